//! Where the router runs each plane call, and what a runtime's own plane is handed.
//!
//! Every request under `/resources` leaves one trace line, written on the thread that computed
//! its answer, so a sink that records the writing thread shows where each call ran: on the test's
//! async worker (a `current_thread` runtime: the test's own thread), or on the blocking pool.
//! The crate's own planes answer small reads and plain redeems inline; listings, large files,
//! proof-checked redeems and every call to a runtime's own plane go to the pool.

mod support;

use bytes::Bytes;
use http::Method;
use resource_plane::backends::{
    FixedKeyStore, ManualClock, MemoryFilesystem, RecordingTraceSink, TraceSink,
};
use resource_plane::budget::ByteBudget;
use resource_plane::http::INLINE_READ_LIMIT;
use resource_plane::http::Router;
use resource_plane::path::RelPath;
use resource_plane::planes::{
    Cancel, ExportScope, HmacPeerPlane, IfNoneMatch, Listing, ListingEntry, Minted, PeerPlane,
    ReadOutcome, RedeemOutcome, RedeemRequest, ResourcePlane, ServedFile,
};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Capsule, CapsuleBuilder, Code, Manifest, Refusal};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use support::sha256_hex;

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
    fs: Arc<MemoryFilesystem>,
    customise: impl FnOnce(CapsuleBuilder<'_>) -> CapsuleBuilder<'_>,
) -> (Capsule, Arc<ThreadSink>) {
    let manifest = Manifest::from_yaml(BOTH_YAML).unwrap().manifest;
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

impl ResourcePlane for Reports {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    fn list(&self, _cancel: &Cancel) -> Result<Listing, Refusal> {
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
    fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
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
    fn redeem(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
        self.redeems
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.inner.redeem(request)
    }
    fn end_session(&self) {
        self.inner.end_session();
    }
}

/// A runtime's own planes are always called on the blocking pool, however small the call; the
/// plane gets the decoded path, never a refused one; the router answers the 304 a plane that
/// ignores conditions cannot, and the redeem's trace line holds the request's own facts.
#[tokio::test(flavor = "current_thread")]
async fn a_runtimes_own_planes_always_run_on_the_pool() {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/small.md", "small\n", START_MS);
    let reports = Arc::new(Reports {
        scope: ExportScope {
            root: RootPath::parse("generated/").unwrap(),
            max_bytes: 1024,
            containment: Containment::Advisory,
        },
        text: Bytes::from_static(b"quarterly\n"),
        asked: Mutex::new(Vec::new()),
    });
    let peer = Arc::new(CountedPeer {
        inner: HmacPeerPlane::new(
            fs.clone(),
            Arc::new(ManualClock::new(START_MS)),
            Arc::new(FixedKeyStore::new([9; 32])),
            ExportScope {
                root: RootPath::parse("out/").unwrap(),
                max_bytes: 1024,
                containment: Containment::Advisory,
            },
            "ses_runtime".into(),
            ByteBudget::new(1 << 20),
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
        !sink.last_written_here(),
        "a runtime's read goes to the pool"
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
        !sink.last_written_here(),
        "a runtime's listing goes to the pool"
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
    assert!(asked.iter().all(|(_, thread)| *thread != here));

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
        !sink.last_written_here(),
        "a runtime's redeem goes to the pool"
    );
    let redeems = peer.redeems.lock().unwrap().clone();
    assert_eq!(redeems.len(), 1);
    assert_ne!(redeems[0], here);
    let line = sink.last_event();
    assert_eq!(line["handle_id"], minted.handle_id.as_str());
    assert_eq!(
        line["audience_asserted"], READER,
        "normalised by the router"
    );
    assert_eq!(line["path"], "small.md");
    assert_eq!(line["audience_proof"], "none");
}

/// The synchronous `respond` runs every plane call on the caller's thread.
#[test]
fn respond_runs_the_plane_call_on_the_callers_thread() {
    let fs = Arc::new(MemoryFilesystem::new());
    let large = usize::try_from(INLINE_READ_LIMIT).unwrap() + 1;
    fs.add_file("out/large.bin", vec![b'x'; large], START_MS);
    let (capsule, sink) = capsule(fs, |builder| builder);
    let router = capsule.router();
    for path in ["/resources/files/large.bin", "/resources/files"] {
        let response = router.respond(&Method::GET, path, &[]);
        assert_eq!(response.status(), 200, "{path}");
        assert!(sink.last_written_here(), "{path}");
    }
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
    impl ResourcePlane for Untouchable {
        fn scope(&self) -> &ExportScope {
            &self.scope
        }
        fn list(&self, _: &Cancel) -> Result<Listing, Refusal> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(Refusal::new(Code::IoError, "listed"))
        }
        fn read(&self, _: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(Refusal::new(Code::IoError, "read"))
        }
    }
    let plane = Arc::new(Untouchable {
        scope: ExportScope {
            root: RootPath::parse("out/").unwrap(),
            max_bytes: 1,
            containment: Containment::Advisory,
        },
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
