//! The one list of refusal codes.
//!
//! Every refusal the crate can produce is a [`Code`]. From a code alone we derive the wire string
//! (the JSON `error` field, the trace `outcome`, a tool error's `code`), the HTTP status and the
//! fixed public message. The human detail of *why* lives in [`Refusal::reason`], which goes to the
//! trace only, never to the wire (D-2.8, D-4.4).

use std::fmt;

/// A refusal code from the specification's error tables, the tools' vocabulary, or the
/// console's (`docs/protocol.md` and `docs/spec/contract.md`). Each code has one
/// wire string, one HTTP status and one fixed public message; a refused request is answered
/// `{"error": <wire string>, "message": <message>}` with that status.
///
/// ```
/// use resource_plane::Code;
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let code = Code::NotFound;
/// assert_eq!((code.as_str(), code.status()), ("not_found", 404));
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let request = http::Request::get("/resources/files/missing.md").body(()).unwrap();
/// let response = capsule.router().handle(request).await;
/// assert_eq!(response.status(), code.status());
/// let body: serde_json::Value = serde_json::from_slice(&response.body().bytes()).unwrap();
/// assert_eq!(body, serde_json::json!({"error": code.as_str(), "message": code.message()}));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// 404: the manifest declares no `exports.files`.
    NoResourcePlane,
    /// 404: the path names nothing under the root.
    NotFound,
    /// 403: the path, or a symlink's target, resolves outside the export root (D-2.3, D-2.5).
    OutsideRoot,
    /// 403: a symlink was met and the class is `scoped` (D-2.5).
    SymlinkRefused,
    /// 403: a directory, FIFO, socket or device node (D-2.6).
    NotARegularFile,
    /// 413: the file exceeds `max_bytes` (D-2.7), or a fetched body exceeds the fetcher's cap.
    TooLarge,
    /// 405: any method other than `GET` under `/resources` (D-4.3).
    MethodNotAllowed,
    /// 500: the open or read failed for any other reason; the OS detail goes to the trace only.
    IoError,
    /// 404: the manifest declares no `exports.peer_files`.
    NoPeerPlane,
    /// 400: the token is not `mh1.<b64>.<b64>` with a valid v1 payload (D-7.2).
    MalformedHandle,
    /// 400: no usable `x-murmur-audience` header (D-7.2).
    MissingAudience,
    /// 403: MAC verification failed, for any reason (D-7.3).
    HandleNotValid,
    /// 410: the handle's `exp` is in the past.
    HandleExpired,
    /// Tool input that is missing, mistyped or empty (D-9.1, D-10.1).
    InvalidInput,
    /// A `ttl` that is not a positive duration (`90`, `30s`, `15m`, `1h`, `1d`) (D-1.5, D-9.1).
    InvalidTtl,
    /// The peer's card could not be fetched or lacks `name` and `url`, or the peer did not answer
    /// (D-8, D-10.2).
    PeerUnreachable,
    /// The peer is not in `capabilities.peer_fetch.allow` (D-10.1).
    PeerNotAllowed,
    /// `exports.peer_files.require_peer_proof` is set and the peer's card publishes no identity
    /// key (D-14.2).
    PeerNotAuthenticated,
    /// A fetched body whose etag is not its sha256 (D-10.3).
    EtagMismatch,
    /// Landing a fetched file met a symlink or a non-directory on the way (D-10.4).
    PathRefused,
    /// A console call to a tool the capsule was not granted (`docs/spec/contract.md`).
    UnknownTool,
    /// 400: a console line that is not a known request (`docs/spec/contract.md`), or a listing
    /// whose `wait` or `watch` parameter is malformed (D-17.2).
    InvalidRequest,
    /// The client left before its answer was ready: its work was stopped, or never started
    /// (D-4.6.1). A trace `outcome` only: nobody is left to answer.
    ClientGone,
    /// A tool called after its session ended (D-12.1): its keys are gone, so it does nothing.
    SessionEnded,
}

