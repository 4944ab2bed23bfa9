//! Embedding the crate in a runtime: capsules built with `Capsule::builder`, a runtime's own
//! planes answering through the crate's router, the builder's refusals, and the `test-util`
//! helpers, all on in-memory backends and in process: no socket, and no file read (the https
//! trust is built but never loaded, the in-memory workdir counts its opens).

mod support;

use bytes::Bytes;
use http::Method;
use resource_plane::backends::PeerTls;
use resource_plane::backends::{FixedKeyStore, ManualClock, MemoryFilesystem, RecordingTraceSink};
use resource_plane::budget::ByteBudget;
use resource_plane::path::RelPath;
use resource_plane::planes::{
    Cancel, ExportScope, HmacPeerPlane, IfNoneMatch, Listing, ListingEntry, Minted, Origin,
    PeerPlane, ReadOutcome, RedeemOutcome, RedeemRequest, ResourcePlane, ServedFile,
};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::test_util::{self, TEST_SESSION_ID, TEST_START_MS, TEST_URL, TestCapsule};
use resource_plane::{Backends, Capsule, CapsuleConfig, Code, LaunchError, Manifest, Refusal};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::sha256_hex;

const PEER_YAML: &str = "name: reporter\nexports:\n  peer_files: { root: out/, max_ttl: 15m }\n";
const FILES_YAML: &str = "name: reporter\nexports:\n  files: { root: reports/, mode: read-only }\n";
const READER: &str = "reader@127.0.0.1:9000";

fn manifest(yaml: &str) -> Manifest {
    Manifest::from_yaml(yaml)
        .unwrap_or_else(|e| panic!("{e}"))
        .manifest
}

fn error_code(response: &http::Response<resource_plane::http::PlaneBody>) -> String {
    let body: Value = serde_json::from_slice(&response.body().bytes()).expect("a JSON body");
    body["error"].as_str().unwrap_or_default().to_owned()
}

// ------------------------------------------------------------------------------------------------
// Handle expiry on in-memory backends, through the test-util helpers
// ------------------------------------------------------------------------------------------------

/// An expired handle answers 410 `handle_expired` before anything is opened (D-7.2): the
/// in-memory workdir records no open, and the https trust was never loaded.
#[test]
fn an_expired_handle_is_refused_without_opening_a_file() {
    let t = test_util::capsule(PEER_YAML);
    t.fs.add_file("out/report.md", "quarterly\n", TEST_START_MS);
    let token = t.mint("report.md", READER, 60);

    t.clock.advance(60_001);
    let path = format!("/resources/peer/{token}");
    let expired = t.get(&path, Some(READER));
    assert_eq!(expired.status(), 410);
    assert_eq!(error_code(&expired), "handle_expired");
    assert_eq!(t.fs.files_opened(), 0, "an expired handle reaches no file");

    let events = t.trace.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["event_type"], "peer_handle_redeem");
    assert_eq!(events[0]["outcome"], "handle_expired");
    assert_eq!(events[0]["session_id"], TEST_SESSION_ID);
    assert!(
        t.trace.lines().iter().all(|line| !line.contains(&token)),
        "the token never reaches the trace"
    );
    assert!(!t.peer_tls.roots_loaded(), "no certificate store was read");

    // Control: the same file, redeemed in time, is opened and served, so the counter counts.
    let fresh = t.mint("report.md", READER, 60);
    let served = t.get(&format!("/resources/peer/{fresh}"), Some(READER));
    assert_eq!(served.status(), 200);
    assert_eq!(&served.body().bytes()[..], b"quarterly\n");
    assert_eq!(t.fs.files_opened(), 1);
}

/// Expiry is exclusive at the instant itself and inclusive a millisecond before (D-7.2).
#[test]
fn a_handle_expires_at_its_expiry_instant() {
    let t = test_util::capsule(PEER_YAML);
    t.fs.add_file("out/a.md", "a", TEST_START_MS);
    let token = t.mint("a.md", READER, 1);
    let path = format!("/resources/peer/{token}");
    t.clock.advance(999);
    assert_eq!(t.get(&path, Some(READER)).status(), 200);
    t.clock.advance(1);
    let at_expiry = t.get(&path, Some(READER));
    assert_eq!(
        (at_expiry.status().as_u16(), error_code(&at_expiry)),
        (410, "handle_expired".to_owned())
    );
}

