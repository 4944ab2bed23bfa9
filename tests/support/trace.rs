#![allow(dead_code)] // each test file uses a subset

//! The trace lines of D-6, checked: the envelope (D-6.1), each event's fields in order (D-6.2)
//! and what a read, a listing or a redeem must say. The checks that need a capsule's session,
//! clock and containment class are methods of [`World`].

use super::is_lower_hex;
use super::sha256_hex;
use super::world::World;
use resource_plane::backends::Clock as _;
use serde_json::{Value, json};

/// The envelope every line starts with (D-6.1).
pub const ENVELOPE: [&str; 4] = ["event_type", "event_id", "session_id", "timestamp"];
/// A `resource_list` line's own fields, in order (D-6.2).
pub const LIST_FIELDS: [&str; 7] = [
    "root",
    "entry_count",
    "total_bytes",
    "generation",
    "containment_achieved",
    "outcome",
    "reason",
];
/// A `resource_read` line's own fields, in order (D-6.2).
pub const READ_FIELDS: [&str; 7] = [
    "path",
    "outcome",
    "bytes",
    "sha256",
    "generation",
    "containment_achieved",
    "reason",
];
/// A `peer_handle_redeem` line's own fields, in order (D-6.2).
pub const REDEEM_FIELDS: [&str; 8] = [
    "handle_id",
    "path",
    "generation",
    "audience_asserted",
    "bytes",
    "sha256",
    "outcome",
    "reason",
];

/// The keys of a JSON object, in order.
pub fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// `outcome` is `ok` with a null `reason`, or a refusal code with a non-empty one.
pub fn assert_reason(ev: &Value, outcome: &str, ctx: &str) {
    assert_eq!(ev["outcome"], outcome, "{ctx}: outcome ({ev})");
    if outcome == "ok" {
        assert!(ev["reason"].is_null(), "{ctx}: reason must be null on ok");
    } else {
        let reason = ev["reason"].as_str().unwrap_or_default();
        assert!(
            !reason.is_empty(),
            "{ctx}: a refusal carries a reason: {ev}"
        );
    }
}

/// What one `peer_handle_redeem` line must say.
pub struct RedeemLine<'a> {
    pub handle_id: Option<String>,
    pub path: Option<&'a str>,
    pub generation: u64,
    pub audience: Option<&'a str>,
    /// The bytes served, on `ok`.
    pub served: Option<&'a [u8]>,
    pub outcome: &'a str,
}

/// A `peer_handle_redeem` line of session `session`: the envelope and fields in order, then
/// exactly what `want` says.
#[track_caller]
pub fn assert_redeem_line(line: &Value, want: &RedeemLine<'_>, session: &str, ctx: &str) {
    let keys = keys(line);
    let order: Vec<&str> = ENVELOPE.iter().chain(&REDEEM_FIELDS).copied().collect();
    assert!(
        keys.len() >= order.len() && keys[..order.len()] == order[..],
        "{ctx}: field order {keys:?}"
    );
    assert_eq!(line["event_type"], "peer_handle_redeem", "{ctx}");
    assert_eq!(line["session_id"], session, "{ctx}");
    let event_id = line["event_id"].as_str().expect("event_id");
    assert!(
        event_id
            .strip_prefix("evt_")
            .is_some_and(|hex| is_lower_hex(hex, 32)),
        "{ctx}: event_id {event_id}"
    );
    assert!(line["timestamp"].is_i64(), "{ctx}: timestamp");
    let opt = |v: Option<&str>| v.map_or(Value::Null, |s| Value::String(s.to_owned()));
    assert_eq!(
        line["handle_id"],
        opt(want.handle_id.as_deref()),
        "{ctx}: handle_id"
    );
    assert_eq!(line["path"], opt(want.path), "{ctx}: path");
    assert_eq!(line["generation"], want.generation, "{ctx}: generation");
    assert_eq!(
        line["audience_asserted"],
        opt(want.audience),
        "{ctx}: audience_asserted"
    );
    assert_eq!(line["outcome"], want.outcome, "{ctx}: outcome");
    match want.served {
        Some(bytes) => {
            assert_eq!(line["bytes"], bytes.len() as u64, "{ctx}: bytes");
            assert_eq!(line["sha256"], sha256_hex(bytes), "{ctx}: sha256");
            assert_eq!(line["reason"], Value::Null, "{ctx}: reason on ok");
        }
        None => {
            assert_eq!(line["bytes"], Value::Null, "{ctx}: bytes on refusal");
            assert_eq!(line["sha256"], Value::Null, "{ctx}: sha256 on refusal");
            assert!(
                line["reason"].as_str().is_some_and(|r| !r.is_empty()),
                "{ctx}: a refusal carries a reason: {line}"
            );
        }
    }
}

