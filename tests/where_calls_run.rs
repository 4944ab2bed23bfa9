//! Where the router runs each plane call, and what a runtime's own plane is handed.
//!
//! Every request under `/resources` leaves one trace line, written on the thread that computed
//! its answer, so a sink that records the writing thread shows where each call ran: on the test's
//! async worker (a `current_thread` runtime: the test's own thread), or on the blocking pool.
//! The crate's own planes answer small reads and plain redeems inline; listings, large files and
//! proof-checked redeems go to the pool. A runtime's own plane is async and awaited on the
//! worker, never on the pool; the synchronous `respond` waits for it on the caller's thread.

mod support;

use bytes::Bytes;
use http::Method;
use resource_plane::backends::{
    FileMeta, Filesystem, FixedKeyStore, FsError, FsErrorKind, ManualClock, MemoryFilesystem,
    OpenFile, RecordingTraceSink, RootDir, TraceSink,
};
use resource_plane::budget::ByteBudget;
use resource_plane::http::INLINE_READ_LIMIT;
use resource_plane::http::Router;
use resource_plane::path::RelPath;
use resource_plane::planes::{
    Cancel, ExportScope, HmacPeerPlane, IfNoneMatch, Listing, ListingEntry, Minted, Origin,
    PeerPlane, ReadOutcome, RedeemOutcome, RedeemRequest, ResourcePlane, ServedFile,
};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Capsule, CapsuleBuilder, Code, Manifest, Refusal};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use support::sha256_hex;
use support::world::CountingFs;

const START_MS: i64 = 1_700_000_000_000;
const READER: &str = "reader@127.0.0.1:9000";
const BOTH_YAML: &str = "name: reporter\nexports:\n  files: { root: out/, mode: read-only }\n  peer_files: { root: out/, max_ttl: 15m }\n";

/// A trace sink that records the thread each line was written on.
#[derive(Debug, Default)]
struct ThreadSink {
    lines: RecordingTraceSink,
    threads: Mutex<Vec<ThreadId>>,
}

impl TraceSink for ThreadSink {
    fn append_line(&self, line: &[u8]) -> io::Result<()> {
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.lines.append_line(line)
    }
}

impl ThreadSink {
    /// Whether the last line was written on this thread (the test's async worker).
    fn last_written_here(&self) -> bool {
        let threads = self.threads.lock().unwrap();
        *threads.last().expect("a trace line") == std::thread::current().id()
    }

    fn last_event(&self) -> serde_json::Value {
        self.lines.events().pop().expect("a trace line")
    }
}

