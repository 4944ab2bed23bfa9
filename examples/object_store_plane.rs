//! A runtime's own operator plane over an async object store (the `object_store` crate's
//! `InMemory`; S3, GCS or Azure behind the same trait work alike). The plane awaits the store:
//! it lists through the store's async listing and reads by streaming the object's bytes, so no
//! thread waits on the store and no file is held whole. It vouches for each file's sha256 from
//! a checksum object written beside it (`<key>.sha256`, as upload pipelines often keep), so the
//! router sends the etag and the length before the first byte.
//!
//! The router's own rules hold unchanged: `304` for an `If-None-Match` naming the etag (the
//! stream is never polled), `outside_root` for an escape, `not_found`, `405` for a `POST`, and
//! one trace line per request. `Router::respond`, the synchronous face, works for the async
//! plane too, from a thread that is not an async worker.
//!
//! Run: `cargo run --example object_store_plane`.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
use resource_plane::planes::{
    Cancel, ExportScope, IfNoneMatch, Listing, ListingEntry, ReadOutcome, RelPath, ResourcePlane,
    StreamedFile,
};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Capsule, Code, Manifest, Refusal};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The suffix of the checksum object written beside each file.
const CHECKSUM: &str = ".sha256";

/// Files under `prefix/` in an object store, each with its checksum object.
#[derive(Debug)]
struct ObjectStorePlane {
    scope: ExportScope,
    store: Arc<dyn ObjectStore>,
    /// The key prefix the export's root maps to, without a trailing `/`.
    prefix: Path,
}

/// A store error as a plane's refusal: a missing object is `not_found`, anything else
/// `io_error`.
fn refusal(e: object_store::Error) -> Refusal {
    match e {
        object_store::Error::NotFound { .. } => Refusal::new(Code::NotFound, "no such object"),
        other => Refusal::new(Code::IoError, other.to_string()),
    }
}

impl ObjectStorePlane {
    /// The key of `path` under the prefix. The router hands over only plain components, so
    /// every one is a valid key segment.
    fn key(&self, path: &str) -> Result<Path, Refusal> {
        Path::parse(format!("{}/{path}", self.prefix))
            .map_err(|e| Refusal::new(Code::OutsideRoot, e.to_string()))
    }

    /// The checksum the upload recorded for `key`.
    async fn sha256_of(&self, key: &Path) -> Result<String, Refusal> {
        let sidecar = Path::parse(format!("{key}{CHECKSUM}"))
            .map_err(|e| Refusal::new(Code::IoError, e.to_string()))?;
        let bytes = self
            .store
            .get(&sidecar)
            .await
            .map_err(refusal)?
            .bytes()
            .await
            .map_err(refusal)?;
        let hex = String::from_utf8_lossy(&bytes).trim().to_owned();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Refusal::new(Code::IoError, "a malformed checksum object"));
        }
        Ok(hex.to_ascii_lowercase())
    }
}

