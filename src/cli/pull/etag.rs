//! A listing's validator: the `etag` of a listing (`"sha256:<64 hex>"` of its body), which a
//! watch stream names its events by and resumes from.

use std::fmt;

/// A listing's etag, kept as the server wrote it (so it goes back in `Last-Event-ID` byte for
/// byte) and compared by its opaque value: the same tag quoted or not, weak (`W/`) or not, is
/// the same listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Etag(String);

impl Etag {
    /// The tag a listing body of `sha256` (64 lowercase hex) carries.
    pub(crate) fn of_body(sha256: &str) -> Etag {
        Etag(crate::wire::etag::quoted(sha256))
    }

    /// `text` as a server wrote it, when it can go back in a request header: at most 1 KiB
    /// of visible ASCII (no control character, so it cannot end a header line).
    pub(crate) fn parse(text: &str) -> Option<Etag> {
        let usable = !text.is_empty()
            && text.len() <= 1024
            && text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
        usable.then(|| Etag(text.to_owned()))
    }

    /// As the server wrote it.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The opaque value: without a `W/` prefix and the quotes around it.
    pub(crate) fn opaque(&self) -> &str {
        crate::wire::etag::opaque_of(&self.0)
    }

    /// Whether both name the same listing.
    pub(crate) fn same(&self, other: &Etag) -> bool {
        self.opaque() == other.opaque()
    }
}

impl fmt::Display for Etag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_listing_quoted_or_weak_or_bare() {
        let hash = "ab".repeat(32);
        let body = Etag::of_body(&hash);
        assert_eq!(body.as_str(), format!("\"sha256:{hash}\""));
        for other in [
            format!("\"sha256:{hash}\""),
            format!("sha256:{hash}"),
            format!("W/\"sha256:{hash}\""),
        ] {
            assert!(body.same(&Etag::parse(&other).unwrap()), "{other}");
        }
        let different = Etag::parse(&format!("\"sha256:{}\"", "cd".repeat(32))).unwrap();
        assert!(!body.same(&different));
    }

    #[test]
    fn a_tag_that_cannot_go_back_in_a_header_is_refused() {
        for bad in [
            "",
            "a\r\nx-evil: 1",
            "tab\there",
            "\u{e9}",
            &"a".repeat(1025),
        ] {
            assert_eq!(Etag::parse(bad), None, "{bad:?}");
        }
    }
}
