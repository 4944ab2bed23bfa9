//! Work for clients that left (D-3.3.1, D-4.6.1), against the binary: a listing or a read whose
//! client left stops, one that had not started never starts, waiting costs no thread, and the
//! request's one trace line says `client_gone`. Thread counts, CPU time and bytes read come
//! from `/proc`, so these run on Linux.

#![allow(clippy::disallowed_methods)] // the test reads /proc and builds its own world with std::fs and std::net

mod support;

use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::http::get_raw;
use support::process::{Served, Stderr, Workdir};

/// One `/proc/<pid>` reading.
struct Usage {
    /// User and system CPU time, in clock ticks (100 a second).
    cpu_ticks: u64,
    threads: u64,
    /// Bytes the process asked `read(2)` and its kin for, sockets and files alike.
    rchar: u64,
}

fn usage(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("comm") + 2..]
        .split(' ')
        .collect();
    let cpu_ticks =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    let field = |file: &str, key: &str| -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).expect(file);
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{key} in /proc/{pid}/{file}"))
    };
    Usage {
        cpu_ticks,
        threads: field("status", "Threads:"),
        rchar: field("io", "rchar:"),
    }
}

/// The trace lines of `event_type`, once at least `count` of them are written (or after 20 s).
fn lines_of(world: &Workdir, event_type: &str, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines: Vec<Value> = world
            .trace_lines()
            .into_iter()
            .filter(|line| line["event_type"] == event_type)
            .collect();
        if lines.len() >= count || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `GET target` and returns the connection, its answer unread.
fn ask(port: u16, target: &str) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .expect("request");
    stream
}

/// Drops `stream` with a reset instead of an orderly close.
fn reset(stream: TcpStream) {
    rustix::net::sockopt::set_socket_linger(&stream, Some(Duration::ZERO)).expect("linger");
    drop(stream);
}

/// The most cores this machine's thread bound allows for (D-4.6.1: 2 × cores + 16).
fn thread_bound() -> u64 {
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as u64;
    2 * cores + 16
}

/// Six clients ask for a listing over a 30 GiB sparse file nobody has hashed yet and leave
/// after half a second: within a second the server stops hashing (its CPU falls to nearly
/// nothing), and each listing leaves one `resource_list` line, `client_gone`. A seventh that
/// resets instead of closing is found gone too.
#[test]
fn a_listing_whose_client_left_stops_hashing_inside_the_file() {
    let world = Workdir::new("name: r\nexports:\n  files: { root: out, mode: read-only }\n");
    world.file("out/small.txt", "small");
    let sparse = world.file("out/sparse.bin", "");
    std::fs::File::options()
        .write(true)
        .open(&sparse)
        .and_then(|file| file.set_len(30 << 30))
        .expect("30 GiB, sparse");
    let served = Served::start("", &world.args(&[]), Stderr::Inherit, false);
    let pid = served.child.id();
    let port = served.port();
    let mut clients: Vec<TcpStream> = (0..6).map(|_| ask(port, "/resources/files")).collect();
    let resetting = ask(port, "/resources/files");
    std::thread::sleep(Duration::from_millis(500));
    reset(resetting);
    clients.clear();
    // A second to notice (D-3.3.1), then the CPU the server spends over two seconds.
    std::thread::sleep(Duration::from_millis(1500));
    let before = usage(pid);
    std::thread::sleep(Duration::from_secs(2));
    let after = usage(pid);
    let spent = after.cpu_ticks - before.cpu_ticks;
    eprintln!("measured: {spent} ticks of CPU in the 2 s after the clients left");
    assert!(
        spent <= 20,
        "{spent} ticks of CPU in 2 s after every client left (hashing went on)"
    );
    let lines = lines_of(&world, "resource_list", 7);
    assert_eq!(lines.len(), 7, "one line per listing: {lines:?}");
    for line in &lines {
        assert_eq!(line["outcome"], "client_gone", "{line}");
        assert!(
            line["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{line}"
        );
        assert_eq!(line["entry_count"], Value::Null, "{line}");
    }
    // The server still lists for a client that stays (it hashes the whole file: give it a
    // small export instead of waiting for 30 GiB).
    std::fs::remove_file(&sparse).expect("remove");
    let (status, body) = get_raw(port, "/resources/files");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("small.txt"), "{body}");
}