/// A capsule over `fs` declaring both planes, its trace going to a [`ThreadSink`].
fn capsule(
    fs: Arc<dyn Filesystem>,
    customise: impl FnOnce(CapsuleBuilder<'_>) -> CapsuleBuilder<'_>,
) -> (Capsule, Arc<ThreadSink>) {
    capsule_of(BOTH_YAML, fs, customise)
}

/// A capsule of the manifest `yaml` over `fs`, its trace going to a [`ThreadSink`].
fn capsule_of(
    yaml: &str,
    fs: Arc<dyn Filesystem>,
    customise: impl FnOnce(CapsuleBuilder<'_>) -> CapsuleBuilder<'_>,
) -> (Capsule, Arc<ThreadSink>) {
    let manifest = Manifest::from_yaml(yaml).unwrap().manifest;
    let sink = Arc::new(ThreadSink::default());
    let builder = Capsule::builder(&manifest)
        .filesystem(fs)
        .clock(Arc::new(ManualClock::new(START_MS)))
        .keys(Arc::new(FixedKeyStore::new([7; 32])))
        .trace(sink.clone())
        .advertised_url("http://127.0.0.1:41234");
    (customise(builder).launch().expect("launch"), sink)
}

async fn get(router: &Router, path: &str, headers: &[(&str, &str)]) -> http::Response<Bytes> {
    let mut request = http::Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router.handle(request.body(()).unwrap()).await;
    response.map(|body| body.bytes())
}

fn mint(capsule: &Capsule, path: &str) -> Minted {
    let plane = capsule.peer_plane().expect("a peer plane");
    plane
        .resolve_for_mint(path)
        .and_then(|target| plane.mint(&target, READER, 60))
        .expect("a mint")
}

/// The crate's own planes: small reads, refusals and plain redeems inline; a file over
/// [`INLINE_READ_LIMIT`], every listing and a redeem carrying a proof on the blocking pool.
#[tokio::test(flavor = "current_thread")]
async fn the_crates_planes_answer_small_calls_inline_and_the_rest_on_the_pool() {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/small.md", "small\n", START_MS);
    let large = usize::try_from(INLINE_READ_LIMIT).unwrap() + 1;
    fs.add_file("out/large.bin", vec![b'x'; large], START_MS);
    let (capsule, sink) = capsule(fs, |builder| builder);
    let router = capsule.router();

    let small = get(&router, "/resources/files/small.md", &[]).await;
    assert_eq!(small.status(), 200);
    assert!(sink.last_written_here(), "a small read answers inline");

    let large_read = get(&router, "/resources/files/large.bin", &[]).await;
    assert_eq!(large_read.status(), 200);
    assert_eq!(large_read.body().len(), large);
    assert!(!sink.last_written_here(), "a large read goes to the pool");

    let listing = get(&router, "/resources/files", &[]).await;
    assert_eq!(listing.status(), 200);
    assert!(!sink.last_written_here(), "a listing goes to the pool");

    let refused = get(&router, "/resources/files/..%2Fsmall.md", &[]).await;
    assert_eq!(refused.status(), 403);
    assert!(sink.last_written_here(), "a lexical refusal needs no plane");

    let post = router
        .handle(
            http::Request::post("/resources/files/small.md")
                .body(())
                .unwrap(),
        )
        .await;
    assert_eq!(post.status(), 405);
    assert!(sink.last_written_here(), "a refused method needs no plane");

    let token = mint(&capsule, "small.md").token;
    let path = format!("/resources/peer/{token}");
    let redeemed = get(&router, &path, &[("x-murmur-audience", READER)]).await;
    assert_eq!(redeemed.status(), 200);
    assert_eq!(&redeemed.body()[..], b"small\n");
    assert!(
        sink.last_written_here(),
        "a plain small redeem answers inline"
    );

    // Any proof defers before any check: its signature is CPU the worker should not spend.
    let proof = "ed25519;key=AAAA;t=1;n=00;sig=AAAA";
    let proved = get(
        &router,
        &path,
        &[("x-murmur-audience", READER), ("x-murmur-proof", proof)],
    )
    .await;
    assert_eq!(proved.status(), 403);
    assert_eq!(sink.last_event()["outcome"], "handle_not_valid");
    assert!(
        !sink.last_written_here(),
        "a redeem with a proof goes to the pool"
    );
    assert_eq!(capsule.stats().requests_answered, 7, "every answer counted");
}

/// Reports a runtime holds in memory; records what it was asked and on which thread.
#[derive(Debug)]
struct Reports {
    scope: ExportScope,
    text: Bytes,
    asked: Mutex<Vec<(String, ThreadId)>>,
}

#[async_trait::async_trait]
impl ResourcePlane for Reports {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    async fn list(&self, _cancel: &Cancel) -> Result<Listing, Refusal> {
        // An async store's answer: the worker is free while it waits.
        tokio::task::yield_now().await;
        self.asked
            .lock()
            .unwrap()
            .push(("<list>".into(), std::thread::current().id()));
        Ok(Listing::from_entries(vec![ListingEntry {
            path: "a b/report.md".into(),
            size_bytes: self.text.len() as u64,
            mtime_ms: 5,
            sha256: sha256_hex(&self.text),
        }]))
    }

    /// Ignores the condition: the router answers the 304.
    async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        tokio::task::yield_now().await;
        self.asked
            .lock()
            .unwrap()
            .push((path.as_str().to_owned(), std::thread::current().id()));
        if path.as_str() != "a b/report.md" {
            return Err(Refusal::new(Code::NotFound, "no such report"));
        }
        Ok(ReadOutcome::File(ServedFile {
            bytes: self.text.clone(),
            sha256: sha256_hex(&self.text),
            mtime_ms: 5,
        }))
    }
}

/// A runtime's peer plane: the crate's, counted, and recording the thread of each redeem.
#[derive(Debug)]
struct CountedPeer {
    inner: HmacPeerPlane,
    redeems: Mutex<Vec<ThreadId>>,
}

#[async_trait::async_trait]
impl PeerPlane for CountedPeer {
    fn scope(&self) -> &ExportScope {
        self.inner.scope()
    }
    fn resolve_for_mint(&self, path: &str) -> Result<RelPath, Refusal> {
        self.inner.resolve_for_mint(path)
    }
    fn mint(&self, path: &RelPath, audience: &str, ttl_secs: u64) -> Result<Minted, Refusal> {
        self.inner.mint(path, audience, ttl_secs)
    }
    /// The crate's plane, awaited: its file work moves to the blocking pool by itself.
    async fn redeem(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
        self.redeems
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.inner.redeem(request).await
    }
    fn end_session(&self) {
        self.inner.end_session();
    }
}

/// A runtime's own planes are async and awaited on the worker that received the request, never
/// handed to the blocking pool, however large the call; the plane gets the decoded path, never
/// a refused one; the router answers the 304 a plane that ignores conditions cannot, and the
/// redeem's trace line holds the request's own facts.
#[tokio::test(flavor = "current_thread")]
async fn a_runtimes_own_planes_are_awaited_on_the_worker() {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/small.md", "small\n", START_MS);
    let reports = Arc::new(Reports {
        scope: advisory_scope("generated/", 1024),
        text: Bytes::from_static(b"quarterly\n"),
        asked: Mutex::new(Vec::new()),
    });
    let peer = Arc::new(CountedPeer {
        inner: HmacPeerPlane::new(
            fs.clone(),
            Arc::new(ManualClock::new(START_MS)),
            Arc::new(FixedKeyStore::new([9; 32])),
            advisory_scope("out/", 1024),
            "ses_runtime".into(),
            ByteBudget::new(1 << 20),
            Origin::of_url("http://127.0.0.1:41234").unwrap(),
        ),
        redeems: Mutex::new(Vec::new()),
    });
    let (capsule, sink) = capsule(fs, |builder| {
        builder
            .resource_plane(reports.clone())
            .peer_plane(peer.clone())
    });
    let router = capsule.router();
    let here = std::thread::current().id();

    let read = get(&router, "/resources/files/a%20b%2Freport.md", &[]).await;
    assert_eq!(read.status(), 200);
    assert_eq!(read.headers()["x-murmur-export-root"], "generated/");
    assert!(
        sink.last_written_here(),
        "a runtime's read is awaited on the worker"
    );
    let etag = read.headers()["etag"].to_str().unwrap().to_owned();

    let again = get(
        &router,
        "/resources/files/a%20b%2Freport.md?poll=1",
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(again.status(), 304, "the router compares the etag");
    assert!(again.body().is_empty());
    let line = sink.last_event();
    assert_eq!(line["outcome"], "not_modified");
    assert_eq!(line["path"], "a b/report.md");
    assert_eq!(line["bytes"], 0);

    assert_eq!(get(&router, "/resources/files", &[]).await.status(), 200);
    assert!(
        sink.last_written_here(),
        "a runtime's listing is awaited on the worker"
    );

    for refused in ["..%2Fsecret", "a%2F%2Fb", "%zz", "a/./b"] {
        let response = get(&router, &format!("/resources/files/{refused}"), &[]).await;
        assert_eq!(response.status(), 403, "{refused}");
    }
    let asked = reports.asked.lock().unwrap().clone();
    let paths: Vec<&str> = asked.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(
        paths,
        ["a b/report.md", "a b/report.md", "<list>"],
        "the plane got the decoded path, and no refused one"
    );
    assert!(asked.iter().all(|(_, thread)| *thread == here));

    let minted = mint(&capsule, "small.md");
    let path = format!("/resources/peer/{}", minted.token);
    let redeemed = get(
        &router,
        &path,
        &[("x-murmur-audience", " Reader@127.0.0.1:9000")],
    )
    .await;
    assert_eq!(redeemed.status(), 200);
    assert_eq!(
        redeemed.headers()["x-murmur-handle-id"],
        minted.handle_id.as_str()
    );
    assert!(
        sink.last_written_here(),
        "a runtime's redeem is awaited on the worker"
    );
    let redeems = peer.redeems.lock().unwrap().clone();
    assert_eq!(redeems, [here]);
    let line = sink.last_event();
    assert_eq!(line["handle_id"], minted.handle_id.as_str());
    assert_eq!(
        line["audience_asserted"], READER,
        "normalised by the router"
    );
    assert_eq!(line["path"], "small.md");
    assert_eq!(line["audience_proof"], "none");
}

/// The synchronous `respond` runs every plane call on the caller's thread: the crate's planes
/// by their blocking calls, a runtime's async plane waited for there, with no runtime at all.
#[test]
fn respond_runs_the_plane_call_on_the_callers_thread() {
    let fs = Arc::new(MemoryFilesystem::new());
    let large = usize::try_from(INLINE_READ_LIMIT).unwrap() + 1;
    fs.add_file("out/large.bin", vec![b'x'; large], START_MS);
    let (crates, sink) = capsule(fs.clone(), |builder| builder);
    let router = crates.router();
    for path in ["/resources/files/large.bin", "/resources/files"] {
        let response = router.respond(&Method::GET, path, &[]);
        assert_eq!(response.status(), 200, "{path}");
        assert!(sink.last_written_here(), "{path}");
    }

    let reports = Arc::new(Reports {
        scope: advisory_scope("generated/", 1024),
        text: Bytes::from_static(b"quarterly\n"),
        asked: Mutex::new(Vec::new()),
    });
    let (runtimes, sink) = capsule(fs, |builder| builder.resource_plane(reports.clone()));
    let router = runtimes.router();
    for path in ["/resources/files/a%20b/report.md", "/resources/files"] {
        let response = router.respond(&Method::GET, path, &[]);
        assert_eq!(response.status(), 200, "{path}");
        assert!(sink.last_written_here(), "{path}");
    }
    let here = std::thread::current().id();
    let asked = reports.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert!(asked.iter().all(|(_, thread)| *thread == here));
}

/// A runtime's plane that never answers: dropping the request's future (the listener found the
/// client gone) drops the plane's future too, and the request's one trace line records
/// `client_gone`, as for a call on the blocking pool.
#[tokio::test(flavor = "current_thread")]
async fn a_runtimes_plane_dropped_mid_call_leaves_one_client_gone_line() {
    #[derive(Debug)]
    struct Stuck {
        scope: ExportScope,
        dropped: Arc<AtomicUsize>,
    }
    /// Counts the plane futures dropped unfinished.
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    #[async_trait::async_trait]
    impl ResourcePlane for Stuck {
        fn scope(&self) -> &ExportScope {
            &self.scope
        }
        async fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
            let _dropped = Dropped(self.dropped.clone());
            let cancel = cancel.clone();
            std::future::pending::<()>().await;
            Err(Refusal::new(
                Code::IoError,
                format!("{}", cancel.is_cancelled()),
            ))
        }
        async fn read(&self, _: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
            let _dropped = Dropped(self.dropped.clone());
            std::future::pending().await
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let plane = Arc::new(Stuck {
        scope: advisory_scope("out/", 1024),
        dropped: dropped.clone(),
    });
    let (capsule, sink) = capsule(Arc::new(MemoryFilesystem::new()), |builder| {
        builder.resource_plane(plane)
    });
    let router = capsule.router();
    for (path, count) in [("/resources/files/stuck.md", 1), ("/resources/files", 2)] {
        let request = http::Request::get(path).body(()).unwrap();
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), router.handle(request))
                .await;
        assert!(waited.is_err(), "{path}: the plane never answers");
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            count,
            "{path}: its future dropped"
        );
        let events = sink.lines.events();
        assert_eq!(events.len(), count, "{path}: one line per request");
        assert_eq!(events[count - 1]["outcome"], "client_gone", "{path}");
    }
    assert_eq!(sink.lines.events()[0]["path"], "stuck.md");
}

