#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Black-box tests of `resource-plane serve` (`contract.md`, D-1, D-4, D-6): the real binary is
//! spawned over a temporary workdir and manifest, its ready line is read from stdout, and it is
//! spoken to in raw HTTP/1.1 over `std::net::TcpStream`, through its console on stdin, and with
//! signals. Every spawned process is killed when its guard drops.
//!
//! Each test runs in a [`Workdir`] (`tests/support/process.rs`): one temporary directory
//! holding `wd/` (the workdir), `manifest.yaml`, `tr/` (where traces go) and `tmp/` (the
//! child's `TMPDIR`), so "nothing created" can be checked by comparing a snapshot of the whole
//! directory before and after a refused launch.
//!
//! Runtime: every test takes well under a second except
//! [`slow_stalled_head_is_dropped_within_twelve_seconds`], which waits out the 10 s header read
//! timeout (D-4.6) and is the only slow test.

mod support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, UNIX_EPOCH};
use support::http::{
    Reply, ask, ask_small_window, connect, exchange, get, parse_reply, read_to_eof, send,
};
use support::process::{Exited, Served, Stderr, Workdir, read_trace};
use support::{is_lower_hex, sha256_hex};

/// How long one HTTP exchange may take.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// An operator plane over `out/`; the name has capitals so audience lowercasing shows.
const FILES_MANIFEST: &str = "\
name: Reporter
exports:
  files: { root: out/, mode: read-only, max_bytes: 10Mi }
";

// =============================================================================================
// 1. The ready line.
// =============================================================================================

#[test]
fn ready_line_has_exactly_the_documented_keys_and_stdout_holds_nothing_else() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start(&world, world.args(&[]));
    let ready = server
        .ready
        .as_object()
        .expect("ready line is an object")
        .clone();
    let keys: BTreeSet<&str> = ready.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "audience",
            "confinement",
            "event",
            "planes",
            "session_id",
            "tools",
            "trace",
            "url"
        ]),
        "ready line keys: {}",
        server.ready
    );
    assert_eq!(ready["event"], "listening");
    assert_eq!(ready["planes"], serde_json::json!(["files"]));
    assert_eq!(ready["tools"], serde_json::json!([]));
    let confinement = ready["confinement"]
        .as_object()
        .expect("confinement is an object");
    assert_eq!(
        confinement.keys().map(String::as_str).collect::<Vec<_>>(),
        ["landlock_abi", "status"]
    );
    assert!(confinement["landlock_abi"].is_u64());
    assert!(["full", "partial", "none"].contains(&confinement["status"].as_str().unwrap_or("")));
    let port = server.port();
    assert_eq!(
        server.ready_str("audience"),
        format!("reporter@127.0.0.1:{port}"),
        "audience: lowercased name @ bound address"
    );
    let session = server.ready_str("session_id").to_owned();
    assert!(
        session
            .strip_prefix("ses_")
            .is_some_and(|hex| is_lower_hex(hex, 32)),
        "session_id {session:?} is not ses_ + 32 lowercase hex"
    );
    assert_eq!(
        server.ready_str("trace"),
        world.trace().display().to_string(),
        "--trace is the trace reported"
    );

    // The url is live, and the trace named is the one written.
    assert_eq!(get(port, "/resources/files").status, 200);
    let lines = read_trace(&world.trace());
    assert_eq!(lines.len(), 1, "one request, one trace line: {lines:?}");
    assert_eq!(lines[0]["session_id"], session.as_str());

    server.stop_with(rustix::process::Signal::TERM, "SIGTERM");
    assert_eq!(
        server.remaining_stdout(),
        Vec::<String>::new(),
        "nothing but the ready line may reach stdout"
    );
}

#[test]
fn url_flag_changes_url_and_audience() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&["--url", "http://Example.test:8080"]));
    assert_eq!(server.ready_str("url"), "http://Example.test:8080");
    assert_eq!(server.ready_str("audience"), "reporter@example.test:8080");
    drop(server);

    // `--listen` takes a host name the system resolves, as an operator would write it.
    let server = start(&world, world.args(&["--listen", "localhost:0"]));
    assert!(
        server.ready_str("url").starts_with("http://127.0.0.1:"),
        "{}",
        server.ready_str("url")
    );
    assert_still_serving(server.port(), "a listener named by host");
    drop(server);

    // The port is always explicit in an audience (D-8): 80 for http when absent.
    let server = start(&world, world.args(&["--url", "http://Example.test"]));
    assert_eq!(server.ready_str("url"), "http://Example.test");
    assert_eq!(server.ready_str("audience"), "reporter@example.test:80");
}

#[test]
fn default_trace_is_a_per_session_file_outside_the_workdir() {
    let world = with_files(FILES_MANIFEST);
    let first = start(&world, world.args_without_trace(&[]));
    let second = start(&world, world.args_without_trace(&[]));
    let mut created = Vec::new();
    for server in [&first, &second] {
        let trace = PathBuf::from(server.ready_str("trace"));
        created.push(trace.clone());
        assert!(
            trace.is_absolute(),
            "default trace {trace:?} is not absolute"
        );
        let canonical = std::fs::canonicalize(&trace)
            .unwrap_or_else(|e| panic!("default trace {trace:?} does not exist: {e}"));
        assert!(
            !canonical.starts_with(world.path()),
            "default trace {canonical:?} lies inside the workdir"
        );
        assert_eq!(get(server.port(), "/resources/files").status, 200);
        let lines = read_trace(&trace);
        assert_eq!(lines.len(), 1, "default trace {trace:?}: {lines:?}");
        assert_eq!(lines[0]["session_id"], server.ready_str("session_id"));
    }
    assert_ne!(
        created[0], created[1],
        "two sessions at once must not share a default trace file"
    );
    drop((first, second));
    for trace in created {
        if !trace.starts_with(world.root()) {
            let _ = std::fs::remove_file(trace);
        }
    }
}

// =============================================================================================
// 2. Launch refusals (status 2, `error[CODE]:`, `  hint:`, nothing created).
// =============================================================================================

#[test]
fn malformed_manifests_refuse_with_e_man_003() {
    let cases = [
        (
            "max_bytes 10MB",
            "name: r\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 10MB }\n",
        ),
        (
            "max_bytes 0",
            "name: r\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 0 }\n",
        ),
        (
            "missing name",
            "exports:\n  files: { root: out/, mode: read-only }\n",
        ),
        (
            "blank name",
            "name: '  '\nexports:\n  files: { root: out/, mode: read-only }\n",
        ),
        (
            "mode read-write",
            "name: r\nexports:\n  files: { root: out/, mode: read-write }\n",
        ),
        (
            "missing mode",
            "name: r\nexports:\n  files: { root: out/ }\n",
        ),
        (
            "root with ..",
            "name: r\nexports:\n  files: { root: ../out, mode: read-only }\n",
        ),
        (
            "absolute root",
            "name: r\nexports:\n  files: { root: /out, mode: read-only }\n",
        ),
        (
            "allow entry with a path",
            "name: r\ncapabilities:\n  peer_fetch: { allow: [\"http://host/path\"] }\n",
        ),
        (
            "empty allow list",
            "name: r\ncapabilities:\n  network: { allow: [] }\n",
        ),
        (
            "max_ttl 1h30m",
            "name: r\nexports:\n  peer_files: { root: out/, max_ttl: 1h30m }\n",
        ),
        (
            "after_task forever",
            "name: r\nlifecycle: { after_task: forever }\n",
        ),
        ("not a mapping", "- just\n- a list\n"),
        ("not YAML", "name: [unclosed\n"),
        // The name heads the audience, an HTTP header value: no control character fits.
        ("name with a line break", "name: \"a\\nb\"\n"),
    ];
    for (case, manifest) in cases {
        let world = Workdir::new(manifest);
        let trace = world.trace();
        assert_refused(case, &world, &world.args(&[]), "E-MAN-003", &trace);
    }

    // With the default trace path, a refused launch creates no trace directory either.
    let world = Workdir::new(cases[0].1);
    let stderr = assert_refused(
        "max_bytes 10MB, default trace",
        &world,
        &world.args_without_trace(&[]),
        "E-MAN-003",
        &world.trace(),
    );
    assert!(
        stderr.contains("exports.files.max_bytes"),
        "E-MAN-003 names the field (D-1.7):\n{stderr}"
    );
}

