//! The world a capsule reaches beyond its four backends, injected through the builder and the
//! listener's configuration:
//!
//! 1. the peer transport: two capsules share and fetch a file over `MemoryTransport`, each
//!    router served in-process over in-memory pipes, with no socket and no name resolved;
//! 2. the random source: capsules launched with one `SeededRandom` seed agree on their session
//!    id, keys, handle nonces, trace event ids and redeem-proof nonces; another seed changes
//!    every one of them;
//! 3. the clock: the listener dates its answers (and its own 505) by the `ListenerConfig`
//!    clock.

mod support;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use resource_plane::backends::{
    ManualClock, MemoryFilesystem, MemoryListener, MemoryTransport, Random, RecordingTraceSink,
    SeededRandom, SystemClock,
};
use resource_plane::http::PeerTimeouts;
use resource_plane::http::{ListenerConfig, Router, serve_with};
use resource_plane::planes::RelPath;
use resource_plane::tools::{
    FetchPeerFile, FetchPeerFileInput, ShareFile, ShareFileInput, ToolErrorCode, Ttl,
};
use resource_plane::{Capsule, Manifest};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const REPORT: &str = "Q3: all green, carried over memory\n";
/// A timeout an in-process peer never reaches.
const GENEROUS: Duration = Duration::from_secs(15);

const MINTER_URL: &str = "http://reporter.test:8080";
const FETCHER_URL: &str = "http://reader.test:8081";
const MINTER: &str = "name: reporter\nexports:\n  peer_files: { root: out/, max_ttl: 15m }\n\
                      capabilities:\n  network: { allow: [\"reader.test:8081\"] }\n";
const FETCHER: &str =
    "name: reader\ncapabilities:\n  peer_fetch: { allow: [\"reporter.test:8080\"] }\n";

/// A capsule over memory and the backends a test looks at.
struct Node {
    capsule: Capsule,
    fs: Arc<MemoryFilesystem>,
    trace: Arc<RecordingTraceSink>,
}

/// Launches `yaml` at `url` reaching peers through `transport`.
fn launch(yaml: &str, url: &str, transport: &MemoryTransport) -> Node {
    let manifest = Manifest::from_yaml(yaml).expect("manifest").manifest;
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", REPORT, 1_787_577_327_015);
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::builder(&manifest)
        .filesystem(fs.clone())
        .clock(Arc::new(SystemClock))
        .trace(trace.clone())
        .advertised_url(url)
        .peer_timeouts(PeerTimeouts {
            connect: GENEROUS,
            card_total: GENEROUS,
            fetch_total: GENEROUS,
        })
        .peer_transport(Arc::new(transport.clone()))
        .launch()
        .expect("launch");
    Node { capsule, fs, trace }
}

/// Serves `router` on every connection `listener` accepts, counting them.
fn serve_in_memory(mut listener: MemoryListener, router: Router) -> Arc<AtomicUsize> {
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Some(stream) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let service = TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    accepted
}

// ------------------------------------------------------------------------------------------------
// The peer transport
// ------------------------------------------------------------------------------------------------

