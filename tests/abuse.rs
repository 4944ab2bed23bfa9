//! Abuse the release of the binary survives: logs that cannot be written, descriptors run out,
//! end of input while a tool call waits on a silent peer, tokens hidden behind
//! percent-encoding. Each case drives the real binary over real pipes and sockets.

#![allow(clippy::disallowed_methods)] // the tests build their world with std::fs

mod support;

use std::io::Write;
use std::time::Duration;
use support::http::get_raw;
use support::process::{Served, Stderr, Workdir};

const FILES: &str = "name: reporter\nexports:\n  files: { root: out, mode: read-only }\n";

/// With stderr a full disk, a console line that is refused (which logs a warning) is still
/// answered, the next one too, and end of input still ends the session with status 0.
#[test]
fn a_full_stderr_never_stops_the_console() {
    let world = Workdir::new(FILES);
    world.file("out/a.txt", "a");
    let args = world.args(&["--console"]);
    let mut served = Served::start("", &args, Stderr::Redirect("2>/dev/full"), true);
    // A line that is not UTF-8 is refused with a warning on stderr.
    served.send_bytes(b"\xff\xfe\n");
    let answer = served.line(Duration::from_secs(10)).expect("an answer");
    assert!(answer.contains("invalid_request"), "{answer}");
    served.send(r#"{"op":"tools"}"#);
    let answer = served
        .line(Duration::from_secs(10))
        .expect("a second answer");
    assert_eq!(answer, r#"{"ok":true,"result":[]}"#);
    served.close_stdin();
    let status = served.wait(Duration::from_secs(10)).expect("ended");
    assert_eq!(status.code(), Some(0));
}

/// Out of descriptors with stderr a closed pipe: the accept errors are logged (into nothing)
/// and retried, the listener survives, and once connections close it serves again. A signal
/// then ends the session with status 0.
#[test]
fn running_out_of_descriptors_with_a_closed_stderr_is_survived() {
    let world = Workdir::new(FILES);
    world.file("out/a.txt", "hello");
    // The limit leaves room for little more than the baseline.
    let served = Served::start("ulimit -n 48", &world.args(&[]), Stderr::ClosedPipe, false);
    let port = served.port();
    let held: Vec<_> = (0..80)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // Each held connection sends a complete request, so the server answers and closes it.
    for mut stream in held {
        let _ = stream.write_all(b"GET /resources/files/a.txt HTTP/1.1\r\nhost: x\r\n\r\n");
    }
    std::thread::sleep(Duration::from_millis(500));
    let (status, response) = get_raw(port, "/resources/files/a.txt");
    assert_eq!(status, 200, "{response}");
    assert!(response.ends_with("hello"), "{response}");
    let mut served = served;
    served.terminate();
    let status = served.wait(Duration::from_secs(10)).expect("ended");
    assert_eq!(status.code(), Some(0));
}

/// A token spelled with percent-encoded dots, once or twice, in a tool's peer URL, a handle
/// field and a read's path: no trace line and no console answer holds its payload or MAC in any
/// spelling.
#[test]
fn percent_encoded_tokens_never_reach_the_trace() {
    let world = Workdir::new(
        "name: fetcher\nexports:\n  files: { root: out, mode: read-only }\n\
         capabilities:\n  peer_fetch: { allow: [\"127.0.0.1\"] }\n",
    );
    let (payload, mac) = (
        "eyJ2IjoxLCJpc3MiOiJ4In0",
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
    );
    let mut served = Served::start("", &world.args(&["--console"]), Stderr::Inherit, true);
    let port = served.port();
    for peer in [
        format!("http://127.0.0.1:{port}/mh1%2E{payload}%2E{mac}"),
        format!("http://127.0.0.1:{port}/MH1%252e{payload}%252E{mac}"),
    ] {
        let call = serde_json::json!({"op": "call", "tool": "fetch-peer-file",
            "input": {"peer": peer, "handle": format!("mh1.{payload}.{mac}")}});
        served.send(&call.to_string());
        let answer = served.line(Duration::from_secs(20)).expect("an answer");
        assert!(
            !answer.contains(payload) && !answer.contains(mac),
            "{answer}"
        );
    }
    for path in [
        format!("/resources/files/mh1%252E{payload}%252E{mac}"),
        format!("/resources/files/x/mh1%2E{payload}.{mac}"),
    ] {
        let (status, _) = get_raw(port, &path);
        assert_eq!(status, 404, "{path}");
    }
    served.close_stdin();
    assert_eq!(
        served.wait(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );
    let trace = std::fs::read_to_string(world.trace()).expect("the trace");
    // Two fetches and two reads. Each fetch addresses the peer under its URL's path (D-20.2),
    // which this capsule does not serve: its 404 leaves no redeem line.
    assert_eq!(trace.lines().count(), 4, "{trace}");
    assert_eq!(
        trace.matches("\"event_type\":\"peer_file_fetch\"").count(),
        2,
        "{trace}"
    );
    assert!(
        !trace.contains(payload) && !trace.contains(mac),
        "a token's payload or MAC reached the trace:\n{trace}"
    );
    assert!(trace.contains("<handle:"), "{trace}");
}

/// End of stdin while `fetch-peer-file` waits on a peer that accepted and says nothing ends the
/// session within the drain deadline (5 s), not the fetch's 60 s, with status 0, and the call
/// is recorded as abandoned.
#[test]
fn end_of_input_during_a_call_ends_the_session_within_the_drain_deadline() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a silent peer");
    let peer_port = silent.local_addr().expect("address").port();
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().take(2).flatten() {
            held.push(stream);
        }
        std::thread::sleep(Duration::from_secs(70));
        drop(held);
    });
    let world = Workdir::new(&format!(
        "name: fetcher\ncapabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{peer_port}\"] }}\n"
    ));
    let mut served = Served::start("", &world.args(&["--console"]), Stderr::Inherit, true);
    let call = serde_json::json!({"op": "call", "tool": "fetch-peer-file", "input": {
        "peer": format!("http://127.0.0.1:{peer_port}"),
        "handle": "mh1.eyJ2IjoxfQ.QUJD"}});
    served.send(&call.to_string());
    std::thread::sleep(Duration::from_millis(500));
    let closed = std::time::Instant::now();
    served.close_stdin();
    let status = served.wait(Duration::from_secs(15));
    let took = closed.elapsed();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "ended {took:?} after end of input"
    );
    assert!(took < Duration::from_secs(12), "{took:?}");
    let lines = world.trace_lines();
    let fetch = lines
        .iter()
        .find(|l| l["event_type"] == "peer_file_fetch")
        .expect("the abandoned call's line");
    assert!(
        fetch["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("abandoned"),
        "{fetch}"
    );
    drop(held);
}