#[test]
fn persistent_capsule_without_a_short_ttl_refuses_with_e_cap_008() {
    let cases = [
        (
            "sleep without max_ttl",
            "name: r\nexports:\n  peer_files: { root: out/ }\nlifecycle: { after_task: sleep }\n",
        ),
        (
            "sleep with max_ttl 901",
            "name: r\nexports:\n  peer_files: { root: out/, max_ttl: 901 }\nlifecycle: { after_task: sleep }\n",
        ),
        (
            "sleep with max_ttl 16m",
            "name: r\nexports:\n  peer_files: { root: out/, max_ttl: 16m }\nlifecycle: { after_task: sleep }\n",
        ),
        (
            // E-CAP-008 is checked before E-CAP-007 (D-1.9).
            "sleep without max_ttl and an escaping root",
            "name: r\nexports:\n  peer_files: { root: esc/ }\nlifecycle: { after_task: sleep }\n",
        ),
    ];
    for (case, manifest) in cases {
        let world = Workdir::new(manifest);
        world.symlink("../tr", "wd/esc");
        let stderr = assert_refused(case, &world, &world.args(&[]), "E-CAP-008", &world.trace());
        for needle in [
            "exports.peer_files.max_ttl",
            "lifecycle.after_task: sleep",
            "900s",
            "durability",
        ] {
            assert!(
                stderr.contains(needle),
                "{case}: E-CAP-008 must mention {needle:?} (D-1.8):\n{stderr}"
            );
        }
    }

    // 900 s exactly is allowed.
    let world = Workdir::new(
        "name: r\nexports:\n  peer_files: { root: out/, max_ttl: 900 }\nlifecycle: { after_task: sleep }\n",
    );
    let server = start(&world, world.args(&[]));
    assert_eq!(server.ready["event"], "listening");
}

#[test]
fn escaping_export_roots_refuse_with_e_cap_007() {
    let files = "name: r\nexports:\n  files: { root: out, mode: read-only }\n";
    let peer = "name: r\nexports:\n  peer_files: { root: out }\n";
    // (case, manifest, link target of wd/out, field the message must name)
    let cases = [
        (
            "relative symlink to ../outside",
            files,
            "../outside",
            "exports.files.root",
        ),
        (
            "dangling relative symlink ../nowhere/x",
            files,
            "../nowhere/x",
            "exports.files.root",
        ),
        (
            "peer root: relative symlink out",
            peer,
            "../outside",
            "exports.peer_files.root",
        ),
    ];
    for (case, manifest, target, field) in cases {
        let world = Workdir::new(manifest);
        std::fs::create_dir(world.at("outside")).expect("outside dir");
        world.symlink(target, "wd/out");
        let stderr = assert_refused(case, &world, &world.args(&[]), "E-CAP-007", &world.trace());
        assert!(
            stderr.contains(field),
            "{case}: the message names {field}:\n{stderr}"
        );
    }

    // An absolute symlink refuses even when it points inside the workdir [stronger].
    let world = Workdir::new(files);
    std::fs::create_dir(world.path().join("real")).expect("real dir");
    let target = world.path().join("real").display().to_string();
    world.symlink(&target, "wd/out");
    assert_refused(
        "absolute symlink pointing inside the workdir",
        &world,
        &world.args(&[]),
        "E-CAP-007",
        &world.trace(),
    );

    // A relative symlink staying inside, and a missing root, are accepted.
    let world = Workdir::new(files);
    world.file("real/a.txt", b"x");
    world.symlink("real", "wd/out");
    let server = start(&world, world.args(&[]));
    let listing = get(server.port(), "/resources/files");
    assert_eq!(listing.status, 200, "{}", listing.text());
    assert_eq!(listing.json()["entries"][0]["path"], "a.txt");
    drop(server);
    let world = Workdir::new(files);
    let server = start(&world, world.args(&[]));
    let listing = get(server.port(), "/resources/files");
    assert_eq!(listing.status, 200, "missing root: {}", listing.text());
    assert_eq!(listing.json()["entries"], serde_json::json!([]));
}

#[test]
fn trace_inside_the_workdir_or_a_missing_workdir_refuses_with_e_cli_001() {
    let world = Workdir::new(FILES_MANIFEST);
    std::fs::create_dir(world.path().join("out")).expect("out");
    let inside = world.path().join("trace.jsonl");
    assert_refused(
        "--trace inside the workdir",
        &world,
        &world.args_without_trace(&["--trace", &inside.display().to_string()]),
        "E-CLI-001",
        &inside,
    );
    let dotted = world.path().join("out").join("..").join("t.jsonl");
    assert_refused(
        "--trace inside the workdir through ..",
        &world,
        &world.args_without_trace(&["--trace", &dotted.display().to_string()]),
        "E-CLI-001",
        &world.path().join("t.jsonl"),
    );
    // A trace path that is a symlink into the workdir must not write there either.
    world.symlink("../wd/linked.jsonl", "tr/link.jsonl");
    let link = world.at("tr").join("link.jsonl");
    assert_refused(
        "--trace a symlink into the workdir",
        &world,
        &world.args_without_trace(&["--trace", &link.display().to_string()]),
        "E-CLI-001",
        &world.path().join("linked.jsonl"),
    );

    // A trace file hard-linked into the workdir is the same file: refused, left untouched.
    std::fs::write(world.path().join("out").join("t.jsonl"), b"").expect("inner file");
    let linked = world.at("tr").join("hard.jsonl");
    std::fs::hard_link(world.path().join("out").join("t.jsonl"), &linked).expect("hard link");
    assert_refused(
        "--trace hard-linked into the workdir",
        &world,
        &world.args_without_trace(&["--trace", &linked.display().to_string()]),
        "E-CLI-001",
        &world.trace(),
    );
    std::fs::remove_file(&linked).expect("unlink");

    // The default trace directory (`$TMPDIR/resource-plane-traces`) is itself the workdir.
    let traces = world.tmpdir().join("resource-plane-traces");
    std::fs::create_dir_all(traces.join("out")).expect("workdir named like the trace dir");
    let mut args = world.args_without_trace(&[]);
    args[2] = traces.display().to_string();
    assert_refused(
        "default trace directory is the workdir",
        &world,
        &args,
        "E-CLI-001",
        &world.trace(),
    );
    // ... or lies beneath it.
    let mut args = world.args_without_trace(&[]);
    args[2] = world.tmpdir().display().to_string();
    std::fs::create_dir_all(world.tmpdir().join("out")).expect("out under TMPDIR");
    assert_refused(
        "default trace directory beneath the workdir",
        &world,
        &args,
        "E-CLI-001",
        &world.trace(),
    );

    // A FIFO would hang the open (no reader), a directory is no trace: both refused at once.
    let fifo = world.at("tr").join("fifo.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let started = Instant::now();
    let stderr = assert_refused(
        "--trace a FIFO",
        &world,
        &world.args_without_trace(&["--trace", &fifo.display().to_string()]),
        "E-CLI-001",
        &world.trace(),
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{stderr}");
    std::fs::remove_file(&fifo).expect("remove the FIFO");
    let dir = world.at("tr");
    let stderr = assert_refused(
        "--trace a directory",
        &world,
        &world.args_without_trace(&["--trace", &dir.display().to_string()]),
        "E-CLI-001",
        &world.trace(),
    );
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");

    let missing = world.at("missing");
    let mut args = world.args(&[]);
    args[2] = missing.display().to_string();
    assert_refused(
        "missing workdir",
        &world,
        &args,
        "E-CLI-001",
        &world.trace(),
    );
    assert!(!missing.exists(), "serve never creates the workdir");

    let file = world.at("tr").join("not-a-dir");
    std::fs::write(&file, b"").expect("file");
    args[2] = file.display().to_string();
    assert_refused(
        "workdir is a file",
        &world,
        &args,
        "E-CLI-001",
        &world.trace(),
    );
}

/// `--listen unix:PATH` (D-20.1): the operator plane over a socket file, the ready line's url
/// the advertised one, the same answers as over TCP, and, unconfined, the file gone after the
/// session. (Under the Landlock wall the process may not unlink outside its workdir: the file
/// stays, and the next launch replaces it as a stale socket, as the next test shows.)
#[test]
fn a_unix_socket_listener_serves_the_operator_plane_and_is_removed_at_the_end() {
    let world = with_files(FILES_MANIFEST);
    let socket = world.root().join("op.sock");
    let listen = format!("unix:{}", socket.display());
    let mut server = start(
        &world,
        world.args(&[
            "--listen",
            &listen,
            "--url",
            "http://capsule.test:8080",
            "--no-confine",
        ]),
    );
    assert_eq!(server.ready_str("url"), "http://capsule.test:8080");
    assert_eq!(server.ready_str("audience"), "reporter@capsule.test:8080");
    let answer = over_unix(
        &socket,
        b"GET /resources/files/a.txt HTTP/1.1\r\nhost: x\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nhello\n"), "{answer}");
    // The listener's hardening holds on a socket file too: the version gate answers 505.
    let answer = over_unix(&socket, b"GET / HTTP/1.2\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 505 "), "{answer}");
    let read = world
        .trace_lines()
        .into_iter()
        .find(|line| line["event_type"] == "resource_read")
        .expect("a resource_read line");
    assert_eq!(read["outcome"], "ok");
    server.stop_with(rustix::process::Signal::TERM, "SIGTERM");
    assert!(!socket.exists(), "the socket file outlived the session");
}