/// A plane that streams a file it vouches for: the etag, `content-length` and trace line come
/// from what it vouched for, the body from the stream; a matching `If-None-Match` is a 304 that
/// never polls the stream; a stream that fails ends the body short of its length.
#[tokio::test(flavor = "current_thread")]
async fn a_streamed_read_sends_what_its_plane_vouched_for() {
    use http_body_util::BodyExt;
    use resource_plane::planes::StreamedFile;

    const TEXT: &[u8] = b"streamed, chunk by chunk\n";
    #[derive(Debug)]
    struct Streaming {
        scope: ExportScope,
        polled: Arc<AtomicUsize>,
    }
    #[async_trait::async_trait]
    impl ResourcePlane for Streaming {
        fn scope(&self) -> &ExportScope {
            &self.scope
        }
        async fn list(&self, _: &Cancel) -> Result<Listing, Refusal> {
            Ok(Listing::from_entries(Vec::new()))
        }
        async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
            let polled = self.polled.clone();
            let broken = path.as_str() == "broken.txt";
            let chunks = TEXT.chunks(5).enumerate().map(move |(i, chunk)| {
                polled.fetch_add(1, Ordering::SeqCst);
                if broken && i == 2 {
                    return Err(io::Error::other("the store went away"));
                }
                Ok(Bytes::copy_from_slice(chunk))
            });
            Ok(ReadOutcome::Stream(StreamedFile::new(
                futures::stream::iter(chunks),
                sha256_hex(TEXT),
                TEXT.len() as u64,
                START_MS,
            )))
        }
    }
    let polled = Arc::new(AtomicUsize::new(0));
    let plane = Arc::new(Streaming {
        scope: advisory_scope("out/", 1024),
        polled: polled.clone(),
    });
    let (capsule, sink) = capsule(Arc::new(MemoryFilesystem::new()), |builder| {
        builder.resource_plane(plane)
    });
    let router = capsule.router();

    let request = http::Request::get("/resources/files/file.txt")
        .body(())
        .unwrap();
    let response = router.handle(request).await;
    assert_eq!(response.status(), 200);
    let etag = format!("\"sha256:{}\"", sha256_hex(TEXT));
    assert_eq!(response.headers()["etag"], etag.as_str());
    assert_eq!(
        response.headers()["x-murmur-mtime-ms"],
        START_MS.to_string().as_str()
    );
    let line = sink.last_event();
    assert_eq!(line["sha256"], sha256_hex(TEXT));
    assert_eq!(line["bytes"], TEXT.len());
    assert_eq!(
        polled.load(Ordering::SeqCst),
        0,
        "nothing polled before the body is sent"
    );
    let sent = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&sent[..], TEXT);

    let request = http::Request::get("/resources/files/file.txt")
        .header("if-none-match", etag.as_str())
        .body(())
        .unwrap();
    let polls = polled.load(Ordering::SeqCst);
    let response = router.handle(request).await;
    assert_eq!(response.status(), 304);
    assert_eq!(sink.last_event()["outcome"], "not_modified");
    assert_eq!(
        polled.load(Ordering::SeqCst),
        polls,
        "a 304 never polls the stream"
    );

    let request = http::Request::get("/resources/files/broken.txt")
        .body(())
        .unwrap();
    let response = router.handle(request).await;
    assert_eq!(
        response.status(),
        200,
        "the headers left before the stream failed"
    );
    let sent = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        &sent[..],
        &TEXT[..10],
        "the body ends where the stream failed"
    );
}

