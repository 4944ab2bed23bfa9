//! Trace events as typed values (D-20.3): what a [`TraceSink`](super::TraceSink) can receive
//! beside each JSON line, so that a runtime forwards events to `tracing` or OpenTelemetry
//! without parsing JSON itself.
//!
//! A typed event is read from the very line the sink is handed, after redaction (D-6.5): it
//! holds no more than the line does, and never a handle token.

use serde::Deserialize;
use std::io;

/// The fields every trace line starts with (D-6.1).
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"resource_list","event_id":"evt_1","session_id":"ses_1","timestamp":5,"root":null,"entry_count":null,"total_bytes":null,"generation":0,"containment_achieved":"advisory","outcome":"not_found","reason":"no export"}"#;
/// let event = TraceEvent::from_line(line).unwrap();
/// assert_eq!(event.envelope().session_id, "ses_1");
/// assert_eq!(event.envelope().timestamp_ms, 5);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Envelope {
    /// `evt_` and 32 hex characters, unique within the session.
    pub event_id: String,
    /// The session the line belongs to.
    pub session_id: String,
    /// When the line was written, in ms since the Unix epoch (the line's `timestamp`).
    #[serde(rename = "timestamp")]
    pub timestamp_ms: i64,
}

/// `resource_list`: one per request on the listing route.
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"resource_list","event_id":"evt_1","session_id":"s","timestamp":0,"root":"out/","entry_count":2,"total_bytes":10,"generation":1,"containment_achieved":"scoped","outcome":"ok","reason":null}"#;
/// let Ok(TraceEvent::ResourceList(list)) = TraceEvent::from_line(line) else { panic!() };
/// assert_eq!((list.entry_count, list.total_bytes), (Some(2), Some(10)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct ResourceList {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// `exports.files.root` as declared; `None` when undeclared.
    pub root: Option<String>,
    /// Entries listed; `None` on refusal.
    pub entry_count: Option<u64>,
    /// Sum of the entries' sizes; `None` on refusal.
    pub total_bytes: Option<u64>,
    /// The generation read at the request's start.
    pub generation: u64,
    /// The achieved containment class.
    pub containment_achieved: String,
    /// `ok` or the refusal code.
    pub outcome: String,
    /// `None` on `ok`, a human-readable text on every refusal.
    pub reason: Option<String>,
}

/// `resource_read`: one per request on every other operator route.
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"resource_read","event_id":"evt_1","session_id":"s","timestamp":0,"path":"a.md","outcome":"not_found","bytes":null,"sha256":null,"generation":0,"containment_achieved":"advisory","reason":"no such file"}"#;
/// let Ok(TraceEvent::ResourceRead(read)) = TraceEvent::from_line(line) else { panic!() };
/// assert_eq!((read.path.as_deref(), read.outcome.as_str()), (Some("a.md"), "not_found"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct ResourceRead {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The decoded request path (raw when it does not decode).
    pub path: Option<String>,
    /// `ok` or the refusal code.
    pub outcome: String,
    /// Bytes served; `None` on refusal.
    pub bytes: Option<u64>,
    /// sha256 of the bytes served; `None` on refusal.
    pub sha256: Option<String>,
    /// The generation read at the request's start.
    pub generation: u64,
    /// The achieved containment class.
    pub containment_achieved: String,
    /// `None` on `ok`.
    pub reason: Option<String>,
}