/// `--listen unix:PATH` refuses, creating nothing and removing nothing: without `--url` (peers
/// could not reach the capsule), over a file that is not a socket, and over a socket another
/// process listens on. A socket file nobody listens on (a crashed session's) is replaced.
#[test]
fn a_unix_socket_listener_refuses_without_url_or_over_another_file_and_replaces_a_stale_one() {
    let world = with_files(FILES_MANIFEST);
    let socket = world.root().join("op.sock");
    let listen = format!("unix:{}", socket.display());
    let stderr =
        assert_command_line_refused("no --url", &world, &world.args(&["--listen", &listen]));
    assert!(stderr.contains("no --url"), "{stderr}");
    assert!(!socket.exists());
    let with_url = || world.args(&["--listen", &listen, "--url", "http://capsule.test:8080"]);

    std::fs::write(&socket, b"not a socket").unwrap();
    let stderr = assert_command_line_refused("a regular file", &world, &with_url());
    assert!(stderr.contains("not a socket"), "{stderr}");
    assert_eq!(std::fs::read(&socket).unwrap(), b"not a socket");
    std::fs::remove_file(&socket).unwrap();

    let live = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let stderr = assert_command_line_refused("a live socket", &world, &with_url());
    assert!(stderr.contains("listens on that socket"), "{stderr}");
    drop(live); // the file stays: a stale socket now

    let server = start(&world, with_url());
    let answer = over_unix(&socket, b"GET /resources/files HTTP/1.1\r\nhost: x\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    server.stop();
    // Confined, the session could not unlink its socket: the next launch replaces it.
    let again = start(&world, with_url());
    let answer = over_unix(&socket, b"GET /resources/files HTTP/1.1\r\nhost: x\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    again.stop();
    assert_command_line_refused("an empty path", &world, &world.args(&["--listen", "unix:"]));
}

/// Sends `request` on a fresh connection to the socket file and reads the answer to its end.
fn over_unix(socket: &Path, request: &[u8]) -> String {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("a connection");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("the answer");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A launch refused after the listener is bound must still have created nothing ("a refused
/// launch … exits with status 2, having created nothing"). `--url` that cannot form an audience
/// is a command-line error (`E-CLI-001`), checked before anything is created.
#[test]
fn unusable_advertised_url_refuses_and_creates_no_trace() {
    let world = with_files(FILES_MANIFEST);
    assert_refused(
        "--url not a url, --trace given",
        &world,
        &world.args(&["--url", "not a url"]),
        "E-CLI-001",
        &world.trace(),
    );
    assert_refused(
        "--url ftp://x, default trace",
        &world,
        &world.args_without_trace(&["--url", "ftp://x"]),
        "E-CLI-001",
        &world.trace(),
    );
}

/// `--shards` (an extension of the contract) takes 1 to 256 runtimes; anything else is a
/// command-line error before anything is created, and every accepted count serves alike.
#[test]
fn shard_counts_outside_1_to_256_refuse_and_any_accepted_count_serves() {
    let world = with_files(FILES_MANIFEST);
    for bad in ["0", "257", "-1", "two", ""] {
        let stderr = assert_command_line_refused(
            &format!("--shards {bad:?}"),
            &world,
            &world.args(&["--shards", bad]),
        );
        // clap reads `-1` as an unknown flag, not as the value of --shards.
        assert!(
            bad == "-1" || (stderr.contains("--shards <SHARDS>") && stderr.contains("1 to 256")),
            "{stderr}"
        );
    }
    for good in ["1", "3"] {
        let server = start(&world, world.args(&["--shards", good]));
        assert_eq!(server.ready["event"], "listening");
        for _ in 0..8 {
            assert_still_serving(server.port(), &format!("--shards {good}"));
        }
    }
}

#[test]
fn unknown_manifest_keys_only_warn_and_the_launch_proceeds() {
    let world = with_files(
        "\
name: Reporter
colour: blue
exports:
  files: { root: out/, mode: read-only, extra: 2 }
",
    );
    let server = start(&world, world.args(&[]));
    assert_eq!(server.ready["event"], "listening");
    let stderr = server.stderr();
    for key in ["colour", "exports.files.extra"] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("WARN") && l.contains(&format!("unknown key `{key}`"))),
            "unknown key {key} must be warned about on stderr:\n{stderr}"
        );
    }
    assert!(
        !stderr.contains("error["),
        "a warning is not an error:\n{stderr}"
    );
    assert_still_serving(server.port(), "a warned launch");
}

// =============================================================================================
// 3. HTTP over the socket.
// =============================================================================================

#[test]
fn listing_and_read_carry_exactly_the_spec_headers() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&["--containment", "sealed"]));
    let port = server.port();
    let out = world.path().join("out");

    let listing = get(port, "/resources/files");
    assert_eq!(listing.status, 200, "{}", listing.text());
    assert_eq!(listing.version, "HTTP/1.1");
    assert_eq!(
        listing.names(),
        BTreeSet::from([
            "connection",
            "content-length",
            "content-type",
            "date",
            "etag",
            "x-murmur-containment",
            "x-murmur-export-root",
            "x-murmur-generation",
        ]),
        "listing headers: {listing:?}"
    );
    listing.assert_close_and_date("listing");
    assert_eq!(listing.header("content-type"), Some("application/json"));
    assert_eq!(listing.header("x-murmur-generation"), Some("0"));
    assert_eq!(listing.header("x-murmur-containment"), Some("sealed"));
    assert_eq!(listing.header("x-murmur-export-root"), Some("out/"));
    assert_eq!(
        listing.header("content-length"),
        Some(listing.body.len().to_string().as_str())
    );
    let entry = |rel: &str, bytes: &[u8]| {
        format!(
            r#"{{"path":"{rel}","size_bytes":{},"mtime_ms":{},"sha256":"{}"}}"#,
            bytes.len(),
            mtime_ms(&out.join(rel)),
            sha256_hex(bytes)
        )
    };
    let expected = format!(
        r#"{{"root":"out/","mode":"read-only","max_bytes":10485760,"generation":0,"containment_achieved":"sealed","entries":[{},{},{}]}}"#,
        entry(".hidden", b"h"),
        entry("a.txt", b"hello\n"),
        entry("sub/b.txt", b"bee"),
    );
    assert_eq!(
        listing.text(),
        expected,
        "listing body (D-3.5 order, compact)"
    );

    let read = get(port, "/resources/files/a.txt");
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(
        read.names(),
        BTreeSet::from([
            "connection",
            "content-length",
            "content-type",
            "date",
            "etag",
            "x-murmur-containment",
            "x-murmur-export-root",
            "x-murmur-generation",
            "x-murmur-mtime-ms",
        ]),
        "read headers: {read:?}"
    );
    read.assert_close_and_date("read");
    assert_eq!(read.body, b"hello\n");
    assert_eq!(
        read.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(
        read.header("etag"),
        Some(format!("\"sha256:{}\"", sha256_hex(b"hello\n")).as_str())
    );
    assert_eq!(read.header("content-length"), Some("6"));
    assert_eq!(
        read.header("x-murmur-mtime-ms"),
        Some(mtime_ms(&out.join("a.txt")).to_string().as_str())
    );
    assert_eq!(read.header("x-murmur-generation"), Some("0"));
    assert_eq!(read.header("x-murmur-containment"), Some("sealed"));
    assert_eq!(read.header("x-murmur-export-root"), Some("out/"));

    // HTTP/1.0 is served too, and closed the same way (D-4.1).
    let old = exchange(
        port,
        b"GET /resources/files/sub/b.txt HTTP/1.0\r\n\r\n",
        IO_TIMEOUT,
    );
    assert_eq!(old.status, 200, "{}", old.text());
    assert_eq!(old.body, b"bee");
    old.assert_close_and_date("HTTP/1.0 read");
}