impl Code {
    /// The wire string: JSON `error`, trace `outcome`, tool error `code`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::NoResourcePlane => "no_resource_plane",
            Code::NotFound => "not_found",
            Code::OutsideRoot => "outside_root",
            Code::SymlinkRefused => "symlink_refused",
            Code::NotARegularFile => "not_a_regular_file",
            Code::TooLarge => "too_large",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::IoError => "io_error",
            Code::NoPeerPlane => "no_peer_plane",
            Code::MalformedHandle => "malformed_handle",
            Code::MissingAudience => "missing_audience",
            Code::HandleNotValid => "handle_not_valid",
            Code::HandleExpired => "handle_expired",
            Code::InvalidInput => "invalid_input",
            Code::InvalidTtl => "invalid_ttl",
            Code::PeerUnreachable => "peer_unreachable",
            Code::PeerNotAllowed => "peer_not_allowed",
            Code::PeerNotAuthenticated => "peer_not_authenticated",
            Code::EtagMismatch => "etag_mismatch",
            Code::PathRefused => "path_refused",
            Code::UnknownTool => "unknown_tool",
            Code::InvalidRequest => "invalid_request",
            Code::ClientGone => "client_gone",
            Code::SessionEnded => "session_ended",
        }
    }

    /// The HTTP status this code answers with on the listener.
    pub const fn status(self) -> u16 {
        match self {
            Code::NoResourcePlane | Code::NotFound | Code::NoPeerPlane => 404,
            Code::OutsideRoot
            | Code::SymlinkRefused
            | Code::NotARegularFile
            | Code::HandleNotValid
            | Code::PeerNotAllowed
            | Code::PeerNotAuthenticated
            | Code::PathRefused => 403,
            Code::TooLarge => 413,
            Code::MethodNotAllowed => 405,
            Code::MalformedHandle
            | Code::MissingAudience
            | Code::InvalidInput
            | Code::InvalidTtl
            | Code::UnknownTool
            | Code::InvalidRequest => 400,
            Code::HandleExpired | Code::SessionEnded => 410,
            Code::PeerUnreachable | Code::EtagMismatch => 502,
            Code::IoError => 500,
            // nginx's "client closed request": never sent, since nobody is left to read it.
            Code::ClientGone => 499,
        }
    }

    /// The one fixed public message for this code (D-4.4). It never names a path, a token or
    /// file contents, so it is safe on the wire, in a tool result and in a log.
    pub const fn message(self) -> &'static str {
        match self {
            Code::NoResourcePlane => "this capsule declares no exports.files",
            Code::NotFound => "no such file under the export root",
            Code::OutsideRoot => "the path resolves outside the export root",
            Code::SymlinkRefused => "a symlink was met under the scoped containment class",
            Code::NotARegularFile => "the path names something other than a regular file",
            Code::TooLarge => "the file exceeds max_bytes",
            Code::MethodNotAllowed => "only GET is allowed under /resources",
            Code::IoError => "the file could not be read",
            Code::NoPeerPlane => "this capsule declares no exports.peer_files",
            Code::MalformedHandle => "the handle is not a well-formed mh1 token",
            Code::MissingAudience => "the x-murmur-audience header is required",
            Code::HandleNotValid => "the handle is not valid",
            Code::HandleExpired => "the handle has expired",
            Code::InvalidInput => "the tool input is invalid",
            Code::InvalidTtl => "ttl must be a positive duration such as 90, 30s, 15m, 1h or 1d",
            Code::PeerUnreachable => "the peer could not be reached or did not identify itself",
            Code::PeerNotAllowed => "the peer is not in capabilities.peer_fetch.allow",
            Code::PeerNotAuthenticated => {
                "the peer's agent card publishes no identity key, and exports.peer_files.require_peer_proof is set"
            }
            Code::EtagMismatch => "the peer's etag does not describe the body it sent",
            Code::PathRefused => "the landing path is not a plain directory under the workdir",
            Code::UnknownTool => "this capsule has no such tool",
            Code::InvalidRequest => {
                "the request is malformed (a query parameter, or a console operation)"
            }
            Code::ClientGone => "the client left before its answer was ready",
            Code::SessionEnded => "the session has ended; its tools no longer run",
        }
    }
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 24] = [
        Code::NoResourcePlane,
        Code::NotFound,
        Code::OutsideRoot,
        Code::SymlinkRefused,
        Code::NotARegularFile,
        Code::TooLarge,
        Code::MethodNotAllowed,
        Code::IoError,
        Code::NoPeerPlane,
        Code::MalformedHandle,
        Code::MissingAudience,
        Code::HandleNotValid,
        Code::HandleExpired,
        Code::InvalidInput,
        Code::InvalidTtl,
        Code::PeerUnreachable,
        Code::PeerNotAllowed,
        Code::PeerNotAuthenticated,
        Code::EtagMismatch,
        Code::PathRefused,
        Code::UnknownTool,
        Code::InvalidRequest,
        Code::SessionEnded,
        Code::ClientGone,
    ];

    /// The code whose wire string is `wire`, if any: `from_wire("handle_expired")` is
    /// [`Code::HandleExpired`].
    ///
    /// ```
    /// use resource_plane::Code;
    ///
    /// assert_eq!(Code::from_wire("handle_expired"), Some(Code::HandleExpired));
    /// assert_eq!(Code::from_wire("Handle_Expired"), None);
    /// ```
    pub fn from_wire(wire: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|code| code.as_str() == wire)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: a public [`Code`] plus a private `reason` for the trace.
