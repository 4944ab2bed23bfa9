//! A trace sink that forwards every event to `tracing`, typed: one `tracing` event per trace
//! line, its fields taken from the `TraceEvent` variant (no JSON parsed by the runtime), at
//! `info` for `ok` and `warn` for a refusal. The same sink also keeps each JSON line, as a file
//! sink would: a sink may take both.
//!
//! It launches a capsule on in-memory backends, sends a read, a refused read (whose path holds a
//! handle-shaped text, redacted in the typed event as in the line) and a listing through the
//! router, checks what the sink received, and exits.
//!
//! Run: `cargo run --example tracing_sink`

use resource_plane::backends::{MemoryFilesystem, TraceEvent, TraceLine, TraceSink};
use resource_plane::{Capsule, Manifest};
use std::io;
use std::sync::{Arc, Mutex};

/// Forwards each event to `tracing` and keeps its line.
#[derive(Debug, Default)]
struct TracingSink {
    lines: Mutex<Vec<String>>,
    forwarded: Mutex<Vec<TraceEvent>>,
}

impl TraceSink for TracingSink {
    fn append_line(&self, line: &[u8]) -> io::Result<()> {
        let line = String::from_utf8(line.to_vec())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.lines.lock().expect("not poisoned").push(line);
        Ok(())
    }

    fn append(&self, line: TraceLine<'_>) -> io::Result<()> {
        let event = line.event()?;
        let envelope = event.envelope();
        let (path, bytes) = match &event {
            TraceEvent::ResourceRead(read) => (read.path.clone(), read.bytes),
            TraceEvent::ResourceList(list) => (list.root.clone(), list.total_bytes),
            TraceEvent::PeerHandleRedeem(redeem) => (redeem.path.clone(), redeem.bytes),
            TraceEvent::PeerFileFetch(fetch) => (fetch.stored_path.clone(), fetch.bytes),
            TraceEvent::PeerHandleMint(mint) => (mint.path.clone(), None),
            // The enum is non-exhaustive: a kind added later is forwarded with its envelope.
            _ => (None, None),
        };
        if event.outcome() == "ok" {
            tracing::info!(
                event_type = event.event_type(),
                event_id = %envelope.event_id,
                session = %envelope.session_id,
                path = path.as_deref().unwrap_or("-"),
                bytes = bytes.unwrap_or(0),
                "capsule trace"
            );
        } else {
            tracing::warn!(
                event_type = event.event_type(),
                event_id = %envelope.event_id,
                outcome = event.outcome(),
                path = path.as_deref().unwrap_or("-"),
                "capsule trace"
            );
        }
        self.forwarded.lock().expect("not poisoned").push(event);
        self.append_line(line.bytes())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_target(false).init();
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "all green\n", 0);
    let sink = Arc::new(TracingSink::default());
    let capsule = Capsule::builder(
        &Manifest::from_yaml("name: r\nexports: { files: { root: out/, mode: read-only } }")?
            .manifest,
    )
    .filesystem(fs)
    .trace(sink.clone())
    .advertised_url("http://127.0.0.1:41234")
    .launch()?;

    let router = capsule.router();
    for path in [
        "/resources/files/report.md",
        "/resources/files/mh1.eyJwIjoiciJ9.c2lnbmF0dXJl",
        "/resources/files",
    ] {
        let response = router.handle(http::Request::get(path).body(())?).await;
        println!("GET {path}: {}", response.status());
    }

    let forwarded = sink.forwarded.lock().expect("not poisoned");
    let kinds: Vec<(&str, &str)> = forwarded
        .iter()
        .map(|event| (event.event_type(), event.outcome()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("resource_read", "ok"),
            ("resource_read", "not_found"),
            ("resource_list", "ok")
        ]
    );
    assert_eq!(sink.lines.lock().expect("not poisoned").len(), 3);
    let TraceEvent::ResourceRead(refused) = &forwarded[1] else {
        return Err("the second event is not a read".into());
    };
    let path = refused.path.as_deref().unwrap_or_default();
    assert!(
        !path.contains("mh1."),
        "a token reached the typed event: {path}"
    );
    println!("the refused read's path, as the sink saw it: {path}");
    Ok(())
}
