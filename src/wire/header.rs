//! The headers the project defines (D-4.4, D-4.5, D-7.2, D-14.3, D-17.3). The standard ones
//! (`etag`, `if-none-match`, `content-type`, ...) are `http::header`'s constants.

use http::header::HeaderName;

/// `x-murmur-generation`: the capsule's generation counter (D-5), on every plane response.
pub(crate) const GENERATION: HeaderName = HeaderName::from_static("x-murmur-generation");
/// `x-murmur-containment`: the containment class the runtime achieved.
pub(crate) const CONTAINMENT: HeaderName = HeaderName::from_static("x-murmur-containment");
/// `x-murmur-export-root`: the operator plane's root as declared (D-1.2).
pub(crate) const EXPORT_ROOT: HeaderName = HeaderName::from_static("x-murmur-export-root");
/// `x-murmur-mtime-ms`: a read file's modification time, Unix milliseconds.
pub(crate) const MTIME_MS: HeaderName = HeaderName::from_static("x-murmur-mtime-ms");
/// `x-murmur-handle-id`: the redeemed handle's public name, on a redeem's answer.
pub(crate) const HANDLE_ID: HeaderName = HeaderName::from_static("x-murmur-handle-id");
/// `x-murmur-audience`: who a redeemer says it is (D-7.2).
pub(crate) const AUDIENCE: HeaderName = HeaderName::from_static("x-murmur-audience");
/// `x-murmur-proof`: a redeemer's signature over the redeem (D-14.3).
pub(crate) const PROOF: HeaderName = HeaderName::from_static("x-murmur-proof");
/// `Last-Event-ID`: the etag a watch stream resumes from (D-17.3); Server-Sent Events' own
/// header, which `http::header` does not name.
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// The media type of a watch stream (D-17.3).
pub(crate) const EVENT_STREAM: &str = "text/event-stream";
