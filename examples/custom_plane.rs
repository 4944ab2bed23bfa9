//! A runtime's own operator plane: reports the runtime generates and holds in memory, served
//! under `/resources/files` by the crate's router, which keeps its own rules (routing, the
//! method check, the path decoding and its lexical refusals, `304` for a matching
//! `If-None-Match`, headers, one trace line per request). The plane itself only finds a
//! report by its decoded path; its calls are async (`async-trait`), awaited by the router on
//! the async worker that received the request. `examples/object_store_plane.rs` awaits an
//! object store and streams its bytes.
//!
//! The plane is mounted with `Capsule::builder(..).resource_plane(..)`; the request is answered
//! in process, with no socket.
//!
//! Run: `cargo run --example custom_plane`.

use bytes::Bytes;
use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
use resource_plane::planes::RelPath;
use resource_plane::planes::{
    Cancel, ExportScope, IfNoneMatch, Listing, ListingEntry, ReadOutcome, ResourcePlane, ServedFile,
};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Capsule, Code, Manifest, Refusal};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Reports by path, each with its bytes and the time it was generated.
#[derive(Debug)]
struct GeneratedReports {
    scope: ExportScope,
    reports: HashMap<String, (Bytes, i64)>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[async_trait::async_trait]
impl ResourcePlane for GeneratedReports {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    async fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
        let mut entries = Vec::with_capacity(self.reports.len());
        for (path, (bytes, generated_ms)) in &self.reports {
            if cancel.is_cancelled() {
                return Err(Refusal::new(Code::IoError, "the client left"));
            }
            entries.push(ListingEntry {
                path: path.clone(),
                size_bytes: bytes.len() as u64,
                mtime_ms: *generated_ms,
                sha256: sha256_hex(bytes),
            });
        }
        // Sorted by the listing itself (D-3.5).
        Ok(Listing::from_entries(entries))
    }

    // The router has already decoded the path and refused `..`, `%2e%2e`, an empty component
    // (D-2.2, D-2.3), and answers 304 itself when the etag matches `If-None-Match`.
    async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        let (bytes, generated_ms) = self
            .reports
            .get(path.as_str())
            .ok_or_else(|| Refusal::new(Code::NotFound, "no such report"))?;
        if bytes.len() as u64 > self.scope.max_bytes {
            return Err(Refusal::new(Code::TooLarge, "the report exceeds max_bytes"));
        }
        Ok(ReadOutcome::File(ServedFile {
            bytes: bytes.clone(),
            sha256: sha256_hex(bytes),
            mtime_ms: *generated_ms,
        }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The manifest still declares the export: it decides what a capsule serves.
    let manifest = Manifest::from_yaml(
        "name: reporter\nexports: { files: { root: reports/, mode: read-only } }",
    )?
    .manifest;
    let plane = GeneratedReports {
        scope: ExportScope {
            root: RootPath::parse("reports/")?,
            max_bytes: 1 << 20,
            containment: Containment::Sealed,
        },
        reports: HashMap::from([(
            "q3/summary.md".to_owned(),
            (
                Bytes::from_static(b"# Q3\n\nAll green.\n"),
                1_700_000_000_000,
            ),
        )]),
    };
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::builder(&manifest)
        // The launch checks still run on a filesystem (E-CAP-007); an empty one has no root
        // to escape.
        .filesystem(Arc::new(MemoryFilesystem::new()))
        .trace(trace.clone())
        .advertised_url("http://127.0.0.1:41234")
        .containment(Containment::Sealed)
        .resource_plane(Arc::new(plane))
        .launch()?;
    let router = capsule.router();

    let read = router
        .handle(http::Request::get("/resources/files/q3/summary.md").body(())?)
        .await;
    println!(
        "GET /resources/files/q3/summary.md -> {} etag {:?}",
        read.status(),
        read.headers().get("etag")
    );
    assert_eq!(read.status(), 200);
    assert_eq!(&read.body().bytes()[..], b"# Q3\n\nAll green.\n");

    // A client polling with the etag it holds gets a 304, though the plane ignores conditions.
    let etag = read.headers()["etag"].clone();
    let again = router
        .handle(
            http::Request::get("/resources/files/q3/summary.md")
                .header("if-none-match", etag)
                .body(())?,
        )
        .await;
    println!("the same read with its etag -> {}", again.status());
    assert_eq!(again.status(), 304);

    let listing = router
        .handle(http::Request::get("/resources/files").body(())?)
        .await;
    println!(
        "GET /resources/files -> {} {}",
        listing.status(),
        String::from_utf8_lossy(&listing.body().bytes())
    );
    assert_eq!(listing.status(), 200);

    // The router's rules hold for a runtime's plane as for the crate's.
    let escape = router
        .handle(http::Request::get("/resources/files/q3/..%2F..%2Fsecrets").body(())?)
        .await;
    let post = router
        .handle(http::Request::post("/resources/files/q3/summary.md").body(())?)
        .await;
    println!("escape -> {}, POST -> {}", escape.status(), post.status());
    assert_eq!(
        (escape.status().as_u16(), post.status().as_u16()),
        (403, 405)
    );

    for line in trace.lines() {
        println!("trace: {line}");
    }
    assert_eq!(trace.lines().len(), 5, "one trace line per request");
    Ok(())
}
