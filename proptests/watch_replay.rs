//! A watch stream's events replayed against the real export (D-17.3): random create, modify,
//! append, truncate, rename, delete, mkdir and rmdir sequences, with and without pauses, run
//! in a real export while a client applies every `change` event to the listing it started
//! from. Once the export is quiet, the applied state renders to exactly the bytes of a fresh
//! listing, and the last event's etag is that listing's etag. Run with kernel notification
//! and with it forced off (the 2 s fallback).
//!
//! Case count: `RP_PROPTEST_CASES` (default 64) / 4 with notification, / 16 with the fallback
//! (each of its cases waits for the 2 s re-list).
#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs

mod common;

use http_body_util::BodyExt;
use proptest::prelude::*;
use resource_plane::backends::{OsFilesystem, RecordingTraceSink};
use resource_plane::http::PlaneBody;
use resource_plane::planes::ListingEntry;
use resource_plane::planes::watch::ChangeBatch;
use resource_plane::{Capsule, Manifest};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The places operations name: a few files in a few directories, so they collide.
const DIRS: [&str; 3] = ["d0", "d1", "d0/e"];
const FILES: [&str; 6] = ["f0", "f1", "d0/f2", "d1/f3", "d0/e/f4", ".hidden"];

#[derive(Debug, Clone)]
enum Op {
    Create(usize, Vec<u8>),
    Modify(usize, Vec<u8>),
    Append(usize, Vec<u8>),
    Truncate(usize),
    Rename(usize, usize),
    RenameDir(usize, usize),
    Delete(usize),
    Mkdir(usize),
    Rmdir(usize),
    Pause(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let bytes = || prop::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        (0..FILES.len(), bytes()).prop_map(|(f, b)| Op::Create(f, b)),
        (0..FILES.len(), bytes()).prop_map(|(f, b)| Op::Modify(f, b)),
        (0..FILES.len(), bytes()).prop_map(|(f, b)| Op::Append(f, b)),
        (0..FILES.len()).prop_map(Op::Truncate),
        (0..FILES.len(), 0..FILES.len()).prop_map(|(a, b)| Op::Rename(a, b)),
        (0..DIRS.len(), 0..DIRS.len()).prop_map(|(a, b)| Op::RenameDir(a, b)),
        (0..FILES.len()).prop_map(Op::Delete),
        (0..DIRS.len()).prop_map(Op::Mkdir),
        (0..DIRS.len()).prop_map(Op::Rmdir),
        (0u64..400).prop_map(Op::Pause),
    ]
}

/// Runs `op` in the export at `out`; a step the tree does not allow (a missing parent, a
/// non-empty directory) simply fails, as an agent's would.
async fn run(out: &Path, op: &Op) {
    use std::io::Write;
    let file = |f: usize| out.join(FILES[f]);
    let dir = |d: usize| out.join(DIRS[d]);
    let _ = match op {
        Op::Create(f, bytes) => std::fs::write(file(*f), bytes),
        Op::Modify(f, bytes) => std::fs::OpenOptions::new()
            .write(true)
            .open(file(*f))
            .and_then(|mut o| o.write_all(bytes)),
        Op::Append(f, bytes) => std::fs::OpenOptions::new()
            .append(true)
            .open(file(*f))
            .and_then(|mut o| o.write_all(bytes)),
        Op::Truncate(f) => std::fs::OpenOptions::new()
            .write(true)
            .open(file(*f))
            .and_then(|o| o.set_len(0)),
        Op::Rename(a, b) => std::fs::rename(file(*a), file(*b)),
        Op::RenameDir(a, b) => std::fs::rename(dir(*a), dir(*b)),
        Op::Delete(f) => std::fs::remove_file(file(*f)),
        Op::Mkdir(d) => std::fs::create_dir(dir(*d)),
        Op::Rmdir(d) => std::fs::remove_dir(dir(*d)),
        Op::Pause(ms) => {
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            Ok(())
        }
    };
}

/// What `serde_json` writes for a listing: the body the applied state must equal.
#[derive(serde::Serialize)]
struct Body<'a> {
    root: &'a Value,
    mode: &'a Value,
    max_bytes: &'a Value,
    generation: u64,
    containment_achieved: &'a Value,
    entries: &'a [ListingEntry],
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a stream's events and applies every change to `entries`.
struct Client {
    body: PlaneBody,
    buffer: Vec<u8>,
    entries: Vec<ListingEntry>,
    generation: u64,
    etag: String,
}