#[test]
fn test_util_refuses_what_a_launch_refuses() {
    let refused = TestCapsule::launch("name: x\nexports: { files: { root: /etc } }")
        .expect_err("an absolute root");
    assert_eq!(refused.code(), "E-MAN-003");
    let refused = TestCapsule::launch(
        "name: x\nlifecycle: { after_task: sleep }\nexports: { peer_files: { root: out } }",
    )
    .expect_err("a sleeping capsule without a short max_ttl");
    assert!(
        matches!(
            refused,
            LaunchError::HandleLifetime {
                declared_max_ttl_secs: None,
                ..
            }
        ),
        "{refused:?}"
    );
}

#[test]
#[should_panic(expected = "error[E-MAN-003]: exports.files.mode: exactly read-only")]
fn test_util_capsule_panics_with_the_refusal_text() {
    test_util::capsule("name: x\nexports: { files: { root: out } }");
}

#[test]
#[should_panic(expected = "not_found")]
fn test_util_mint_panics_with_the_refusal_code() {
    let t = test_util::capsule(PEER_YAML);
    t.mint("missing.md", READER, 60);
}

// ------------------------------------------------------------------------------------------------
// Nothing is read at construction
// ------------------------------------------------------------------------------------------------

/// A configuration, a builder and a launched capsule with every plane and tool read no file:
/// the https trust stays unloaded through a launch and requests that never reach a peer.
#[test]
fn building_and_launching_reads_no_certificate_store() {
    let trust = PeerTls::system();
    let config = CapsuleConfig::new("http://127.0.0.1:41234")
        .expect("an http URL")
        .peer_tls(trust.clone());
    let yaml = "name: reporter\nexports:\n  files: { root: out/, mode: read-only }\n  \
                peer_files: { root: out/ }\ncapabilities:\n  peer_fetch: { allow: [localhost] }\n";
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/a.md", "a", 0);
    let capsule = Capsule::builder(&manifest(yaml))
        .config(config)
        .filesystem(fs.clone())
        .trace(Arc::new(RecordingTraceSink::new()))
        .launch()
        .expect("launch");
    assert_eq!(
        capsule.tools().names(),
        vec!["fetch-peer-file", "share-file"]
    );
    assert_eq!(fs.files_opened(), 0, "a launch opens no file");
    let router = capsule.router();
    for path in [
        "/resources/files",
        "/resources/files/a.md",
        "/.well-known/agent-card.json",
    ] {
        assert_eq!(
            router.respond(&Method::GET, path, &[]).status(),
            200,
            "{path}"
        );
    }
    assert!(
        !trust.roots_loaded(),
        "no https handshake, no certificate store"
    );
}

// ------------------------------------------------------------------------------------------------
// A runtime's own planes
// ------------------------------------------------------------------------------------------------

/// Reports a runtime generates, held in memory.
#[derive(Debug)]
struct GeneratedReports {
    scope: ExportScope,
    reports: HashMap<String, Bytes>,
    lists: AtomicUsize,
}

impl GeneratedReports {
    fn new(reports: &[(&str, &'static str)]) -> Self {
        GeneratedReports {
            scope: ExportScope {
                root: RootPath::parse("generated").expect("a root"),
                max_bytes: 8,
                containment: Containment::Sealed,
            },
            reports: reports
                .iter()
                .map(|(path, text)| ((*path).to_owned(), Bytes::from_static(text.as_bytes())))
                .collect(),
            lists: AtomicUsize::new(0),
        }
    }
}

#[async_trait::async_trait]
impl ResourcePlane for GeneratedReports {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    async fn list(&self, _cancel: &Cancel) -> Result<Listing, Refusal> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        Ok(Listing::from_entries(
            self.reports
                .iter()
                .map(|(path, bytes)| ListingEntry {
                    path: path.clone(),
                    size_bytes: bytes.len() as u64,
                    mtime_ms: 5,
                    sha256: sha256_hex(bytes),
                })
                .collect(),
        ))
    }

    async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        let bytes = self
            .reports
            .get(path.as_str())
            .ok_or_else(|| Refusal::new(Code::NotFound, "no such report"))?;
        if bytes.len() as u64 > self.scope.max_bytes {
            return Err(Refusal::new(Code::TooLarge, "over max_bytes"));
        }
        Ok(ReadOutcome::File(ServedFile {
            bytes: bytes.clone(),
            sha256: sha256_hex(bytes),
            mtime_ms: 5,
        }))
    }
}

