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

/// Whether `text` holds anything redaction would replace, as written or percent-decoded.
pub fn holds_token(text: &str) -> bool {
    find_prefix(text, 0).is_some()
        || (text.as_bytes().contains(&b'%') && !encoded_token_spans(text).is_empty())
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

/// `text` with every token replaced by `<handle:<handle_id>>`, in any spelling (D-6.5): a token
/// that appears only once `text` is percent-decoded, once or several times (`mh1%2E…`,
/// `mh1%252E…`, `%6Dh1.…`, hex in either case), is found too, and its whole encoded span is
/// replaced, the id computed over the decoded token. Borrows when there is none.
pub fn redact_tokens(text: &str) -> Cow<'_, str> {
    if !text.as_bytes().contains(&b'%') {
        return redact_plain(text);
    }
    let spans = encoded_token_spans(text);
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for span in spans {
        // Spans start and end on ASCII bytes (a token byte, or a `%` escape of one).
        out.push_str(&text[copied..span.start]);
        out.push_str("<handle:");
        out.push_str(&crate::hex::handle_id(&span.token));
        out.push('>');
        copied = span.end;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// [`redact_tokens`] for a text with no `%`: tokens stand in it as written.
fn redact_plain(text: &str) -> Cow<'_, str> {
    let Some(first) = find_prefix(text, 0) else {
        return Cow::Borrowed(text);
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut next = Some(first);
    while let Some(start) = next {
        // The prefix and the run after it are ASCII, so both ends are character boundaries.
        let end = token_end(bytes, start);
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

/// Where the token whose prefix starts at `start` ends: the longest run of token bytes after
/// the prefix.
fn token_end(bytes: &[u8], start: usize) -> usize {
    let mut end = start + PREFIX.len();
    while end < bytes.len() && is_token_byte(bytes[end]) {
        end += 1;
    }
    end
}

/// How many times a text is percent-decoded in the search for tokens: enough for any encoding
/// a client or an agent plausibly stacks, and a bound on the work for a hostile one.
const DECODING_ROUNDS: usize = 8;

/// A token found in some decoding of a text: where its encoding stands in the text, and the
/// token itself as decoded.
#[derive(Debug)]
struct TokenSpan {
    start: usize,
    end: usize,
    token: String,
}

/// A text decoded some number of times: each byte, with the span of the original text it
/// decodes from.
struct Decoded {
    bytes: Vec<u8>,
    from: Vec<(usize, usize)>,
}

impl Decoded {
    fn of(text: &str) -> Self {
        Decoded {
            bytes: text.as_bytes().to_vec(),
            from: (0..text.len()).map(|at| (at, at + 1)).collect(),
        }
    }

    /// One more round of percent-decoding (`%` and two hex digits, either case; anything else
    /// kept as is), or `None` when it would change nothing.
    fn decoded_once(&self) -> Option<Self> {
        let (bytes, from) = (&self.bytes, &self.from);
        let mut next = Decoded {
            bytes: Vec::with_capacity(bytes.len()),
            from: Vec::with_capacity(bytes.len()),
        };
        let mut at = 0;
        let mut changed = false;
        while at < bytes.len() {
            let escape = (bytes[at] == b'%')
                .then(|| {
                    Some(hex_digit(*bytes.get(at + 1)?)? << 4 | hex_digit(*bytes.get(at + 2)?)?)
                })
                .flatten();
            match escape {
                Some(byte) => {
                    next.bytes.push(byte);
                    next.from.push((from[at].0, from[at + 2].1));
                    at += 3;
                    changed = true;
                }
                None => {
                    next.bytes.push(bytes[at]);
                    next.from.push(from[at]);
                    at += 1;
                }
            }
        }
        changed.then_some(next)
    }

    /// Every token in these bytes, with its span in the original text.
    fn tokens(&self, found: &mut Vec<TokenSpan>) {
        let bytes = &self.bytes;
        let mut at = 0;
        while at + PREFIX.len() <= bytes.len() {
            if !bytes[at..at + PREFIX.len()].eq_ignore_ascii_case(PREFIX) {
                at += 1;
                continue;
            }
            let end = token_end(bytes, at);
            found.push(TokenSpan {
                start: self.from[at].0,
                end: self.from[end - 1].1,
                // Token bytes are ASCII.
                token: String::from_utf8_lossy(&bytes[at..end]).into_owned(),
            });
            at = end;
        }
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The spans of `text` that spell a token, as written or once decoded up to
/// [`DECODING_ROUNDS`] times, in order and without overlap: spans that overlap (a token found
/// as written up to a `%2E`, and whole after a decoding) become one, named after the longest
/// token found in them.
fn encoded_token_spans(text: &str) -> Vec<TokenSpan> {
    let mut found = Vec::new();
    let mut decoded = Decoded::of(text);
    decoded.tokens(&mut found);
    for _ in 0..DECODING_ROUNDS {
        match decoded.decoded_once() {
            Some(next) => decoded = next,
            None => break,
        }
        decoded.tokens(&mut found);
    }
    found.sort_by_key(|span| span.start);
    let mut merged: Vec<TokenSpan> = Vec::with_capacity(found.len());
    for span in found {
        match merged.last_mut() {
            Some(last) if span.start < last.end => {
                last.end = last.end.max(span.end);
                if span.token.len() > last.token.len() {
                    last.token = span.token;
                }
            }
            _ => merged.push(span),
        }
    }
    merged
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

    /// `mh1%2E<payload>%2E<mac>` decodes to a token, and `mh1.<payload>%2E<mac>` holds one
    /// past the `%`: both are revealed whole to redaction.
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

    /// Tokens behind any stack of percent-encodings, in either hex case, are replaced whole
    /// (the encoded span, not only what was written plainly), named after the decoded token.
    #[test]
    fn tokens_in_any_percent_encoded_spelling_are_replaced_whole() {
        let token = "mh1.eyJ2IjoxfQ.AbC-_9";
        let id = crate::hex::handle_id(token);
        for (spelled, around) in [
            ("mh1%2EeyJ2IjoxfQ%2EAbC-_9", ("http://127.0.0.1:9/", "")),
            ("mh1%252EeyJ2IjoxfQ%252eAbC-_9", ("", "?x=1")),
            ("mh1%25252EeyJ2IjoxfQ.AbC-_9", ("a ", " b")),
            ("%6Dh1.eyJ2IjoxfQ.AbC-_9", ("/", "/")),
            ("mh1.eyJ2IjoxfQ%2EAbC-_9", ("", "")),
            ("%256d%2568%2531%252e%2565yJ2IjoxfQ.AbC-_9", ("é", "é")),
        ] {
            let text = format!("{}{spelled}{}", around.0, around.1);
            let out = redact_tokens(&text);
            assert_eq!(
                out,
                format!("{}<handle:{id}>{}", around.0, around.1),
                "{text}"
            );
            assert!(holds_token(&text), "{text}");
            assert_eq!(redact_tokens(&out), out, "idempotent: {text}");
        }
        // Nine encodings deep is past the search; a valid escape next to nothing is kept.
        let deep = format!("mh1%{}2E", "25".repeat(9));
        assert_eq!(redact_tokens(&deep), deep);
        assert_eq!(
            redact_tokens("100%25 sure, %41%zz%"),
            "100%25 sure, %41%zz%"
        );
    }

    #[test]
    fn json_keys_and_nested_values() {
        let mut v = serde_json::json!({"a":["mh1.x.y"], "MH1.k": {"b": "pre Mh1.zz"}});
        redact_json(&mut v);
        assert!(!holds_token(&v.to_string()), "{v}");
    }
}