/// A redeem request names its token by its handle id in `Debug`, never the token itself.
#[test]
fn a_redeem_request_never_shows_its_token() {
    let token = "mh1.eyJ2IjoxfQ.c2VjcmV0";
    let request = RedeemRequest::new(token, &[b"reader@127.0.0.1:9000"]).with_proof(&[b"p"]);
    let shown = format!("{request:?}");
    assert!(!shown.contains("mh1."), "{shown}");
    assert!(
        shown.contains(&resource_plane::hex::handle_id(token)),
        "{shown}"
    );
    assert_eq!((request.audience.len(), request.proof.len()), (1, 1));
}

/// The refusals the router makes itself (the method, the route, the path's decoding and
/// lexical rules) never reach the plane.
#[test]
fn refusals_before_the_plane_never_reach_it() {
    #[derive(Debug)]
    struct Untouchable {
        scope: ExportScope,
        calls: AtomicUsize,
    }
    #[async_trait::async_trait]
    impl ResourcePlane for Untouchable {
        fn scope(&self) -> &ExportScope {
            &self.scope
        }
        async fn list(&self, _: &Cancel) -> Result<Listing, Refusal> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(Refusal::new(Code::IoError, "listed"))
        }
        async fn read(&self, _: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(Refusal::new(Code::IoError, "read"))
        }
    }
    let plane = Arc::new(Untouchable {
        scope: advisory_scope("out/", 1),
        calls: AtomicUsize::new(0),
    });
    let (capsule, sink) = capsule(Arc::new(MemoryFilesystem::new()), |builder| {
        builder.resource_plane(plane.clone())
    });
    let router = capsule.router();
    for (method, path, status, outcome) in [
        (Method::POST, "/resources/files", 405, "method_not_allowed"),
        (Method::PUT, "/resources/files/a", 405, "method_not_allowed"),
        (Method::GET, "/resources/files/", 403, "outside_root"),
        (Method::GET, "/resources/files/a/../b", 403, "outside_root"),
        (Method::GET, "/resources/files/%2e%2e", 403, "outside_root"),
        (Method::GET, "/resources/files/%C3", 403, "outside_root"),
        (Method::GET, "/resources/nothing", 404, "not_found"),
    ] {
        let response = router.respond(&method, path, &[]);
        assert_eq!(response.status(), status, "{method} {path}");
        assert_eq!(sink.last_event()["outcome"], outcome, "{method} {path}");
    }
    assert_eq!(plane.calls.load(Ordering::SeqCst), 0);
    // The control: a good path does reach it.
    assert_eq!(
        router
            .respond(&Method::GET, "/resources/files/a", &[])
            .status(),
        500
    );
    assert_eq!(plane.calls.load(Ordering::SeqCst), 1);
}