#[test]
fn every_response_closes_after_exactly_one_response() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let requests: [(&str, &[u8], u16); 8] = [
        (
            "listing",
            b"GET /resources/files HTTP/1.1\r\nhost: x\r\n\r\n",
            200,
        ),
        (
            "read",
            b"GET /resources/files/a.txt HTTP/1.1\r\nhost: x\r\n\r\n",
            200,
        ),
        (
            "missing",
            b"GET /resources/files/nope HTTP/1.1\r\nhost: x\r\n\r\n",
            404,
        ),
        (
            "escape",
            b"GET /resources/files/../x HTTP/1.1\r\nhost: x\r\n\r\n",
            403,
        ),
        (
            "post",
            b"POST /resources/files HTTP/1.1\r\nhost: x\r\n\r\n",
            405,
        ),
        (
            "agent card",
            b"GET /.well-known/agent-card.json HTTP/1.1\r\nhost: x\r\n\r\n",
            200,
        ),
        ("foreign", b"GET / HTTP/1.1\r\nhost: x\r\n\r\n", 404),
        ("unparseable", b"GET\r\n\r\n", 400),
    ];
    for (what, request, status) in requests {
        let reply = exchange(port, request, IO_TIMEOUT);
        assert_eq!(reply.status, status, "{what}: {}", reply.text());
        reply.assert_close_and_date(what);
        if let Some(length) = reply.header("content-length") {
            assert_eq!(
                length,
                reply.body.len().to_string(),
                "{what}: nothing may follow the one response"
            );
        }
    }

    // Two pipelined requests, even with keep-alive asked for: one response, then close.
    let pipelined = exchange(
        port,
        b"GET /resources/files/a.txt HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\n\r\n\
          GET /resources/files/sub/b.txt HTTP/1.1\r\nhost: x\r\n\r\n",
        IO_TIMEOUT,
    );
    assert_eq!(pipelined.status, 200);
    assert_eq!(
        pipelined.body,
        b"hello\n",
        "only the first pipelined request is answered: {:?}",
        pipelined.text()
    );
    pipelined.assert_close_and_date("pipelined");
}

#[test]
fn head_on_a_file_path_is_405_with_the_same_headers_and_no_body() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let head = send(port, "HEAD", "/resources/files/a.txt");
    let post = send(port, "POST", "/resources/files/a.txt");
    post.assert_refusal(405, "method_not_allowed", "POST");
    assert_eq!(head.status, 405, "HEAD: {head:?}");
    assert_eq!(head.header("allow"), Some("GET"));
    assert_eq!(post.header("allow"), Some("GET"));
    assert!(head.body.is_empty(), "HEAD has no body: {:?}", head.text());
    assert_eq!(
        head.header("content-length"),
        Some(post.body.len().to_string().as_str()),
        "HEAD's content-length is that of the GET-shaped 405 body"
    );
    head.assert_close_and_date("HEAD");
    let without_date = |r: &Reply| -> Vec<(String, String)> {
        let mut h: Vec<_> = r
            .headers
            .iter()
            .filter(|(n, _)| n != "date")
            .cloned()
            .collect();
        h.sort();
        h
    };
    assert_eq!(
        without_date(&head),
        without_date(&post),
        "HEAD gets the same status and headers as any other non-GET (D-4.3)"
    );
}

#[test]
fn request_heads_over_16_kib_are_431_and_smaller_ones_are_served() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let with_padding = |n: usize| {
        let mut req = b"GET /resources/files/a.txt HTTP/1.1\r\nhost: x\r\nx-pad: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', n));
        req.extend_from_slice(b"\r\n\r\n");
        req
    };
    let small = exchange(port, &with_padding(12 * 1024), IO_TIMEOUT);
    assert_eq!(
        small.status,
        200,
        "a 12 KiB head is served: {}",
        small.text()
    );
    assert_eq!(small.body, b"hello\n");

    let big = exchange(port, &with_padding(17 * 1024), IO_TIMEOUT);
    assert_eq!(big.status, 431, "a 17 KiB head: {big:?}");
    big.assert_close_and_date("431");
    assert_still_serving(port, "a 431");
}

#[test]
fn malformed_requests_get_4xx_and_the_server_keeps_serving() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let cases: [(&str, &[u8]); 4] = [
        ("garbage bytes", b"\x00\x01\r\n\r\n"),
        ("bare method", b"GET\r\n\r\n"),
        (
            "target with spaces",
            b"GET /resources/files/a b c HTTP/1.1\r\nhost: x\r\n\r\n",
        ),
        (
            "header without colon",
            b"GET /resources/files HTTP/1.1\r\nno colon here\r\n\r\n",
        ),
    ];
    for (case, request) in cases {
        let reply = exchange(port, request, IO_TIMEOUT);
        assert!(
            (400..500).contains(&reply.status),
            "{case}: expected a 4xx, got {reply:?}"
        );
        reply.assert_close_and_date(case);
        assert_still_serving(port, case);
    }
    // A version other than HTTP/1.0 and 1.1, the HTTP/2 preface included, is 505 (D-4.1, D-4.5).
    let versions: [(&str, &[u8]); 4] = [
        ("HTTP/9.9", b"GET / HTTP/9.9\r\nhost: x\r\n\r\n"),
        (
            "HTTP/1.2",
            b"GET /resources/files HTTP/1.2\r\nhost: x\r\n\r\n",
        ),
        (
            "HTTP/2 over HTTP/1",
            b"GET /resources/files HTTP/2.0\r\nhost: x\r\n\r\n",
        ),
        ("the HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    ];
    for (case, request) in versions {
        let reply = exchange(port, request, IO_TIMEOUT);
        assert_eq!(reply.status, 505, "{case}: {reply:?}");
        reply.assert_close_and_date(case);
        assert_still_serving(port, case);
    }
    // The same, with the request line arriving in pieces (hyper's parser alone would answer
    // 400 as soon as it saw the version's digit), with bare `\n` line ends, after an empty line.
    let pieces: [(&str, &[&[u8]]); 5] = [
        (
            "split before the line end",
            &[b"GET /resources/files HTTP/1.2", b"\r\nhost: x\r\n\r\n"],
        ),
        (
            "split inside the version",
            &[b"GET / HTTP/2", b".0\r\n\r\n"],
        ),
        (
            "the preface in two pieces",
            &[b"PRI * HTTP/2.0", b"\r\n\r\nSM\r\n\r\n"],
        ),
        ("bare line feeds", &[b"GET / HTTP/1.2\nhost: x\n\n"]),
        ("after an empty line", &[b"\r\nGET / HTTP/1.2\r\n\r\n"]),
    ];
    for (case, chunks) in pieces {
        let mut stream = connect(port);
        for chunk in chunks {
            stream.write_all(chunk).expect("send a piece");
            std::thread::sleep(Duration::from_millis(100));
        }
        let reply = parse_reply(&read_to_eof(&mut stream, Duration::from_secs(5)));
        assert_eq!(reply.status, 505, "{case}: {reply:?}");
        reply.assert_close_and_date(case);
        assert_still_serving(port, case);
    }
    // A first line naming HTTP/1.1 is served even when a later header mentions another version.
    let mut stream = connect(port);
    stream
        .write_all(b"GET /resources/files HTTP/1.1\nx-note: HTTP/2\r\nhost: x\r\n\r\n")
        .expect("send");
    let reply = parse_reply(&read_to_eof(&mut stream, Duration::from_secs(5)));
    assert_eq!(reply.status, 200, "{reply:?}");
    // Nothing unparseable reached the trace: only the listings after each case did.
    let lines = read_trace(&world.trace());
    assert_eq!(
        lines.len(),
        cases.len() + versions.len() + pieces.len() + 1,
        "trace: {lines:?}"
    );
    assert!(lines.iter().all(|l| l["event_type"] == "resource_list"));
}

/// What hyper alone would get wrong, answered as the line deserves (D-4.5, D-4.6, D-2.2): a
/// wrong version on a long line is still 505; a raw `#` (no request target has a fragment) is
/// a name byte, never a cut that serves the file before it; bytes no request line may hold get
/// 400 at once, not at the 10 s head timeout; and a small head with many header lines is
/// served.
#[test]
fn heads_hyper_alone_would_misjudge_get_the_answer_their_line_deserves() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();

    let long = format!("GET /resources/files/{} HTTP/2.0\r\n\r\n", "a".repeat(9000));
    let reply = exchange(port, long.as_bytes(), IO_TIMEOUT);
    assert_eq!(
        reply.status, 505,
        "a 9,000-byte line naming HTTP/2.0: {reply:?}"
    );

    // A raw `#` is an ordinary name byte (escaped by the gate), never a fragment cut off:
    // `a.txt#frag` is not `a.txt`, and the request is routed and traced like any other.
    for (target, status, path) in [
        ("/resources/files/a.txt#frag", 404, "a.txt#frag"),
        ("/resources/files/a.txt#", 404, "a.txt#"),
        ("/resources/files/#/../a.txt", 403, "#/../a.txt"),
    ] {
        let reply = get(port, target);
        assert_eq!(reply.status, status, "{target}: {}", reply.text());
        reply.assert_close_and_date(target);
        assert!(reply.header("x-murmur-generation").is_some(), "{target}");
        let lines = read_trace(&world.trace());
        assert_eq!(
            lines.last().expect("a trace line")["path"],
            path,
            "{target}"
        );
    }
    std::fs::write(world.path().join("out").join("odd#name"), b"hash").expect("odd name");
    let literal = get(port, "/resources/files/odd#name");
    assert_eq!(
        (literal.status, literal.body.as_slice()),
        (200, &b"hash"[..])
    );
    std::fs::remove_file(world.path().join("out").join("odd#name")).expect("remove");
    let encoded = get(port, "/resources/files/a.txt%23frag");
    assert_eq!(
        encoded.status, 404,
        "an encoded # names the same file: {encoded:?}"
    );

    // A TLS ClientHello's first bytes, with no line end, on a connection left open.
    let mut stream = connect(port);
    stream
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03AAAAAAAAAAAAAAAA")
        .expect("send");
    let started = Instant::now();
    let reply = parse_reply(&read_to_eof(&mut stream, Duration::from_secs(9)));
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at once, not at the head timeout: {:?}",
        started.elapsed()
    );

    // Around hyper's own table of 100 (the listener's lean shape) and far beyond it, sent whole
    // and with the head's end in a later read than its start (the wide shape for any count).
    for count in [98, 99, 100, 101, 500, 1000] {
        let mut head = b"GET /resources/files HTTP/1.1\r\nhost: x\r\n".to_vec();
        for i in 0..count {
            head.extend_from_slice(format!("x-{i}: y\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        assert!(head.len() < 16 * 1024);
        let reply = exchange(port, &head, IO_TIMEOUT);
        assert_eq!(
            reply.status,
            200,
            "{} header lines in {} bytes",
            count + 1,
            head.len()
        );
        let mut stream = connect(port);
        let (start, end) = head.split_at(head.len() / 2);
        stream.write_all(start).expect("first half");
        std::thread::sleep(Duration::from_millis(50));
        stream.write_all(end).expect("second half");
        let reply = parse_reply(&read_to_eof(&mut stream, IO_TIMEOUT));
        assert_eq!(reply.status, 200, "{} header lines in two reads", count + 1);
    }
    assert_still_serving(port, "the misjudged heads");
    // Every request that reached routing left one line: three `#` reads, the literal and the
    // encoded one, twelve listings (six heads, each sent whole and in two reads) and the last
    // check; the 505 and the 400 none.
    let lines = read_trace(&world.trace());
    assert_eq!(lines.len(), 3 + 2 + 12 + 1, "trace: {lines:?}");
}

/// An agent's tree thousands of levels deep (any agent can build one in its workdir) used to
/// overflow the listener's stack on a listing and abort the whole process. The listing answers
/// 200, lists what a read can reach (paths up to `PATH_MAX`), and the server keeps serving.
#[test]
fn a_listing_of_a_thousands_deep_tree_answers_and_the_server_survives() {
    use rustix::fs::{Mode, OFlags};
    let world = with_files(FILES_MANIFEST);
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd =
        rustix::fs::open(world.path().join("out"), dir_flags, Mode::empty()).expect("open out");
    for depth in 1..=3000 {
        rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o755)).expect("mkdirat");
        fd = rustix::fs::openat(&fd, "d", dir_flags, Mode::empty()).expect("descend");
        if depth == 1000 {
            let file = rustix::fs::openat(
                &fd,
                "deep.txt",
                OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .expect("create the deep file");
            rustix::io::write(&file, b"deep").expect("write");
        }
    }
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let reply = get(port, "/resources/files");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let deep = format!("{}deep.txt", "d/".repeat(1000));
    let paths: Vec<String> = reply.json()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["path"].as_str().expect("path").to_owned())
        .collect();
    assert_eq!(paths, [".hidden", "a.txt", deep.as_str(), "sub/b.txt"]);
    let read = get(port, &format!("/resources/files/{deep}"));
    assert_eq!((read.status, read.body.as_slice()), (200, &b"deep"[..]));
}

