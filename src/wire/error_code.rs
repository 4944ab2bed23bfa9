//! A refusal's body, `{"error":"<code>","message":"<text>"}` (D-4.3), and the one grammar by
//! which a code in such a body is read (D-10.3): a peer's answer to a redeem, a remote
//! capsule's answer to `pull`. A code that does not follow it is not repeated; the caller
//! falls back on the status (`http_<status>`).

/// The longest code read (D-10.3).
pub(crate) const MAX_LEN: usize = 64;

/// Whether `text` has the shape of a refusal code: 1 to [`MAX_LEN`] bytes of `[a-z0-9_]`, and
/// not `ok` (a trace line's word for success).
pub(crate) fn is_code(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_LEN
        && text != "ok"
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The code a refusal's `body` names in its `error` field, when the body is JSON and the code
/// follows [`is_code`].
pub(crate) fn read(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let code = value.get("error")?.as_str()?;
    is_code(code).then(|| code.to_owned())
}

/// The body of a refusal: `{"error":<code>,"message":<message>}`, in that order.
pub(crate) fn body(code: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": code, "message": message});
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_what_looks_like_a_code() {
        for good in ["handle_not_valid", "x", "e42", "http_502", &"a".repeat(64)] {
            assert!(is_code(good), "{good:?}");
        }
        for bad in ["", "ok", "Evil", "a-b", "a b", "é", "x\n", &"a".repeat(65)] {
            assert!(!is_code(bad), "{bad:?}");
        }
        for code in crate::refusal::Code::ALL {
            assert!(is_code(code.as_str()), "{code}");
        }
    }

    #[test]
    fn a_body_names_its_code_only_when_it_follows_the_rule() {
        assert_eq!(
            read(&body("handle_not_valid", "x")).as_deref(),
            Some("handle_not_valid")
        );
        for refused in [
            &b"<html>"[..],
            br#"{"error":"Evil Code!"}"#,
            br#"{"error":"ok"}"#,
            br#"{"error":7}"#,
            br#"{"message":"no code"}"#,
        ] {
            assert_eq!(
                read(refused),
                None,
                "{:?}",
                String::from_utf8_lossy(refused)
            );
        }
    }

    #[test]
    fn the_body_keeps_error_before_message() {
        assert_eq!(
            body("not_found", "no such \"file\""),
            br#"{"error":"not_found","message":"no such \"file\""}"#
        );
    }
}