/// The resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// The threads of process `pid`.
fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads")
}

/// Thirty clients that ask for a 20,000-file listing (a 4 MB body) and never read it: the
/// listings are charged to an 8 MiB in-flight budget, so the server's memory grows by a few
/// listings' worth, not thirty, and its threads stay within 2 × cores + 16; the stalled clients
/// are cut at the send deadline, and then a client that reads gets the whole listing.
#[test]
fn stalled_listing_clients_stay_inside_the_budget_and_are_cut() {
    let world = Workdir::new(FILES);
    let name = "n".repeat(150);
    for n in 0..20_000 {
        world.file(&format!("out/d{}/{name}-{n}", n % 50), format!("{n}"));
    }
    // Out of the racy window: the first listing caches, the rest hit.
    std::thread::sleep(Duration::from_millis(2100));
    let args = world.args(&["--inflight-budget", "8388608", "--send-timeout", "3"]);
    let served = Served::start("", &args, Stderr::Inherit, false);
    let port = served.port();
    let (status, whole) = get_raw(port, "/resources/files");
    assert_eq!(status, 200);
    let body_len = whole.len();
    assert!(body_len > 4_000_000, "{body_len}");
    let before = rss(served.child.id());
    let stalled: Vec<std::net::TcpStream> = (0..30)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            stream
                .write_all(b"GET /resources/files HTTP/1.1\r\nhost: x\r\n\r\n")
                .expect("request");
            stream
        })
        .collect();
    let mut most = before;
    let mut most_threads = 0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        most = most.max(rss(served.child.id()));
        most_threads = most_threads.max(threads(served.child.id()));
    }
    // D-4.6.1: waiting costs no thread.
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as u64;
    assert!(
        most_threads <= 2 * cores + 16,
        "{most_threads} threads with 30 stalled listings"
    );
    let grown = most.saturating_sub(before);
    assert!(
        grown < 40 << 20,
        "30 stalled listings grew the server by {} MiB",
        grown >> 20
    );
    // Past the send deadline (3 s) the first stalled ones are cut: their stream ends short.
    std::thread::sleep(Duration::from_secs(4));
    let cut = stalled
        .iter()
        .filter(|stream| {
            let mut stream = *stream;
            stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            let mut got = Vec::new();
            match std::io::Read::read_to_end(&mut stream, &mut got) {
                Ok(_) => got.len() < body_len,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        })
        .count();
    assert!(cut >= 1, "no stalled client was cut");
    // The clients leave; a reader is then served the whole listing.
    drop(stalled);
    let (status, again) = get_raw(port, "/resources/files");
    assert_eq!((status, again.len()), (200, body_len));
}