/// The router answers from a runtime's plane with its own rules: headers from the plane's
/// scope, the method check and the lexical refusals before the plane is asked, one trace line
/// per request, the plane's refusals mapped to their statuses.
#[tokio::test(flavor = "current_thread")]
async fn a_runtime_resource_plane_answers_through_the_router() {
    let plane = Arc::new(GeneratedReports::new(&[
        ("b/two.md", "two"),
        ("a.md", "one"),
        ("big.md", "far too long"),
    ]));
    let trace = Arc::new(RecordingTraceSink::new());
    let fs = Arc::new(MemoryFilesystem::new());
    let capsule = Capsule::builder(&manifest(FILES_YAML))
        .filesystem(fs.clone())
        .clock(Arc::new(ManualClock::new(0)))
        .trace(trace.clone())
        .advertised_url("http://127.0.0.1:41234")
        .containment(Containment::Scoped)
        .resource_plane(plane.clone())
        .launch()
        .expect("launch");
    let router = capsule.router();
    let get = |path: &str| http::Request::get(path).body(()).unwrap();

    let read = router.handle(get("/resources/files/b%2Ftwo.md")).await;
    assert_eq!(read.status(), 200);
    assert_eq!(&read.body().bytes()[..], b"two");
    assert_eq!(
        read.headers()["etag"],
        format!("\"sha256:{}\"", sha256_hex(b"two")).as_str()
    );
    assert_eq!(read.headers()["x-murmur-export-root"], "generated");
    assert_eq!(read.headers()["x-murmur-containment"], "scoped");

    let listing = router.handle(get("/resources/files")).await;
    assert_eq!(listing.status(), 200);
    let body: Value = serde_json::from_slice(&listing.body().bytes()).unwrap();
    let paths: Vec<&str> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["a.md", "b/two.md", "big.md"],
        "sorted by the listing"
    );
    assert_eq!(body["root"], "generated");

    let refused = [
        (
            Method::GET,
            "/resources/files/..%2Fsecret",
            403,
            "outside_root",
        ),
        (Method::GET, "/resources/files/missing.md", 404, "not_found"),
        (Method::GET, "/resources/files/big.md", 413, "too_large"),
        (
            Method::DELETE,
            "/resources/files/a.md",
            405,
            "method_not_allowed",
        ),
        (Method::POST, "/resources/files", 405, "method_not_allowed"),
    ];
    for (method, path, status, code) in &refused {
        let response = router.respond(method, path, &[]);
        assert_eq!(response.status(), *status, "{method} {path}");
        assert_eq!(error_code(&response), *code, "{method} {path}");
    }
    assert_eq!(
        plane.lists.load(Ordering::SeqCst),
        1,
        "a refused method never reaches the plane"
    );
    let events = trace.events();
    assert_eq!(events.len(), 2 + refused.len(), "one line per request");
    assert_eq!(events[0]["event_type"], "resource_read");
    assert_eq!(events[0]["path"], "b/two.md");
    assert_eq!(events[1]["event_type"], "resource_list");
    assert_eq!(events[1]["entry_count"], 3);
    assert_eq!(events[2]["outcome"], "outside_root");
    assert_eq!(fs.files_opened(), 0, "the workdir is never read");
}

/// A runtime's peer plane (here a decorator counting the crate's plane's calls) mints for
/// `share-file` and answers redeems; the session's end reaches it.
#[derive(Debug)]
struct CountingPeerPlane {
    inner: HmacPeerPlane,
    mints: AtomicUsize,
    redeems: AtomicUsize,
    ended: AtomicUsize,
}