impl World {
    /// The envelope (D-6.1) with this world's session and clock, and the event's field names
    /// in order (D-6.2).
    pub fn assert_envelope(&self, ev: &Value, event_type: &str, fields: &[&str], ctx: &str) {
        let keys = keys(ev);
        let want: Vec<&str> = ENVELOPE.iter().chain(fields).copied().collect();
        assert!(
            keys.len() >= want.len() && keys[..want.len()] == want[..],
            "{ctx}: trace keys {keys:?}, want {want:?} first, in order"
        );
        assert_eq!(ev["event_type"], event_type, "{ctx}: event_type");
        let id = ev["event_id"].as_str().expect("event_id is a string");
        assert!(
            id.strip_prefix("evt_")
                .is_some_and(|hex| is_lower_hex(hex, 32)),
            "{ctx}: event_id {id:?} is not evt_ + 32 lowercase hex"
        );
        let session = self.session_id();
        assert!(
            session
                .strip_prefix("ses_")
                .is_some_and(|hex| is_lower_hex(hex, 32)),
            "session id {session:?}"
        );
        assert_eq!(ev["session_id"], session, "{ctx}: session_id");
        assert_eq!(ev["timestamp"], self.clock.now_ms(), "{ctx}: timestamp");
    }

    /// A `resource_read` line: `served` is the body on `ok`.
    pub fn assert_read_event(
        &self,
        ev: &Value,
        path: &str,
        outcome: &str,
        served: Option<&[u8]>,
        generation: u64,
        ctx: &str,
    ) {
        self.assert_envelope(ev, "resource_read", &READ_FIELDS, ctx);
        assert_eq!(ev["path"], path, "{ctx}: trace path");
        assert_reason(ev, outcome, ctx);
        match served {
            Some(body) => {
                assert_eq!(ev["bytes"], body.len(), "{ctx}: trace bytes");
                assert_eq!(ev["sha256"], sha256_hex(body), "{ctx}: trace sha256");
            }
            None => {
                assert!(ev["bytes"].is_null(), "{ctx}: bytes null on refusal");
                assert!(ev["sha256"].is_null(), "{ctx}: sha256 null on refusal");
            }
        }
        self.assert_generation(ev, generation, ctx);
    }

    /// The listing generation a line carries, and the containment the expectation holds.
    fn assert_generation(&self, ev: &Value, generation: u64, ctx: &str) {
        assert_eq!(ev["generation"], generation, "{ctx}: trace generation");
        assert_eq!(
            ev["containment_achieved"],
            self.containment.as_str(),
            "{ctx}: trace containment"
        );
    }

    /// A `resource_list` line: `listed` is (entry_count, total_bytes) on `ok`.
    pub fn assert_list_event(
        &self,
        ev: &Value,
        root: Option<&str>,
        outcome: &str,
        listed: Option<(usize, usize)>,
        generation: u64,
        ctx: &str,
    ) {
        self.assert_envelope(ev, "resource_list", &LIST_FIELDS, ctx);
        assert_eq!(ev["root"], json!(root), "{ctx}: trace root");
        match listed {
            Some((count, total)) => {
                assert_eq!(ev["entry_count"], count, "{ctx}: entry_count");
                assert_eq!(ev["total_bytes"], total, "{ctx}: total_bytes");
            }
            None => {
                assert!(ev["entry_count"].is_null(), "{ctx}: entry_count null");
                assert!(ev["total_bytes"].is_null(), "{ctx}: total_bytes null");
            }
        }
        self.assert_generation(ev, generation, ctx);
        assert_reason(ev, outcome, ctx);
    }

    /// A `peer_handle_redeem` line for a refusal before the MAC: no path, no audience.
    pub fn assert_redeem_refusal_event(
        &self,
        ev: &Value,
        handle_id: Option<&str>,
        outcome: &str,
        ctx: &str,
    ) {
        self.assert_envelope(ev, "peer_handle_redeem", &REDEEM_FIELDS, ctx);
        assert_eq!(ev["handle_id"], json!(handle_id), "{ctx}: handle_id");
        assert!(ev["path"].is_null(), "{ctx}: no path before the MAC");
        assert_eq!(ev["generation"], self.generation(), "{ctx}: generation");
        assert!(ev["audience_asserted"].is_null(), "{ctx}: no audience sent");
        assert!(ev["bytes"].is_null() && ev["sha256"].is_null(), "{ctx}");
        assert_reason(ev, outcome, ctx);
    }
}
