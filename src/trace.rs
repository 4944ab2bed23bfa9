//! The trace (D-6): one JSON object per line, written before the response or tool result leaves.
//!
//! [`Tracer`] builds each line (the envelope, a session-unique event id, the event's fields)
//! and redacts tokens from it (D-6.5) before handing the finished line to a
//! [`TraceSink`] backend, so every sink, the test doubles included, only ever sees redacted
//! lines. [`TraceEvent`] is one kind of line ([`events`](crate::events) holds the five of
//! D-6.2); [`OwedLine`] is the line an attempt owes if it is dropped before writing its own.
//!
//! ```
//! use resource_plane::backends::{ManualClock, RecordingTraceSink};
//! use resource_plane::trace::{TraceEvent, Tracer};
//! use std::sync::Arc;
//!
//! #[derive(serde::Serialize)]
//! struct Probe {
//!     note: &'static str,
//! }
//! impl TraceEvent for Probe {
//!     const EVENT_TYPE: &'static str = "probe";
//! }
//!
//! let sink = Arc::new(RecordingTraceSink::new());
//! let tracer = Tracer::new(sink.clone(), Arc::new(ManualClock::new(42)), "ses_1".into());
//! tracer.emit(&Probe { note: "got mh1.abc.def" }).unwrap();
//! let line = &sink.events()[0];
//! assert_eq!(line["event_type"], "probe");
//! assert_eq!(line["timestamp"], 42);
//! assert!(!line["note"].as_str().unwrap().contains("mh1."));
//! ```

use crate::backends::clock::Clock;
use crate::backends::random::{OsRandom, Random};
use crate::backends::trace::TraceSink;
use crate::backends::trace_event::TraceLine;
use serde::Serialize;
use std::fmt::Debug;
use std::io;
use std::sync::Arc;

/// One kind of trace event: its `event_type` and its fields after the envelope, in order.
pub trait TraceEvent: Serialize {
    /// The `event_type` string.
    const EVENT_TYPE: &'static str;

    /// Whether this line records a handle minted (a `peer_handle_mint` with outcome `ok`):
    /// the tracer counts those it wrote, for the session's closing log line (D-15.1).
    fn mints_a_handle(&self) -> bool {
        false
    }
}

/// Builds and writes trace lines for one session.
#[derive(Debug, Clone)]
pub struct Tracer {
    sink: Arc<dyn TraceSink>,
    clock: Arc<dyn Clock>,
    session_id: String,
    /// Event ids: a random 64-bit prefix drawn once, then a counter, so ids are unique within
    /// the session, unpredictable across sessions, and cost no syscall per line.
    id_prefix: u64,
    id_counter: Arc<std::sync::atomic::AtomicU64>,
    /// Lines written that record a handle minted.
    handles_minted: Arc<std::sync::atomic::AtomicU64>,
}

impl Tracer {
    /// A tracer stamping `session_id` on every line, its event ids' prefix drawn from the OS
    /// random source.
    pub fn new(sink: Arc<dyn TraceSink>, clock: Arc<dyn Clock>, session_id: String) -> Self {
        Self::with_random(sink, clock, session_id, &OsRandom)
    }