/// `serve` raises its soft descriptor limit to the hard one: connections, reads and the
/// fallback path walk need descriptors well past a 1,024 default.
#[test]
fn serve_raises_its_soft_descriptor_limit_to_the_hard_one() {
    let world = with_files(FILES_MANIFEST);
    let server = start_in_shell(&world, "ulimit -Sn 256", world.args(&[]), false);
    let limits =
        std::fs::read_to_string(format!("/proc/{}/limits", server.child.id())).expect("limits");
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a descriptor limit")
        .split_whitespace()
        .collect();
    let (soft, hard) = (open_files[3], open_files[4]);
    assert_eq!(soft, hard, "{limits}");
    assert_ne!(soft, "256", "{limits}");
}

#[test]
fn absolute_form_target_routes_normally() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let origin = get(port, "/resources/files");
    let absolute = get(port, "http://x/resources/files");
    assert_eq!(absolute.status, 200, "{}", absolute.text());
    assert_eq!(absolute.body, origin.body, "the same listing");
    absolute.assert_close_and_date("absolute-form");
    let read = get(port, "http://x/resources/files/a.txt");
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.body, b"hello\n");
}

#[test]
fn a_request_body_is_never_awaited() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let cases: [(&str, &[u8]); 3] = [
        (
            "content-length 10^9, nothing sent",
            b"POST /resources/files/a.txt HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000000\r\n\r\n",
        ),
        (
            "chunked, nothing sent",
            b"PUT /resources/files/a.txt HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n",
        ),
        (
            "GET with content-length 10^9",
            b"GET /resources/files/a.txt HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000000\r\n\r\n",
        ),
    ];
    for (case, request) in cases {
        // `exchange` fails the test unless the response arrives and the connection closes
        // within IO_TIMEOUT although the declared body never comes.
        let reply = exchange(port, request, IO_TIMEOUT);
        reply.assert_close_and_date(case);
        if request.starts_with(b"GET") {
            assert_eq!(reply.status, 200, "{case}: {}", reply.text());
            assert_eq!(reply.body, b"hello\n", "{case}");
        } else {
            reply.assert_refusal(405, "method_not_allowed", case);
            assert_eq!(reply.header("allow"), Some("GET"), "{case}");
        }
    }
}

// =============================================================================================
// 4. Stalled clients.
// =============================================================================================

const PARTIAL_HEAD: &[u8] = b"GET /resources/files HTTP/1.1\r\nhost: x\r\nx-slow: ";

#[test]
fn stalled_partial_heads_do_not_block_other_clients() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let stalled: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = connect(port);
            s.write_all(PARTIAL_HEAD).expect("partial head");
            s
        })
        .collect();
    let started = Instant::now();
    let reply = get(port, "/resources/files/a.txt");
    let took = started.elapsed();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.body, b"hello\n");
    assert!(
        took < Duration::from_secs(2),
        "a client behind 5 stalled ones waited {took:?}"
    );
    drop(stalled);
}

/// SLOW (about 10 s): the only test that waits out the header read timeout (D-4.6).
/// Clients that stop reading keep their bodies' bytes of the in-flight budget (D-4.6), so
/// later large reads wait for bytes. Waiting for bytes must hold nothing else: listings and
/// small reads still answer at once, and the waiting reads finish once the bytes come back.
/// (A slot bounding concurrent reads was once taken before the bytes: two clients that stopped
/// reading plus two waiting reads then stalled every listing.)
#[test]
fn clients_that_stop_reading_stall_neither_listings_nor_small_reads() {
    let world = with_big_files(4);
    // Room for two big bodies, not three.
    let server = start(&world, world.args(&["--inflight-budget", "20971520"]));
    let port = server.port();
    // Two clients that never read: their bodies hold the budget.
    let stalled = [
        ask(port, "/resources/files/big1"),
        ask(port, "/resources/files/big2"),
    ];
    std::thread::sleep(Duration::from_millis(500));
    // More large reads than cores: each waits for bytes.
    let mut waiting: Vec<TcpStream> = (0..4)
        .map(|n| ask(port, &format!("/resources/files/big{}", 3 + n % 2)))
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    for (what, path) in [
        ("a listing", "/resources/files"),
        ("a small read", "/resources/files/a.txt"),
    ] {
        let started = Instant::now();
        let mut stream = ask(port, path);
        let reply = parse_reply(&read_to_eof(&mut stream, Duration::from_secs(5)));
        assert_eq!(
            reply.status, 200,
            "{what} behind clients that stopped reading"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{what} took {:?} behind clients that stopped reading",
            started.elapsed()
        );
    }

    // The bytes come back when the stalled clients go; every waiting read then completes
    // (read all at once: a body nobody reads would hold its bytes again).
    drop(stalled);
    let readers: Vec<_> = waiting
        .drain(..)
        .map(|mut stream| {
            std::thread::spawn(move || {
                parse_reply(&read_to_eof(&mut stream, Duration::from_secs(20)))
            })
        })
        .collect();
    for (n, reader) in readers.into_iter().enumerate() {
        let reply = reader.join().expect("reader thread");
        assert_eq!(reply.status, 200, "waiting read {n}");
        assert_eq!(reply.body.len(), BIG, "waiting read {n} is whole");
    }
}