#[async_trait::async_trait]
impl ResourcePlane for ObjectStorePlane {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    async fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
        let objects: Vec<_> = self
            .store
            .list(Some(&self.prefix))
            .try_collect()
            .await
            .map_err(refusal)?;
        let root = format!("{}/", self.prefix);
        let mut entries = Vec::with_capacity(objects.len() / 2);
        for meta in objects {
            if cancel.is_cancelled() {
                return Err(Refusal::new(Code::IoError, "the client left"));
            }
            let key = meta.location.as_ref();
            let Some(path) = key.strip_prefix(&root) else {
                continue;
            };
            if path.ends_with(CHECKSUM) || meta.size > self.scope.max_bytes {
                continue;
            }
            entries.push(ListingEntry {
                path: path.to_owned(),
                size_bytes: meta.size,
                mtime_ms: meta.last_modified.timestamp_millis(),
                sha256: self.sha256_of(&meta.location).await?,
            });
        }
        Ok(Listing::from_entries(entries))
    }

    // The router has decoded the path and refused `..` and its spellings already, and answers
    // the `304` itself from the sha256 vouched for.
    async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        if path.as_str().ends_with(CHECKSUM) {
            return Err(Refusal::new(Code::NotFound, "a checksum, not a file"));
        }
        let key = self.key(path.as_str())?;
        let object = self.store.get(&key).await.map_err(refusal)?;
        let (size, mtime_ms) = (
            object.meta.size,
            object.meta.last_modified.timestamp_millis(),
        );
        if size > self.scope.max_bytes {
            return Err(Refusal::new(Code::TooLarge, "the object exceeds max_bytes"));
        }
        let sha256 = self.sha256_of(&key).await?;
        let body = object
            .into_stream()
            .map(|chunk| chunk.map_err(std::io::Error::other));
        Ok(ReadOutcome::Stream(StreamedFile::new(
            body, sha256, size, mtime_ms,
        )))
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Uploads `bytes` at `key` with its checksum object beside it.
async fn upload(store: &dyn ObjectStore, key: &str, bytes: &'static [u8]) {
    let sha = sha256_hex(bytes);
    store
        .put(&Path::from(key), PutPayload::from_static(bytes))
        .await
        .expect("put");
    store
        .put(
            &Path::from(format!("{key}{CHECKSUM}")),
            PutPayload::from(Bytes::from(sha)),
        )
        .await
        .expect("put checksum");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let summary: &'static [u8] = b"# Q3\n\nAll green.\n";
    upload(store.as_ref(), "reports/q3/summary.md", summary).await;
    upload(
        store.as_ref(),
        "reports/q3/costs.csv",
        b"item,eur\nrunners,120\n",
    )
    .await;
    upload(store.as_ref(), "private/keys.txt", b"not exported\n").await;

    let manifest = Manifest::from_yaml(
        "name: reporter\nexports: { files: { root: reports/, mode: read-only } }",
    )?
    .manifest;
    let plane = ObjectStorePlane {
        scope: ExportScope {
            root: RootPath::parse("reports/")?,
            max_bytes: 1 << 20,
            containment: Containment::Sealed,
        },
        store: store.clone(),
        prefix: Path::from("reports"),
    };
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::builder(&manifest)
        // The launch checks run on a filesystem; an empty one has no root to escape.
        .filesystem(Arc::new(MemoryFilesystem::new()))
        .trace(trace.clone())
        .advertised_url("http://127.0.0.1:41234")
        .containment(Containment::Sealed)
        .resource_plane(Arc::new(plane))
        .launch()?;
    let router = capsule.router();
    let get = |path: &str| http::Request::get(path).body(());

    // The listing, through the store's async listing: the two reports, no checksum object,
    // nothing outside the prefix.
    let listing = router.handle(get("/resources/files")?).await;
    let listed: serde_json::Value = serde_json::from_slice(&listing.body().bytes())?;
    let paths: Vec<&str> = listed["entries"]
        .as_array()
        .ok_or("entries")?
        .iter()
        .filter_map(|entry| entry["path"].as_str())
        .collect();
    println!("GET /resources/files -> {} {paths:?}", listing.status());
    assert_eq!(listing.status(), 200);
    assert_eq!(paths, ["q3/costs.csv", "q3/summary.md"]);

    // A read, streamed: the etag and length come from what the plane vouched for before the
    // first byte, and the bytes sent hash to that etag.
    let read = router.handle(get("/resources/files/q3/summary.md")?).await;
    let etag = read.headers()["etag"].clone();
    // The length a server sends as `content-length`, known before the first byte.
    let length = http_body::Body::size_hint(read.body()).exact();
    println!(
        "GET /resources/files/q3/summary.md -> {} etag {etag:?} length {length:?}",
        read.status()
    );
    assert_eq!(read.status(), 200);
    let sent = read.into_body().collect().await?.to_bytes();
    assert_eq!(&sent[..], summary);
    assert_eq!(etag, format!("\"sha256:{}\"", sha256_hex(&sent)).as_str());
    assert_eq!(length, Some(summary.len() as u64));

    // The same read with that etag: a 304, though the plane ignores conditions.
    let again = router
        .handle(
            http::Request::get("/resources/files/q3/summary.md")
                .header("if-none-match", etag)
                .body(())?,
        )
        .await;
    println!("the same read with its etag -> {}", again.status());
    assert_eq!(again.status(), 304);

    // The router's refusals, before and after the plane.
    let escape = router
        .handle(get("/resources/files/q3/..%2F..%2Fprivate/keys.txt")?)
        .await;
    let missing = router.handle(get("/resources/files/q4/summary.md")?).await;
    let post = router
        .handle(http::Request::post("/resources/files/q3/summary.md").body(())?)
        .await;
    println!(
        "escape -> {}, missing -> {}, POST -> {}",
        escape.status(),
        missing.status(),
        post.status()
    );
    assert_eq!(
        [escape.status(), missing.status(), post.status()].map(|s| s.as_u16()),
        [403, 404, 405]
    );

    // The synchronous face, from a blocking thread: the async plane is waited for there.
    let blocking_router = router.clone();
    let answered = tokio::task::spawn_blocking(move || {
        blocking_router.respond(&http::Method::GET, "/resources/files/q3/costs.csv", &[])
    })
    .await?;
    println!(
        "respond GET /resources/files/q3/costs.csv -> {}",
        answered.status()
    );
    assert_eq!(answered.status(), 200);
    let sent = answered.into_body().collect().await?.to_bytes();
    assert_eq!(&sent[..], b"item,eur\nrunners,120\n");

    let outcomes: Vec<String> = trace
        .events()
        .iter()
        .map(|event| event["outcome"].as_str().unwrap_or_default().to_owned())
        .collect();
    for line in trace.lines() {
        println!("trace: {line}");
    }
    assert_eq!(
        outcomes,
        [
            "ok",
            "ok",
            "not_modified",
            "outside_root",
            "not_found",
            "method_not_allowed",
            "ok"
        ],
        "one trace line per request"
    );
    Ok(())
}