/// Bytes numbered so that any shift or cut shows.
/// An advisory export scope of `root` with `max_bytes`, for a runtime's own plane.
fn advisory_scope(root: &str, max_bytes: u64) -> ExportScope {
    ExportScope {
        root: RootPath::parse(root).unwrap(),
        max_bytes,
        containment: Containment::Advisory,
    }
}

fn numbered(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The response and the trace line a request gets, with what differs between any two answers
/// by design (the `date` header; the line's event id and timestamp) taken out.
fn comparable(response: &http::Response<Bytes>, line: &serde_json::Value) -> String {
    let mut headers: Vec<String> = response
        .headers()
        .iter()
        .filter(|(name, _)| *name != "date")
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
        .collect();
    headers.sort();
    let mut line = line.clone();
    let fields = line.as_object_mut().unwrap();
    fields.remove("event_id");
    fields.remove("timestamp");
    format!(
        "{} {headers:?} {} {line}",
        response.status(),
        sha256_hex(response.body())
    )
}

/// A file larger than [`INLINE_READ_LIMIT`], read or redeemed: the inline attempt opens it, the
/// blocking pool reads it from that open, so the request resolves its root and its file once;
/// the response and the trace line are those of the same call made whole on one thread
/// (`respond`). A small read opens once too, inline.
#[tokio::test(flavor = "current_thread")]
async fn a_large_read_or_redeem_resolves_its_file_once() {
    let fs = Arc::new(CountingFs::<MemoryFilesystem>::default());
    let large = numbered(4 * usize::try_from(INLINE_READ_LIMIT).unwrap());
    fs.inner.add_file("out/large.bin", large.clone(), START_MS);
    fs.inner.add_file("out/small.md", "small\n", START_MS);
    let (capsule, sink) = capsule(fs.clone(), |builder| builder);
    let router = capsule.router();
    let opens = || (fs.open_roots(), fs.inner.files_opened());
    let since = |before: (usize, u64)| {
        let now = opens();
        (now.0 - before.0, now.1 - before.1)
    };

    let before = opens();
    let small = get(&router, "/resources/files/small.md", &[]).await;
    assert_eq!(small.status(), 200);
    assert!(sink.last_written_here());
    assert_eq!(since(before), (1, 1), "a small read: one root, one file");

    let before = opens();
    let read = get(&router, "/resources/files/large.bin", &[]).await;
    assert_eq!(read.status(), 200);
    assert!(&read.body()[..] == large.as_slice(), "the whole file");
    assert!(!sink.last_written_here(), "read on the pool");
    assert_eq!(
        since(before),
        (1, 1),
        "a large read: one root, one file, however many threads it ran on"
    );
    let async_read = comparable(&read, &sink.last_event());
    let whole = router.respond(&Method::GET, "/resources/files/large.bin", &[]);
    let whole = whole.map(|body| body.bytes());
    assert_eq!(async_read, comparable(&whole, &sink.last_event()));

    // Under a condition that does not match: still one open, the file served.
    let before = opens();
    let stale = get(
        &router,
        "/resources/files/large.bin",
        &[("if-none-match", "\"0000\"")],
    )
    .await;
    assert_eq!(stale.status(), 200);
    assert_eq!(since(before), (1, 1), "a conditional large read");

    let token = mint(&capsule, "large.bin").token;
    let path = format!("/resources/peer/{token}");
    let before = opens();
    let redeemed = get(&router, &path, &[("x-murmur-audience", READER)]).await;
    assert_eq!(redeemed.status(), 200);
    assert!(&redeemed.body()[..] == large.as_slice());
    assert!(!sink.last_written_here(), "redeemed on the pool");
    assert_eq!(since(before), (1, 1), "a large redeem: one root, one file");
    let async_redeem = comparable(&redeemed, &sink.last_event());
    let whole = router.respond(&Method::GET, &path, &[READER.as_bytes()]);
    let whole = whole.map(|body| body.bytes());
    assert_eq!(async_redeem, comparable(&whole, &sink.last_event()));
}

/// One file, `log` under `out/`, whose content lives outside any descriptor: a descriptor
/// reports the size at its open, and reads whatever the file holds when it reads, as on a real
/// filesystem. Right after open number `append_after`, `appended` is written to its end (a
/// writer appending between the inline attempt's `fstat` and the blocking pool's read).
#[derive(Debug, Clone)]
struct AppendedTo {
    content: Arc<Mutex<Vec<u8>>>,
    appended: Arc<Mutex<Option<Vec<u8>>>>,
    append_after: usize,
    opens: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct LiveFile {
    content: Arc<Mutex<Vec<u8>>>,
    at: usize,
    meta: FileMeta,
}

impl io::Read for LiveFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let content = self.content.lock().unwrap();
        let left = &content[self.at.min(content.len())..];
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.at += n;
        Ok(n)
    }
}