    /// A tracer stamping `session_id` on every line, its event ids' prefix drawn from
    /// `random` (the capsule's source).
    pub fn with_random(
        sink: Arc<dyn TraceSink>,
        clock: Arc<dyn Clock>,
        session_id: String,
        random: &dyn Random,
    ) -> Self {
        Tracer {
            sink,
            clock,
            session_id,
            id_prefix: u64::from_le_bytes(random.bytes::<8>()),
            id_counter: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            handles_minted: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// How many handles this session minted and recorded: a mint whose line could not be
    /// written handed out no handle (D-6.4) and is not counted.
    pub fn handles_minted(&self) -> u64 {
        self.handles_minted
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Appends the next event id's 32 hex characters to `line`.
    fn push_next_event_id(&self, line: &mut Vec<u8>) {
        let n = self
            .id_counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::hex::extend(line, &self.id_prefix.to_be_bytes());
        crate::hex::extend(line, &n.to_be_bytes());
    }

    /// The session id stamped on every line.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Writes `event` as one line: envelope, then the event's fields, redacted (D-6).
    ///
    /// The line is serialised once and redacted as text: a token's characters (base64url and
    /// dots) are never escaped by JSON, so every token in any string or key is found there, and
    /// its replacement `<handle:…>` needs no escaping either.
    ///
    /// # Errors
    /// The sink's error; the caller must fail closed (D-6.4).
    pub fn emit<E: TraceEvent>(&self, event: &E) -> io::Result<()> {
        let mut line = Vec::with_capacity(LINE_CAPACITY);
        line.extend_from_slice(br#"{"event_type":"#);
        serde_json::to_writer(&mut line, E::EVENT_TYPE)?;
        line.extend_from_slice(br#","event_id":"evt_"#);
        self.push_next_event_id(&mut line);
        line.extend_from_slice(br#"","session_id":"#);
        serde_json::to_writer(&mut line, &self.session_id)?;
        line.extend_from_slice(br#","timestamp":"#);
        serde_json::to_writer(&mut line, &self.clock.now_ms())?;
        // The event's fields follow the envelope in the same buffer: its opening brace becomes
        // the comma that joins them; an event with no fields leaves just the closing brace.
        let fields = line.len();
        serde_json::to_writer(&mut line, event)?;
        match &line[fields..] {
            b"{}" => {
                line.truncate(fields);
                line.push(b'}');
            }
            [b'{', ..] => line[fields] = b',',
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a trace event must serialise to a JSON object",
                ));
            }
        }
        line.push(b'\n');
        let text = std::str::from_utf8(&line)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        match crate::redact::redact_tokens(text) {
            std::borrow::Cow::Borrowed(_) => self.sink.append(TraceLine::new(&line)),
            std::borrow::Cow::Owned(clean) => self.sink.append(TraceLine::new(clean.as_bytes())),
        }?;
        if event.mints_a_handle() {
            self.handles_minted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Room for a typical line (a read's is about 280 bytes), so building one allocates once.
const LINE_CAPACITY: usize = 384;

/// The trace line an attempt owes if it never writes its own: a tool call whose future is
/// dropped mid-way (a runtime gives up on it, or the console abandons it when the session ends
/// past the drain deadline) still leaves one line (D-6, D-9.3), written as the guard drops.
/// The line is built only then, so its `reason` can say why the attempt ended unfinished.
/// [`settle`](Self::settle) releases it once the attempt writes its real line.
pub struct OwedLine<'a, E: TraceEvent, F: FnOnce() -> E> {
    tracer: &'a Tracer,
    line: Option<F>,
    event: std::marker::PhantomData<fn() -> E>,
}

impl<'a, E: TraceEvent, F: FnOnce() -> E> OwedLine<'a, E, F> {
    /// Owes the line `line` builds on `tracer` until settled.
    pub fn new(tracer: &'a Tracer, line: F) -> Self {
        OwedLine {
            tracer,
            line: Some(line),
            event: std::marker::PhantomData,
        }
    }

    /// The attempt wrote its own line: nothing is owed.
    pub fn settle(mut self) {
        self.line = None;
    }
}

impl<E: TraceEvent, F: FnOnce() -> E> Debug for OwedLine<'_, E, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwedLine")
            .field("event_type", &E::EVENT_TYPE)
            .field("owed", &self.line.is_some())
            .finish()
    }
}

impl<E: TraceEvent, F: FnOnce() -> E> Drop for OwedLine<'_, E, F> {
    fn drop(&mut self) {
        if let Some(line) = self.line.take()
            && let Err(e) = self.tracer.emit(&line())
        {
            tracing::error!("trace write failed for an unfinished attempt: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::clock::ManualClock;
    use crate::backends::random::SeededRandom;
    use crate::backends::TraceEvent as TypedEvent;
    use crate::backends::trace::{FailingTraceSink, RecordingTraceSink};

    /// A tracer for session `session` writing to `sink`, its clock standing at `now_ms`.
    fn tracer_on<S: TraceSink + 'static>(sink: &Arc<S>, now_ms: i64, session: &str) -> Tracer {
        Tracer::new(
            sink.clone(),
            Arc::new(ManualClock::new(now_ms)),
            session.into(),
        )
    }

    #[derive(Serialize)]
    struct Probe {
        path: Option<String>,
        n: u64,
    }
    impl TraceEvent for Probe {
        const EVENT_TYPE: &'static str = "probe";
    }

    #[test]
    fn envelope_then_fields_in_order_with_nulls() {
        let sink = Arc::new(RecordingTraceSink::new());
        let tracer = tracer_on(&sink, 42, "ses_x");
        tracer.emit(&Probe { path: None, n: 3 }).unwrap();
        let line = &sink.lines()[0];
        assert!(
            line.starts_with(r#"{"event_type":"probe","event_id":"evt_"#),
            "{line}"
        );
        assert!(line.ends_with(r#""session_id":"ses_x","timestamp":42,"path":null,"n":3}"#));
    }

    #[derive(Serialize)]
    struct Bare {}
    impl TraceEvent for Bare {
        const EVENT_TYPE: &'static str = "bare";
    }

    #[derive(Serialize)]
    struct NotAnObject(u8);
    impl TraceEvent for NotAnObject {
        const EVENT_TYPE: &'static str = "not_an_object";
    }

    /// The event's fields are written into the line after the envelope: one with none closes
    /// the envelope, and one that is not a JSON object is refused with nothing written.
    #[test]
    fn an_event_without_fields_closes_the_envelope_and_a_non_object_is_refused() {
        let sink = Arc::new(RecordingTraceSink::new());
        let tracer = tracer_on(&sink, 7, "s");
        tracer.emit(&Bare {}).unwrap();
        let line = &sink.lines()[0];
        assert!(
            line.ends_with(r#""session_id":"s","timestamp":7}"#),
            "{line}"
        );
        let parsed: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(parsed.as_object().map(|o| o.len()), Some(4), "{line}");
        let event_id = parsed["event_id"].as_str().unwrap();
        assert_eq!(event_id.len(), 36, "evt_ and 32 hex characters: {event_id}");
        assert!(
            event_id[4..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );

        let refused = tracer.emit(&NotAnObject(1)).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            sink.lines().len(),
            1,
            "nothing written for the refused event"
        );
    }

    /// Event ids are the session's random prefix, then a counter: unique within a session.
    #[test]
    fn event_ids_count_up_after_one_prefix() {
        let sink = Arc::new(RecordingTraceSink::new());
        let tracer = tracer_on(&sink, 0, "s");
        for _ in 0..3 {
            tracer.emit(&Bare {}).unwrap();
        }
        let ids: Vec<String> = sink
            .lines()
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["event_id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert!(ids.iter().all(|id| id[..20] == ids[0][..20]), "{ids:?}");
        let counters: Vec<&str> = ids.iter().map(|id| &id[20..]).collect();
        assert_eq!(
            counters,
            ["0000000000000000", "0000000000000001", "0000000000000002"]
        );
    }

    #[test]
    fn tokens_are_redacted_before_any_sink() {
        let sink = Arc::new(RecordingTraceSink::new());
        let tracer = tracer_on(&sink, 0, "s");
        tracer
            .emit(&Probe {
                path: Some("see mh1.abc.def".into()),
                n: 0,
            })
            .unwrap();
        assert!(!sink.lines()[0].contains("mh1."));
    }

    #[test]
    fn a_failing_sink_fails_the_emit() {
        let tracer = tracer_on(&Arc::new(FailingTraceSink), 0, "s");
        assert!(tracer.emit(&Probe { path: None, n: 0 }).is_err());
    }

    /// A sink that takes each line typed and keeps both.
    #[derive(Debug, Default)]
    struct Typed(std::sync::Mutex<Vec<(String, crate::backends::TraceEvent)>>);

    impl TraceSink for Typed {
        fn append_line(&self, _line: &[u8]) -> io::Result<()> {
            unreachable!("a sink that overrides append gets every line there")
        }
        fn append(&self, line: crate::backends::TraceLine<'_>) -> io::Result<()> {
            let text = String::from_utf8(line.bytes().to_vec()).unwrap();
            self.0.lock().unwrap().push((text, line.event()?));
            Ok(())
        }
    }

    /// A token as the planes mint them, to be found redacted wherever it was written.
    const TOKEN: &str = "mh1.eyJ0IjoxfQ.c2ln";

    /// What a typed sink makes of `event`, emitted in session `ses_t` at 42 ms, once the checks
    /// every kind of line must pass hold: the envelope reaches the typed event as the line has
    /// it, and no token is left in the line or in the typed event.
    fn typed(event: &impl TraceEvent) -> crate::backends::TraceEvent {
        let sink = Arc::new(Typed::default());
        tracer_on(&sink, 42, "ses_t").emit(event).unwrap();
        let mut got = sink.0.lock().unwrap();
        assert_eq!(got.len(), 1);
        let (line, event) = got.pop().unwrap();
        assert!(!line.contains("mh1."), "{line}");
        assert!(!format!("{event:?}").contains("mh1."), "{event:?}");
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["event_type"], event.event_type());
        assert_eq!(parsed["outcome"], event.outcome());
        assert_eq!(parsed["event_id"], event.envelope().event_id.as_str());
        assert_eq!(event.envelope().session_id, "ses_t");
        assert_eq!(event.envelope().timestamp_ms, 42);
        event
    }

    #[test]
    fn a_listing_reaches_a_typed_sink_field_for_field() {
        let event = typed(&crate::events::ResourceList {
            root: Some("out/".into()),
            entry_count: Some(3),
            total_bytes: Some(30),
            generation: 2,
            containment_achieved: "scoped",
            outcome: "ok",
            reason: None,
        });
        let TypedEvent::ResourceList(list) = &event else { panic!("{event:?}") };
        assert_eq!(
            (list.root.as_deref(), list.entry_count, list.total_bytes, list.generation),
            (Some("out/"), Some(3), Some(30), 2)
        );
        assert_eq!(list.containment_achieved, "scoped");
    }

    #[test]
    fn a_read_reaches_a_typed_sink_with_its_tokens_redacted() {
        let event = typed(&crate::events::ResourceRead {
            path: Some(format!("a/{TOKEN}")),
            outcome: "not_found",
            bytes: None,
            sha256: None,
            generation: 2,
            containment_achieved: "advisory",
            reason: Some(format!("no file {TOKEN}")),
        });
        let TypedEvent::ResourceRead(read) = &event else { panic!("{event:?}") };
        let redacted_path = read.path.as_deref().unwrap();
        assert!(redacted_path.starts_with("a/<handle:"), "{redacted_path}");
        assert!(read.reason.as_deref().unwrap().starts_with("no file <handle:"));
    }

    #[test]
    fn a_mint_and_a_redeem_reach_a_typed_sink_with_their_audience_proof() {
        use crate::events::{PeerHandleMint, PeerHandleRedeem, WithAudienceProof};
        let event = typed(&WithAudienceProof {
            event: PeerHandleMint {
                handle_id: Some("3f2a91c40b7e5d68".into()),
                path: Some("r.md".into()),
                audience: Some("b@h:1".into()),
                expires_at_ms: Some(60_042),
                outcome: "ok",
                reason: None,
            },
            audience_proof: Some("ed25519"),
        });
        let TypedEvent::PeerHandleMint(mint) = &event else { panic!("{event:?}") };
        assert_eq!(mint.expires_at_ms, Some(60_042));
        assert_eq!(mint.audience_proof.as_deref(), Some("ed25519"));
        let event = typed(&WithAudienceProof {
            event: PeerHandleRedeem {
                handle_id: Some("3f2a91c40b7e5d68".into()),
                path: Some("r.md".into()),
                generation: 1,
                audience_asserted: Some("b@h:1".into()),
                bytes: Some(5),
                sha256: Some("ab".into()),
                outcome: "ok",
                reason: None,
            },
            audience_proof: None,
        });
        let TypedEvent::PeerHandleRedeem(redeem) = &event else { panic!("{event:?}") };
        assert_eq!((redeem.bytes, redeem.audience_proof.as_deref()), (Some(5), None));
        assert_eq!(redeem.audience_asserted.as_deref(), Some("b@h:1"));
    }

    #[test]
    fn a_fetch_reaches_a_typed_sink_with_its_outcome_and_its_tokens_redacted() {
        let event = typed(&crate::events::PeerFileFetch {
            peer: Some("http://h:1/capsules/a".into()),
            handle_id: None,
            stored_path: None,
            bytes: None,
            sha256: None,
            outcome: "http_404".into(),
            reason: Some(format!("refused {TOKEN}")),
        });
        let TypedEvent::PeerFileFetch(fetch) = &event else { panic!("{event:?}") };
        assert_eq!(fetch.peer.as_deref(), Some("http://h:1/capsules/a"));
        assert_eq!(fetch.outcome, "http_404");
        assert!(fetch.reason.as_deref().unwrap().starts_with("refused <handle:"));
    }

    /// A typed sink that cannot read a line fails the emit: the caller fails closed.
    #[test]
    fn a_line_a_typed_sink_cannot_read_fails_the_emit() {
        let sink = Arc::new(Typed::default());
        let tracer = tracer_on(&sink, 0, "s");
        let refused = tracer.emit(&Bare {}).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidData);
        assert!(sink.0.lock().unwrap().is_empty());
    }

    /// The id prefix comes from the tracer's random source: a seeded source gives the same ids
    /// on every run, another seed other ones.
    #[test]
    fn the_event_id_prefix_is_drawn_from_the_random_source() {
        let first_id = |seed| {
            let sink = Arc::new(RecordingTraceSink::new());
            let tracer = Tracer::with_random(
                sink.clone(),
                Arc::new(ManualClock::new(0)),
                "s".into(),
                &SeededRandom::new(seed),
            );
            tracer.emit(&Bare {}).unwrap();
            sink.events()[0]["event_id"].as_str().unwrap().to_owned()
        };
        assert_eq!(first_id([1; 32]), first_id([1; 32]));
        assert_ne!(first_id([1; 32]), first_id([2; 32]));
    }
}