/// A client holds the whole in-flight budget by not reading a 64 MiB body; 300 more ask for
/// that file and leave while they wait. Waiting holds no thread (the process stays within
/// 2 × cores + 16 threads), none of the 300 reads starts once the budget comes back (the
/// process reads far less than one more copy of the file), and each leaves one
/// `resource_read` line, `client_gone` with `bytes` 0.
#[test]
fn reads_whose_clients_left_while_waiting_never_start_and_hold_no_thread() {
    let world = Workdir::new(
        "name: r\nexports:\n  files: { root: out, mode: read-only, max_bytes: 100Mi }\n",
    );
    let big: Vec<u8> = (0..64u32 << 20).map(|i| (i % 251) as u8).collect();
    world.file("out/big.bin", &big);
    let budget = (80u64 << 20).to_string();
    let args = world.args(&["--inflight-budget", &budget, "--send-timeout", "4"]);
    let served = Served::start("", &args, Stderr::Inherit, false);
    let pid = served.child.id();
    let port = served.port();
    let holder = ask(port, "/resources/files/big.bin");
    std::thread::sleep(Duration::from_millis(500));
    let start = usage(pid);
    let mut most_threads = start.threads;
    let mut leaving: Vec<TcpStream> = Vec::new();
    for n in 0..300 {
        leaving.push(ask(port, "/resources/files/big.bin"));
        if n % 50 == 49 {
            most_threads = most_threads.max(usage(pid).threads);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    most_threads = most_threads.max(usage(pid).threads);
    leaving.clear();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(200));
        most_threads = most_threads.max(usage(pid).threads);
    }
    // The holder is cut at the send deadline; its bytes come back, and nobody is waiting.
    let lines = lines_of(&world, "resource_read", 301);
    std::thread::sleep(Duration::from_secs(5));
    drop(holder);
    let end = usage(pid);
    assert!(
        most_threads <= thread_bound(),
        "{most_threads} threads with 300 reads queued (bound {})",
        thread_bound()
    );
    let gone: Vec<&Value> = lines
        .iter()
        .filter(|line| line["outcome"] == "client_gone")
        .collect();
    assert_eq!(lines.len(), 301, "one line per request");
    assert!(
        gone.len() >= 300,
        "{} of 300 traced client_gone",
        gone.len()
    );
    for line in &gone {
        assert_eq!(line["bytes"], 0, "{line}");
        assert_eq!(line["path"], "big.bin", "{line}");
    }
    let read = end.rchar - start.rchar;
    eprintln!(
        "measured: {most_threads} threads at most, {} KiB read after the queue formed",
        read >> 10
    );
    assert!(
        read < 64 << 20,
        "{} MiB read after the queue formed: reads of clients that left ran",
        read >> 20
    );
}

/// A client that shuts down its sending side after an HTTP/1.1 request still reads: it is
/// not taken for gone, and gets the whole answer after the interim responses it may be sent.
#[test]
fn a_half_closed_client_is_not_taken_for_gone() {
    let world = Workdir::new("name: r\nexports:\n  files: { root: out, mode: read-only }\n");
    world.file("out/zeros.bin", vec![0u8; 8 << 20]);
    let served = Served::start("", &world.args(&[]), Stderr::Inherit, false);
    let mut stream = ask(served.port(), "/resources/files/zeros.bin");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let raw = support::http::read_to_eof(&mut stream, Duration::from_secs(20));
    let reply = support::http::parse_reply(&raw);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body.len(), 8 << 20);
    let lines = lines_of(&world, "resource_read", 1);
    assert_eq!(lines[0]["outcome"], "ok");
}

/// Six clients ask for a 1 GiB file and leave after 300 ms, while it is being read and
/// hashed: the work stops within a step (the server's CPU falls to nearly nothing a second
/// later), and each read leaves one `resource_read` line, `client_gone`, `bytes` 0.
#[test]
fn a_large_read_whose_client_left_stops_within_a_step() {
    let world = Workdir::new(
        "name: r\nexports:\n  files: { root: out, mode: read-only, max_bytes: 2Gi }\n",
    );
    let sparse = world.file("out/huge.bin", "");
    std::fs::File::options()
        .write(true)
        .open(&sparse)
        .and_then(|file| file.set_len(1 << 30))
        .expect("1 GiB, sparse");
    let budget = (8u64 << 30).to_string();
    let args = world.args(&["--inflight-budget", &budget]);
    let served = Served::start("", &args, Stderr::Inherit, false);
    let pid = served.child.id();
    let mut clients: Vec<TcpStream> = (0..6)
        .map(|_| ask(served.port(), "/resources/files/huge.bin"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    clients.clear();
    std::thread::sleep(Duration::from_millis(1500));
    let before = usage(pid);
    std::thread::sleep(Duration::from_secs(2));
    let spent = usage(pid).cpu_ticks - before.cpu_ticks;
    eprintln!("measured: {spent} ticks of CPU in the 2 s after the clients left");
    assert!(
        spent <= 20,
        "{spent} ticks of CPU in 2 s after every client left (reads went on)"
    );
    let lines = lines_of(&world, "resource_read", 6);
    assert_eq!(lines.len(), 6, "{lines:?}");
    for line in &lines {
        assert_eq!(
            (&line["outcome"], &line["bytes"]),
            (&Value::from("client_gone"), &Value::from(0)),
            "{line}"
        );
    }
}

/// 150 listings asked for at once, none of them read until all are asked: they queue on the
/// async side (the process stays within 2 × cores + 16 threads), and every one is then
/// answered whole.
#[test]
fn queued_listings_hold_no_thread_each() {
    let world = Workdir::new("name: r\nexports:\n  files: { root: out, mode: read-only }\n");
    for n in 0..2_000 {
        world.file(&format!("out/d{}/f{n}", n % 20), format!("{n}"));
    }
    let served = Served::start("", &world.args(&[]), Stderr::Inherit, false);
    let pid = served.child.id();
    let (status, whole) = get_raw(served.port(), "/resources/files");
    assert_eq!(status, 200);
    let mut most_threads = 0;
    let mut queued: Vec<TcpStream> = Vec::new();
    for n in 0..150 {
        queued.push(ask(served.port(), "/resources/files"));
        if n % 10 == 9 {
            most_threads = most_threads.max(usage(pid).threads);
        }
    }
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        most_threads = most_threads.max(usage(pid).threads);
    }
    eprintln!("measured: {most_threads} threads at most with 150 listings queued");
    assert!(
        most_threads <= thread_bound(),
        "{most_threads} threads with 150 listings queued (bound {})",
        thread_bound()
    );
    for mut stream in queued {
        let raw = support::http::read_to_eof(&mut stream, Duration::from_secs(60));
        assert_eq!(
            raw.len(),
            whole.len(),
            "every queued listing answered whole"
        );
    }
}