/// A client that asks for large files and stops reading holds its bodies' budget bytes only
/// until the send timeout (`--send-timeout`, extending the contract): its connection is then
/// dropped, the bytes come back, and a large read waiting behind it is served while the
/// stalled client is still connected. Without the timeout every large read would wait for as
/// long as such a client kept its connection open.
#[test]
fn a_client_that_stops_reading_is_dropped_after_the_send_timeout() {
    let world = with_big_files(3);
    // Room for two big bodies, not three.
    let server = start(
        &world,
        world.args(&["--inflight-budget", "20971520", "--send-timeout", "1"]),
    );
    let port = server.port();
    let mut stalled = [
        ask_small_window(port, "/resources/files/big1"),
        ask_small_window(port, "/resources/files/big2"),
    ];
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut waiting = ask(port, "/resources/files/big3");
    let reply = parse_reply(&read_to_eof(&mut waiting, Duration::from_secs(20)));
    assert_eq!((reply.status, reply.body.len()), (200, BIG));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "served {:?} after asking, behind clients that stopped reading",
        started.elapsed()
    );
    // The stalled clients were cut off: what they now read ends short of a whole body.
    for stream in &mut stalled {
        let got = read_to_eof(stream, Duration::from_secs(10));
        assert!(got.len() < BIG, "a stalled client got {} bytes", got.len());
    }
}

/// A slow client that keeps reading is never cut off by the send timeout, however much longer
/// than the timeout the whole body takes: 4 MiB at about 800 KiB/s under `--send-timeout 3`
/// (a rate at which the kernel's longest refusal stays under 2 s).
/// (The timer runs only while the kernel refuses bytes; see `stall_guard` for how slow a
/// client may be before that gap grows past the timeout.)
#[test]
fn a_slow_client_that_keeps_reading_outlasts_the_send_timeout() {
    const SIZE: usize = 4 << 20;
    let world = with_files(FILES_MANIFEST);
    world.file("out/big", vec![b'y'; SIZE]);
    let server = start(&world, world.args(&["--send-timeout", "3"]));
    let mut stream = ask(server.port(), "/resources/files/big");
    let started = Instant::now();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 20 * 1024];
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    loop {
        std::thread::sleep(Duration::from_millis(25));
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("read failed after {} bytes: {e}", got.len()),
        }
    }
    let reply = parse_reply(&got);
    assert_eq!(
        (reply.status, reply.body.len()),
        (200, SIZE),
        "cut off after {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() > Duration::from_secs(3),
        "the client was slow: {:?}",
        started.elapsed()
    );
}

#[test]
fn slow_stalled_head_is_dropped_within_twelve_seconds() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    // A client that connects and sends nothing at all is dropped on the same clock, and so is
    // one whose first bytes come late: the clock runs from the connection, not from them.
    let mut silent = connect(server.port());
    let mut late = connect(server.port());
    let mut stalled = connect(server.port());
    stalled.write_all(PARTIAL_HEAD).expect("partial head");
    let started = Instant::now();
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(6));
        late.write_all(PARTIAL_HEAD).expect("late partial head");
        // Closed by 10 s after the connection (plus slack), not 10 s after these bytes (16 s).
        read_to_eof(&mut late, Duration::from_secs(8))
    });
    assert!(
        read_to_eof(&mut silent, Duration::from_secs(12)).is_empty(),
        "a silent client gets no answer"
    );
    assert!(
        started.elapsed() > Duration::from_secs(8),
        "dropped at the head timeout, not before: {:?}",
        started.elapsed()
    );
    // read_to_eof fails the test unless the server closes within 12 s.
    let leftover = read_to_eof(&mut stalled, Duration::from_secs(12));
    for leftover in [leftover, late.join().expect("late client")] {
        if !leftover.is_empty() {
            let reply = parse_reply(&leftover);
            assert!(
                (400..500).contains(&reply.status),
                "a timed-out head may only get a 4xx: {reply:?}"
            );
        }
    }
    assert_still_serving(server.port(), "a dropped stalled client");
}

// =============================================================================================
// 5. The console.
// =============================================================================================

fn invalid_request(answer: &Value) -> bool {
    answer["ok"] == false
        && answer["error"]["code"] == "invalid_request"
        && answer["error"]["message"].is_string()
}

#[test]
fn console_tools_lists_exactly_the_granted_tools_sorted() {
    let peer_files = "exports:\n  peer_files: { root: out/ }\n";
    let peer_fetch = "capabilities:\n  peer_fetch: { allow: [\"localhost:1\"] }\n";
    let files = "exports:\n  files: { root: out/, mode: read-only }\n";
    let cases = [
        (
            "both",
            format!("name: r\n{peer_files}{peer_fetch}"),
            vec!["fetch-peer-file", "share-file"],
        ),
        (
            "peer_files only",
            format!("name: r\n{peer_files}"),
            vec!["share-file"],
        ),
        (
            "peer_fetch only",
            format!("name: r\n{peer_fetch}"),
            vec!["fetch-peer-file"],
        ),
        ("neither", format!("name: r\n{files}"), vec![]),
        (
            "network only",
            "name: r\ncapabilities:\n  network: { allow: [localhost] }\n".to_owned(),
            vec![],
        ),
    ];
    for (case, manifest, tools) in cases {
        let world = Workdir::new(&manifest);
        let mut server = start_console(&world, world.args(&[]));
        assert_eq!(
            server.console(r#"{"op":"tools"}"#),
            serde_json::json!({"ok": true, "result": tools}),
            "{case}"
        );
    }
}

#[test]
fn console_task_complete_advances_the_generation_seen_over_http() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start_console(&world, world.args(&[]));
    let port = server.port();
    assert_eq!(
        get(port, "/resources/files/a.txt").header("x-murmur-generation"),
        Some("0")
    );
    for generation in 1..=3u64 {
        assert_eq!(
            server.console(r#"{"op":"task-complete"}"#),
            serde_json::json!({"ok": true, "result": {"generation": generation}}),
        );
        let read = get(port, "/resources/files/a.txt");
        assert_eq!(
            read.header("x-murmur-generation"),
            Some(generation.to_string().as_str()),
            "read after {generation} completed tasks"
        );
        let listing = get(port, "/resources/files");
        assert_eq!(listing.json()["generation"], generation);
    }
    let generations: Vec<Value> = read_trace(&world.trace())
        .iter()
        .map(|l| l["generation"].clone())
        .collect();
    assert_eq!(
        generations,
        serde_json::json!([0, 1, 1, 2, 2, 3, 3])
            .as_array()
            .cloned()
            .unwrap(),
        "trace generations"
    );
}

#[test]
fn console_answers_invalid_lines_with_invalid_request_and_goes_on() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start_console(&world, world.args(&[]));
    for line in [
        "garbage",
        "{}",
        r#"{"op":"nope"}"#,
        "[]",
        "42",
        r#"{"op":7}"#,
        r#"{"op":"call"}"#,
        r#"{"op":"call","tool":5}"#,
        "",
    ] {
        let answer = server.console(line);
        assert!(
            invalid_request(&answer),
            "{line:?} must answer invalid_request, got {answer}"
        );
    }
    assert_eq!(
        server.console(r#"{"op":"task-complete"}"#),
        serde_json::json!({"ok": true, "result": {"generation": 1}}),
        "the session goes on after invalid lines"
    );
    assert_still_serving(server.port(), "invalid console lines");
}

#[test]
fn console_calling_an_ungranted_tool_answers_unknown_tool() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start_console(&world, world.args(&[]));
    for tool in ["share-file", "fetch-peer-file", "nope"] {
        let answer = server.console(&format!(
            r#"{{"op":"call","tool":"{tool}","input":{{"path":"a.txt","peer":"localhost:1","handle":"mh1.a.b"}}}}"#
        ));
        assert_eq!(answer["ok"], false, "{tool}: {answer}");
        assert_eq!(answer["error"]["code"], "unknown_tool", "{tool}: {answer}");
        assert!(answer["error"]["message"].is_string(), "{tool}: {answer}");
    }
    // A granted tool is callable through the same op (here refused on its input).
    let world = Workdir::new("name: r\nexports:\n  peer_files: { root: out/ }\n");
    let mut server = start_console(&world, world.args(&[]));
    let answer = server.console(r#"{"op":"call","tool":"share-file","input":{}}"#);
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_input", "{answer}");
}

#[test]
fn console_end_of_stdin_exits_zero() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start_console(&world, world.args(&[]));
    assert_eq!(server.console(r#"{"op":"tools"}"#)["ok"], true);
    drop(server.stdin.take());
    server.expect_clean_exit("end of stdin");
    assert_eq!(server.remaining_stdout(), Vec::<String>::new());
}

// =============================================================================================
// 6. Signals.
// =============================================================================================

#[test]
fn sigterm_ends_the_session_with_status_0() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start(&world, world.args(&[]));
    assert_still_serving(server.port(), "launch");
    server.stop_with(rustix::process::Signal::TERM, "SIGTERM");
}

/// Clients connected but silent (a browser's preconnect, a slowloris) are closed at once on
/// shutdown, as hyper closes a connection that has read nothing: they must not hold the exit
/// for the drain deadline.
#[test]
fn idle_connections_do_not_hold_the_exit() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start(&world, world.args(&[]));
    let mut idle: Vec<TcpStream> = (0..5).map(|_| connect(server.port())).collect();
    assert_still_serving(server.port(), "idle connections");
    let started = Instant::now();
    server.stop_with(
        rustix::process::Signal::TERM,
        "SIGTERM with idle connections",
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the exit waited {:?} for connections that sent nothing (drain deadline 5 s)",
        started.elapsed()
    );
    for stream in &mut idle {
        assert!(read_to_eof(stream, IO_TIMEOUT).is_empty());
    }
}

