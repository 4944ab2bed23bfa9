//! Watching an export (D-17) on the real filesystem: the listing's etag and 304, long-polls,
//! watch streams (resume, reset, the slow-reader cut, shutdown, trace lines, generation
//! steps), and the 2 s fallback with notification off.
#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs

use bytes::Bytes;
use http_body_util::BodyExt;
use resource_plane::backends::{OsFilesystem, RecordingTraceSink};
use resource_plane::http::PlaneBody;
use resource_plane::planes::watch::{ChangeBatch, ChangeStream, WatchEvent};
use resource_plane::{Capsule, Manifest};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::future::poll_fn;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct World {
    _dir: tempfile::TempDir,
    out: PathBuf,
    capsule: Capsule,
    trace: Arc<RecordingTraceSink>,
}

fn world(notify: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("first.md"), "first").unwrap();
    let manifest =
        Manifest::from_yaml("name: w\nexports: { files: { root: out/, mode: read-only } }")
            .unwrap()
            .manifest;
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::builder(&manifest)
        .filesystem(Arc::new(OsFilesystem::open(dir.path()).unwrap()))
        .trace(trace.clone())
        .advertised_url("http://127.0.0.1:41234")
        .watch_notifications(notify)
        .launch()
        .unwrap();
    World {
        _dir: dir,
        out,
        capsule,
        trace,
    }
}

impl World {
    async fn get(&self, uri: &str, headers: &[(&str, &str)]) -> http::Response<PlaneBody> {
        let mut request = http::Request::get(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.capsule
            .router()
            .handle(request.body(()).unwrap())
            .await
    }

    /// A plain listing: its body and its etag header.
    async fn listing(&self) -> (Vec<u8>, String) {
        let response = self.get("/resources/files", &[]).await;
        assert_eq!(response.status(), 200);
        let etag = response.headers()["etag"].to_str().unwrap().to_owned();
        (response.body().bytes().to_vec(), etag)
    }

    fn last_line(&self) -> Value {
        self.trace.events().last().cloned().expect("a trace line")
    }
}

/// `"sha256:<hex of body>"`.
fn etag_of(body: &[u8]) -> String {
    let hex: String = Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"sha256:{hex}\"")
}

/// Reads a stream's events one at a time.
struct Events {
    body: PlaneBody,
    buffer: Vec<u8>,
}

/// Why a stream gave no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoEvent {
    Ended,
    TimedOut,
}

/// One parsed event: its name, id and data (`None` for a comment).
#[derive(Debug)]
struct Event {
    name: String,
    id: Option<String>,
    data: Value,
}

impl Events {
    fn of(response: http::Response<PlaneBody>) -> Events {
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        assert_eq!(response.headers()["cache-control"], "no-store");
        Events {
            body: response.into_body(),
            buffer: Vec::new(),
        }
    }

    /// The next event within `within`, or why none came.
    async fn next(&mut self, within: Duration) -> Result<Event, NoEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let text = String::from_utf8(raw).unwrap();
                if text.starts_with(':') {
                    continue;
                }
                let (mut name, mut id, mut data) = (String::new(), None, Value::Null);
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str(v).unwrap();
                    }
                }
                return Ok(Event { name, id, data });
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .map_err(|_| NoEvent::TimedOut)?;
            match frame {
                Some(Ok(frame)) => {
                    let data: Bytes = frame.into_data().unwrap_or_default();
                    self.buffer.extend_from_slice(&data);
                }
                _ => return Err(NoEvent::Ended),
            }
        }
    }

    /// The next `change` event's batch.
    async fn change(&mut self) -> ChangeBatch {
        let event = self.next(Duration::from_secs(10)).await.expect("an event");
        assert_eq!(event.name, "change", "{event:?}");
        let batch: ChangeBatch = serde_json::from_value(event.data).unwrap();
        assert_eq!(event.id.as_deref(), Some(batch.etag.as_str()));
        batch
    }
}