#[async_trait::async_trait]
impl PeerPlane for CountingPeerPlane {
    fn scope(&self) -> &ExportScope {
        self.inner.scope()
    }
    fn resolve_for_mint(&self, path: &str) -> Result<RelPath, Refusal> {
        self.inner.resolve_for_mint(path)
    }
    fn mint(&self, path: &RelPath, audience: &str, ttl_secs: u64) -> Result<Minted, Refusal> {
        self.mints.fetch_add(1, Ordering::SeqCst);
        self.inner.mint(path, audience, ttl_secs)
    }
    async fn redeem(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
        self.redeems.fetch_add(1, Ordering::SeqCst);
        self.inner.redeem(request).await
    }
    fn end_session(&self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
        self.inner.end_session();
    }
}

#[test]
fn a_runtime_peer_plane_mints_and_redeems_through_the_capsule() {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "quarterly\n", TEST_START_MS);
    let clock = Arc::new(ManualClock::new(TEST_START_MS));
    let plane = Arc::new(CountingPeerPlane {
        inner: HmacPeerPlane::new(
            fs.clone(),
            clock.clone(),
            Arc::new(FixedKeyStore::new([9; 32])),
            ExportScope {
                root: RootPath::parse("out/").unwrap(),
                max_bytes: 1024,
                containment: Containment::Advisory,
            },
            TEST_SESSION_ID.to_owned(),
            ByteBudget::new(1 << 20),
            Origin::of_url(TEST_URL).unwrap(),
        ),
        mints: AtomicUsize::new(0),
        redeems: AtomicUsize::new(0),
        ended: AtomicUsize::new(0),
    });
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::builder(&manifest(PEER_YAML))
        .filesystem(fs.clone())
        .clock(clock)
        .trace(trace.clone())
        .advertised_url("http://127.0.0.1:41234")
        .peer_plane(plane.clone())
        .launch()
        .expect("launch with a runtime's peer plane");
    assert_eq!(capsule.tools().names(), vec!["share-file"]);

    let mounted = capsule.peer_plane().expect("the declared peer plane");
    let minted = mounted
        .resolve_for_mint("report.md")
        .and_then(|path| mounted.mint(&path, READER, 60))
        .expect("a mint");
    assert_eq!(
        plane.mints.load(Ordering::SeqCst),
        1,
        "the runtime's plane minted"
    );

    let path = format!("/resources/peer/{}", minted.token);
    let served = capsule
        .router()
        .respond(&Method::GET, &path, &[READER.as_bytes()]);
    assert_eq!(served.status(), 200);
    assert_eq!(&served.body().bytes()[..], b"quarterly\n");
    assert_eq!(
        served.headers()["x-murmur-handle-id"],
        minted.handle_id.as_str()
    );
    assert_eq!(plane.redeems.load(Ordering::SeqCst), 1);
    let events = trace.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event_type"], "peer_handle_redeem");
    assert_eq!(events[0]["outcome"], "ok");
    assert_eq!(events[0]["handle_id"], minted.handle_id.as_str());

    // The end of the session reaches the runtime's plane, and its handles stop verifying.
    capsule.end_session();
    assert_eq!(plane.ended.load(Ordering::SeqCst), 1);
    let after = capsule
        .router()
        .respond(&Method::GET, &path, &[READER.as_bytes()]);
    assert_eq!(error_code(&after), "handle_not_valid");
}

// ------------------------------------------------------------------------------------------------
// The builder's refusals
// ------------------------------------------------------------------------------------------------

fn memory_backends() -> Backends {
    Backends {
        fs: Arc::new(MemoryFilesystem::new()),
        clock: Arc::new(ManualClock::new(0)),
        keys: None,
        trace: Arc::new(RecordingTraceSink::new()),
    }
}

#[test]
fn a_builder_missing_a_required_setting_names_it() {
    let m = manifest(FILES_YAML);
    let backends = memory_backends();
    let cases = [
        (Capsule::builder(&m), "filesystem"),
        (
            Capsule::builder(&m).filesystem(backends.fs.clone()),
            "trace",
        ),
        (
            Capsule::builder(&m)
                .filesystem(backends.fs.clone())
                .trace(backends.trace.clone()),
            "advertised_url",
        ),
    ];
    for (builder, missing) in cases {
        let refused = builder.launch().expect_err(missing);
        assert!(
            matches!(&refused, LaunchError::Incomplete { setting, .. } if *setting == missing),
            "{refused:?}"
        );
        assert_eq!(refused.code(), "E-CLI-001");
        assert!(
            refused.to_string().contains(&format!("`{missing}`")),
            "{refused}"
        );
    }
    // The clock and the keys have defaults: these three are all a launch needs.
    Capsule::builder(&m)
        .filesystem(backends.fs)
        .trace(backends.trace)
        .advertised_url("http://127.0.0.1:1")
        .launch()
        .expect("a complete builder");
}