impl OpenFile for LiveFile {
    fn meta(&self) -> FileMeta {
        self.meta
    }
}

impl RootDir for AppendedTo {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        if target.as_str() != "log" {
            return Err(FsError::new(
                FsErrorKind::NotFound,
                "no such entry (ENOENT)",
            ));
        }
        let size = self.content.lock().unwrap().len() as u64;
        if self.opens.fetch_add(1, Ordering::SeqCst) + 1 == self.append_after
            && let Some(more) = self.appended.lock().unwrap().take()
        {
            self.content.lock().unwrap().extend_from_slice(&more);
        }
        Ok(Box::new(LiveFile {
            content: self.content.clone(),
            at: 0,
            meta: FileMeta {
                size,
                mtime_ms: START_MS,
                dev: 1,
                ino: 7,
                mtime_ns: i128::from(START_MS) * 1_000_000,
                ctime_ns: i128::from(START_MS) * 1_000_000,
            },
        }))
    }

    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        Ok(vec![RelPath::parse_canonical("log").unwrap()])
    }
}

impl Filesystem for AppendedTo {
    fn open_root(
        &self,
        _root: &RootPath,
        _class: Containment,
    ) -> Result<Box<dyn RootDir>, FsError> {
        Ok(Box::new(self.clone()))
    }

