//! A tool's refusal: a typed code whose wire string is `contract.md`'s, and a public message.

use crate::refusal::{Code, Refusal};
use std::borrow::Cow;
use std::fmt;

/// The code of a [`ToolError`]: one of the crate's [`Code`]s, or what a peer answered a redeem
/// with (D-10.3). [`as_str`](Self::as_str) is the wire string: the console's `error.code`, the
/// trace line's `outcome`.
///
/// ```
/// use resource_plane::refusal::Code;
/// use resource_plane::tools::ToolErrorCode;
///
/// assert_eq!(ToolErrorCode::from(Code::InvalidTtl).as_str(), "invalid_ttl");
/// assert_eq!(ToolErrorCode::Http(502).as_str(), "http_502");
/// let peer = ToolErrorCode::peer("handle_expired").unwrap();
/// assert_eq!(peer, "handle_expired");
/// assert_eq!(peer.code(), None, "the peer's word, not one of ours");
/// assert_eq!(ToolErrorCode::peer("Evil Code!"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorCode {
    /// A refusal of this capsule: `invalid_input`, `peer_unreachable`, `io_error`, ... (the
    /// tools' vocabulary of `docs/spec/contract.md`, every code in [`Code`]).
    Code(Code),
    /// The peer refused a redeem with its own JSON `error` code, recorded as the peer wrote it:
    /// 1 to 64 bytes of `[a-z0-9_]`, never `ok` (see [`peer`](Self::peer)). It may spell one
    /// of our codes (`handle_not_valid`, `handle_expired`): it is still the peer's word.
    Peer(String),
    /// The peer answered a redeem with this non-200 HTTP status and no usable code:
    /// `http_<status>`.
    Http(u16),
}

impl ToolErrorCode {
    /// The longest peer code kept (D-10.3).
    pub const MAX_PEER_CODE: usize = 64;

    /// `code` as a peer's refusal code, when it looks like one: 1 to
    /// [`MAX_PEER_CODE`](Self::MAX_PEER_CODE) bytes of `[a-z0-9_]`, and not `ok` (reserved for
    /// success). `None` otherwise: the caller then records `http_<status>`.
    pub fn peer(code: &str) -> Option<Self> {
        let looks_like_one = !code.is_empty()
            && code.len() <= Self::MAX_PEER_CODE
            && code != "ok"
            && code
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        looks_like_one.then(|| ToolErrorCode::Peer(code.to_owned()))
    }

    /// The wire string: `invalid_input`, the peer's code, `http_502`.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            ToolErrorCode::Code(code) => Cow::Borrowed(code.as_str()),
            ToolErrorCode::Peer(code) => Cow::Borrowed(code),
            ToolErrorCode::Http(status) => Cow::Owned(format!("http_{status}")),
        }
    }

    /// The crate's own code, when this is one (not a peer's answer).
    pub fn code(&self) -> Option<Code> {
        match self {
            ToolErrorCode::Code(code) => Some(*code),
            ToolErrorCode::Peer(_) | ToolErrorCode::Http(_) => None,
        }
    }
}

impl From<Code> for ToolErrorCode {
    fn from(code: Code) -> Self {
        ToolErrorCode::Code(code)
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolErrorCode::Code(code) => f.write_str(code.as_str()),
            ToolErrorCode::Peer(code) => f.write_str(code),
            ToolErrorCode::Http(status) => write!(f, "http_{status}"),
        }
    }
}

impl PartialEq<str> for ToolErrorCode {
    fn eq(&self, wire: &str) -> bool {
        self.as_str() == wire
    }
}

impl PartialEq<&str> for ToolErrorCode {
    fn eq(&self, wire: &&str) -> bool {
        self.as_str() == *wire
    }
}

impl PartialEq<Code> for ToolErrorCode {
    fn eq(&self, code: &Code) -> bool {
        self.code() == Some(*code)
    }
}

impl serde::Serialize for ToolErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_str())
    }
}

