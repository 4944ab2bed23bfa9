//! The five trace events of D-6.2, each a struct whose field order is the line's field order.
//! Every field is always present; `None` serialises as `null`.
//!
//! D-14.2 and D-14.5 add `audience_proof` after the last field of `peer_handle_mint` and
//! `peer_handle_redeem` (D-6.1: more fields may follow): those lines are written as
//! [`WithAudienceProof`] around the event.

use crate::trace::TraceEvent;
use serde::Serialize;

/// `resource_list`: one per request on the listing route.
#[derive(Debug, Serialize)]
pub struct ResourceList {
    /// `exports.files.root` as declared, or null when undeclared.
    pub root: Option<String>,
    /// Entries listed; null on refusal.
    pub entry_count: Option<u64>,
    /// Sum of `size_bytes`; null on refusal.
    pub total_bytes: Option<u64>,
    /// The generation read at the request's start.
    pub generation: u64,
    /// The achieved class.
    pub containment_achieved: &'static str,
    /// `ok` or the refusal code.
    pub outcome: &'static str,
    /// Null on `ok`, a human-readable text on every refusal.
    pub reason: Option<String>,
}

impl TraceEvent for ResourceList {
    const EVENT_TYPE: &'static str = "resource_list";
}

/// A `resource_list` line of a long-poll or a watch stream (D-17.2, D-17.3): the listing's
/// fields, then `waited_ms` (how long a long-poll was held; null for a stream) and `watch`.
#[derive(Debug, Serialize)]
pub struct ResourceListWaited {
    /// The listing's fields, first and in their order.
    #[serde(flatten)]
    pub event: ResourceList,
    /// Milliseconds from the request to the answer; null for a stream.
    pub waited_ms: Option<u64>,
    /// Whether the request opened a watch stream.
    pub watch: bool,
}

impl TraceEvent for ResourceListWaited {
    const EVENT_TYPE: &'static str = ResourceList::EVENT_TYPE;
}

/// `resource_read`: one per request on every other operator route.
#[derive(Debug, Serialize)]
pub struct ResourceRead {
    /// The decoded request path (raw when it does not decode).
    pub path: Option<String>,
    /// `ok` or the refusal code.
    pub outcome: &'static str,
    /// Bytes served; null on refusal.
    pub bytes: Option<u64>,
    /// sha256 of the bytes served; null on refusal.
    pub sha256: Option<String>,
    /// The generation read at the request's start.
    pub generation: u64,
    /// The achieved class.
    pub containment_achieved: &'static str,
    /// Null on `ok`.
    pub reason: Option<String>,
}

impl TraceEvent for ResourceRead {
    const EVENT_TYPE: &'static str = "resource_read";
}

/// `peer_handle_mint`: one per `share-file` attempt past input validation.
#[derive(Debug, Serialize)]
pub struct PeerHandleMint {
    /// Null when no handle was minted.
    pub handle_id: Option<String>,
    /// The path as requested.
    pub path: Option<String>,
    /// The audience, or null when not derived yet.
    pub audience: Option<String>,
    /// Null when no handle was minted.
    pub expires_at_ms: Option<i64>,
    /// `ok` or the refusal code.
    pub outcome: &'static str,
    /// Null on `ok`.
    pub reason: Option<String>,
}

impl TraceEvent for PeerHandleMint {
    const EVENT_TYPE: &'static str = "peer_handle_mint";

    fn mints_a_handle(&self) -> bool {
        self.outcome == "ok"
    }
}

/// `peer_handle_redeem`: one per request on a peer route.
#[derive(Debug, Serialize)]
pub struct PeerHandleRedeem {
    /// Null when no token was sent.
    pub handle_id: Option<String>,
    /// The payload's `p` once the MAC verified; null before.
    pub path: Option<String>,
    /// The generation read at the request's start.
    pub generation: u64,
    /// Normalised `x-murmur-audience`, null when absent.
    pub audience_asserted: Option<String>,
    /// Bytes served; null on refusal.
    pub bytes: Option<u64>,
    /// sha256 of the bytes served; null on refusal.
    pub sha256: Option<String>,
    /// `ok` or the refusal code.
    pub outcome: &'static str,
    /// Null on `ok`.
    pub reason: Option<String>,
}

impl TraceEvent for PeerHandleRedeem {
    const EVENT_TYPE: &'static str = "peer_handle_redeem";
}

/// A `peer_handle_mint` or `peer_handle_redeem` line with `audience_proof` after the event's
/// own fields (D-14.2, D-14.5).
#[derive(Debug, Serialize)]
pub struct WithAudienceProof<E> {
    /// The event, whose fields come first, in their order.
    #[serde(flatten)]
    pub event: E,
    /// `"ed25519"` or `"none"`; null when not known yet (a mint before the card was read, a
    /// redeem before the MAC verified).
    pub audience_proof: Option<&'static str>,
}

impl TraceEvent for WithAudienceProof<PeerHandleMint> {
    const EVENT_TYPE: &'static str = PeerHandleMint::EVENT_TYPE;

    fn mints_a_handle(&self) -> bool {
        self.event.mints_a_handle()
    }
}

impl TraceEvent for WithAudienceProof<PeerHandleRedeem> {
    const EVENT_TYPE: &'static str = PeerHandleRedeem::EVENT_TYPE;
}

/// `peer_file_fetch`: one per `fetch-peer-file` attempt past input validation.
#[derive(Debug, Serialize)]
pub struct PeerFileFetch {
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
    /// Null on `ok`.
    pub reason: Option<String>,
}

impl TraceEvent for PeerFileFetch {
    const EVENT_TYPE: &'static str = "peer_file_fetch";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audience_proof_follows_the_events_own_fields() {
        let line = serde_json::to_string(&WithAudienceProof {
            event: PeerHandleRedeem {
                handle_id: Some("3f2a91c40b7e5d68".into()),
                path: None,
                generation: 2,
                audience_asserted: Some("b@h:1".into()),
                bytes: None,
                sha256: None,
                outcome: "handle_not_valid",
                reason: Some("MAC verification failed".into()),
            },
            audience_proof: None,
        })
        .unwrap();
        assert_eq!(
            line,
            r#"{"handle_id":"3f2a91c40b7e5d68","path":null,"generation":2,"audience_asserted":"b@h:1","bytes":null,"sha256":null,"outcome":"handle_not_valid","reason":"MAC verification failed","audience_proof":null}"#
        );
        let line = serde_json::to_string(&WithAudienceProof {
            event: PeerHandleMint {
                handle_id: None,
                path: Some("a".into()),
                audience: Some("b@h:1".into()),
                expires_at_ms: None,
                outcome: "peer_not_authenticated",
                reason: Some("r".into()),
            },
            audience_proof: Some("none"),
        })
        .unwrap();
        assert!(
            line.ends_with(r#""reason":"r","audience_proof":"none"}"#),
            "{line}"
        );
    }
}
