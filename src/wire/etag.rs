//! The etag (D-4.4, D-17.1): a file's or a listing's is `sha256:<64 lowercase hex>` of its
//! body, its *opaque tag*, which the `etag` header carries quoted: `"sha256:<hex>"`.
//!
//! A read's etag is compared strongly (byte for byte: a fetcher stores nothing whose etag is
//! not the body's, D-10.3); a listing's by its opaque tag, quoted or bare, weak (`W/`) or not
//! (D-17.1), as a watch names listings.

use http::header::HeaderValue;

/// What every etag of this crate starts with.
pub(crate) const PREFIX: &str = "sha256:";

/// The opaque tag of a body whose sha256 is `sha256` (lowercase hex): `sha256:<hex>`.
pub(crate) fn opaque(sha256: &str) -> String {
    format!("{PREFIX}{sha256}")
}

/// The opaque tag of a body whose sha256 digest is `digest`.
pub(crate) fn of_digest(digest: &[u8]) -> String {
    opaque(&crate::hex::encode(digest))
}

/// `tag` quoted, as the `etag` header carries it: `"<tag>"`.
pub(crate) fn quote(tag: &str) -> String {
    format!("\"{tag}\"")
}

/// The `etag` header's text for a body whose sha256 is `sha256`: `"sha256:<hex>"`.
pub(crate) fn quoted(sha256: &str) -> String {
    quote(&opaque(sha256))
}

/// The `etag` header for a body whose sha256 is `sha256`, built in one allocation; `None`
/// when `sha256` holds a byte no header value may (never for a hex digest).
pub(crate) fn header(sha256: &str) -> Option<HeaderValue> {
    let mut value = Vec::with_capacity(sha256.len() + PREFIX.len() + 2);
    value.push(b'"');
    value.extend_from_slice(PREFIX.as_bytes());
    value.extend_from_slice(sha256.as_bytes());
    value.push(b'"');
    HeaderValue::from_maybe_shared(bytes::Bytes::from(value)).ok()
}

/// Whether the `etag` header `sent` names exactly the body whose sha256 is `sha256`: the
/// strong comparison a fetcher makes before it keeps a body.
pub(crate) fn names_body(sent: &[u8], sha256: &str) -> bool {
    let Some(rest) = sent.strip_prefix(b"\"") else {
        return false;
    };
    rest.strip_prefix(PREFIX.as_bytes())
        .and_then(|rest| rest.strip_suffix(b"\""))
        .is_some_and(|hex| hex == sha256.as_bytes())
}

/// The opaque tag of an entity tag as a client may send it: without a `W/` prefix, and without
/// the quotes around it when it has both.
#[cfg_attr(not(any(feature = "cli", feature = "mcp")), allow(dead_code))] // read by `pull`, the demo and the MCP face
pub(crate) fn opaque_of(tag: &str) -> &str {
    let tag = tag.strip_prefix("W/").unwrap_or(tag);
    tag.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(tag)
}

/// The hex digest an opaque tag names, when it is one of this crate's (`sha256:<hex>`).
pub(crate) fn hex_of(opaque: &str) -> Option<&str> {
    opaque.strip_prefix(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn the_header_quotes_the_prefixed_hash() {
        let expected = format!("\"sha256:{HASH}\"");
        assert_eq!(header(HASH).unwrap().as_bytes(), expected.as_bytes());
        assert_eq!(quoted(HASH), expected);
        assert_eq!(quote(&opaque(HASH)), expected);
        assert_eq!(
            of_digest(&[0xab; 32]),
            format!("sha256:{}", "ab".repeat(32))
        );
        assert_eq!(header("a\nb"), None);
    }

    #[test]
    fn a_body_is_named_only_by_its_strong_quoted_tag() {
        assert!(names_body(quoted(HASH).as_bytes(), HASH));
        for other in [
            opaque(HASH),
            format!("W/{}", quoted(HASH)),
            quoted(&HASH.to_uppercase()),
            quoted(&HASH[1..]),
            format!("{} ", quoted(HASH)),
            format!("\"sha512:{HASH}\""),
            String::new(),
        ] {
            assert!(!names_body(other.as_bytes(), HASH), "{other:?}");
        }
    }

    #[test]
    fn the_opaque_tag_of_a_quoted_weak_or_bare_tag() {
        let bare = opaque(HASH);
        for sent in [bare.clone(), quote(&bare), format!("W/{}", quote(&bare))] {
            assert_eq!(opaque_of(&sent), bare, "{sent}");
        }
        assert_eq!(opaque_of("\"half"), "\"half");
        assert_eq!(hex_of(&bare), Some(HASH));
        assert_eq!(hex_of("md5:00"), None);
    }
}