    fn check_root(&self, _root: &RootPath) -> Result<(), FsError> {
        Ok(())
    }

    fn land(&self, _dir: &str, _name: &str, _bytes: &[u8]) -> Result<(), FsError> {
        Err(FsError::new(FsErrorKind::Io, "read-only test filesystem"))
    }
}

impl AppendedTo {
    /// `log` holding `initial`, `more` appended right after open number `append_after`.
    fn new(initial: &[u8], more: &[u8], append_after: usize) -> Arc<Self> {
        Arc::new(AppendedTo {
            content: Arc::new(Mutex::new(initial.to_vec())),
            appended: Arc::new(Mutex::new(Some(more.to_vec()))),
            append_after,
            opens: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn opens(&self) -> usize {
        self.opens.load(Ordering::SeqCst)
    }
}

/// A file that grows between the inline attempt (which opened it, took its size and handed it
/// to the blocking pool) and the blocking read is caught by that read, which sees one byte more
/// than the size: the read starts over from a fresh open, and serves the file as it is then, or
/// refuses it `too_large` once it has grown past `max_bytes` (D-2.7), as a read that opened it
/// on the blocking pool in the first place would. The same holds for a redeem.
#[tokio::test(flavor = "current_thread")]
async fn a_file_growing_between_the_inline_attempt_and_the_blocking_read_is_read_again() {
    const YAML: &str = "name: reporter\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 400Ki }\n  peer_files: { root: out/, max_ttl: 15m, max_bytes: 400Ki }\n";
    let initial = numbered(300 * 1024);
    assert!(initial.len() as u64 > INLINE_READ_LIMIT);

    // Grown under max_bytes: served as it is after the growth, from a second open.
    let appended = vec![b'+'; 1000];
    let fs = AppendedTo::new(&initial, &appended, 1);
    let (capsule, sink) = capsule_of(YAML, fs.clone(), |builder| builder);
    let read = get(&capsule.router(), "/resources/files/log", &[]).await;
    let whole = [initial.as_slice(), &appended].concat();
    assert_eq!(read.status(), 200);
    assert!(
        &read.body()[..] == whole.as_slice(),
        "the file as it is now"
    );
    assert_eq!(
        read.headers()["etag"],
        format!("\"sha256:{}\"", sha256_hex(&whole))
    );
    let line = sink.last_event();
    assert_eq!(
        (line["outcome"].as_str(), line["bytes"].as_u64()),
        (Some("ok"), Some(whole.len() as u64))
    );
    assert_eq!(line["sha256"], sha256_hex(&whole));
    assert!(!sink.last_written_here());
    assert_eq!(fs.opens(), 2, "opened inline, and again once it grew");

    // Grown past max_bytes: too_large, as the fresh open's size says.
    let fs = AppendedTo::new(&initial, &vec![b'+'; 200 * 1024], 1);
    let (capsule, sink) = capsule_of(YAML, fs.clone(), |builder| builder);
    let refused = get(&capsule.router(), "/resources/files/log", &[]).await;
    assert_eq!(refused.status(), 413);
    let line = sink.last_event();
    assert_eq!(line["outcome"], "too_large");
    assert_eq!(line["reason"], "512000 bytes exceeds max_bytes 409600");
    assert_eq!(fs.opens(), 2);

    // A redeem: the mint opens the file once (to canonicalise its path), the redeem's inline
    // attempt a second time; the growth comes after that one.
    let fs = AppendedTo::new(&initial, &appended, 2);
    let (capsule, sink) = capsule_of(YAML, fs.clone(), |builder| builder);
    let token = mint(&capsule, "log").token;
    let redeemed = get(
        &capsule.router(),
        &format!("/resources/peer/{token}"),
        &[("x-murmur-audience", READER)],
    )
    .await;
    assert_eq!(redeemed.status(), 200);
    assert!(&redeemed.body()[..] == whole.as_slice());
    let line = sink.last_event();
    assert_eq!(
        (line["outcome"].as_str(), line["bytes"].as_u64()),
        (Some("ok"), Some(whole.len() as u64))
    );
    assert_eq!(line["path"], "log");
    assert_eq!(fs.opens(), 3);

    let fs = AppendedTo::new(&initial, &vec![b'+'; 200 * 1024], 2);
    let (capsule, sink) = capsule_of(YAML, fs.clone(), |builder| builder);
    let token = mint(&capsule, "log").token;
    let refused = get(
        &capsule.router(),
        &format!("/resources/peer/{token}"),
        &[("x-murmur-audience", READER)],
    )
    .await;
    assert_eq!(refused.status(), 413);
    assert_eq!(sink.last_event()["outcome"], "too_large");
}
