#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Fault injection: each fault comes through a backend double or a real OS
//! condition, and each answer is checked exactly.
//!
//! - A trace file on a REAL full tmpfs: every request fails closed with 500 `io_error` and no
//!   file byte leaves (D-6.4); freeing space recovers.
//! - ENOSPC while landing a fetched file on a REAL small tmpfs: `io_error`, nothing left under
//!   `peer-in/` (D-10.4), and the space is given back.
//! - EIO mid-read ([`MemoryFilesystem::inject_read_fault`]): 500 `io_error` for a read and a
//!   redeem, the OS detail only in the trace's `reason` (D-2.8).
//! - The wall clock jumping either way ([`ManualClock`]).
//! - 500 slow clients holding half-sent heads against a real `serve` (D-4.6).
//!
//! The tmpfs tests need `mount` (we run as root); where it is refused they print
//! "skipping: cannot mount tmpfs" and pass.

mod support;

use resource_plane::Capsule;
use resource_plane::backends::OsFilesystem;
use serde_json::{Value, json};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::http::{Reply, connect, exchange, get, request_bytes, send};
use support::process::{Served, Workdir};
use support::soak_driver::{etag_of, forge_mac};
use support::world::{Listening, World};
use tempfile::TempDir;

/// The one body every `io_error` carries on the wire (D-2.8, D-4.4).
const IO_ERROR_BODY: &str = r#"{"error":"io_error","message":"the file could not be read"}"#;
/// The one body every `handle_not_valid` carries (D-7.3).
const NOT_VALID_BODY: &str = r#"{"error":"handle_not_valid","message":"the handle is not valid"}"#;
const ENOSPC: i32 = 28;

// ---------------------------------------------------------------------------------------------
// Real tmpfs mounts ([`Tmpfs`], at the end of the file).
// ---------------------------------------------------------------------------------------------