///
/// The `reason` may carry OS detail (`EACCES`, ...) and the request path as the requester sent
/// it, but never a handle token or file contents; it is written to the trace only. Its
/// `Display` is the public part alone, safe to log or show.
///
/// ```
/// use resource_plane::{Code, Refusal};
///
/// let refusal = Refusal::new(Code::OutsideRoot, "../secrets.txt leaves the root");
/// assert_eq!(refusal.code.status(), 403);
/// assert_eq!(refusal.reason, "../secrets.txt leaves the root"); // for the trace only
/// assert_eq!(refusal.to_string(), "outside_root: the path resolves outside the export root");
///
/// // A real error type: it travels through `?` into a boxed error.
/// fn serve() -> Result<(), Box<dyn std::error::Error>> {
///     Err(Refusal::new(Code::TooLarge, "12 MiB over a 10 MiB max_bytes"))?
/// }
/// assert_eq!(serve().unwrap_err().to_string(), "too_large: the file exceeds max_bytes");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The public code.
    pub code: Code,
    /// Human-readable detail for the trace's `reason` field.
    pub reason: String,
}

impl Refusal {
    /// A refusal with the given code and trace detail.
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Refusal {
            code,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.code.message())
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Code; 24] = Code::ALL;

    #[test]
    fn spec_statuses() {
        let expect = [
            ("no_resource_plane", 404),
            ("not_found", 404),
            ("outside_root", 403),
            ("symlink_refused", 403),
            ("not_a_regular_file", 403),
            ("too_large", 413),
            ("method_not_allowed", 405),
            ("io_error", 500),
            ("no_peer_plane", 404),
            ("malformed_handle", 400),
            ("missing_audience", 400),
            ("handle_not_valid", 403),
            ("handle_expired", 410),
        ];
        for (wire, status) in expect {
            let code = ALL.iter().find(|c| c.as_str() == wire).expect(wire);
            assert_eq!(code.status(), status, "{wire}");
        }
    }

    #[test]
    fn every_code_reads_back_from_its_wire_string() {
        for code in ALL {
            assert_eq!(Code::from_wire(code.as_str()), Some(code));
            assert!(crate::wire::error_code::is_code(code.as_str()), "{code}");
        }
        assert_eq!(Code::from_wire("ok"), None);
        assert_eq!(Code::from_wire(""), None);
    }

    #[test]
    fn wire_strings_are_unique_and_messages_never_empty() {
        let mut seen = std::collections::HashSet::new();
        for c in ALL {
            assert!(seen.insert(c.as_str()), "duplicate {c}");
            assert!(!c.message().is_empty());
        }
    }
}
