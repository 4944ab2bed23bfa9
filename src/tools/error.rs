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
/// use resource_plane::tools::{PeerCode, ToolErrorCode};
///
/// assert_eq!(ToolErrorCode::from(Code::InvalidTtl).as_str(), "invalid_ttl");
/// assert_eq!(ToolErrorCode::Http(502).as_str(), "http_502");
/// let peer = ToolErrorCode::peer("handle_expired").unwrap();
/// assert_eq!(peer, "handle_expired");
/// assert_eq!(peer.code(), None, "the peer's word, not one of ours");
/// // ...matched as a typed value, not as a string.
/// assert_eq!(peer.peer_code(), Some(&PeerCode::Spec(Code::HandleExpired)));
/// assert_eq!(ToolErrorCode::peer("Evil Code!"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorCode {
    /// A refusal of this capsule: `invalid_input`, `peer_unreachable`, `io_error`, ... (the
    /// tools' vocabulary of `docs/spec/contract.md`, every code in [`Code`]).
    Code(Code),
    /// The peer refused a redeem with its own JSON `error` code (see [`peer`](Self::peer)):
    /// one of the specification's codes as a typed [`PeerCode::Spec`], any other as
    /// [`PeerCode::Other`]. It is the peer's word even when it spells one of ours.
    Peer(PeerCode),
    /// The peer answered a redeem with this non-200 HTTP status and no usable code:
    /// `http_<status>`.
    Http(u16),
}

impl ToolErrorCode {
    /// The longest peer code kept (D-10.3).
    pub const MAX_PEER_CODE: usize = crate::wire::error_code::MAX_LEN;

    /// `code` as a peer's refusal code, when it looks like one: 1 to
    /// [`MAX_PEER_CODE`](Self::MAX_PEER_CODE) bytes of `[a-z0-9_]`, and not `ok` (reserved for
    /// success). `None` otherwise: the caller then records `http_<status>`.
    pub fn peer(code: &str) -> Option<Self> {
        PeerCode::parse(code).map(ToolErrorCode::Peer)
    }

    /// The peer's refusal code, when this is one.
    pub fn peer_code(&self) -> Option<&PeerCode> {
        match self {
            ToolErrorCode::Peer(code) => Some(code),
            ToolErrorCode::Code(_) | ToolErrorCode::Http(_) => None,
        }
    }

    /// The wire string: `invalid_input`, the peer's code, `http_502`.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            ToolErrorCode::Code(code) => Cow::Borrowed(code.as_str()),
            ToolErrorCode::Peer(code) => Cow::Borrowed(code.as_str()),
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

/// A refusal code a peer answered a redeem with (D-10.3), typed: one of the specification's
/// codes, which a caller matches as a [`Code`], or any other code the peer wrote.
///
/// Only text that looks like a code is read as one ([`parse`](Self::parse): 1 to 64 bytes of
/// `[a-z0-9_]`, never `ok`, the same rule `pull` reads a remote capsule's code by); anything
/// else makes the outcome `http_<status>` ([`ToolErrorCode::Http`]).
///
/// ```
/// use resource_plane::Code;
/// use resource_plane::tools::PeerCode;
///
/// match PeerCode::parse("handle_expired") {
///     Some(PeerCode::Spec(Code::HandleExpired)) => {} // ask the peer for a fresh handle
///     other => panic!("{other:?}"),
/// }
/// let other = PeerCode::parse("quota_exceeded_2").unwrap();
/// assert_eq!(other, PeerCode::Other("quota_exceeded_2".into()));
/// assert_eq!(other.as_str(), "quota_exceeded_2");
/// assert_eq!(PeerCode::parse("ok"), None);
/// assert_eq!(PeerCode::parse("<html>"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerCode {
    /// A code of the specification (`handle_not_valid`, `handle_expired`, `not_found`, ...).
    Spec(Code),
    /// Any other code, as the peer wrote it.
    Other(String),
}

impl PeerCode {
    /// `text` as a peer's code, or `None` when it does not look like one.
    pub fn parse(text: &str) -> Option<PeerCode> {
        if !crate::wire::error_code::is_code(text) {
            return None;
        }
        Some(match Code::from_wire(text) {
            Some(code) => PeerCode::Spec(code),
            None => PeerCode::Other(text.to_owned()),
        })
    }

    /// The code as the peer wrote it.
    pub fn as_str(&self) -> &str {
        match self {
            PeerCode::Spec(code) => code.as_str(),
            PeerCode::Other(text) => text,
        }
    }

    /// The specification's code, when the peer answered one.
    pub fn spec(&self) -> Option<Code> {
        match self {
            PeerCode::Spec(code) => Some(*code),
            PeerCode::Other(_) => None,
        }
    }
}

impl fmt::Display for PeerCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
            ToolErrorCode::Peer(code) => f.write_str(code.as_str()),
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
        for good in ["x", "e42", "quota_2", &"a".repeat(64)] {
            assert_eq!(
                ToolErrorCode::peer(good),
                Some(ToolErrorCode::Peer(PeerCode::Other(good.to_owned())))
            );
        }
        for code in Code::ALL {
            assert_eq!(
                ToolErrorCode::peer(code.as_str()),
                Some(ToolErrorCode::Peer(PeerCode::Spec(code))),
                "{code}"
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