impl Client {
    /// Applies the events that arrive within `within`; `Err` for an event that does not
    /// follow from the state (a `reset`, a `from` that is not the current etag, a change that
    /// does not fit), or the stream's end.
    async fn apply_for(&mut self, within: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let text = String::from_utf8(raw).map_err(|e| e.to_string())?;
                if text.starts_with(':') {
                    continue;
                }
                if !text.starts_with("event: change\n") {
                    return Err(format!("unexpected event: {text}"));
                }
                let data = text
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .ok_or("a change without data")?;
                let batch: ChangeBatch = serde_json::from_str(data).map_err(|e| e.to_string())?;
                if batch.from != self.etag {
                    return Err(format!("batch from {} while at {}", batch.from, self.etag));
                }
                batch
                    .apply_to(&mut self.entries)
                    .map_err(|e| e.to_string())?;
                self.generation = batch.generation;
                self.etag = batch.etag;
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return Ok(()),
                Ok(Some(Ok(frame))) => {
                    self.buffer
                        .extend_from_slice(&frame.into_data().unwrap_or_default());
                }
                Ok(_) => return Err("the stream ended".into()),
            }
        }
    }
}

async fn listing(capsule: &Capsule) -> Vec<u8> {
    let request = http::Request::get("/resources/files").body(()).unwrap();
    let response = capsule.router().handle(request).await;
    assert_eq!(response.status(), 200);
    response.body().bytes().to_vec()
}

/// One case: the operations run while a client follows the stream; the applied state must
/// end equal to a fresh listing.
fn replay(ops: &[Op], notify: bool) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("f0"), "start").unwrap();
        let manifest =
            Manifest::from_yaml("name: p\nexports: { files: { root: out/, mode: read-only } }")
                .unwrap()
                .manifest;
        let capsule = Capsule::builder(&manifest)
            .filesystem(Arc::new(OsFilesystem::open(dir.path()).unwrap()))
            .trace(Arc::new(RecordingTraceSink::new()))
            .advertised_url("http://127.0.0.1:41234")
            .watch_notifications(notify)
            .launch()
            .unwrap();

        // The client's starting point: a listing, then the stream resumed from its etag.
        let first = listing(&capsule).await;
        let parsed: Value = serde_json::from_slice(&first).unwrap();
        let etag = format!("sha256:{}", sha256(&first));
        let request = http::Request::get("/resources/files?watch=1")
            .header("last-event-id", &etag)
            .body(())
            .unwrap();
        let response = capsule.router().handle(request).await;
        prop_assert_eq!(response.status(), 200);
        let mut client = Client {
            body: response.into_body(),
            buffer: Vec::new(),
            entries: serde_json::from_value(parsed["entries"].clone()).unwrap(),
            generation: parsed["generation"].as_u64().unwrap(),
            etag,
        };

        for op in ops {
            run(&out, op).await;
            client
                .apply_for(Duration::from_millis(1))
                .await
                .map_err(TestCaseError::fail)?;
        }

        // Quiet: follow until the client's etag is a fresh listing's, or give up.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            client
                .apply_for(Duration::from_millis(300))
                .await
                .map_err(TestCaseError::fail)?;
            let fresh = listing(&capsule).await;
            if format!("sha256:{}", sha256(&fresh)) == client.etag {
                let parsed: Value = serde_json::from_slice(&fresh).unwrap();
                let applied = serde_json::to_vec(&Body {
                    root: &parsed["root"],
                    mode: &parsed["mode"],
                    max_bytes: &parsed["max_bytes"],
                    generation: client.generation,
                    containment_achieved: &parsed["containment_achieved"],
                    entries: &client.entries,
                })
                .unwrap();
                prop_assert_eq!(
                    String::from_utf8_lossy(&applied),
                    String::from_utf8_lossy(&fresh)
                );
                prop_assert_eq!(format!("sha256:{}", sha256(&applied)), client.etag);
                return Ok(());
            }
            prop_assert!(
                tokio::time::Instant::now() < deadline,
                "the stream never reached the fresh listing"
            );
        }
    })
}

proptest! {
    #![proptest_config(common::config(common::cases() / 4))]

    #[test]
    fn applied_events_give_the_fresh_listing_with_notification(
        ops in prop::collection::vec(op(), 1..16),
    ) {
        replay(&ops, true)?;
    }
}

proptest! {
    #![proptest_config(common::config(common::cases() / 16))]

    #[test]
    fn applied_events_give_the_fresh_listing_with_the_fallback(
        ops in prop::collection::vec(op(), 1..16),
    ) {
        replay(&ops, false)?;
    }
}