/// The next event of a library stream.
async fn next(stream: &mut ChangeStream) -> Option<WatchEvent> {
    poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut *stream), cx)).await
}

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_listing_answers_304_with_the_200s_headers_but_content() {
    let w = world(true);
    let response = w.get("/resources/files", &[]).await;
    let body = response.body().bytes();
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, etag_of(&body), "the etag is the sha256 of the body");

    let weak = format!("W/{etag}");
    for condition in [etag.as_str(), weak.as_str(), "\"x\", *"] {
        let again = w
            .get("/resources/files", &[("if-none-match", condition)])
            .await;
        if condition.contains('*') {
            // `*` beside a tag is ignored (D-13.1): a full listing.
            assert_eq!(again.status(), 200);
            continue;
        }
        assert_eq!(again.status(), 304, "{condition}");
        assert!(again.body().bytes().is_empty());
        let mut names: Vec<&str> = again.headers().keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "connection",
                "etag",
                "x-murmur-containment",
                "x-murmur-export-root",
                "x-murmur-generation"
            ]
        );
        assert_eq!(again.headers()["etag"], etag.as_str());
        let line = w.last_line();
        assert_eq!(line["outcome"], "not_modified");
        assert_eq!(line["entry_count"], 1);
        assert!(
            line.get("waited_ms").is_none(),
            "a plain listing's line is unchanged"
        );
    }

    std::fs::write(w.out.join("second.md"), "second").unwrap();
    let changed = w.get("/resources/files", &[("if-none-match", &etag)]).await;
    assert_eq!(changed.status(), 200);
    assert_ne!(changed.headers()["etag"], etag.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_is_woken_by_a_write() {
    let w = Arc::new(world(true));
    let (_, etag) = w.listing().await;
    let poller = w.clone();
    let started = Instant::now();
    let poll = tokio::spawn(async move {
        let uri = "/resources/files?wait=30";
        poller.get(uri, &[("if-none-match", &etag)]).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!poll.is_finished(), "held while nothing changes");
    std::fs::write(w.out.join("new.md"), "new").unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("woken well before the wait ran out")
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.body().bytes();
    assert!(String::from_utf8_lossy(&body).contains("\"new.md\""));
    assert_eq!(response.headers()["etag"], etag_of(&body).as_str());
    let line = w.last_line();
    assert_eq!(line["outcome"], "ok");
    let waited = line["waited_ms"].as_u64().unwrap();
    assert!(waited >= 400 && u128::from(waited) <= started.elapsed().as_millis());
    assert_eq!(line["watch"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_times_out_with_304_and_one_line() {
    let w = world(true);
    let (_, etag) = w.listing().await;
    let lines = w.trace.events().len();
    let started = Instant::now();
    let response = w
        .get("/resources/files?wait=1", &[("if-none-match", &etag)])
        .await;
    assert!(started.elapsed() >= SECOND);
    assert_eq!(response.status(), 304);
    assert_eq!(response.headers()["etag"], etag.as_str());
    assert_eq!(
        w.trace.events().len(),
        lines + 1,
        "one line for the request"
    );
    let line = w.last_line();
    assert_eq!(line["event_type"], "resource_list");
    assert_eq!(line["outcome"], "not_modified");
    assert!(line["waited_ms"].as_u64().unwrap() >= 1000);

    // Without If-None-Match, or with another etag, the answer comes at once.
    let started = Instant::now();
    let at_once = w
        .get(
            "/resources/files?wait=300",
            &[("if-none-match", "\"sha256:00\"")],
        )
        .await;
    assert_eq!(at_once.status(), 200);
    assert!(started.elapsed() < SECOND);
    assert!(w.last_line()["waited_ms"].as_u64().unwrap() < 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_whose_client_leaves_records_client_gone() {
    let w = world(true);
    let (_, etag) = w.listing().await;
    let headers = [("if-none-match", etag.as_str())];
    let poll = w.get("/resources/files?wait=60", &headers);
    assert!(tokio::time::timeout(SECOND, poll).await.is_err(), "held");
    let line = w.last_line();
    assert_eq!(line["outcome"], "client_gone");
    assert!(line["reason"].is_string());
    assert!(line["waited_ms"].as_u64().unwrap() >= 900);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_wait_or_watch_is_invalid_request() {
    let w = world(true);
    for query in [
        "wait=0",
        "wait=301",
        "wait=abc",
        "wait=",
        "watch=2",
        "wait=5&watch=1",
    ] {
        let response = w.get(&format!("/resources/files?{query}"), &[]).await;
        assert_eq!(response.status(), 400, "{query}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = serde_json::from_slice(&response.body().bytes()).unwrap();
        assert_eq!(body["error"], "invalid_request", "{query}");
        assert!(body["message"].is_string());
        let line = w.last_line();
        assert_eq!(line["outcome"], "invalid_request");
        assert!(line["reason"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_opens_with_the_listing_and_one_trace_line() {
    let w = world(true);
    let (_, etag) = w.listing().await;
    let lines = w.trace.events().len();
    let mut events = Events::of(w.get("/resources/files?watch=1", &[]).await);
    let opening = events.next(Duration::from_secs(10)).await.unwrap();
    assert_eq!(opening.name, "listing");
    assert_eq!(
        Some(format!("\"{}\"", opening.data["etag"].as_str().unwrap())),
        Some(etag.clone())
    );
    assert_eq!(opening.id.map(|id| format!("\"{id}\"")), Some(etag));
    assert_eq!(opening.data["entry_count"], 1);
    assert_eq!(w.trace.events().len(), lines + 1);
    let line = w.last_line();
    assert_eq!(line["event_type"], "resource_list");
    assert_eq!(line["watch"], true);
    assert_eq!(line["waited_ms"], Value::Null);
    assert_eq!(line["outcome"], "ok");
    assert_eq!(line["entry_count"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumes_after_a_drop_without_a_missed_or_repeated_change() {
    let w = world(true);
    let mut events = Events::of(w.get("/resources/files?watch=1", &[]).await);
    let opening = events.next(Duration::from_secs(10)).await.unwrap();
    std::fs::write(w.out.join("a.md"), "a").unwrap();
    let first = events.change().await;
    assert_eq!(first.from, opening.data["etag"]);
    assert!(first.changes.iter().any(|c| c.path == "a.md"));
    drop(events);

    std::fs::write(w.out.join("b.md"), "b").unwrap();
    std::fs::remove_file(w.out.join("first.md")).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut resumed = Events::of(
        w.get(
            "/resources/files?watch=1",
            &[("last-event-id", &first.etag)],
        )
        .await,
    );
    let mut at = first.etag.clone();
    let mut seen = Vec::new();
    while !(seen.contains(&"b.md".to_owned()) && seen.contains(&"first.md".to_owned())) {
        let batch = resumed.change().await;
        assert_eq!(batch.from, at, "each batch starts where the last ended");
        at = batch.etag.clone();
        for change in batch.changes {
            assert!(!seen.contains(&change.path), "{} repeated", change.path);
            assert_ne!(
                change.path, "a.md",
                "a change before the resume point came again"
            );
            seen.push(change.path);
        }
    }
    let (_, listing_etag) = w.listing().await;
    assert_eq!(listing_etag, format!("\"{at}\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_from_an_unknown_etag_gets_a_reset() {
    let w = world(true);
    let unknown = format!("sha256:{}", "0".repeat(64));
    let mut events = Events::of(
        w.get("/resources/files?watch=1", &[("last-event-id", &unknown)])
            .await,
    );
    let reset = events.next(Duration::from_secs(10)).await.unwrap();
    assert_eq!(reset.name, "reset");
    assert_eq!(reset.id, None);
    let (_, etag) = w.listing().await;
    assert_eq!(
        format!("\"{}\"", reset.data["etag"].as_str().unwrap()),
        etag
    );

    // A known etag, sent as If-None-Match, resumes with nothing to send first.
    let mut events = Events::of(
        w.get("/resources/files?watch=1", &[("if-none-match", &etag)])
            .await,
    );
    assert_eq!(
        events.next(Duration::from_millis(500)).await.unwrap_err(),
        NoEvent::TimedOut
    );
    std::fs::write(w.out.join("c.md"), "c").unwrap();
    assert_eq!(format!("\"{}\"", events.change().await.from), etag);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_step_is_an_event_with_no_changes() {
    let w = world(true);
    let mut events = Events::of(w.get("/resources/files?watch=1", &[]).await);
    let opening = events.next(Duration::from_secs(10)).await.unwrap();
    assert_eq!(w.capsule.task_completed(), 1);
    let batch = events.change().await;
    assert_eq!(batch.from, opening.data["etag"]);
    assert!(batch.changes.is_empty());
    assert_eq!(batch.generation, 1);
    let (body, etag) = w.listing().await;
    assert_eq!(format!("\"{}\"", batch.etag), etag);
    assert!(String::from_utf8_lossy(&body).contains("\"generation\":1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_streams_and_answers_long_polls() {
    let w = Arc::new(world(true));
    let (_, etag) = w.listing().await;
    let mut events = Events::of(w.get("/resources/files?watch=1", &[]).await);
    events.next(Duration::from_secs(10)).await.unwrap();
    let poller = w.clone();
    let poll = tokio::spawn(async move {
        poller
            .get("/resources/files?wait=60", &[("if-none-match", &etag)])
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.capsule.router().shut_down_watches();
    assert_eq!(
        events.next(Duration::from_secs(2)).await.unwrap_err(),
        NoEvent::Ended
    );
    let answered = tokio::time::timeout(Duration::from_secs(2), poll)
        .await
        .expect("the long-poll answered at shutdown")
        .unwrap();
    assert_eq!(answered.status(), 304);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_lets_over_1_mib_queue_up_is_cut() {
    let w = world(true);
    // A library subscriber sees each batch land while the HTTP stream is not read.
    let mut library = w.capsule.watch(None).unwrap();
    let Some(WatchEvent::Listing { .. }) = next(&mut library).await else {
        panic!("listing first")
    };
    let mut events = Events::of(w.get("/resources/files?watch=1", &[]).await);
    events.next(Duration::from_secs(10)).await.unwrap();

    std::fs::write(w.out.join("small.md"), "s").unwrap();
    let Some(WatchEvent::Change(_)) = next(&mut library).await else {
        panic!("the small batch")
    };
    let long = "n".repeat(200);
    for i in 0..6000 {
        std::fs::write(w.out.join(format!("{long}{i:05}")), "").unwrap();
    }
    let mut listed = 0;
    while listed < 6000 {
        let Some(WatchEvent::Change(batch)) = next(&mut library).await else {
            panic!("a change")
        };
        listed += batch.changes.len();
    }
    // Over 1 MiB of events queue behind the small batch: the stream ends unread.
    assert_eq!(
        events.next(Duration::from_secs(2)).await.unwrap_err(),
        NoEvent::Ended
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_notification_off_the_watcher_relists_every_2_s() {
    let w = world(false);
    let mut events = Events::of(w.get("/resources/files?watch=1", &[]).await);
    events.next(Duration::from_secs(10)).await.unwrap();
    let started = Instant::now();
    std::fs::write(w.out.join("late.md"), "late").unwrap();
    let batch = events.change().await;
    assert!(batch.changes.iter().any(|c| c.path == "late.md"));
    assert!(started.elapsed() < Duration::from_secs(4));
}