#[test]
fn a_replacement_plane_needs_its_export_declared() {
    let none_declared = manifest("name: bare\n");
    let refused = Capsule::builder(&none_declared)
        .backends(memory_backends())
        .advertised_url("http://127.0.0.1:1")
        .resource_plane(Arc::new(GeneratedReports::new(&[])))
        .launch()
        .expect_err("exports.files is not declared");
    assert!(
        matches!(&refused, LaunchError::UndeclaredPlane { export, .. } if *export == "exports.files"),
        "{refused:?}"
    );
    assert!(
        refused.to_string().starts_with("error[E-CLI-001]: "),
        "{refused}"
    );

    let files_only = manifest(FILES_YAML);
    let fs = Arc::new(MemoryFilesystem::new());
    let plane = Arc::new(CountingPeerPlane {
        inner: HmacPeerPlane::new(
            fs.clone(),
            Arc::new(ManualClock::new(0)),
            Arc::new(FixedKeyStore::new([1; 32])),
            ExportScope {
                root: RootPath::parse("out").unwrap(),
                max_bytes: 1,
                containment: Containment::Advisory,
            },
            TEST_SESSION_ID.to_owned(),
            ByteBudget::new(1),
            Origin::of_url(TEST_URL).unwrap(),
        ),
        mints: AtomicUsize::new(0),
        redeems: AtomicUsize::new(0),
        ended: AtomicUsize::new(0),
    });
    let refused = Capsule::builder(&files_only)
        .backends(memory_backends())
        .advertised_url("http://127.0.0.1:1")
        .peer_plane(plane)
        .launch()
        .expect_err("exports.peer_files is not declared");
    assert!(
        matches!(&refused, LaunchError::UndeclaredPlane { export, .. } if *export == "exports.peer_files"),
        "{refused:?}"
    );
}

#[test]
fn an_advertised_url_without_a_host_is_refused_by_the_config_and_the_builder() {
    for url in ["", "127.0.0.1:9", "ftp://h", "http://", "http:///x"] {
        let refused = CapsuleConfig::new(url).expect_err(url);
        assert!(
            matches!(&refused, LaunchError::AdvertisedUrl { url: given, .. } if given == url),
            "{refused:?}"
        );
        assert_eq!(refused.code(), "E-CLI-001");
        let refused = Capsule::builder(&manifest(FILES_YAML))
            .backends(memory_backends())
            .advertised_url(url)
            .launch()
            .expect_err(url);
        assert_eq!(
            refused.to_string(),
            format!(
                "error[E-CLI-001]: advertised url `{url}`: an http(s) URL with a host\n  hint: {}",
                refused.hint()
            )
        );
    }
}

