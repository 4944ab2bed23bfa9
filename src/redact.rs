//! Token redaction (D-6.5): any handle token in any string becomes `<handle:<handle_id>>`.
//!
//! A token is recognised generously: `mh1.` followed by the longest run of base64url characters
//! and dots. That covers well-formed tokens and every malformed or truncated variant of one, so
//! nothing that starts like a handle ever reaches a trace, a log line or an error message.

use std::borrow::Cow;

const PREFIX: &str = "mh1.";

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// `text` with every token replaced by `<handle:<handle_id>>`. Borrows when there is none.
pub fn redact_tokens(text: &str) -> Cow<'_, str> {
    if !text.contains(PREFIX) {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find(PREFIX) {
        let start = search + found;
        let mut end = start + PREFIX.len();
        while end < bytes.len() && is_token_byte(bytes[end]) {
            end += 1;
        }
        out.push_str(&text[copied..start]);
        let token = &text[start..end];
        out.push_str("<handle:");
        out.push_str(&crate::hex::handle_id(token));
        out.push('>');
        copied = end;
        search = end;
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
            let dirty_keys: Vec<String> =
                map.keys().filter(|k| k.contains(PREFIX)).cloned().collect();
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
    fn json_keys_and_nested_values() {
        let mut v = serde_json::json!({"a":["mh1.x.y"], "mh1.k": {"b": "pre mh1.zz"}});
        redact_json(&mut v);
        assert!(!v.to_string().contains("mh1."), "{v}");
    }
}