/// `peer_handle_mint`: one per `share-file` attempt past input validation.
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"peer_handle_mint","event_id":"evt_1","session_id":"s","timestamp":0,"handle_id":"3f2a","path":"r.md","audience":"b@h:1","expires_at_ms":60000,"outcome":"ok","reason":null,"audience_proof":"ed25519"}"#;
/// let Ok(TraceEvent::PeerHandleMint(mint)) = TraceEvent::from_line(line) else { panic!() };
/// assert_eq!(mint.audience_proof.as_deref(), Some("ed25519"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct PeerHandleMint {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// `None` when no handle was minted.
    pub handle_id: Option<String>,
    /// The path as requested.
    pub path: Option<String>,
    /// The peer's audience, `None` when not derived yet.
    pub audience: Option<String>,
    /// `None` when no handle was minted.
    pub expires_at_ms: Option<i64>,
    /// `ok` or the refusal code.
    pub outcome: String,
    /// `None` on `ok`.
    pub reason: Option<String>,
    /// `ed25519` or `none` (D-14.2); `None` before the peer's card was read.
    #[serde(default)]
    pub audience_proof: Option<String>,
}

/// `peer_handle_redeem`: one per request on a peer route.
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"peer_handle_redeem","event_id":"evt_1","session_id":"s","timestamp":0,"handle_id":null,"path":null,"generation":0,"audience_asserted":null,"bytes":null,"sha256":null,"outcome":"malformed_handle","reason":"not a token","audience_proof":null}"#;
/// let Ok(TraceEvent::PeerHandleRedeem(redeem)) = TraceEvent::from_line(line) else { panic!() };
/// assert_eq!(redeem.outcome, "malformed_handle");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct PeerHandleRedeem {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// `None` when no token was sent.
    pub handle_id: Option<String>,
    /// The handle's path once its MAC verified; `None` before.
    pub path: Option<String>,
    /// The generation read at the request's start.
    pub generation: u64,
    /// The normalised `x-murmur-audience`, `None` when absent.
    pub audience_asserted: Option<String>,
    /// Bytes served; `None` on refusal.
    pub bytes: Option<u64>,
    /// sha256 of the bytes served; `None` on refusal.
    pub sha256: Option<String>,
    /// `ok` or the refusal code.
    pub outcome: String,
    /// `None` on `ok`.
    pub reason: Option<String>,
    /// `ed25519` or `none` (D-14.5); `None` before the MAC verified.
    #[serde(default)]
    pub audience_proof: Option<String>,
}

/// `peer_file_fetch`: one per `fetch-peer-file` attempt past input validation.
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"peer_file_fetch","event_id":"evt_1","session_id":"s","timestamp":0,"peer":"h:1","handle_id":"3f2a","stored_path":null,"bytes":null,"sha256":null,"outcome":"http_502","reason":"bad gateway"}"#;
/// let Ok(TraceEvent::PeerFileFetch(fetch)) = TraceEvent::from_line(line) else { panic!() };
/// assert_eq!((fetch.peer.as_deref(), fetch.outcome.as_str()), (Some("h:1"), "http_502"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct PeerFileFetch {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The peer as given.
    pub peer: Option<String>,
    /// The handle id of the token.
    pub handle_id: Option<String>,
    /// `peer-in/...` when stored.
    pub stored_path: Option<String>,
    /// Bytes stored.
    pub bytes: Option<u64>,
    /// sha256 of the bytes stored.
    pub sha256: Option<String>,
    /// `ok`, a refusal code, the peer's code, or `http_<status>`.
    pub outcome: String,
    /// `None` on `ok`.
    pub reason: Option<String>,
}

/// One trace event, typed: the five kinds of line of D-6.2, each with its envelope. More kinds
/// may come (the enum is `#[non_exhaustive]`), as more fields may (each struct is too).
///
/// ```
/// use resource_plane::backends::TraceEvent;
///
/// let line = br#"{"event_type":"resource_read","event_id":"evt_1","session_id":"s","timestamp":0,"path":"a.md","outcome":"ok","bytes":5,"sha256":"2cf2","generation":0,"containment_achieved":"advisory","reason":null}"#;
/// let event = TraceEvent::from_line(line).unwrap();
/// assert_eq!((event.event_type(), event.outcome()), ("resource_read", "ok"));
/// match event {
///     TraceEvent::ResourceRead(read) => assert_eq!(read.bytes, Some(5)),
///     _ => unreachable!("a resource_read line"),
/// }
/// assert!(TraceEvent::from_line(br#"{"event_type":"other"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "event_type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TraceEvent {
    /// `resource_list`.
    ResourceList(ResourceList),
    /// `resource_read`.
    ResourceRead(ResourceRead),
    /// `peer_handle_mint`.
    PeerHandleMint(PeerHandleMint),
    /// `peer_handle_redeem`.
    PeerHandleRedeem(PeerHandleRedeem),
    /// `peer_file_fetch`.
    PeerFileFetch(PeerFileFetch),
}