/// `share-file` fetches the reader's card and `fetch-peer-file` redeems at the reporter, both
/// through the injected transport: the reporter's and the reader's in-process listeners each
/// see one connection, the file lands, and both trace lines say `ok`. The hosts are names no
/// resolver knows (`.test`, RFC 2606), so TCP could not have reached them.
#[tokio::test]
async fn share_and_fetch_travel_over_an_in_memory_transport() {
    let transport = MemoryTransport::new();
    let minter = launch(MINTER, MINTER_URL, &transport);
    let fetcher = launch(FETCHER, FETCHER_URL, &transport);
    let minter_connections = serve_in_memory(
        transport.listen("reporter.test", 8080),
        minter.capsule.router(),
    );
    let fetcher_connections = serve_in_memory(
        transport.listen("reader.test", 8081),
        fetcher.capsule.router(),
    );

    let share = minter.capsule.tools().typed::<ShareFile>().expect("share");
    let shared = share
        .share(ShareFileInput::new("report.md", FETCHER_URL).with_ttl(Ttl::Seconds(60)))
        .await
        .expect("share over memory");
    assert_eq!(shared.audience, "reader@reader.test:8081");
    assert_eq!(fetcher_connections.load(Ordering::SeqCst), 1, "the card");
    assert_eq!(minter_connections.load(Ordering::SeqCst), 0);

    let fetch = fetcher
        .capsule
        .tools()
        .typed::<FetchPeerFile>()
        .expect("fetch");
    let fetched = fetch
        .fetch(FetchPeerFileInput::new(
            "reporter.test:8080",
            &shared.handle,
        ))
        .await
        .expect("fetch over memory");
    assert_eq!(minter_connections.load(Ordering::SeqCst), 1, "the redeem");
    assert_eq!(fetched.bytes, REPORT.len() as u64);
    assert_eq!(fetched.sha256, support::sha256_hex(REPORT.as_bytes()));
    assert_eq!(
        fetcher.fs.file_bytes(&fetched.path).as_deref(),
        Some(REPORT.as_bytes())
    );
    let outcome = |node: &Node, event: &str| {
        node.trace
            .events()
            .into_iter()
            .filter(|e| e["event_type"] == event)
            .map(|e| e["outcome"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(outcome(&minter, "peer_handle_mint"), ["ok"]);
    assert_eq!(outcome(&minter, "peer_handle_redeem"), ["ok"]);
    assert_eq!(outcome(&fetcher, "peer_file_fetch"), ["ok"]);
}

/// A peer the transport cannot reach is `peer_unreachable`, the trace's reason naming the
/// failed connect.
#[tokio::test]
async fn a_peer_the_transport_refuses_is_unreachable() {
    let transport = MemoryTransport::new();
    let fetcher = launch(FETCHER, FETCHER_URL, &transport);
    let fetch = fetcher
        .capsule
        .tools()
        .typed::<FetchPeerFile>()
        .expect("fetch");
    let minter = resource_plane::test_util::capsule(
        "name: reporter\nexports: { peer_files: { root: out/, max_ttl: 15m } }",
    );
    minter.fs.add_file("out/report.md", REPORT, 0);
    let token = minter.mint("report.md", "reader@reader.test:8081", 60);
    let refused = fetch
        .fetch(FetchPeerFileInput::new("reporter.test:8080", &token))
        .await
        .expect_err("nobody listens");
    assert_eq!(
        refused.code,
        ToolErrorCode::Code(resource_plane::Code::PeerUnreachable)
    );
    let line = fetcher.trace.events().pop().expect("a fetch line");
    assert_eq!(line["outcome"], "peer_unreachable");
    let reason = line["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("connect"), "{reason}");
}

// ------------------------------------------------------------------------------------------------
// The random source
// ------------------------------------------------------------------------------------------------

/// What a capsule drew from its random source, as far as a test can see it.
#[derive(Debug, PartialEq, Eq)]
struct Drawn {
    session_id: String,
    identity_key: Option<String>,
    /// The handle's sha256, so that a failure prints no token.
    token_sha256: String,
    event_id: String,
    proof: String,
}

/// Launches a capsule that exports, mints and fetches on `random`, then reads what it drew:
/// its session id and identity key, a handle's token (the minting key and the nonce), a trace
/// line's event id, and the `x-murmur-proof` its fetch sends (the proof's nonce).
async fn draws(random: Arc<dyn Random>) -> Drawn {
    let manifest = Manifest::from_yaml(
        "name: both\nexports:\n  files: { root: out/, mode: read-only }\n  peer_files: { root: out/ }\n\
         capabilities:\n  peer_fetch: { allow: [\"proof.test:9\"] }\n",
    )
    .expect("manifest")
    .manifest;
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", REPORT, 0);
    let trace = Arc::new(RecordingTraceSink::new());
    let transport = MemoryTransport::new();
    let capsule = Capsule::builder(&manifest)
        .filesystem(fs)
        .clock(Arc::new(ManualClock::new(1_787_577_327_015)))
        .trace(trace.clone())
        .advertised_url("http://both.test:1")
        .random(random)
        .peer_transport(Arc::new(transport.clone()))
        .launch()
        .expect("launch");

    let path = RelPath::parse_canonical("report.md").expect("a path");
    let token = capsule
        .peer_plane()
        .expect("peer_files")
        .mint(&path, "reader@reader.test:8081", 60)
        .expect("mint")
        .token;

    let read = http::Request::get("/resources/files/report.md")
        .body(())
        .expect("request");
    assert_eq!(capsule.router().handle(read).await.status(), 200);
    let event_id = trace.events()[0]["event_id"]
        .as_str()
        .expect("an event id")
        .to_owned();

    // A peer that records the proof header and refuses.
    let mut listener = transport.listen("proof.test", 9);
    let proof = tokio::spawn(async move {
        let stream = listener.accept().await.expect("the redeem connects");
        let (reader, mut writer) = tokio::io::split(stream);
        let mut lines = BufReader::new(reader).lines();
        let mut proof = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("x-murmur-proof: ") {
                proof = value.to_owned();
            }
        }
        let body = br#"{"error":"not_found","message":"no"}"#;
        let head = format!(
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            body.len()
        );
        let _ = writer.write_all(head.as_bytes()).await;
        let _ = writer.write_all(body).await;
        proof
    });
    let fetch = capsule.tools().typed::<FetchPeerFile>().expect("fetch");
    let _ = fetch
        .fetch(FetchPeerFileInput::new("proof.test:9", &token))
        .await
        .expect_err("the peer refuses");
    let proof = proof.await.expect("the peer task");
    assert!(!proof.is_empty(), "the fetch sent no proof");

    Drawn {
        session_id: capsule.session_id().to_owned(),
        identity_key: capsule.identity_key(),
        token_sha256: support::sha256_hex(token.as_bytes()),
        event_id,
        proof,
    }
}

/// One seed, one world: every value the capsule draws is the same on a second launch. Another
/// seed changes each of them, so each really comes from the injected source.
#[tokio::test]
async fn a_seeded_source_makes_every_draw_reproducible() {
    let seeded = |seed| Arc::new(SeededRandom::new(seed)) as Arc<dyn Random>;
    let first = draws(seeded([5; 32])).await;
    assert_eq!(first, draws(seeded([5; 32])).await);
    assert!(
        first.session_id.starts_with("ses_") && first.session_id.len() == 36,
        "{}",
        first.session_id
    );

    let other = draws(seeded([6; 32])).await;
    assert_ne!(first.session_id, other.session_id);
    assert_ne!(first.identity_key, other.identity_key);
    assert_ne!(first.token_sha256, other.token_sha256);
    assert_ne!(first.event_id[..20], other.event_id[..20], "the id prefix");
    assert_ne!(first.proof, other.proof);
}

// ------------------------------------------------------------------------------------------------
// The clock
// ------------------------------------------------------------------------------------------------

/// Every answer the listener gives is dated by its configured clock: a router's 200 and 404,
/// and the 505 the listener writes itself; moving the clock moves the date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods)] // binds its own loopback listener
async fn the_listener_dates_answers_by_its_clock() {
    let t = resource_plane::test_util::capsule(
        "name: reporter\nexports: { files: { root: out/, mode: read-only } }",
    );
    t.fs.add_file("out/report.md", REPORT, 0);
    let clock = Arc::new(ManualClock::new(784_111_777_000));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let config = ListenerConfig {
        clock: clock.clone(),
        ..ListenerConfig::default()
    };
    let router = t.capsule.router();
    tokio::spawn(serve_with(listener, router, config, std::future::pending()));

    let ask = |request: &'static [u8]| {
        tokio::task::spawn_blocking(move || {
            support::http::exchange(addr, request, support::http::TIMEOUT)
        })
    };
    let read = ask(b"GET /resources/files/report.md HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("read");
    assert_eq!(read.status, 200);
    assert_eq!(read.header("date"), Some("Sun, 06 Nov 1994 08:49:37 GMT"));
    let missing = ask(b"GET /resources/files/none.md HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("read");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.header("date"),
        Some("Sun, 06 Nov 1994 08:49:37 GMT")
    );
    let dates: Vec<_> = read.headers.iter().filter(|(n, _)| n == "date").collect();
    assert_eq!(dates.len(), 1, "one date, not hyper's as well: {dates:?}");

    clock.advance(86_400_000);
    let version = ask(b"GET / HTTP/1.2\r\nhost: x\r\n\r\n")
        .await
        .expect("505");
    assert_eq!(version.status, 505);
    assert_eq!(
        version.header("date"),
        Some("Mon, 07 Nov 1994 08:49:37 GMT")
    );
}

// ------------------------------------------------------------------------------------------------
// Many capsules behind one listener
// ------------------------------------------------------------------------------------------------

const HUB_A: &str = "http://hub.test:8080/capsules/a";
const HUB_B: &str = "http://hub.test:8080/capsules/b/";

/// Two capsules nested under one listener (an axum app on `hub.test:8080`, served by
/// `serve_with` on the transport's listener) share and fetch between each other (D-20.2): `a`
/// reads `b`'s card under `/capsules/b`, `b` redeems under `/capsules/a` with a proof naming the
/// listener's origin, and `a` accepts it. Addressed at the host's root instead, the same calls
/// reach no capsule: the tools really follow the peer's path.
#[tokio::test]
async fn two_capsules_under_one_listener_share_and_fetch_under_their_paths() {
    let transport = MemoryTransport::new();
    let a = launch(
        "name: a\nexports:\n  peer_files: { root: out/, max_ttl: 15m, require_peer_proof: true }\n\
         capabilities:\n  network: { allow: [\"hub.test:8080\"] }\n",
        HUB_A,
        &transport,
    );
    let b = launch(
        "name: b\ncapabilities:\n  peer_fetch: { allow: [\"hub.test:8080\"] }\n",
        HUB_B,
        &transport,
    );
    let app = axum::Router::new()
        .nest_service("/capsules/a", a.capsule.router())
        .nest_service("/capsules/b", b.capsule.router());
    tokio::spawn(serve_with(
        transport.listen("hub.test", 8080),
        app,
        ListenerConfig::default(),
        std::future::pending(),
    ));

    let share = a.capsule.tools().typed::<ShareFile>().expect("share");
    let at_root = share
        .share(ShareFileInput::new("report.md", "http://hub.test:8080"))
        .await
        .expect_err("no card at the root");
    assert_eq!(
        at_root.code,
        ToolErrorCode::Code(resource_plane::Code::PeerUnreachable),
        "{at_root}"
    );
    let shared = share
        .share(ShareFileInput::new("report.md", HUB_B))
        .await
        .expect("b's card under its path");
    assert_eq!(shared.audience, "b@hub.test:8080");

    let fetch = b.capsule.tools().typed::<FetchPeerFile>().expect("fetch");
    let wrong = fetch
        .fetch(FetchPeerFileInput::new(
            "http://hub.test:8080",
            &shared.handle,
        ))
        .await
        .expect_err("no redeem route at the root");
    assert_eq!(wrong.code, ToolErrorCode::Http(404), "{wrong}");
    let fetched = fetch
        .fetch(FetchPeerFileInput::new(HUB_A, &shared.handle))
        .await
        .expect("a redeem under a's path");
    assert_eq!(fetched.sha256, support::sha256_hex(REPORT.as_bytes()));
    assert_eq!(
        b.fs.file_bytes(&fetched.path).as_deref(),
        Some(REPORT.as_bytes())
    );
    let redeem = a
        .trace
        .events()
        .into_iter()
        .find(|line| line["event_type"] == "peer_handle_redeem")
        .expect("a's redeem line");
    assert_eq!(redeem["outcome"], "ok");
    assert_eq!(redeem["audience_asserted"], "b@hub.test:8080");
    assert_eq!(redeem["audience_proof"], "ed25519", "b proved its redeem");
}