/// A client may shut down its sending side once its request is out (`nc -N`, a one-shot
/// script): it still gets the whole answer, for an inline read, a read on the blocking pool
/// and a listing.
#[test]
fn a_client_that_half_closes_after_its_request_gets_the_answer() {
    let world = with_big_files(1);
    let server = start(&world, world.args(&[]));
    for (target, len) in [
        ("/resources/files/a.txt", Some(6)),
        ("/resources/files/big1", Some(BIG)),
        ("/resources/files", None),
    ] {
        for _ in 0..5 {
            let mut stream = ask(server.port(), target);
            stream
                .shutdown(std::net::Shutdown::Write)
                .expect("half-close");
            let reply = parse_reply(&read_to_eof(&mut stream, IO_TIMEOUT));
            assert_eq!(reply.status, 200, "{target} after a half-close");
            if let Some(len) = len {
                assert_eq!(reply.body.len(), len, "{target}: the whole body");
            }
        }
    }
}

#[test]
fn sigint_ends_the_session_with_status_0() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start(&world, world.args(&[]));
    assert_still_serving(server.port(), "launch");
    server.stop_with(rustix::process::Signal::INT, "SIGINT");
}

/// A supervisor that reads the ready line and then stops reading stdout leaves the console
/// stuck writing an answer: a signal must still end the session, within the drain deadline
/// and a margin, with status 0.
#[test]
fn a_signal_ends_a_console_session_whose_stdout_nobody_reads() {
    let world = with_files(FILES_MANIFEST);
    let mut server = start_in_shell(&world, "", world.args(&["--console"]), true);
    // Far more answers than a pipe holds, and none of them read.
    let mut stdin = server.stdin.take().expect("stdin");
    let requests = "{\"op\":\"tools\"}\n".repeat(5_000);
    stdin.write_all(requests.as_bytes()).expect("requests");
    stdin.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    server.signal(rustix::process::Signal::TERM);
    let status = server.wait(Duration::from_secs(10));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "exit after {:?}",
        started.elapsed()
    );
    drop(server);
}