/// The launch checks run through the builder as through `Capsule::launch`, before the URL.
#[test]
fn the_launch_checks_refuse_through_the_builder() {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_symlink("reports", "../elsewhere");
    let refused = Capsule::builder(&manifest(FILES_YAML))
        .filesystem(fs)
        .trace(Arc::new(RecordingTraceSink::new()))
        .advertised_url("not a url")
        .launch()
        .expect_err("an escaping root");
    assert!(
        matches!(
            &refused,
            LaunchError::RootEscapes { field: "exports.files.root", root, .. } if root == "reports/"
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "error[E-CAP-007]: exports.files.root: `reports/` resolves outside the workdir\n  \
         hint: point the export root at a directory inside the workdir, reached through no \
         absolute symlink (README § Manifest)"
    );
}

/// A manifest built by hand (its fields are public) with a name no audience can carry is
/// refused as the parser would refuse it.
#[test]
fn a_hand_built_manifest_whose_name_cannot_head_an_audience_is_refused() {
    let mut bad = manifest(FILES_YAML);
    bad.name = "line\nbreak".into();
    let refused = Capsule::builder(&bad)
        .backends(memory_backends())
        .advertised_url("http://127.0.0.1:1")
        .launch()
        .expect_err("a control character in the name");
    assert!(
        matches!(&refused, LaunchError::Malformed { field, .. } if field == "name"),
        "{refused:?}"
    );
    assert_eq!(refused.code(), "E-MAN-003");
}

/// `serve_with` over an in-memory listener (a channel of pipes, `Accept` for
/// `mpsc::Receiver`): the router answers over a pipe as over TCP, the version gate still
/// refuses another HTTP version with 505 before the router sees it, and once every sender is
/// gone the listener stops with `NotConnected`.
#[tokio::test(flavor = "current_thread")]
async fn serve_with_an_in_memory_listener_keeps_the_hardening() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let capsule = test_util::capsule(FILES_YAML);
    capsule
        .fs
        .add_file("reports/a.md", "over a pipe", TEST_START_MS);
    let (connect, listener) = tokio::sync::mpsc::channel(4);
    let server = tokio::spawn(resource_plane::http::serve_with(
        listener,
        capsule.capsule.router(),
        resource_plane::http::ListenerConfig::default(),
        std::future::pending(),
    ));
    let ask = |request: &'static [u8]| {
        let connect = connect.clone();
        async move {
            let (mut client, server_end) = tokio::io::duplex(64 * 1024);
            connect
                .send(server_end)
                .await
                .expect("the listener takes it");
            client.write_all(request).await.unwrap();
            let mut answer = String::new();
            client.read_to_string(&mut answer).await.unwrap();
            answer
        }
    };
    let read = ask(b"GET /resources/files/a.md HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(read.starts_with("HTTP/1.1 200 OK\r\n"), "{read}");
    assert!(read.ends_with("\r\n\r\nover a pipe"), "{read}");
    let refused = ask(b"GET /resources/files/a.md HTTP/2.0\r\n\r\n").await;
    assert!(refused.starts_with("HTTP/1.1 505 "), "{refused}");
    assert_eq!(capsule.trace.lines().len(), 1, "the 505 reached no plane");

    drop(connect);
    let stopped = server.await.unwrap().unwrap_err();
    assert_eq!(
        stopped.kind(),
        std::io::ErrorKind::NotConnected,
        "{stopped}"
    );
}

/// A runtime's own `Accept` is judged as an OS listener is: a transient error (a connection
/// aborted before it was accepted) is retried and the next connection served; any other error
/// stops the listener, which returns it.
#[tokio::test(flavor = "current_thread")]
async fn a_custom_accept_is_retried_after_a_transient_error_and_stopped_by_another() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    /// Answers its script in order, then, once `fail` fires, fails for good.
    struct Scripted {
        script: std::collections::VecDeque<std::io::Result<DuplexStream>>,
        fail: Option<tokio::sync::oneshot::Receiver<()>>,
    }
    impl resource_plane::http::Accept for Scripted {
        type Io = DuplexStream;
        async fn accept(&mut self) -> std::io::Result<DuplexStream> {
            if let Some(next) = self.script.pop_front() {
                return next;
            }
            if let Some(fail) = self.fail.take() {
                let _ = fail.await;
            }
            Err(std::io::Error::other("the socket is gone"))
        }
    }
    let capsule = test_util::capsule(FILES_YAML);
    capsule
        .fs
        .add_file("reports/a.md", "after a retry", TEST_START_MS);
    let (mut client, server_end) = tokio::io::duplex(64 * 1024);
    let (fail, failing) = tokio::sync::oneshot::channel();
    let script = Scripted {
        script: [
            Err(std::io::ErrorKind::ConnectionAborted.into()),
            Ok(server_end),
        ]
        .into(),
        fail: Some(failing),
    };
    let server = tokio::spawn(resource_plane::http::serve_with(
        script,
        capsule.capsule.router(),
        resource_plane::http::ListenerConfig::default(),
        std::future::pending(),
    ));
    client
        .write_all(b"GET /resources/files/a.md HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    assert!(answer.ends_with("\r\n\r\nafter a retry"), "{answer}");
    fail.send(()).unwrap();
    let stopped = server.await.unwrap().unwrap_err();
    assert_eq!(stopped.to_string(), "the socket is gone");
}