/// A tool's refusal, as the model sees it: `{"code","message"}` (`docs/spec/contract.md`).
/// The message never holds a handle token, a host path or file contents; the detail of *why*
/// goes to the trace line's `reason` only.
///
/// ```
/// use resource_plane::refusal::Code;
/// use resource_plane::tools::{ToolError, ToolErrorCode};
///
/// let error = ToolError::of(Code::PeerNotAllowed);
/// assert_eq!(error.code, Code::PeerNotAllowed);
/// assert_eq!(error.code_str(), "peer_not_allowed");
/// assert_eq!(
///     error.to_string(),
///     "peer_not_allowed: the peer is not in capabilities.peer_fetch.allow"
/// );
/// assert_eq!(
///     serde_json::to_value(&error).unwrap(),
///     serde_json::json!({
///         "code": "peer_not_allowed",
///         "message": "the peer is not in capabilities.peer_fetch.allow"
///     })
/// );
///
/// // A real error type: it travels through `?` into a boxed error.
/// fn run() -> Result<(), Box<dyn std::error::Error>> {
///     Err(ToolError::new(ToolErrorCode::Http(502), "the peer answered HTTP 502"))?;
///     Ok(())
/// }
/// assert_eq!(run().unwrap_err().to_string(), "http_502: the peer answered HTTP 502");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ToolError {
    /// The code; its wire string is [`code_str`](Self::code_str).
    pub code: ToolErrorCode,
    /// Human-readable text, safe to show the model and to log.
    pub message: String,
}

impl ToolError {
    /// The error for one of the crate's codes, with its fixed message.
    pub fn of(code: Code) -> Self {
        ToolError {
            code: ToolErrorCode::Code(code),
            message: code.message().to_owned(),
        }
    }

    /// An error with its own message, which must hold no token, host path or file contents.
    pub fn new(code: impl Into<ToolErrorCode>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
        }
    }

    /// The code's wire string: the console's `error.code`.
    pub fn code_str(&self) -> Cow<'_, str> {
        self.code.as_str()
    }
}

impl From<Code> for ToolError {
    fn from(code: Code) -> Self {
        ToolError::of(code)
    }
}

/// A refusal's public side: its code and fixed message. The reason stays behind (it may name
/// a host path; it belongs in the trace).
impl From<Refusal> for ToolError {
    fn from(refusal: Refusal) -> Self {
        ToolError::of(refusal.code)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_codes_are_kept_only_when_they_look_like_codes() {
        for good in ["handle_not_valid", "x", "e42", &"a".repeat(64)] {
            assert_eq!(
                ToolErrorCode::peer(good),
                Some(ToolErrorCode::Peer(good.to_owned()))
            );
        }
        for bad in ["", "ok", "Evil", "a-b", "a b", "é", &"a".repeat(65)] {
            assert_eq!(ToolErrorCode::peer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn wire_strings_and_comparisons() {
        let http = ToolErrorCode::Http(404);
        assert_eq!(http, "http_404");
        assert_ne!(http, "http_0404");
        assert_ne!(http, Code::NotFound);
        let ours = ToolErrorCode::from(Code::NotFound);
        assert_eq!(ours, Code::NotFound);
        assert_eq!(ours, "not_found");
        // A peer's code spelled like ours is not ours.
        let theirs = ToolErrorCode::peer("not_found").unwrap();
        assert_eq!(theirs, "not_found");
        assert_ne!(theirs, Code::NotFound);
        assert_ne!(theirs, ours);
        assert_eq!(
            serde_json::to_value(&http).unwrap(),
            serde_json::json!("http_404")
        );
    }

    #[test]
    fn a_refusal_keeps_its_reason_out_of_the_error() {
        let error: ToolError = Refusal::new(Code::NotFound, "/srv/secret/out/x.md: ENOENT").into();
        assert_eq!(error.message, Code::NotFound.message());
        assert!(!error.to_string().contains("/srv"), "{error}");
        let source: &dyn std::error::Error = &error;
        assert!(source.source().is_none());
    }
}