macro_rules! tmpfs_or_skip {
    ($size:expr) => {
        match Tmpfs::mount($size) {
            Some(mount) => mount,
            None => {
                println!("skipping: cannot mount tmpfs");
                return;
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// The real binary.
// ---------------------------------------------------------------------------------------------

const FILES_MANIFEST: &str = "name: faulty\nexports:\n  files: { root: out/, mode: read-only }\n";

/// Writes `out/<name>` in `world`'s workdir for each file; returns the workdir.
fn workdir_with(world: &Workdir, files: &[(&str, &[u8])]) -> PathBuf {
    for (name, bytes) in files {
        world.file(&format!("out/{name}"), bytes);
    }
    world.path()
}

/// Spawns `serve --console` over `world`, tracing to `trace`, stderr captured.
fn serve(world: &Workdir, trace: &Path) -> Served {
    let trace = trace.display().to_string();
    let args = world.args_without_trace(&["--listen", "127.0.0.1:0", "--trace", &trace]);
    world.launch(&args).console().start()
}

/// A 500 `io_error` exactly as D-6.4 and D-2.8 require: generic body, no file validator.
fn assert_io_error_over_http(response: &Reply, what: &str) {
    assert_eq!(response.status, 500, "{what}: {}", response.describe());
    assert_eq!(
        String::from_utf8_lossy(&response.body),
        IO_ERROR_BODY,
        "{what}: body"
    );
    assert_eq!(
        response.header("content-type"),
        Some("application/json"),
        "{what}"
    );
    assert_eq!(response.header("etag"), None, "{what}: no etag on a 500");
    assert_eq!(
        response.header("x-murmur-mtime-ms"),
        None,
        "{what}: no mtime on a 500"
    );
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// 1. The trace on a full filesystem: fail closed (D-6.4).
// ---------------------------------------------------------------------------------------------

const TRACED_FILE: &[u8] = b"TMPFS-FAULT-FILE-BYTES: must never leave unrecorded\n";

#[test]
fn trace_on_a_full_tmpfs_fails_every_request_closed_and_freeing_space_recovers() {
    let world = Workdir::new(FILES_MANIFEST);
    workdir_with(&world, &[("data.txt", TRACED_FILE)]);
    let mount = tmpfs_or_skip!("64k");
    // The trace file exists (empty) while there is room; then the filesystem fills up.
    let trace = mount.dir.join("trace.jsonl");
    std::fs::File::create(&trace).expect("create the trace file on the tmpfs");
    mount.fill("filler");
    let probe = std::fs::OpenOptions::new()
        .append(true)
        .open(&trace)
        .and_then(|mut f| f.write_all(b"{}\n"));
    assert_eq!(
        probe.map_err(|e| e.raw_os_error()),
        Err(Some(ENOSPC)),
        "the tmpfs must refuse an append to the trace before the server starts"
    );

    let mut serve = serve(&world, &trace);

    let read = get(serve.port(), "/resources/files/data.txt");
    assert_io_error_over_http(&read, "read with an unwritable trace");
    assert!(
        !contains(&read.body, b"TMPFS-FAULT"),
        "no file byte may leave unrecorded"
    );
    assert_io_error_over_http(
        &get(serve.port(), "/resources/files"),
        "listing with an unwritable trace",
    );
    // Refusals fail closed too: their line cannot be written either.
    assert_io_error_over_http(
        &get(serve.port(), "/resources/files/missing.txt"),
        "a not_found with an unwritable trace",
    );
    let post = send(serve.port(), "POST", "/resources/files/data.txt");
    assert_io_error_over_http(&post, "a 405 with an unwritable trace");
    assert_eq!(
        std::fs::metadata(&trace).expect("stat the trace").len(),
        0,
        "nothing reached the trace"
    );
    assert!(
        serve.is_running(),
        "a full trace filesystem must not crash serve"
    );

    // Space comes back: the next request is served and traced.
    std::fs::remove_file(mount.dir.join("filler")).expect("remove the filler");
    let read = get(serve.port(), "/resources/files/data.txt");
    assert_eq!(read.status, 200, "after freeing space: {}", read.describe());
    assert_eq!(read.body, TRACED_FILE);
    assert_eq!(read.header("etag"), Some(etag_of(TRACED_FILE).as_str()));
    let lines = serve.trace_lines();
    assert_eq!(lines.len(), 1, "exactly the one served request: {lines:?}");
    let event = &lines[0];
    assert_eq!(event["event_type"], "resource_read");
    assert_eq!(event["outcome"], "ok");
    assert_eq!(event["path"], "data.txt");
    assert_eq!(event["bytes"], TRACED_FILE.len());

    serve.close_stdin();
    let status = serve.wait_exit("the end of stdin");
    assert!(status.success(), "serve exits 0, got {status}");
    drop(serve);
    drop(mount);
}

// ---------------------------------------------------------------------------------------------
// In-process capsules on real tokio listeners.
// ---------------------------------------------------------------------------------------------

/// A capsule with no exports: it only serves the agent card a minter fetches.
async fn card_server(name: &str) -> Listening {
    World::builder(&format!("name: {name}\n"))
        .now(0)
        .fresh_key()
        .listen()
        .await
}

fn minter_manifest() -> &'static str {
    "name: minter\nexports:\n  files: { root: out/, mode: read-only }\n  \
     peer_files: { root: out/, max_ttl: 1h }\n\
     capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n"
}

/// `share-file` for `path` to `peer`, `ttl` seconds; returns the whole result.
async fn share(capsule: &Capsule, path: &str, peer: SocketAddr, ttl: Option<u64>) -> Value {
    let mut input = json!({"path": path, "peer": peer.to_string()});
    if let Some(ttl) = ttl {
        input["ttl"] = json!(ttl);
    }
    capsule
        .tools()
        .call("share-file", input)
        .await
        .unwrap_or_else(|e| panic!("share-file {path}: {e:?}"))
}

// ---------------------------------------------------------------------------------------------
// 2. ENOSPC while landing a fetched file (D-10.4).
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enospc_while_landing_is_io_error_and_leaves_nothing_under_peer_in() {
    let big: Vec<u8> = (0..512 * 1024u32).map(|i| (i % 251) as u8).collect();
    let small = b"small enough to land\n".to_vec();
    let world = Workdir::new("");
    let work_a = workdir_with(&world, &[("big.bin", &big), ("small.txt", &small)]);
    let mount = tmpfs_or_skip!("128k");

    let a = World::builder(
        "name: minter\nexports:\n  peer_files: { root: out/ }\n\
         capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n",
    )
    .filesystem(Arc::new(
        OsFilesystem::open(&work_a).expect("open A's workdir"),
    ))
    .now(1_800_000_000_000)
    .fresh_key()
    .listen()
    .await;
    let b = World::builder(&format!(
        "name: fetcher\ncapabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{}\"] }}\n",
        a.addr.port()
    ))
    .filesystem(Arc::new(
        OsFilesystem::open(&mount.dir).expect("open B's workdir on the tmpfs"),
    ))
    .now(1_800_000_000_000)
    .fresh_key()
    .listen()
    .await;

    let minted = share(&a.world.capsule, "big.bin", b.addr, None).await;
    let fetched = b
        .world
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": a.addr.to_string(), "handle": minted["handle"]}),
        )
        .await;
    let error = fetched.expect_err("landing 512 KiB on a 128 KiB tmpfs must fail");
    assert_eq!(error.code, "io_error", "{error:?}");
    assert!(
        !error
            .message
            .contains(mount.dir.to_str().expect("UTF-8 path"))
            && !error.message.contains("space"),
        "the tool message stays generic: {error:?}"
    );
    // A served the bytes; B could not keep them.
    assert_eq!(a.world.last_event()["outcome"], "ok");
    let event = b.world.last_event();
    assert_eq!(event["event_type"], "peer_file_fetch");
    assert_eq!(event["outcome"], "io_error");
    assert_eq!(event["stored_path"], Value::Null);
    assert_eq!(event["handle_id"], minted["handle_id"]);
    let reason = event["reason"].as_str().expect("a reason on a refusal");
    assert!(
        reason.contains("No space left on device"),
        "the OS detail belongs in the trace reason: {reason}"
    );
    let landing = mount.dir.join("peer-in");
    assert_eq!(
        dir_names(&landing),
        Vec::<String>::new(),
        "no partial file and no .part temp may remain under peer-in/"
    );

    // The partial temp was removed, so the space is back: a small fetch lands whole.
    let minted = share(&a.world.capsule, "small.txt", b.addr, None).await;
    let result = b
        .world
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": a.addr.to_string(), "handle": minted["handle"]}),
        )
        .await
        .expect("a small fetch lands once the partial is gone");
    let id = minted["handle_id"].as_str().expect("a handle id");
    assert_eq!(result["path"], format!("peer-in/{id}-small.txt"));
    assert_eq!(dir_names(&landing), vec![format!("{id}-small.txt")]);
    assert_eq!(
        std::fs::read(landing.join(format!("{id}-small.txt"))).expect("read the landed file"),
        small
    );
    drop(b);
    drop(mount);
}

fn dir_names(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .map(|e| {
                    e.expect("a directory entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            names.sort();
            names
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("read {}: {e}", dir.display()),
    }
}

// ---------------------------------------------------------------------------------------------
// 3. EIO mid-read (D-2.8).
// ---------------------------------------------------------------------------------------------

const REPORT: &[u8] = b"REPORT-BYTES: the quarterly numbers\n";
const OTHER: &[u8] = b"other file, unaffected\n";
const MTIME: i64 = 1_700_000_000_123;
const T0: i64 = 1_800_000_000_000;

/// Capsule A (minter) over a memory workdir holding `out/report.md` and `out/other.md`, on
/// the clock at [`T0`], driven through its router; plus a served card capsule B to mint for.
async fn peer_world() -> (World, Listening) {
    let a = World::builder(minter_manifest())
        .url("http://127.0.0.1:1")
        .now(T0)
        .fresh_key()
        .file("out/report.md", REPORT, MTIME)
        .file("out/other.md", OTHER, MTIME)
        .build();
    (a, card_server("reader").await)
}

fn assert_io_error(answer: &Reply, what: &str) {
    assert_eq!(answer.status, 500, "{what}: {}", answer.text());
    assert_eq!(
        answer.text(),
        IO_ERROR_BODY,
        "{what}: the wire body is generic"
    );
    assert_eq!(answer.header("etag"), None, "{what}: no etag on a 500");
    assert_eq!(answer.header("x-murmur-generation"), Some("0"), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_mid_read_is_io_error_for_read_and_redeem_with_detail_only_in_the_trace() {
    let (a, b) = peer_world().await;
    let reader = b.world.capsule.audience();
    let minted = share(&a.capsule, "report.md", b.addr, None).await;
    let token = minted["handle"].as_str().expect("a token").to_owned();
    let id = minted["handle_id"]
        .as_str()
        .expect("a handle id")
        .to_owned();
    assert_eq!(a.ask_peer(&token, reader).await.status, 200);

    a.fs.inject_read_fault("out/report.md", ErrorKind::Other);

    let read = a.ask("/resources/files/report.md", None).await;
    assert_io_error(&read, "read of a file whose read fails");
    assert!(!contains(&read.body, b"REPORT-BYTES") && !contains(&read.body, b"EIO"));
    let event = a.last_event();
    assert_eq!(event["event_type"], "resource_read");
    assert_eq!(event["outcome"], "io_error");
    assert_eq!(event["path"], "report.md");
    assert_eq!(event["bytes"], Value::Null);
    assert_eq!(event["sha256"], Value::Null);
    let reason = event["reason"].as_str().expect("a reason");
    assert!(
        reason.contains("injected read fault (EIO)"),
        "the OS detail is in the trace reason: {reason}"
    );

    let redeem = a.ask_peer(&token, reader).await;
    assert_io_error(&redeem, "redeem of a file whose read fails");
    assert_eq!(redeem.header("x-murmur-handle-id"), Some(id.as_str()));
    assert!(!contains(&redeem.body, b"REPORT-BYTES") && !contains(&redeem.body, b"EIO"));
    let event = a.last_event();
    assert_eq!(event["event_type"], "peer_handle_redeem");
    assert_eq!(event["outcome"], "io_error");
    assert_eq!(event["handle_id"], id.as_str());
    assert_eq!(
        event["path"], "report.md",
        "the MAC verified, so the path is named"
    );
    assert_eq!(event["bytes"], Value::Null);
    assert!(
        event["reason"]
            .as_str()
            .is_some_and(|r| r.contains("injected read fault (EIO)")),
        "{event}"
    );

    // The fault is one file's: its neighbour still reads, and the listing omits the failing
    // entry rather than failing (D-3.3).
    let other = a.ask("/resources/files/other.md", None).await;
    assert_eq!(other.status, 200);
    assert_eq!(&other.body[..], OTHER);
    let listing = a.ask("/resources/files", None).await;
    assert_eq!(listing.status, 200, "{}", listing.text());
    let listing: Value = serde_json::from_slice(&listing.body).expect("listing JSON");
    let paths: Vec<&str> = listing["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert_eq!(
        paths,
        ["other.md"],
        "the failing file is omitted from the listing"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. The wall clock jumping either way.
// ---------------------------------------------------------------------------------------------

/// Expiry is judged against the clock **at redeem time** (`exp <= now` → 410, D-7.2): the
/// plane keeps no memory of earlier readings, so a clock jumped back past `exp` makes an
/// expired handle redeem again until `exp` comes round once more. What a jump can never do is
/// get anything past the MAC: the MAC is checked before the expiry, so a forged token or a
/// wrong audience is `handle_not_valid` whatever the clock reads, and never names a path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_jumps_decide_expiry_at_redeem_time_and_never_get_past_the_mac() {
    let (a, b) = peer_world().await;
    let audience = b.world.capsule.audience().to_owned();
    let minted = share(&a.capsule, "report.md", b.addr, Some(60)).await;
    assert_eq!(minted["expires_at_ms"], T0 + 60_000);
    let token = minted["handle"].as_str().expect("a token").to_owned();
    let id = minted["handle_id"]
        .as_str()
        .expect("a handle id")
        .to_owned();

    let expect_redeem = |answer: &Reply, status: u16, at: i64| {
        assert_eq!(
            answer.status,
            status,
            "redeem at clock {at} (T0{:+}): {}",
            at - T0,
            answer.text()
        );
    };

    // Valid now; expired after a jump forward; exactly at `exp` it is expired (`exp <= now`).
    let at = T0;
    expect_redeem(&a.ask_peer(&token, &audience).await, 200, at);
    a.clock.advance(61_000);
    let expired = a.ask_peer(&token, &audience).await;
    expect_redeem(&expired, 410, T0 + 61_000);
    assert_eq!(
        expired.text(),
        r#"{"error":"handle_expired","message":"the handle has expired"}"#
    );
    let event = a.last_event();
    assert_eq!(event["outcome"], "handle_expired");
    assert_eq!(
        event["path"], "report.md",
        "past the MAC, the path is named"
    );
    assert_eq!(
        event["timestamp"],
        T0 + 61_000,
        "trace timestamps follow the clock"
    );
    a.clock.set(T0 + 60_000);
    expect_redeem(&a.ask_peer(&token, &audience).await, 410, T0 + 60_000);
    a.clock.set(T0 + 59_999);
    expect_redeem(&a.ask_peer(&token, &audience).await, 200, T0 + 59_999);

    // A jump back of 120 s from T0+61 s: valid again, judged by the clock at redeem time.
    a.clock.set(T0 + 61_000);
    a.clock.advance(-120_000);
    let revived = a.ask_peer(&token, &audience).await;
    expect_redeem(&revived, 200, T0 - 59_000);
    assert_eq!(&revived.body[..], REPORT);
    assert_eq!(revived.header("x-murmur-handle-id"), Some(id.as_str()));
    assert_eq!(a.last_event()["timestamp"], T0 - 59_000);

    // Whatever the clock reads, a forgery or a wrong audience is handle_not_valid, never
    // handle_expired and never a path.
    let forged = forge_mac(&token, 7);
    for at in [
        0,
        T0 - 59_000,
        T0,
        T0 + 60_000,
        T0 + 61_000,
        T0 + 10 * 365 * 86_400_000,
    ] {
        a.clock.set(at);
        for (token, audience) in [
            (forged.as_str(), audience.as_str()),
            (token.as_str(), "mallory@127.0.0.1:9"),
        ] {
            let answer = a.ask_peer(token, audience).await;
            assert_eq!(answer.status, 403, "at {at}: {}", answer.text());
            assert_eq!(answer.text(), NOT_VALID_BODY, "at {at}");
            let event = a.last_event();
            assert_eq!(event["outcome"], "handle_not_valid", "at {at}");
            assert_eq!(
                event["path"],
                Value::Null,
                "at {at}: a forgery names no path"
            );
            assert_eq!(event["timestamp"], at);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_jumps_leave_listing_and_read_alone_except_trace_timestamps() {
    let (a, _b) = peer_world().await;
    let read_before = a.ask("/resources/files/report.md", None).await;
    let listing_before = a.ask("/resources/files", None).await;
    assert_eq!(read_before.status, 200);
    assert_eq!(listing_before.status, 200);
    for at in [
        T0 + 3_600_000,
        T0 - 86_400_000,
        0,
        T0 + 10 * 365 * 86_400_000,
    ] {
        a.clock.set(at);
        let read = a.ask("/resources/files/report.md", None).await;
        assert_eq!(read.status, 200, "read at {at}");
        assert_eq!(&read.body[..], REPORT, "read at {at}");
        assert_eq!(read.header("etag"), read_before.header("etag"), "at {at}");
        assert_eq!(
            read.header("x-murmur-mtime-ms"),
            Some(MTIME.to_string().as_str()),
            "the mtime is the file's, not the clock's (at {at})"
        );
        assert_eq!(a.last_event()["timestamp"], at);
        let listing = a.ask("/resources/files", None).await;
        assert_eq!(listing.status, 200, "listing at {at}");
        assert_eq!(listing.body, listing_before.body, "listing at {at}");
        let event = a.last_event();
        assert_eq!(event["event_type"], "resource_list");
        assert_eq!(event["timestamp"], at, "trace timestamps follow the clock");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Slow clients holding half-sent heads (D-4.6).
// ---------------------------------------------------------------------------------------------

const SLOW_CLIENTS: usize = 500;
const HELLO: &[u8] = b"hello from a busy server\n";

#[test]
fn five_hundred_half_sent_heads_do_not_starve_a_normal_client() {
    let world = Workdir::new(FILES_MANIFEST);
    workdir_with(&world, &[("hello.txt", HELLO)]);
    let mut serve = serve(&world, &world.trace());

    let mut slow: Vec<TcpStream> = (0..SLOW_CLIENTS)
        .map(|n| {
            let mut stream = connect(serve.port());
            stream
                .write_all(b"GET /resources/files HTTP/1.1\r\nHost: x\r\n")
                .unwrap_or_else(|e| panic!("slow client {n}: write: {e}"));
            stream
        })
        .collect();

    const NORMAL: usize = 5;
    for n in 0..NORMAL {
        let started = Instant::now();
        let response = exchange(
            serve.port(),
            &request_bytes("GET", "/resources/files/hello.txt", &[("host", "x")]),
            Duration::from_secs(5),
        );
        let elapsed = started.elapsed();
        assert_eq!(
            response.status,
            200,
            "normal request {n}: {}",
            response.describe()
        );
        assert_eq!(response.body, HELLO);
        assert!(
            elapsed < Duration::from_secs(1),
            "normal request {n} took {elapsed:?} behind {SLOW_CLIENTS} slow clients"
        );
    }

    // The slow clients are still held open, unanswered: their heads are incomplete.
    for (n, stream) in slow.iter_mut().enumerate() {
        stream.set_nonblocking(true).expect("nonblocking");
        let mut byte = [0u8; 1];
        match stream.read(&mut byte) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => {
                panic!("slow client {n} got an answer before its head was complete: {other:?}")
            }
        }
    }
    drop(slow);

    // Still serving, and only whole requests left trace lines.
    let after = get(serve.port(), "/resources/files/hello.txt");
    assert_eq!(after.status, 200, "{}", after.describe());
    assert!(serve.is_running());
    let lines = serve.trace_lines();
    assert_eq!(
        lines.len(),
        NORMAL + 1,
        "half-sent heads are not requests and leave no trace line"
    );
    for event in &lines {
        assert_eq!(event["event_type"], "resource_read");
        assert_eq!(event["outcome"], "ok");
    }
    serve.close_stdin();
    let status = serve.wait_exit("the end of stdin");
    assert!(status.success(), "serve exits 0, got {status}");
}

// ---------------------------------------------------------------------------------------------
// Real tmpfs mounts.
// ---------------------------------------------------------------------------------------------

/// A tmpfs mounted on a fresh directory; unmounted when dropped (before the directory goes).
struct Tmpfs {
    dir: PathBuf,
    _parent: TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `64k`); `None` when mounting is not possible here.
    fn mount(size: &str) -> Option<Tmpfs> {
        let parent = tempfile::tempdir().expect("create a mount point's parent");
        let dir = parent.path().join("mnt");
        std::fs::create_dir(&dir).expect("create a mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .is_ok_and(|o| o.status.success());
        mounted.then(|| Tmpfs {
            dir: std::fs::canonicalize(&dir).expect("canonicalise the mount point"),
            _parent: parent,
        })
    }

    /// Fills the filesystem with `filler` until the kernel says ENOSPC.
    fn fill(&self, filler: &str) {
        let mut file = std::fs::File::create(self.dir.join(filler)).expect("create the filler");
        let chunk = [0x5au8; 4096];
        for _ in 0..100_000 {
            if let Err(e) = file.write_all(&chunk) {
                assert_eq!(
                    e.raw_os_error(),
                    Some(ENOSPC),
                    "filling the tmpfs must end in ENOSPC, got {e}"
                );
                return;
            }
        }
        panic!("a small tmpfs never filled up");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}