impl TraceEvent {
    /// Reads one trace line (a line of `trace.jsonl`, or what a sink is handed).
    ///
    /// # Errors
    /// `InvalidData` when `line` is not JSON, names no event type of D-6.2, or lacks one of
    /// its fields.
    pub fn from_line(line: &[u8]) -> io::Result<Self> {
        serde_json::from_slice(line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The line's `event_type`.
    pub fn event_type(&self) -> &'static str {
        match self {
            TraceEvent::ResourceList(_) => "resource_list",
            TraceEvent::ResourceRead(_) => "resource_read",
            TraceEvent::PeerHandleMint(_) => "peer_handle_mint",
            TraceEvent::PeerHandleRedeem(_) => "peer_handle_redeem",
            TraceEvent::PeerFileFetch(_) => "peer_file_fetch",
        }
    }

    /// The envelope every line carries.
    pub fn envelope(&self) -> &Envelope {
        match self {
            TraceEvent::ResourceList(e) => &e.envelope,
            TraceEvent::ResourceRead(e) => &e.envelope,
            TraceEvent::PeerHandleMint(e) => &e.envelope,
            TraceEvent::PeerHandleRedeem(e) => &e.envelope,
            TraceEvent::PeerFileFetch(e) => &e.envelope,
        }
    }

    /// `ok` or the refusal (or, for a fetch, the peer's) code.
    pub fn outcome(&self) -> &str {
        match self {
            TraceEvent::ResourceList(e) => &e.outcome,
            TraceEvent::ResourceRead(e) => &e.outcome,
            TraceEvent::PeerHandleMint(e) => &e.outcome,
            TraceEvent::PeerHandleRedeem(e) => &e.outcome,
            TraceEvent::PeerFileFetch(e) => &e.outcome,
        }
    }
}

/// One finished trace line as a sink receives it ([`TraceSink::append`](super::TraceSink::append)):
/// its bytes, newline included and already redacted of handle tokens, and the same event typed
/// on request. The typed event is read from those bytes only when asked for, so a sink that
/// stores lines pays nothing for it.
///
/// ```
/// use resource_plane::backends::{TraceEvent, TraceLine};
///
/// let bytes = b"{\"event_type\":\"peer_file_fetch\",\"event_id\":\"evt_1\",\"session_id\":\"s\",\"timestamp\":0,\"peer\":\"h:1\",\"handle_id\":null,\"stored_path\":null,\"bytes\":null,\"sha256\":null,\"outcome\":\"peer_not_allowed\",\"reason\":\"not in the allow list\"}\n";
/// let line = TraceLine::new(bytes);
/// assert_eq!(line.bytes(), bytes);
/// assert!(matches!(line.event().unwrap(), TraceEvent::PeerFileFetch(_)));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TraceLine<'a> {
    bytes: &'a [u8],
}

impl<'a> TraceLine<'a> {
    /// The line whose bytes are `bytes` (one JSON object and its newline).
    pub fn new(bytes: &'a [u8]) -> Self {
        TraceLine { bytes }
    }

    /// The line, newline included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The event typed, read from [`bytes`](Self::bytes).
    ///
    /// # Errors
    /// As [`TraceEvent::from_line`]: never for a line the crate's tracer wrote.
    pub fn event(&self) -> io::Result<TraceEvent> {
        TraceEvent::from_line(self.bytes)
    }
}
