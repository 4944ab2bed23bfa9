#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! In-process tests of the two agent tools, `share-file` and `fetch-peer-file`, against real
//! loopback peers (D-8, D-9, D-10, D-6.2, D-6.5):
//!
//! 1. https end to end with a CA made at test time, and certificate errors refused;
//! 2. hostile peers written as raw TCP responders (silent, endless, oversized, garbage,
//!    redirecting, refusing, lying about the etag): each maps to one code and lands nothing;
//! 3. agent-card edge cases for `share-file`, and the audience it derives;
//! 4. landing under `peer-in/<handle_id>-<sanitised basename>` (D-10.4), on disk and in memory;
//! 5. the `peer_file_fetch` trace line: one per attempt past input validation, fields in order,
//!    and no token anywhere.
//!
//! Real capsules are mounted on real listeners (`resource_plane::http::serve`, or a TLS accept
//! loop in this file). Timeouts are set per test through `CapsuleConfig.peer_timeouts`: short
//! (1 s) only where a peer is meant to stall, generous elsewhere so a loaded machine cannot turn
//! a fast answer into a timeout.

mod support;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use resource_plane::backends::Filesystem;
use resource_plane::backends::PeerTls;
use resource_plane::backends::{MemoryFilesystem, OsFilesystem, RecordingTraceSink, SystemClock};
use resource_plane::http::PeerTimeouts;
use resource_plane::http::{ListenerConfig, serve};
use resource_plane::tools::ToolError;
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::sha256_hex;
use support::test_ca::TestCa;
use support::tokens::handle_id;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

const REPORT: &str = "REPORT-BODY-7d1c: all green, written by the minter\n";
/// A timeout for peers that are meant to stall.
const SHORT: Duration = Duration::from_secs(1);
/// A timeout that a healthy loopback peer never reaches, even on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(15);
/// The fetcher's body cap in the hostile-peer tests.
const CAP: u64 = 64 * 1024;
/// The fields of a `peer_file_fetch` line, in order (D-6.1, D-6.2).
const FETCH_FIELDS: [&str; 11] = [
    "event_type",
    "event_id",
    "session_id",
    "timestamp",
    "peer",
    "handle_id",
    "stored_path",
    "bytes",
    "sha256",
    "outcome",
    "reason",
];

type Shared<T> = Arc<Mutex<T>>;

// ------------------------------------------------------------------------------------------------
// Small pure helpers
// ------------------------------------------------------------------------------------------------

fn timeouts(connect: Duration, card_total: Duration, fetch_total: Duration) -> PeerTimeouts {
    PeerTimeouts {
        connect,
        card_total,
        fetch_total,
    }
}

fn generous() -> PeerTimeouts {
    timeouts(GENEROUS, GENEROUS, GENEROUS)
}

/// A token with the right shape and a payload naming `p`, signed by nobody: good enough for
/// peers that never verify it.
fn crafted_token(p: &str) -> String {
    let payload = json!({
        "v": 1,
        "iss": format!("ses_{}", "0123456789abcdef".repeat(2)),
        "p": p,
        "exp": 4_102_444_800_000_i64,
        "n": "ab".repeat(16),
    });
    format!(
        "mh1.{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap()),
        URL_SAFE_NO_PAD.encode([7u8; 32])
    )
}

/// A complete HTTP/1.1 response with `content-length` and `connection: close`.
fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn etag_of(body: &[u8]) -> String {
    format!("\"sha256:{}\"", sha256_hex(body))
}

/// A 200 as a redeem answers it: raw bytes, a correct etag, a generation.
fn redeem_ok(body: &[u8]) -> Vec<u8> {
    response(
        "200 OK",
        &[
            ("content-type", "application/octet-stream"),
            ("etag", &etag_of(body)),
            ("x-murmur-generation", "7"),
        ],
        body,
    )
}

fn json_response(status: &str, body: &str) -> Vec<u8> {
    response(
        status,
        &[("content-type", "application/json")],
        body.as_bytes(),
    )
}

// ------------------------------------------------------------------------------------------------
// Capsules on real listeners
// ------------------------------------------------------------------------------------------------

async fn bind() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// One launched capsule and its recorded trace.
struct Node {
    capsule: Arc<Capsule>,
    trace: Arc<RecordingTraceSink>,
}

impl Node {
    async fn call(&self, tool: &str, input: Value) -> Result<Value, ToolError> {
        self.capsule.tools().call(tool, input).await
    }

    async fn share(&self, path: &str, peer: &str) -> Value {
        self.call("share-file", json!({"path": path, "peer": peer}))
            .await
            .unwrap_or_else(|e| panic!("share-file {path} to {peer} failed: {e:?}"))
    }

    async fn fetch(&self, peer: &str, handle: &str) -> Result<Value, ToolError> {
        self.call("fetch-peer-file", json!({"peer": peer, "handle": handle}))
            .await
    }

    fn events_of(&self, event_type: &str) -> Vec<Value> {
        self.trace
            .events()
            .into_iter()
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }

    /// The only `peer_file_fetch` line so far.
    fn only_fetch_line(&self) -> Value {
        let lines = self.events_of("peer_file_fetch");
        assert_eq!(
            lines.len(),
            1,
            "exactly one peer_file_fetch line: {lines:#?}"
        );
        lines.into_iter().next().unwrap()
    }

    /// D-6.5: no trace line holds anything that starts like a token.
    fn assert_trace_has_no_token(&self) {
        for line in self.trace.lines() {
            assert!(!line.contains("mh1."), "a token reached the trace: {line}");
        }
    }
}

fn launch(
    yaml: &str,
    url: &str,
    fs: Arc<dyn Filesystem>,
    tweak: impl FnOnce(CapsuleConfig) -> CapsuleConfig,
) -> Node {
    let manifest = Manifest::from_yaml(yaml)
        .unwrap_or_else(|e| panic!("manifest {yaml:?}: {e:?}"))
        .manifest;
    let config = tweak(CapsuleConfig::new(url).expect("capsule config"));
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::launch(
        &manifest,
        config,
        Backends {
            fs,
            clock: Arc::new(SystemClock),
            keys: None,
            trace: trace.clone(),
        },
    )
    .expect("capsule launches");
    Node {
        capsule: Arc::new(capsule),
        trace,
    }
}

/// Serves `node`'s router over plain http on `listener` with the crate's own listener.
fn serve_http(listener: TcpListener, node: &Node) {
    let router = node.capsule.router();
    tokio::spawn(async move {
        let _ = serve(
            listener,
            router,
            ListenerConfig::default(),
            std::future::pending(),
        )
        .await;
    });
}

