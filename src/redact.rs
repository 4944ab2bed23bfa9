//! Token redaction (D-6.5): any handle token in any string becomes `<handle:<handle_id>>`.
//!
//! A token is recognised generously: `mh1.` followed by the longest run of base64url characters
//! and dots. That covers well-formed tokens and every malformed or truncated variant of one, so
//! nothing that starts like a handle ever reaches a trace, a log line or an error message. The
//! prefix is matched in any ASCII case: `MH1.<payload>.<mac>` is no token, but lower-casing
//! three letters makes it one again, so it is a credential all the same.

use std::borrow::Cow;

const PREFIX: &[u8] = b"mh1.";

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// Where the first token prefix (`mh1.` in any ASCII case) at or after `from` starts. The
/// search runs on the prefix's dot, the one byte of it with no case, with the standard
/// library's single-byte search (every string of every trace line passes through here, and
/// holds few dots), and checks the three bytes before each dot it finds.
fn find_prefix(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = from;
    while let Some(found) = text.get(at..)?.find('.') {
        let dot = at + found;
        if dot >= from + 3 && bytes[dot - 3..dot].eq_ignore_ascii_case(&PREFIX[..3]) {
            return Some(dot - 3);
        }
        // `.` is ASCII, so the byte after it starts a character.
        at = dot + 1;
    }
    None
}

/// Whether `text` holds anything redaction would replace.
pub fn holds_token(text: &str) -> bool {
    find_prefix(text, 0).is_some()
}

/// `raw` (a path as a client or an agent wrote it) as a trace line should record it: as
/// written, unless a best-effort percent-decoding reveals a token (`mh1%2E…`, `%6Dh1.…`, a
/// token with one dot encoded), in which case the decoding, so that the sink's redaction sees
/// the whole token (D-6.5).
pub fn revealing_tokens(raw: &str) -> String {
    let lossy = crate::path::percent_decode_lossy(raw);
    if holds_token(&lossy) {
        lossy
    } else {
        raw.to_owned()
    }
}

/// `text` with every token replaced by `<handle:<handle_id>>`. Borrows when there is none.
pub fn redact_tokens(text: &str) -> Cow<'_, str> {
    let Some(first) = find_prefix(text, 0) else {
        return Cow::Borrowed(text);
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut next = Some(first);
    while let Some(start) = next {
        // The prefix and the run after it are ASCII, so both ends are character boundaries.
        let mut end = start + PREFIX.len();
        while end < bytes.len() && is_token_byte(bytes[end]) {
            end += 1;
        }
        out.push_str(&text[copied..start]);
        out.push_str("<handle:");
        out.push_str(&crate::hex::handle_id(&text[start..end]));
        out.push('>');
        copied = end;
        next = find_prefix(text, end);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Redacts every string (keys included) of a JSON value in place.
pub fn redact_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if let Cow::Owned(clean) = redact_tokens(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::Object(map) => {
            let dirty_keys: Vec<String> = map.keys().filter(|k| holds_token(k)).cloned().collect();
            for key in dirty_keys {
                if let Some(v) = map.shift_remove(&key) {
                    map.insert(redact_tokens(&key).into_owned(), v);
                }
            }
            map.values_mut().for_each(redact_json);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_each_token_with_its_id() {
        let token = "mh1.eyJ2IjoxfQ.AbC-_9";
        let text = format!("x {token} y {token}.");
        let out = redact_tokens(&text);
        let id = crate::hex::handle_id(&format!("{token}."));
        assert!(!out.contains("mh1."), "{out}");
        assert!(out.contains(&format!("<handle:{id}>")), "{out}");
        assert!(out.starts_with("x <handle:"));
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(redact_tokens("nothing here"), Cow::Borrowed(_)));
        assert_eq!(redact_tokens("mh1"), "mh1");
    }

    #[test]
    fn the_prefix_in_any_case_is_redacted() {
        for token in ["MH1.eyJ2IjoxfQ.AbC", "Mh1.x.y", "mH1.x", "mh1.x"] {
            let text = format!("read {token} now");
            let out = redact_tokens(&text);
            let id = crate::hex::handle_id(token);
            assert_eq!(out, format!("read <handle:{id}> now"), "{token}");
            assert!(holds_token(&text), "{token}");
        }
        assert!(!holds_token("mh1 MH1 mh.1 mh1-x"));
        assert!(matches!(redact_tokens("é MH1"), Cow::Borrowed(_)));
        // Multi-byte characters around a token keep their boundaries.
        assert_eq!(
            redact_tokens("été MH1.a é"),
            format!("été <handle:{}> é", crate::hex::handle_id("MH1.a"))
        );
    }

    /// A review found `share-file` recording `mh1%2E<payload>%2E<mac>` as written, which
    /// decodes to the token; and `mh1.<payload>%2E<mac>` redacted only up to the `%`.
    #[test]
    fn encoded_tokens_are_revealed_to_redaction() {
        for raw in [
            "mh1%2EPAYLOAD%2EMAC",
            "%6Dh1.PAYLOAD.MAC",
            "mh1.PAYLOAD%2EMAC",
            "x/MH1%2ePAYLOAD.MAC",
        ] {
            let recorded = revealing_tokens(raw);
            let redacted = redact_tokens(&recorded);
            assert!(
                !redacted.contains("PAYLOAD") && !redacted.contains("MAC"),
                "{raw}: {redacted}"
            );
        }
        assert_eq!(revealing_tokens("a%20b"), "a%20b", "no token: as written");
    }

    #[test]
    fn json_keys_and_nested_values() {
        let mut v = serde_json::json!({"a":["mh1.x.y"], "MH1.k": {"b": "pre Mh1.zz"}});
        redact_json(&mut v);
        assert!(!holds_token(&v.to_string()), "{v}");
    }
}