/// With `--console` and stdin still open (an operator's terminal or pipe), a signal must end
/// the session just as without the console: the pending stdin read must not hold the exit.
#[test]
fn signals_end_a_console_session_with_stdin_open() {
    let world = with_files(FILES_MANIFEST);
    for (signal, name) in [
        (rustix::process::Signal::TERM, "SIGTERM"),
        (rustix::process::Signal::INT, "SIGINT"),
    ] {
        let mut server = start_console(&world, world.args(&[]));
        assert_eq!(server.console(r#"{"op":"tools"}"#)["ok"], true);
        assert_still_serving(server.port(), "launch");
        server.stop_with(signal, &format!("{name} with --console and stdin open"));
    }
}

/// The ready line says the server is up, so a signal sent the moment it is read must already
/// end the session gracefully. Repeated so a handler installed only after the line shows.
#[test]
fn a_signal_right_after_the_ready_line_still_exits_0() {
    let world = with_files(FILES_MANIFEST);
    for round in 0..10 {
        let (signal, name) = if round % 2 == 0 {
            (rustix::process::Signal::TERM, "SIGTERM")
        } else {
            (rustix::process::Signal::INT, "SIGINT")
        };
        let mut server = start(&world, world.args(&[]));
        server.stop_with(
            signal,
            &format!("round {round}: {name} right after the ready line"),
        );
    }
}

// =============================================================================================
// 7. The trace file.
// =============================================================================================

/// A trace write cut short (a full disk; here a file size limit) fails the request closed
/// (500) and leaves no fragment: the trace stays one JSON object per line (D-6.1, D-6.4).
#[test]
fn a_short_trace_write_fails_closed_and_leaves_no_fragment() {
    let world = with_files(FILES_MANIFEST);
    // 1 KiB of file for the process: room for about three trace lines.
    let server = start_in_shell(&world, "trap '' XFSZ; ulimit -f 1", world.args(&[]), false);
    let port = server.port();
    let statuses: Vec<u16> = (0..6)
        .map(|_| get(port, "/resources/files/a.txt").status)
        .collect();
    let served = statuses.iter().take_while(|s| **s == 200).count();
    assert!(
        (1..6).contains(&served) && statuses[served..].iter().all(|s| *s == 500),
        "served until the trace was full, then failed closed: {statuses:?}"
    );
    let text = std::fs::read_to_string(world.trace()).expect("the trace");
    assert!(text.ends_with('\n'), "no fragment at the end: {text:?}");
    assert_eq!(read_trace(&world.trace()).len(), served, "{text}");
    drop(server);
}

#[test]
fn trace_has_exactly_one_line_per_request_under_resources() {
    let world = with_files(FILES_MANIFEST);
    let server = start(&world, world.args(&[]));
    let port = server.port();
    let session = server.ready_str("session_id").to_owned();
    // (method, target, status, event_type, outcome)
    let requests = [
        ("GET", "/resources/files", 200, "resource_list", "ok"),
        ("GET", "/resources/files/a.txt", 200, "resource_read", "ok"),
        (
            "GET",
            "/resources/files/sub/b.txt?v=1",
            200,
            "resource_read",
            "ok",
        ),
        (
            "GET",
            "/resources/files/missing.txt",
            404,
            "resource_read",
            "not_found",
        ),
        (
            "GET",
            "/resources/files/..%2Fsecret",
            403,
            "resource_read",
            "outside_root",
        ),
        (
            "GET",
            "/resources/files/sub",
            403,
            "resource_read",
            "not_a_regular_file",
        ),
        (
            "POST",
            "/resources/files/a.txt",
            405,
            "resource_read",
            "method_not_allowed",
        ),
        (
            "HEAD",
            "/resources/files/a.txt",
            405,
            "resource_read",
            "method_not_allowed",
        ),
        (
            "DELETE",
            "/resources/files",
            405,
            "resource_list",
            "method_not_allowed",
        ),
        ("GET", "/resources/x", 404, "resource_read", "not_found"),
        ("GET", "/resources", 404, "resource_read", "not_found"),
        (
            "PUT",
            "/resources/x",
            405,
            "resource_read",
            "method_not_allowed",
        ),
        (
            "GET",
            "/resources/peer/",
            404,
            "peer_handle_redeem",
            "no_peer_plane",
        ),
    ];
    for (method, target, status, _, _) in requests {
        let reply = send(port, method, target);
        assert_eq!(reply.status, status, "{method} {target}: {}", reply.text());
        // Requests outside /resources leave no line.
        assert_eq!(get(port, "/").status, 404);
        assert_eq!(get(port, "/.well-known/agent-card.json").status, 200);
        let _ = exchange(port, b"GET\r\n\r\n", IO_TIMEOUT);
    }

    let lines = read_trace(&world.trace());
    assert_eq!(
        lines.len(),
        requests.len(),
        "one trace line per request under /resources: {lines:#?}"
    );
    let mut last_timestamp = 0;
    let mut ids = BTreeSet::new();
    for ((method, target, _, event_type, outcome), line) in requests.iter().zip(&lines) {
        let what = format!("{method} {target}: {line}");
        assert_eq!(line["event_type"], *event_type, "{what}");
        let id = line["event_id"].as_str().unwrap_or_default();
        assert!(
            id.strip_prefix("evt_").is_some_and(|h| is_lower_hex(h, 32)),
            "{what}: event_id"
        );
        assert!(ids.insert(id.to_owned()), "{what}: event_id repeated");
        assert_eq!(line["session_id"], session.as_str(), "{what}");
        let timestamp = line["timestamp"]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: timestamp is not Unix ms"));
        assert!(
            timestamp >= last_timestamp,
            "{what}: timestamps go backwards"
        );
        last_timestamp = timestamp;
        assert_eq!(line["outcome"], *outcome, "{what}");
        if *outcome == "ok" {
            assert!(line["reason"].is_null(), "{what}: reason on ok");
        } else {
            assert!(line["reason"].is_string(), "{what}: reason on a refusal");
        }
        assert_eq!(line["generation"], 0, "{what}");
    }
    assert_eq!(lines[1]["path"], "a.txt");
    assert_eq!(lines[1]["bytes"], 6);
    assert_eq!(lines[1]["sha256"], sha256_hex(b"hello\n"));
    assert_eq!(
        lines[2]["path"], "sub/b.txt",
        "the query is not part of the path"
    );
    assert_eq!(lines[4]["path"], "../secret", "the decoded request path");
    assert!(lines[4]["bytes"].is_null() && lines[4]["sha256"].is_null());
    assert_eq!(lines[0]["entry_count"], 3);
    assert_eq!(lines[0]["total_bytes"], 10);
    assert!(lines[12]["handle_id"].is_null(), "no token, no handle_id");
}

/// A command line that does not parse exits 2, as a refused launch does, with clap's own
/// rendering on stderr (its `error:` line, a tip where it has one) and nothing on stdout; no
/// arguments at all show the help there. `--help` and `--version` still exit 0.
#[test]
fn unparsable_command_lines_are_refused_launches() {
    let bin = env!("CARGO_BIN_EXE_resource-plane");
    let flag = |name: &'static str, value: &'static str| -> Vec<&'static str> {
        vec![
            "serve",
            "--workdir",
            "/tmp",
            "--manifest",
            "/x",
            name,
            value,
        ]
    };
    let zero_budget = flag("--inflight-budget", "0");
    let zero_fetch = flag("--fetch-max-bytes", "0");
    let padded_shards = flag("--shards", " 3");
    let cases: [&[&str]; 8] = [
        &zero_budget,
        &zero_fetch,
        &padded_shards,
        &[],
        &["serve"],
        &[
            "serve",
            "--workdir",
            "/tmp",
            "--manifest",
            "/nonexistent",
            "--containment",
            "bogus",
        ],
        &[
            "serve",
            "--workdir",
            "/tmp",
            "--manifest",
            "/x",
            "--listen",
            "not-an-address",
        ],
        &["frobnicate"],
    ];
    for args in cases {
        let out = std::process::Command::new(bin).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        if args.is_empty() {
            assert!(
                stderr.starts_with("error[E-CLI-001]: a subcommand is required"),
                "{args:?}: {stderr}"
            );
        } else {
            assert!(
                stderr.starts_with("error[E-CLI-001]: "),
                "{args:?}: {stderr}"
            );
            assert!(
                stderr.contains("For more information, try '--help'."),
                "{args:?}: {stderr}"
            );
            assert!(
                !stderr.contains("Read-only file surfaces"),
                "{args:?}: the reason, not the program's description: {stderr}"
            );
        }
    }
    for flag in ["--help", "--version"] {
        let out = std::process::Command::new(bin).arg(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(!out.stdout.is_empty(), "{flag}");
    }
}

/// A stdout nobody reads from (a closed pipe: `serve … | true`) cannot carry the ready line:
/// the session ends at once with a word on stderr and status 1, not with a panic (status
/// 101).
#[test]
fn a_closed_stdout_ends_the_session_with_a_message_not_a_panic() {
    let world = with_files(FILES_MANIFEST);
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let Exited { status, stderr, .. } = world
        .launch(&world.args(&[]))
        .run_with_stdout(writer.into());
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write the ready line to stdout"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

// =============================================================================================
// Worlds and checks.
// =============================================================================================

/// A workdir holding `out/a.txt`, `out/.hidden` and `out/sub/b.txt`.
fn with_files(manifest: &str) -> Workdir {
    let world = Workdir::new(manifest);
    world.file("out/a.txt", b"hello\n");
    world.file("out/.hidden", b"h");
    world.file("out/sub/b.txt", b"bee");
    world
}

/// The size of each `out/big<n>` file of [`with_big_files`]: too large for the kernel's socket
/// buffers, so a client that stops reading really holds its body.
const BIG: usize = 9 << 20;

/// The standard world plus `count` files `out/big1`, `out/big2`, … of [`BIG`] bytes each.
fn with_big_files(count: usize) -> Workdir {
    let world = with_files(FILES_MANIFEST);
    let big = vec![b'x'; BIG];
    for n in 1..=count {
        world.file(&format!("out/big{n}"), &big);
    }
    world
}

/// `serve` over `world` with `args`, its stderr captured.
fn start(world: &Workdir, args: Vec<String>) -> Served {
    world.launch(&args).start()
}

/// [`start`] with `--console` and stdin open.
fn start_console(world: &Workdir, args: Vec<String>) -> Served {
    world.launch(&args).console().start()
}

/// A `serve` started through `bash -c "<setup>; exec BIN ARGS"` (a resource limit, say) whose
/// stdout nobody reads past the ready line.
fn start_in_shell(world: &Workdir, setup: &str, args: Vec<String>, stdin: bool) -> Served {
    let launch = world
        .launch(&args)
        .shell(setup)
        .stderr(Stderr::Null)
        .hold_stdout();
    if stdin { launch.stdin() } else { launch }.start()
}

/// Runs `serve` to completion (it must exit within the launch timeout).
fn run_to_exit(world: &Workdir, args: &[String]) -> Exited {
    world.launch(args).run()
}

/// Requires a refused launch: status 2, `error[CODE]:` and a `  hint:` line on stderr, nothing
/// on stdout, nothing created anywhere in the world and no file at `trace`. Returns stderr.
fn assert_refused(
    case: &str,
    world: &Workdir,
    args: &[String],
    code: &str,
    trace: &Path,
) -> String {
    let before = world.snapshot();
    let out = run_to_exit(world, args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{case}: exit status {:?}; stderr:\n{}",
        out.status,
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("error[{code}]:")),
        "{case}: stderr lacks `error[{code}]:`:\n{}",
        out.stderr
    );
    assert!(
        out.stderr.lines().any(|l| l.starts_with("  hint:")),
        "{case}: stderr has no line starting `  hint:`:\n{}",
        out.stderr
    );
    assert_eq!(out.stdout, "", "{case}: a refused launch printed on stdout");
    assert!(
        std::fs::symlink_metadata(trace).is_err(),
        "{case}: a refused launch created the trace file {}",
        trace.display()
    );
    assert_eq!(
        world.snapshot(),
        before,
        "{case}: a refused launch created or changed something in the world"
    );
    out.stderr
}

/// Requires a command line clap refuses: status 2, `error[E-CLI-001]: ` and clap's own
/// rendering on stderr, nothing on stdout, nothing created anywhere in the world. Returns
/// stderr.
fn assert_command_line_refused(case: &str, world: &Workdir, args: &[String]) -> String {
    let before = world.snapshot();
    let out = run_to_exit(world, args);
    assert_eq!(out.status.code(), Some(2), "{case}: {}", out.stderr);
    assert!(
        out.stderr.starts_with("error[E-CLI-001]: "),
        "{case}: {}",
        out.stderr
    );
    assert_eq!(out.stdout, "", "{case}");
    assert_eq!(world.snapshot(), before, "{case}: created something");
    out.stderr
}

/// A listing must answer 200 with one entry per file: the server is still serving.
fn assert_still_serving(port: u16, after: &str) {
    let reply = get(port, "/resources/files");
    assert_eq!(reply.status, 200, "listing after {after}: {}", reply.text());
    assert_eq!(
        reply.json()["entries"].as_array().map(Vec::len),
        Some(3),
        "listing after {after}"
    );
}

fn mtime_ms(path: &Path) -> u128 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime")
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis()
}