/// Serves `node`'s router over TLS: accept TCP, handshake, then hyper's http1 server.
fn serve_https(listener: TcpListener, node: &Node, acceptor: TlsAcceptor) {
    let router = node.capsule.router();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let router = router.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request| {
                    let router = router.clone();
                    async move { Ok::<_, Infallible>(router.handle(request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
}

fn minter_yaml(network_allow: &str) -> String {
    format!(
        "name: reporter\nexports:\n  peer_files: {{ root: out/, max_ttl: 15m }}\n\
         capabilities:\n  network: {{ allow: [{network_allow}] }}\n"
    )
}

fn fetcher_yaml(peer_fetch_allow: &str) -> String {
    format!("name: reader\ncapabilities:\n  peer_fetch: {{ allow: [{peer_fetch_allow}] }}\n")
}

/// A minter over memory holding `out/report.md`.
fn memory_minter(url: &str, tweak: impl FnOnce(CapsuleConfig) -> CapsuleConfig) -> Node {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", REPORT, 1_787_577_327_015);
    launch(&minter_yaml("\"localhost\", \"127.0.0.1\""), url, fs, tweak)
}

// ------------------------------------------------------------------------------------------------
// A fetcher on a real directory, for checking that nothing (not even a temp file) lands
// ------------------------------------------------------------------------------------------------

struct DiskFetcher {
    node: Node,
    dir: TempDir,
}

impl DiskFetcher {
    /// A fetcher named `reader`, advertised at `http://127.0.0.1:9`, over a fresh workdir.
    fn new(allow: &str, peer_timeouts: PeerTimeouts, fetch_max_bytes: u64) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = OsFilesystem::open(dir.path()).expect("open workdir");
        let node = launch(
            &fetcher_yaml(allow),
            "http://127.0.0.1:9",
            Arc::new(fs),
            |c| {
                c.peer_timeouts(peer_timeouts)
                    .fetch_max_bytes(fetch_max_bytes)
            },
        );
        DiskFetcher { node, dir }
    }

    /// Every name under `peer-in/`, hidden temp files included; empty when it does not exist.
    fn landed(&self) -> Vec<String> {
        landed_names(self.dir.path())
    }
}

fn landed_names(workdir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(workdir.join("peer-in")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The refusal contract shared by every failed fetch: the exact code; one trace line with that
/// outcome, a reason, no stored path, bytes or hash; nothing under `peer-in/`; no token in the
/// message or the trace.
fn assert_refused(
    fetcher: &DiskFetcher,
    result: Result<Value, ToolError>,
    peer: &str,
    token: &str,
    code: &str,
) {
    let error = match result {
        Ok(v) => panic!("expected {code}, got a success: {v}"),
        Err(e) => e,
    };
    assert_eq!(error.code, code, "tool error code ({error:?})");
    assert!(
        !error.message.contains("mh1."),
        "message holds a token: {error:?}"
    );
    let line = fetcher.node.only_fetch_line();
    assert_eq!(line["outcome"], code, "trace outcome: {line}");
    assert_eq!(line["peer"], peer, "trace peer: {line}");
    assert_eq!(
        line["handle_id"],
        handle_id(token),
        "trace handle_id: {line}"
    );
    assert_eq!(line["stored_path"], Value::Null, "{line}");
    assert_eq!(line["bytes"], Value::Null, "{line}");
    assert_eq!(line["sha256"], Value::Null, "{line}");
    assert!(
        line["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "a refusal carries a reason: {line}"
    );
    assert_eq!(
        fetcher.landed(),
        Vec::<String>::new(),
        "nothing (no file, no temp file) under peer-in/ after {code}"
    );
    fetcher.node.assert_trace_has_no_token();
}

// ------------------------------------------------------------------------------------------------
// Raw TCP responders: hostile peers
// ------------------------------------------------------------------------------------------------

#[derive(Clone)]
enum Behaviour {
    /// Reads the request head, writes these bytes, closes.
    Reply(Vec<u8>),
    /// Writes these bytes as soon as it accepts, without reading anything, then closes (what a
    /// plain-http server does with a TLS ClientHello it cannot parse).
    Blurt(Vec<u8>),
    /// Reads the request head and never answers; holds the connection until the client leaves.
    Silent,
    /// Writes these bytes, then stalls without closing.
    ReplyThenStall(Vec<u8>),
    /// Writes `head`, then body bytes until the client leaves (bounded at 256 MiB): raw
    /// close-delimited bytes, or chunks when `chunked`.
    Endless { head: Vec<u8>, chunked: bool },
}

/// A raw responder on loopback: counts connections and records each request head.
struct RawPeer {
    port: u16,
    connections: Arc<AtomicUsize>,
    heads: Shared<Vec<String>>,
}

impl RawPeer {
    async fn start(behaviour: Behaviour) -> Self {
        let (listener, port) = bind().await;
        let connections = Arc::new(AtomicUsize::new(0));
        let heads: Shared<Vec<String>> = Arc::default();
        let (count, record) = (connections.clone(), heads.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let behaviour = behaviour.clone();
                let record = record.clone();
                tokio::spawn(async move { respond(stream, behaviour, record).await });
            }
        });
        RawPeer {
            port,
            connections,
            heads,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Waits until the client closes its side (bounded), discarding anything it sends.
async fn hold_until_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

async fn respond(mut stream: TcpStream, behaviour: Behaviour, heads: Shared<Vec<String>>) {
    if let Behaviour::Blurt(bytes) = &behaviour {
        let _ = stream.write_all(bytes).await;
        let _ = stream.shutdown().await;
        hold_until_closed(&mut stream).await;
        return;
    }
    let head = read_head(&mut stream).await;
    heads.lock().unwrap().push(head);
    match behaviour {
        Behaviour::Blurt(_) => unreachable!("answered above"),
        Behaviour::Reply(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Behaviour::Silent => hold_until_closed(&mut stream).await,
        Behaviour::ReplyThenStall(bytes) => {
            let _ = stream.write_all(&bytes).await;
            hold_until_closed(&mut stream).await;
        }
        Behaviour::Endless { head, chunked } => {
            if stream.write_all(&head).await.is_err() {
                return;
            }
            let block = vec![b'z'; 16 * 1024];
            let mut frame = format!("{:x}\r\n", block.len()).into_bytes();
            frame.extend_from_slice(&block);
            frame.extend_from_slice(b"\r\n");
            let piece = if chunked { frame } else { block };
            for _ in 0..(256 * 1024 * 1024 / piece.len()) {
                if stream.write_all(&piece).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One hostile-peer case: a fetcher allowing any loopback port fetched a crafted handle from a
/// raw responder.
struct RawFetch {
    fetcher: DiskFetcher,
    result: Result<Value, ToolError>,
    peer: String,
    token: String,
    raw: RawPeer,
}

impl RawFetch {
    async fn run(behaviour: Behaviour, peer_timeouts: PeerTimeouts) -> Self {
        Self::run_capped(behaviour, peer_timeouts, CAP).await
    }

    /// `run` with a fetcher whose body cap is `cap`.
    async fn run_capped(behaviour: Behaviour, peer_timeouts: PeerTimeouts, cap: u64) -> Self {
        let raw = RawPeer::start(behaviour).await;
        let fetcher = DiskFetcher::new("\"127.0.0.1\"", peer_timeouts, cap);
        let token = crafted_token("out/report.md");
        let peer = raw.url();
        let result = fetcher.node.fetch(&peer, &token).await;
        RawFetch {
            fetcher,
            result,
            peer,
            token,
            raw,
        }
    }

    fn assert_refused(self, code: &str) -> RawPeer {
        assert_refused(&self.fetcher, self.result, &self.peer, &self.token, code);
        self.raw
    }
}

async fn assert_raw_refusal(behaviour: Behaviour, code: &str) {
    let raw = RawFetch::run(behaviour, generous())
        .await
        .assert_refused(code);
    assert_eq!(raw.connections(), 1, "one connection to the peer");
}

// ================================================================================================
// 1. HTTPS end to end, and certificate errors
// ================================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_share_and_fetch_end_to_end() {
    let ca = TestCa::new("peer-client test CA");
    let acceptor = ca.acceptor(&["localhost", "127.0.0.1"]);
    let (listener_a, port_a) = bind().await;
    let (listener_b, port_b) = bind().await;
    let a = memory_minter(&format!("https://localhost:{port_a}"), |c| {
        c.peer_tls(ca.client_tls()).peer_timeouts(generous())
    });
    let b_fs = Arc::new(MemoryFilesystem::new());
    let b = launch(
        &fetcher_yaml(&format!(
            "\"https://localhost:{port_a}\", \"https://127.0.0.1:{port_a}\""
        )),
        &format!("https://localhost:{port_b}"),
        b_fs.clone(),
        |c| c.peer_tls(ca.client_tls()).peer_timeouts(generous()),
    );
    serve_https(listener_a, &a, acceptor.clone());
    serve_https(listener_b, &b, acceptor);
    a.capsule.task_completed();

    // A fetches B's card over https to mint.
    let shared = a
        .share("report.md", &format!("https://localhost:{port_b}"))
        .await;
    let audience = format!("reader@localhost:{port_b}");
    assert_eq!(shared["audience"], audience.as_str(), "{shared}");
    assert_eq!(b.capsule.audience(), audience);
    let token = shared["handle"].as_str().unwrap().to_owned();
    let id = handle_id(&token);
    assert_eq!(shared["handle_id"], id.as_str());

    // B redeems over https by the name A advertises. By A's IP SAN the TLS handshake succeeds,
    // but B's proof then names `https://127.0.0.1:<port>`, not the origin A advertises, and A
    // refuses it (D-14.3.1): a minter accepts proofs for its advertised origin only.
    let by_name = format!("https://localhost:{port_a}");
    let fetched = b
        .fetch(&by_name, &token)
        .await
        .expect("https fetch by name");
    let stored = format!("peer-in/{id}-report.md");
    assert_eq!(
        fetched,
        json!({
            "path": stored,
            "bytes": REPORT.len(),
            "sha256": sha256_hex(REPORT.as_bytes()),
            "generation": 1,
            "peer": by_name,
        })
    );
    assert_eq!(
        b_fs.file_bytes(&stored).as_deref(),
        Some(REPORT.as_bytes()),
        "the bytes landed"
    );
    let by_ip = format!("https://127.0.0.1:{port_a}");
    let refused = b
        .fetch(&by_ip, &token)
        .await
        .expect_err("a proof for another origin than A's");
    assert_eq!(
        refused.code, "handle_not_valid",
        "A answered over TLS: {refused:?}"
    );

    let redeems = a.events_of("peer_handle_redeem");
    assert_eq!(redeems.len(), 2, "{redeems:#?}");
    for redeem in &redeems {
        assert_eq!(redeem["audience_asserted"], audience.as_str());
        assert_eq!(redeem["handle_id"], id.as_str());
    }
    assert_eq!(redeems[0]["outcome"], "ok");
    assert_eq!(redeems[1]["outcome"], "handle_not_valid");
    assert_eq!(redeems[1]["reason"], "proof addressed to another origin");
    let fetches = b.events_of("peer_file_fetch");
    assert_eq!(fetches.len(), 2);
    assert_eq!(fetches[0]["outcome"], "ok", "{fetches:#?}");
    assert_eq!(fetches[1]["outcome"], "handle_not_valid", "{fetches:#?}");
    a.assert_trace_has_no_token();
    b.assert_trace_has_no_token();
}

/// A fetcher over memory for the certificate tests, trusting `tls`, allowing `allow`.
fn tls_fetcher(allow: &str, tls: PeerTls) -> Node {
    launch(
        &fetcher_yaml(allow),
        "http://127.0.0.1:9",
        Arc::new(MemoryFilesystem::new()),
        |c| c.peer_tls(tls).peer_timeouts(generous()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_peer_signed_by_an_untrusted_ca_is_unreachable() {
    let trusted = TestCa::new("trusted CA");
    let other = TestCa::new("some other CA");
    let (listener, port) = bind().await;
    let a = memory_minter(&format!("https://localhost:{port}"), |c| c);
    serve_https(listener, &a, trusted.acceptor(&["localhost", "127.0.0.1"]));
    let target = format!("https://localhost:{port}");
    let allow = format!("\"{target}\"");
    let token = crafted_token("report.md");

    let wrong_trust = tls_fetcher(&allow, other.client_tls());
    let refused = wrong_trust.fetch(&target, &token).await;
    assert_eq!(refused.unwrap_err().code, "peer_unreachable");
    assert_eq!(wrong_trust.only_fetch_line()["outcome"], "peer_unreachable");
    assert_eq!(
        a.events_of("peer_handle_redeem").len(),
        0,
        "no HTTP request may cross an unverified TLS session"
    );

    // Control: the same server, trusted, is reached (and refuses the unsigned handle itself).
    let right_trust = tls_fetcher(&allow, trusted.client_tls());
    let reached = right_trust.fetch(&target, &token).await;
    assert_eq!(reached.unwrap_err().code, "handle_not_valid");
    assert_eq!(a.events_of("peer_handle_redeem").len(), 1);

    // share-file's card fetch is verified the same way.
    let (card_listener, card_port) = bind().await;
    let card_peer = tls_fetcher("\"localhost\"", other.client_tls());
    serve_https(card_listener, &card_peer, trusted.acceptor(&["localhost"]));
    let minter = memory_minter("http://127.0.0.1:9", |c| {
        c.peer_tls(other.client_tls()).peer_timeouts(generous())
    });
    let share = minter
        .call(
            "share-file",
            json!({"path": "report.md", "peer": format!("https://localhost:{card_port}")}),
        )
        .await;
    assert_eq!(share.unwrap_err().code, "peer_unreachable");
    let mint = &minter.events_of("peer_handle_mint")[0];
    assert_eq!(mint["outcome"], "peer_unreachable");
    assert_eq!(mint["audience"], Value::Null, "{mint}");
}

/// A peer that requires a client certificate (mutual TLS) is reached by a fetcher whose
/// `PeerTls` carries a `ClientIdentity` its client CA signed; without one, or with one another
/// CA signed, the handshake fails and the fetch is `peer_unreachable` with no request crossing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_peer_requiring_a_client_certificate_is_reached_with_the_runtimes_identity() {
    let ca = TestCa::new("server CA");
    let clients = TestCa::new("client CA");
    let strangers = TestCa::new("another client CA");
    let (listener, port) = bind().await;
    let a = memory_minter(&format!("https://localhost:{port}"), |c| c);
    serve_https(
        listener,
        &a,
        ca.acceptor_requiring_clients_of(&["localhost"], &clients),
    );
    let target = format!("https://localhost:{port}");
    let allow = format!("\"{target}\"");
    let token = crafted_token("report.md");

    for (what, tls) in [
        ("no client certificate", ca.client_tls()),
        (
            "a certificate of another CA",
            ca.client_tls()
                .with_client_identity(strangers.client_identity("reader"))
                .expect("an identity"),
        ),
    ] {
        let fetcher = tls_fetcher(&allow, tls);
        let refused = fetcher.fetch(&target, &token).await.expect_err(what);
        assert_eq!(refused.code, "peer_unreachable", "{what}: {refused:?}");
        assert_eq!(a.events_of("peer_handle_redeem").len(), 0, "{what}");
    }

    let identified = ca
        .client_tls()
        .with_client_identity(clients.client_identity("reader"))
        .expect("an identity");
    let fetcher = tls_fetcher(&allow, identified);
    let reached = fetcher
        .fetch(&target, &token)
        .await
        .expect_err("a crafted token");
    assert_eq!(
        reached.code, "handle_not_valid",
        "the minter answered: {reached:?}"
    );
    assert_eq!(a.events_of("peer_handle_redeem").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_certificate_for_another_hostname_is_unreachable() {
    let ca = TestCa::new("trusted CA");
    let (listener, port) = bind().await;
    let a = memory_minter(&format!("https://localhost:{port}"), |c| c);
    serve_https(listener, &a, ca.acceptor(&["wrong.example"]));
    let target = format!("https://localhost:{port}");
    let token = crafted_token("report.md");
    let b = tls_fetcher(&format!("\"{target}\""), ca.client_tls());

    let refused = b.fetch(&target, &token).await;
    assert_eq!(refused.unwrap_err().code, "peer_unreachable");
    let line = b.only_fetch_line();
    assert_eq!(line["outcome"], "peer_unreachable");
    assert_eq!(a.events_of("peer_handle_redeem").len(), 0);
    b.assert_trace_has_no_token();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_allow_entry_does_not_admit_an_https_target() {
    let raw = RawPeer::start(Behaviour::Reply(redeem_ok(b"never"))).await;
    let fetcher = DiskFetcher::new(
        &format!("\"http://localhost:{}\"", raw.port),
        generous(),
        CAP,
    );
    let token = crafted_token("report.md");
    let target = format!("https://localhost:{}", raw.port);
    let result = fetcher.node.fetch(&target, &token).await;
    assert_refused(&fetcher, result, &target, &token, "peer_not_allowed");
    assert_eq!(raw.connections(), 0, "refused before any connection opens");

    // Control: the http target the entry names is admitted.
    let http_target = format!("http://localhost:{}", raw.port);
    let ok = fetcher.node.fetch(&http_target, &token).await;
    assert!(ok.is_ok(), "the written scheme is admitted: {ok:?}");
    assert_eq!(raw.connections(), 1);
}

// ================================================================================================
// 2. Hostile peers
// ================================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_a_raw_peer_answering_correctly_lands_the_bytes() {
    let body = b"raw peer body, exactly as served\n";
    let RawFetch {
        fetcher,
        result,
        peer,
        token,
        raw,
    } = RawFetch::run(Behaviour::Reply(redeem_ok(body)), generous()).await;
    let id = handle_id(&token);
    let result = result.expect("a well-behaved peer is fetched");
    assert_eq!(
        result,
        json!({
            "path": format!("peer-in/{id}-report.md"),
            "bytes": body.len(),
            "sha256": sha256_hex(body),
            "generation": 7,
            "peer": peer,
        })
    );
    assert_eq!(fetcher.landed(), vec![format!("{id}-report.md")]);
    assert_eq!(
        std::fs::read(fetcher.dir.path().join(format!("peer-in/{id}-report.md"))).unwrap(),
        body
    );
    let heads = raw.heads();
    assert!(
        heads[0].starts_with(&format!("GET /resources/peer/{token} HTTP/1.1\r\n")),
        "the redeem request line: {:?}",
        heads[0]
    );
    assert!(
        heads[0]
            .to_ascii_lowercase()
            .contains("\r\nx-murmur-audience: reader@127.0.0.1:9\r\n"),
        "the fetcher asserts its own audience: {:?}",
        heads[0]
    );
    let line = fetcher.node.only_fetch_line();
    assert_eq!(line["outcome"], "ok");
    assert_eq!(line["reason"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_is_unreachable_within_the_timeout() {
    let started = Instant::now();
    let case = RawFetch::run(Behaviour::Silent, timeouts(SHORT, SHORT, SHORT)).await;
    let elapsed = started.elapsed();
    case.assert_refused("peer_unreachable");
    assert!(
        elapsed < SHORT * 3,
        "a silent peer must be given up on within 3x fetch_total ({SHORT:?}); took {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stalls_mid_body_is_unreachable_within_the_timeout() {
    let mut partial = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n".to_vec();
    partial.extend_from_slice(format!("etag: {}\r\n\r\n", etag_of(&[b'q'; 100])).as_bytes());
    partial.extend_from_slice(&[b'q'; 10]);
    let started = Instant::now();
    let case = RawFetch::run(
        Behaviour::ReplyThenStall(partial),
        timeouts(SHORT, SHORT, SHORT),
    )
    .await;
    let elapsed = started.elapsed();
    case.assert_refused("peer_unreachable");
    assert!(elapsed < SHORT * 3, "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_close_delimited_body_is_too_large() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\r\n".to_vec();
    assert_raw_refusal(
        Behaviour::Endless {
            head,
            chunked: false,
        },
        "too_large",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_chunked_body_is_too_large() {
    let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    assert_raw_refusal(
        Behaviour::Endless {
            head,
            chunked: true,
        },
        "too_large",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_response_head_is_unreachable_not_buffered() {
    // One header line that never ends: the client must give up on the head's size, not wait
    // for the timeout (or for memory to run out).
    let head = b"HTTP/1.1 200 OK\r\nx-junk: ".to_vec();
    let started = Instant::now();
    assert_raw_refusal(
        Behaviour::Endless {
            head,
            chunked: false,
        },
        "peer_unreachable",
    )
    .await;
    assert!(
        started.elapsed() < GENEROUS / 2,
        "an endless head must be refused on size, not by timing out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_the_cap_is_too_large_without_reading_the_body() {
    // The peer declares 1 MiB and then stalls: only the declaration can produce `too_large`
    // (waiting for the body would end in a timeout, i.e. `peer_unreachable`).
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: 1048576\r\netag: {}\r\n\r\nfirst bytes",
        etag_of(b"x")
    );
    assert_raw_refusal(Behaviour::ReplyThenStall(head.into_bytes()), "too_large").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_exactly_the_cap_lands_and_one_byte_more_is_too_large() {
    let exact = vec![b'e'; CAP as usize];
    let case = RawFetch::run(Behaviour::Reply(redeem_ok(&exact)), generous()).await;
    let landed = case
        .result
        .expect("a body of exactly fetch_max_bytes is accepted");
    assert_eq!(landed["bytes"], CAP);
    assert_eq!(case.fetcher.landed().len(), 1);

    let over = vec![b'o'; CAP as usize + 1];
    assert_raw_refusal(Behaviour::Reply(redeem_ok(&over)), "too_large").await;
}

/// The fetcher's cap is for the file: a refusal's JSON body is read under its own 64 KiB cap,
/// so a small `--fetch-max-bytes` never turns the peer's code into `too_large` (D-10.3), and a
/// refusal too long to read falls back to `http_<status>` without waiting for its body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_cap_never_hides_the_peers_refusal_code() {
    let forged = json_response(
        "403 Forbidden",
        r#"{"error":"handle_not_valid","message":"the handle is not valid"}"#,
    );
    let expired = json_response(
        "410 Gone",
        r#"{"error":"handle_expired","message":"the handle has expired"}"#,
    );
    for (reply, code) in [(forged, "handle_not_valid"), (expired, "handle_expired")] {
        RawFetch::run_capped(Behaviour::Reply(reply), generous(), 10)
            .await
            .assert_refused(code);
    }
    // Over the refusal cap, declared or not: the status alone speaks.
    let padded = format!(
        r#"{{"error":"handle_not_valid","message":"{}"}}"#,
        "x".repeat(70 * 1024)
    );
    RawFetch::run_capped(
        Behaviour::Reply(json_response("403 Forbidden", &padded)),
        generous(),
        10,
    )
    .await
    .assert_refused("http_403");
    let started = Instant::now();
    let head = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1048576\r\n\r\n{".to_vec();
    RawFetch::run_capped(Behaviour::ReplyThenStall(head), generous(), 10)
        .await
        .assert_refused("http_500");
    assert!(
        started.elapsed() < GENEROUS / 2,
        "a declared refusal over the cap is not read"
    );
    // A success over the cap is still `too_large`.
    RawFetch::run_capped(Behaviour::Reply(redeem_ok(&[b'b'; 11])), generous(), 10)
        .await
        .assert_refused("too_large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_answering_garbage_is_unreachable() {
    for garbage in [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\nnot http at all".to_vec(),
        vec![0u8, 159, 146, 150, 255, 13, 10, 13, 10],
        b"HTTP/1.1 abc Broken\r\n\r\n".to_vec(),
        Vec::new(), // closes without a byte
    ] {
        let started = Instant::now();
        RawFetch::run(Behaviour::Reply(garbage.clone()), generous())
            .await
            .assert_refused("peer_unreachable");
        assert!(
            started.elapsed() < GENEROUS / 2,
            "garbage {garbage:?} must fail on parsing, not by timing out"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_refuses_connections_is_unreachable() {
    let (listener, port) = bind().await;
    drop(listener);
    let fetcher = DiskFetcher::new("\"127.0.0.1\"", generous(), CAP);
    let token = crafted_token("report.md");
    let peer = format!("http://127.0.0.1:{port}");
    let result = fetcher.node.fetch(&peer, &token).await;
    assert_refused(&fetcher, result, &peer, &token, "peer_unreachable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed() {
    let elsewhere = RawPeer::start(Behaviour::Reply(redeem_ok(b"redirected bytes"))).await;
    let token = crafted_token("report.md");
    let location = format!("{}/resources/peer/{token}", elsewhere.url());
    let redirect = response("302 Found", &[("location", &location)], b"");
    assert_raw_refusal(Behaviour::Reply(redirect), "http_302").await;
    assert_eq!(
        elsewhere.connections(),
        0,
        "the redirect target must see no connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_refusal_passes_the_peers_code_through() {
    let body = r#"{"error":"not_found","message":"gone"}"#;
    assert_raw_refusal(
        Behaviour::Reply(json_response("404 Not Found", body)),
        "not_found",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_error_page_is_http_status() {
    let page = response(
        "500 Internal Server Error",
        &[("content-type", "text/html")],
        b"<html><body><h1>500</h1></body></html>",
    );
    assert_raw_refusal(Behaviour::Reply(page), "http_500").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_echoing_the_token_as_its_error_code_gets_http_status() {
    // A hostile peer tries to smuggle the token into the fetcher's outcome and trace.
    let token = crafted_token("report.md");
    let body = json!({"error": token}).to_string();
    let raw = RawPeer::start(Behaviour::Reply(json_response("403 Forbidden", &body))).await;
    let fetcher = DiskFetcher::new("\"127.0.0.1\"", generous(), CAP);
    let result = fetcher.node.fetch(&raw.url(), &token).await;
    assert_refused(&fetcher, result, &raw.url(), &token, "http_403");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_claiming_ok_as_its_error_code_is_not_recorded_as_ok() {
    // D-6.2: `outcome` is `ok` only for a success, and then `reason` is null. A refusing peer
    // must not be able to make a failed fetch look like a success in the fetcher's trace.
    let reply = json_response("403 Forbidden", r#"{"error":"ok","message":"not really"}"#);
    assert_raw_refusal(Behaviour::Reply(reply), "http_403").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_target_that_never_completes_the_handshake_is_unreachable_in_time() {
    let raw = RawPeer::start(Behaviour::Silent).await;
    let fetcher = DiskFetcher::new("\"127.0.0.1\"", timeouts(SHORT, SHORT, SHORT), CAP);
    let token = crafted_token("report.md");
    let peer = format!("https://127.0.0.1:{}", raw.port);
    let started = Instant::now();
    let result = fetcher.node.fetch(&peer, &token).await;
    let elapsed = started.elapsed();
    assert_refused(&fetcher, result, &peer, &token, "peer_unreachable");
    assert!(elapsed < SHORT * 3, "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_target_answering_plain_http_is_unreachable() {
    let bad_request = json_response("400 Bad Request", r#"{"error":"bad_request"}"#);
    let raw = RawPeer::start(Behaviour::Blurt(bad_request)).await;
    let fetcher = DiskFetcher::new("\"127.0.0.1\"", generous(), CAP);
    let token = crafted_token("report.md");
    let peer = format!("https://127.0.0.1:{}", raw.port);
    let started = Instant::now();
    let result = fetcher.node.fetch(&peer, &token).await;
    assert_refused(&fetcher, result, &peer, &token, "peer_unreachable");
    assert!(
        started.elapsed() < GENEROUS / 2,
        "a non-TLS answer must fail the handshake, not time out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_etag_is_etag_mismatch_and_lands_nothing() {
    let body = b"the body actually served";
    let lying = response("200 OK", &[("etag", &etag_of(b"some other body"))], body);
    assert_raw_refusal(Behaviour::Reply(lying), "etag_mismatch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_etag_is_etag_mismatch_and_lands_nothing() {
    let bare = response("200 OK", &[("x-murmur-generation", "1")], b"no validator");
    assert_raw_refusal(Behaviour::Reply(bare), "etag_mismatch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etag_of_the_right_hash_in_the_wrong_form_is_etag_mismatch() {
    let body = b"right hash, wrong spelling";
    let unquoted = format!("sha256:{}", sha256_hex(body));
    let weak = format!("W/{}", etag_of(body));
    for etag in [unquoted, weak] {
        let reply = response("200 OK", &[("etag", &etag)], body);
        assert_raw_refusal(Behaviour::Reply(reply), "etag_mismatch").await;
    }
}

// ================================================================================================
// 3. Agent-card edge cases for share-file
// ================================================================================================

/// A minter over memory, allowed to reach loopback, with the given card timeout.
fn card_minter(card_total: Duration) -> Node {
    memory_minter("http://127.0.0.1:9", |c| {
        c.peer_timeouts(timeouts(GENEROUS, card_total, GENEROUS))
    })
}

/// Shares `report.md` with a raw peer answering `card`; returns the minter, the result and the
/// raw peer.
async fn share_with_card(
    behaviour: Behaviour,
    card_total: Duration,
) -> (Node, Result<Value, ToolError>, RawPeer) {
    let raw = RawPeer::start(behaviour).await;
    let minter = card_minter(card_total);
    let result = minter
        .call(
            "share-file",
            json!({"path": "report.md", "peer": raw.url()}),
        )
        .await;
    (minter, result, raw)
}

/// The single mint line, after checking there is exactly one and it holds no token.
fn only_mint_line(minter: &Node) -> Value {
    let mints = minter.events_of("peer_handle_mint");
    assert_eq!(
        mints.len(),
        1,
        "exactly one peer_handle_mint line: {mints:#?}"
    );
    minter.assert_trace_has_no_token();
    mints.into_iter().next().unwrap()
}

async fn assert_card_accepted(card: Value, audience: &str) {
    let (minter, result, raw) = share_with_card(
        Behaviour::Reply(json_response("200 OK", &card.to_string())),
        GENEROUS,
    )
    .await;
    let shared = result.unwrap_or_else(|e| panic!("card {card} refused: {e:?}"));
    assert_eq!(shared["audience"], audience, "audience from {card}");
    let mint = only_mint_line(&minter);
    assert_eq!(mint["outcome"], "ok");
    assert_eq!(
        mint["audience"], shared["audience"],
        "trace and result agree"
    );
    assert_eq!(mint["handle_id"], shared["handle_id"]);
    assert!(
        raw.heads()[0].starts_with("GET /.well-known/agent-card.json HTTP/1.1\r\n"),
        "the card request: {:?}",
        raw.heads()[0]
    );

    // The handle is bound to exactly that audience: the minter's router serves it to that
    // audience and refuses another.
    let token = shared["handle"].as_str().unwrap();
    let router = minter.capsule.router();
    let path = format!("/resources/peer/{token}");
    let served = router.respond(&http::Method::GET, &path, &[audience.as_bytes()]);
    assert_eq!(served.status(), 200, "redeem as {audience}");
    assert_eq!(&served.body().bytes()[..], REPORT.as_bytes());
    let other = router.respond(&http::Method::GET, &path, &[b"someone@else:1".as_slice()]);
    assert_eq!(other.status(), 403);
}

async fn assert_card_refused(behaviour: Behaviour, card_total: Duration) -> Duration {
    let started = Instant::now();
    let (minter, result, _raw) = share_with_card(behaviour, card_total).await;
    let elapsed = started.elapsed();
    let error = result.expect_err("the card must be refused");
    assert_eq!(error.code, "peer_unreachable", "{error:?}");
    let mint = only_mint_line(&minter);
    assert_eq!(mint["outcome"], "peer_unreachable");
    assert_eq!(
        mint["audience"],
        Value::Null,
        "no audience was derived: {mint}"
    );
    assert_eq!(mint["handle_id"], Value::Null);
    assert_eq!(mint["path"], "report.md");
    assert!(mint["reason"].as_str().is_some_and(|r| !r.is_empty()));
    elapsed
}

fn card_reply(card: &str) -> Behaviour {
    Behaviour::Reply(json_response("200 OK", card))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_with_only_a_top_level_url_gives_a_lowercased_audience_with_explicit_port() {
    assert_card_accepted(
        json!({"name": "  Reporter-X ", "url": "HTTP://Peer.LOCAL:8080/a2a/v1"}),
        "reporter-x@peer.local:8080",
    )
    .await;
    assert_card_accepted(
        json!({"name": "Writer", "url": "https://Writer.Example"}),
        "writer@writer.example:443",
    )
    .await;
    assert_card_accepted(
        json!({"name": "Plain", "url": "http://plain.example/"}),
        "plain@plain.example:80",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_with_only_supported_interfaces_uses_the_first_jsonrpc_entry() {
    assert_card_accepted(
        json!({
            "name": "Reader",
            "supportedInterfaces": [
                {"url": "http://grpc.example:50051", "protocolBinding": "GRPC"},
                {"url": "http://Rpc.Example:7000/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "http://second.example:1", "protocolBinding": "JSONRPC"},
            ],
        }),
        "reader@rpc.example:7000",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_without_a_usable_url_or_name_is_unreachable() {
    for card in [
        json!({"name": "nourl"}),
        json!({"name": "grpc-only", "supportedInterfaces": [
            {"url": "http://grpc.example:1", "protocolBinding": "GRPC"}]}),
        json!({"url": "http://noname.example:1"}),
        json!({"name": "   ", "url": "http://blank.example:1"}),
        json!({"name": 42, "url": "http://numeric.example:1"}),
        json!({"name": "ftp", "url": "ftp://files.example"}),
        json!(["name", "url"]),
    ] {
        assert_card_refused(card_reply(&card.to_string()), GENEROUS).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_that_is_not_json_is_unreachable() {
    assert_card_refused(
        Behaviour::Reply(response(
            "200 OK",
            &[("content-type", "text/html")],
            b"<html>name: x, url: http://x:1</html>",
        )),
        GENEROUS,
    )
    .await;
}

/// A valid card of exactly `len` bytes.
fn card_of_len(len: usize) -> String {
    let base = r#"{"name":"big","url":"http://big.example:7","pad":""}"#;
    let card = format!(
        r#"{{"name":"big","url":"http://big.example:7","pad":"{}"}}"#,
        "p".repeat(len - base.len())
    );
    assert_eq!(card.len(), len);
    card
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_over_64_kib_is_unreachable() {
    // Exactly 64 KiB is read and accepted.
    assert_card_accepted(
        serde_json::from_str(&card_of_len(64 * 1024)).unwrap(),
        "big@big.example:7",
    )
    .await;
    // One byte more is refused, whether declared up front or streamed in chunks.
    let over = card_of_len(64 * 1024 + 1);
    assert_card_refused(card_reply(&over), GENEROUS).await;
    let mut chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for piece in over.as_bytes().chunks(4096) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    assert_card_refused(Behaviour::Reply(chunked), GENEROUS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_that_never_arrives_is_unreachable_within_the_card_timeout() {
    let elapsed = assert_card_refused(Behaviour::Silent, SHORT).await;
    assert!(
        elapsed < SHORT * 3,
        "a silent card peer must be given up on within 3x card_total ({SHORT:?}); took {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_behind_a_redirect_or_an_error_status_is_unreachable() {
    let good = RawPeer::start(card_reply(r#"{"name":"moved","url":"http://m.example:1"}"#)).await;
    let redirect = response(
        "302 Found",
        &[(
            "location",
            &format!("{}/.well-known/agent-card.json", good.url()),
        )],
        b"",
    );
    assert_card_refused(Behaviour::Reply(redirect), GENEROUS).await;
    assert_eq!(good.connections(), 0, "no redirect is followed for a card");
    assert_card_refused(
        Behaviour::Reply(json_response(
            "404 Not Found",
            r#"{"name":"x","url":"http://x.example:1"}"#,
        )),
        GENEROUS,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_peer_outside_network_allow_is_never_contacted() {
    let raw = RawPeer::start(card_reply(r#"{"name":"x","url":"http://x.example:1"}"#)).await;
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", REPORT, 1);
    let minter = launch(
        &minter_yaml("\"127.0.0.1:1\""),
        "http://127.0.0.1:9",
        fs,
        |c| c.peer_timeouts(generous()),
    );
    let result = minter
        .call(
            "share-file",
            json!({"path": "report.md", "peer": raw.url()}),
        )
        .await;
    assert_eq!(result.unwrap_err().code, "peer_unreachable");
    assert_eq!(
        raw.connections(),
        0,
        "network.allow is checked before connecting"
    );
    assert_eq!(only_mint_line(&minter)["audience"], Value::Null);
}

// ================================================================================================
// 4. Landing (D-10.4)
// ================================================================================================

/// A minter and a fetcher, both on real directories and real listeners.
struct DiskPair {
    a: Node,
    b: Node,
    a_url: String,
    b_url: String,
    a_dir: TempDir,
    b_dir: TempDir,
}

async fn disk_pair() -> DiskPair {
    disk_pair_with_fetcher_named("reader").await
}

/// `disk_pair` with the fetcher (B) named `name` in its manifest.
async fn disk_pair_with_fetcher_named(name: &str) -> DiskPair {
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let (listener_a, port_a) = bind().await;
    let (listener_b, port_b) = bind().await;
    let a_url = format!("http://127.0.0.1:{port_a}");
    let b_url = format!("http://127.0.0.1:{port_b}");
    let a = launch(
        &minter_yaml("\"127.0.0.1\""),
        &a_url,
        Arc::new(OsFilesystem::open(a_dir.path()).unwrap()),
        |c| c.peer_timeouts(generous()),
    );
    let b = launch(
        &fetcher_yaml(&format!("\"127.0.0.1:{port_a}\""))
            .replace("name: reader", &format!("name: {name}")),
        &b_url,
        Arc::new(OsFilesystem::open(b_dir.path()).unwrap()),
        |c| c.peer_timeouts(generous()),
    );
    serve_http(listener_a, &a);
    serve_http(listener_b, &b);
    DiskPair {
        a,
        b,
        a_url,
        b_url,
        a_dir,
        b_dir,
    }
}

impl DiskPair {
    fn write_a(&self, rel: &str, content: &str) {
        let path = self.a_dir.path().join("out").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// A redeem refuses any token over 4 KiB as malformed (D-7.2), so `share-file` never mints one:
/// a path whose handle could exceed it is `invalid_input` (with its mint line), and a path just
/// short of that mints a handle that redeems.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_never_exceeds_the_4_kib_a_redeem_accepts() {
    let pair = disk_pair().await;
    let nested = |len: usize| {
        let mut path = String::new();
        while path.len() + 201 < len {
            path.push_str(&"d".repeat(200));
            path.push('/');
        }
        path.push_str(&"f".repeat(len - path.len()));
        path
    };
    let fits = nested(2_880);
    pair.write_a(&fits, "long but shareable\n");
    let shared = pair.a.share(&fits, &pair.b_url).await;
    let token = shared["handle"].as_str().unwrap();
    assert!(token.len() <= 4096, "{} bytes", token.len());
    let fetched = pair.b.fetch(&pair.a_url, token).await.expect("redeems");
    assert_eq!(fetched["bytes"], 19);

    let too_long = nested(3_000);
    pair.write_a(&too_long, "too long to share\n");
    let refused = pair
        .a
        .call("share-file", json!({"path": too_long, "peer": pair.b_url}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, "invalid_input");
    let mints = pair.a.events_of("peer_handle_mint");
    assert_eq!(mints.len(), 2, "{mints:#?}");
    assert_eq!(mints[1]["outcome"], "invalid_input");
    assert_eq!(mints[1]["handle_id"], Value::Null);
}

/// A landing file has no name until it is whole (`O_TMPFILE`, then a link and a rename), so a
/// session that ends mid-write leaves nothing in `peer-in/`: watched throughout an 8 MiB
/// landing, the directory never shows a temp file (a named temp file showed for the whole
/// write; a single glimpse is the instant between the link and the rename).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_file_is_nameless_until_whole() {
    let pair = disk_pair().await;
    let unnamed = rustix::fs::open(
        pair.b_dir.path(),
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::TMPFILE,
        rustix::fs::Mode::from_raw_mode(0o600),
    );
    if unnamed.is_err() {
        eprintln!("skipped: this filesystem has no O_TMPFILE, so landing names its temp file");
        return;
    }
    let big = "z".repeat(8 << 20);
    pair.write_a("big.bin", &big);
    let shared = pair.a.share("big.bin", &pair.b_url).await;
    let landing = pair.b_dir.path().join("peer-in");
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut glimpses = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok(entries) = std::fs::read_dir(&landing) {
                    let temp = entries
                        .flatten()
                        .any(|e| e.file_name().to_string_lossy().ends_with(".part"));
                    glimpses += usize::from(temp);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            glimpses
        })
    };
    let fetched = pair
        .b
        .fetch(&pair.a_url, shared["handle"].as_str().unwrap())
        .await
        .expect("fetch");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(fetched["bytes"], 8 << 20);
    let glimpses = watcher.join().unwrap();
    assert!(glimpses <= 1, "a temp file was visible {glimpses} times");
    let names: Vec<String> = std::fs::read_dir(pair.b_dir.path().join("peer-in"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

/// A capsule's name may be any text without control characters: a fetcher named `Café 東京`
/// sends its audience as a header value of UTF-8 bytes (obs-text), and the minter, which
/// derived the same audience from its card, honours it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetcher_with_a_non_ascii_name_redeems() {
    let pair = disk_pair_with_fetcher_named("Café 東京").await;
    pair.write_a("report.md", "for a named peer\n");
    let shared = pair.a.share("report.md", &pair.b_url).await;
    let port_b = pair.b_url.rsplit(':').next().unwrap();
    assert_eq!(shared["audience"], format!("café 東京@127.0.0.1:{port_b}"));
    let fetched = pair
        .b
        .fetch(&pair.a_url, shared["handle"].as_str().unwrap())
        .await
        .expect("a non-ASCII audience redeems");
    assert_eq!(fetched["bytes"], 17);
}

/// A call dropped mid-way still leaves its one trace line: `io_error`, with the reason saying
/// why (D-9.3 for `share-file`, and every `fetch-peer-file` attempt likewise). A runtime that
/// drops the future records it as cancelled; once the session has ended (the console drops a
/// call that outlasts the drain deadline), as abandoned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_still_leaves_its_trace_line() {
    let silent = RawPeer::start(Behaviour::Silent).await;
    let minter = memory_minter("http://127.0.0.1:9", |c| c.peer_timeouts(generous()));
    let (peer, token) = (silent.url(), crafted_token("out/report.md"));
    let share = minter.call("share-file", json!({"path": "report.md", "peer": peer}));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), share)
            .await
            .is_err(),
        "the silent card keeps the call waiting"
    );
    let mint = only_mint_line(&minter);
    assert_eq!(mint["outcome"], "io_error");
    assert_eq!(mint["path"], "report.md");
    assert_eq!(
        mint["reason"],
        "cancelled: the call's future was dropped before it finished"
    );

    let fetcher = DiskFetcher::new("\"127.0.0.1\"", generous(), CAP);
    let mut fetch = Box::pin(fetcher.node.fetch(&peer, &token));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut fetch)
            .await
            .is_err()
    );
    // The session ends while the call still waits; then the call is dropped.
    fetcher.node.capsule.tools().mark_session_ended();
    assert!(fetcher.node.events_of("peer_file_fetch").is_empty());
    drop(fetch);
    let lines = fetcher.node.events_of("peer_file_fetch");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["outcome"], "io_error");
    assert_eq!(
        lines[0]["reason"],
        "abandoned: the session ended before the call finished"
    );
    fetcher.node.assert_trace_has_no_token();

    // A call that finishes writes only its own line.
    let finished = memory_minter("http://127.0.0.1:9", |c| c.peer_timeouts(generous()));
    let refused = finished
        .call(
            "share-file",
            json!({"path": "missing.md", "peer": silent.url()}),
        )
        .await;
    assert_eq!(refused.unwrap_err().code, "not_found");
    assert_eq!(only_mint_line(&finished)["outcome"], "not_found");
}

/// A minted handle's line names the file as the handle does (the payload's `p`, as each redeem
/// line of it will), not as the agent spelled it; a refused mint keeps the spelling (D-6.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mint_line_names_the_resolved_path() {
    let pair = disk_pair().await;
    pair.write_a("a b.txt", "spaced\n");
    for spelling in ["a%20b.txt", "a b.txt?v=2", "%61 b.txt"] {
        let shared = pair.a.share(spelling, &pair.b_url).await;
        pair.b
            .fetch(&pair.a_url, shared["handle"].as_str().unwrap())
            .await
            .expect("fetch");
    }
    let refused = pair
        .a
        .call(
            "share-file",
            json!({"path": "missing%20one.txt", "peer": pair.b_url}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, "not_found");
    let paths = |event| -> Vec<Value> {
        pair.a
            .events_of(event)
            .into_iter()
            .map(|line| line["path"].clone())
            .collect()
    };
    assert_eq!(
        paths("peer_handle_mint"),
        ["a b.txt", "a b.txt", "a b.txt", "missing%20one.txt"]
    );
    assert_eq!(
        paths("peer_handle_redeem"),
        ["a b.txt", "a b.txt", "a b.txt"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetched_files_land_under_peer_in_with_sanitised_names() {
    let pair = disk_pair().await;
    let long = format!("{}.md", "L".repeat(200));
    let cases: [(&str, String); 5] = [
        ("report.md", "report.md".into()),
        ("my report (final).md", "my_report__final_.md".into()),
        ("notes/sub dir/plan v2.txt", "plan_v2.txt".into()),
        ("résumé – 日本.txt", "r_sum______.txt".into()),
        (long.as_str(), "L".repeat(120)),
    ];
    pair.a.capsule.task_completed();
    pair.a.capsule.task_completed();
    let mut expected_names = Vec::new();
    for (i, (path, sanitised)) in cases.iter().enumerate() {
        let content = format!("CONTENT-MARKER-{i}: bytes of {path}\n");
        pair.write_a(path, &content);
        let shared = pair.a.share(path, &pair.b_url).await;
        let token = shared["handle"].as_str().unwrap().to_owned();
        let id = handle_id(&token);
        let result = pair
            .b
            .fetch(&pair.a_url, &token)
            .await
            .unwrap_or_else(|e| panic!("fetch of {path:?}: {e:?}"));
        let stored = format!("peer-in/{id}-{sanitised}");
        assert_eq!(
            result,
            json!({
                "path": stored,
                "bytes": content.len(),
                "sha256": sha256_hex(content.as_bytes()),
                "generation": 2,
                "peer": pair.a_url,
            }),
            "result for {path:?}"
        );
        assert_eq!(
            std::fs::read_to_string(pair.b_dir.path().join(&stored)).unwrap(),
            content,
            "landed bytes of {path:?}"
        );
        let text = result.to_string();
        assert!(
            !text.contains("CONTENT-MARKER"),
            "contents in the result: {text}"
        );
        assert!(
            !text.contains(&token) && !text.contains("mh1."),
            "token in the result: {text}"
        );
        expected_names.push(format!("{id}-{sanitised}"));
    }
    expected_names.sort();
    assert_eq!(
        landed_names(pair.b_dir.path()),
        expected_names,
        "exactly the landed files under peer-in/, no temp files"
    );
    let fetches = pair.b.events_of("peer_file_fetch");
    assert_eq!(fetches.len(), cases.len());
    for (line, name) in fetches.iter().zip(cases.iter()) {
        assert_eq!(line["outcome"], "ok", "{line}");
        assert!(
            line["stored_path"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("-{}", name.1))),
            "{line}"
        );
    }
    pair.a.assert_trace_has_no_token();
    pair.b.assert_trace_has_no_token();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refetching_replaces_the_landed_file_with_the_current_bytes() {
    let pair = disk_pair().await;
    pair.write_a("report.md", "first version\n");
    let shared = pair.a.share("report.md", &pair.b_url).await;
    let token = shared["handle"].as_str().unwrap();
    let first = pair.b.fetch(&pair.a_url, token).await.expect("first fetch");
    pair.write_a("report.md", "second, longer version\n");
    let second = pair
        .b
        .fetch(&pair.a_url, token)
        .await
        .expect("second fetch");
    assert_eq!(first["path"], second["path"]);
    let stored = second["path"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(pair.b_dir.path().join(stored)).unwrap(),
        "second, longer version\n"
    );
    assert_eq!(
        landed_names(pair.b_dir.path()).len(),
        1,
        "one file, no temp"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_directory_that_is_a_symlink_is_path_refused() {
    let pair = disk_pair().await;
    pair.write_a("report.md", REPORT);
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), pair.b_dir.path().join("peer-in")).unwrap();
    let shared = pair.a.share("report.md", &pair.b_url).await;
    let token = shared["handle"].as_str().unwrap();
    let error = pair.b.fetch(&pair.a_url, token).await.unwrap_err();
    assert_eq!(error.code, "path_refused");
    let line = pair.b.only_fetch_line();
    assert_eq!(line["outcome"], "path_refused");
    assert_eq!(line["stored_path"], Value::Null);
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written through the symlink"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_fault_is_io_error_and_leaves_nothing() {
    let (listener_a, port_a) = bind().await;
    let a_url = format!("http://127.0.0.1:{port_a}");
    let a = memory_minter(&a_url, |c| c.peer_timeouts(generous()));
    serve_http(listener_a, &a);
    let (listener_b, port_b) = bind().await;
    let b_fs = Arc::new(MemoryFilesystem::new());
    b_fs.inject_land_fault();
    let b = launch(
        &fetcher_yaml(&format!("\"{a_url}\"")),
        &format!("http://127.0.0.1:{port_b}"),
        b_fs.clone(),
        |c| c.peer_timeouts(generous()),
    );
    serve_http(listener_b, &b);

    let shared = a
        .share("report.md", &format!("http://127.0.0.1:{port_b}"))
        .await;
    let token = shared["handle"].as_str().unwrap();
    let error = b.fetch(&a_url, token).await.unwrap_err();
    assert_eq!(error.code, "io_error");
    let message = serde_json::to_string(&error).unwrap();
    assert!(
        !message.contains("REPORT-BODY"),
        "contents in the error: {message}"
    );
    assert!(!message.contains("mh1."), "token in the error: {message}");
    let line = b.only_fetch_line();
    assert_eq!(line["outcome"], "io_error", "{line}");
    assert_eq!(line["handle_id"], handle_id(token));
    assert_eq!(line["stored_path"], Value::Null);
    assert_eq!(line["bytes"], Value::Null);
    assert_eq!(b_fs.dir_names("peer-in"), Vec::<String>::new());
    // The redeem itself succeeded on the minter's side.
    assert_eq!(a.events_of("peer_handle_redeem")[0]["outcome"], "ok");
    b.assert_trace_has_no_token();
}

// ================================================================================================
// 5. The peer_file_fetch trace line
// ================================================================================================

fn assert_field_order(line: &str) {
    let parsed: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
    let keys: Vec<&str> = parsed.keys().map(String::as_str).collect();
    assert_eq!(keys, FETCH_FIELDS, "field order of {line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_line_per_attempt_past_input_validation() {
    let (listener_a, port_a) = bind().await;
    let a_url = format!("http://127.0.0.1:{port_a}");
    let a = memory_minter(&a_url, |c| c.peer_timeouts(generous()));
    serve_http(listener_a, &a);
    let (listener_b, port_b) = bind().await;
    let b_fs = Arc::new(MemoryFilesystem::new());
    let b = launch(
        &fetcher_yaml(&format!("\"127.0.0.1:{port_a}\"")),
        &format!("http://127.0.0.1:{port_b}"),
        b_fs.clone(),
        |c| c.peer_timeouts(generous()),
    );
    serve_http(listener_b, &b);
    let token = a
        .share("report.md", &format!("http://127.0.0.1:{port_b}"))
        .await["handle"]
        .as_str()
        .unwrap()
        .to_owned();
    let fetch_lines = || b.events_of("peer_file_fetch").len();

    // Input validation failures leave no line.
    for input in [
        json!("not an object"),
        json!({"peer": a_url}),
        json!({"handle": token}),
        json!({"peer": "   ", "handle": token}),
        json!({"peer": a_url, "handle": ""}),
        json!({"peer": a_url, "handle": 7}),
    ] {
        let error = b.call("fetch-peer-file", input.clone()).await.unwrap_err();
        assert_eq!(error.code, "invalid_input", "{input}");
    }
    assert_eq!(fetch_lines(), 0, "invalid input leaves no trace line");

    // Every attempt past validation leaves exactly one line, in order.
    // Change one MAC character away from the end (the last one carries padding bits).
    let at = token.len() - 3;
    let swap = if &token[at..at + 1] == "A" { "B" } else { "A" };
    let forged = format!("{}{swap}{}", &token[..at], &token[at + 1..]);
    let other_port = "http://127.0.0.1:1".to_owned();
    let attempts: [(String, String, &str); 4] = [
        (a_url.clone(), "mh1.not a token!".into(), "malformed_handle"),
        (other_port, token.clone(), "peer_not_allowed"),
        (a_url.clone(), forged.clone(), "handle_not_valid"),
        (format!("  {a_url}  "), token.clone(), "ok"),
    ];
    for (n, (peer, handle, outcome)) in attempts.iter().enumerate() {
        let result = b.fetch(peer, handle).await;
        assert_eq!(fetch_lines(), n + 1, "one line for the {outcome} attempt");
        let line = b.events_of("peer_file_fetch").pop().unwrap();
        assert_eq!(line["outcome"], *outcome, "{line}");
        assert_eq!(line["peer"], peer.trim(), "peer as given, trimmed: {line}");
        assert_eq!(line["handle_id"], handle_id(handle.trim()), "{line}");
        assert_eq!(line["session_id"], b.capsule.session_id());
        assert!(
            line["event_id"]
                .as_str()
                .is_some_and(|e| e.len() == 36 && e.starts_with("evt_")),
            "{line}"
        );
        if *outcome == "ok" {
            let result = result.expect("the real fetch succeeds");
            assert_eq!(result["peer"], a_url.as_str(), "result peer trimmed");
            assert_eq!(line["stored_path"], result["path"]);
            assert_eq!(line["bytes"], REPORT.len());
            assert_eq!(line["sha256"], sha256_hex(REPORT.as_bytes()));
            assert_eq!(line["reason"], Value::Null);
        } else {
            assert_eq!(result.unwrap_err().code, *outcome);
            assert_eq!(line["stored_path"], Value::Null, "{line}");
            assert!(line["reason"].is_string(), "{line}");
        }
    }
    for line in b.trace.lines() {
        assert_field_order(&line);
    }
    a.assert_trace_has_no_token();
    b.assert_trace_has_no_token();
}

/// A fetch whose trace line cannot be written fails closed (D-6.4): `io_error`, and the
/// landed file is removed again, so no fetched byte stays in the workdir unrecorded (an agent
/// that fills the disk under the trace does not keep the file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_whose_trace_line_fails_leaves_no_file() {
    let body = b"bytes the trace never records\n";
    let raw = RawPeer::start(Behaviour::Reply(redeem_ok(body))).await;
    let fetcher = DiskFetcher::new("\"127.0.0.1\"", generous(), CAP);
    fetcher.node.trace.fail_from_now();
    let refused = fetcher
        .node
        .fetch(&raw.url(), &crafted_token("out/report.md"))
        .await
        .expect_err("the trace cannot record it");
    assert_eq!(refused.code, "io_error");
    assert_eq!(fetcher.landed(), Vec::<String>::new(), "nothing stays");
    assert_eq!(raw.heads().len(), 1, "the fetch did reach the peer");
}
