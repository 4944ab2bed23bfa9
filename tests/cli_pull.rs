#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Black-box tests of `resource-plane pull` (D-16, `contract.md`): the real binary mirrors a
//! real `resource-plane serve`, and a small hostile HTTP(S) server written here that serves
//! whatever listing and bodies a case needs and logs every request target it receives.
//!
//! Each case asserts the exact summary line, the exit status, what the mirror directory holds
//! afterwards, and that nothing outside it changed.

mod support;

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};
use support::process::{Exited, Launch, Leaf, Served, Stderr, snapshot_tree};
use support::sha256_hex;
use support::test_ca::TestCa;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_resource-plane");
/// How long a pull or a launch may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

const FILES_MANIFEST: &str = "\
name: reporter
exports:
  files: { root: out/, mode: read-only, max_bytes: 10Mi }
";

// ---------------------------------------------------------------------------------------------
// Processes (started through tests/support/process.rs)
// ---------------------------------------------------------------------------------------------

/// What a finished pull says.
trait Pulled {
    fn code(&self) -> Option<i32>;
    fn summary(&self) -> Value;
    fn assert_refused(&self, message_part: &str);
}

impl Pulled for Exited {
    fn code(&self) -> Option<i32> {
        self.code
    }

    /// The summary: the only stdout line, which must be one JSON object.
    fn summary(&self) -> Value {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "stdout must be exactly the summary line: {:?}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("the summary is not JSON ({e}): {:?}", lines[0]))
    }

    /// A refused run: status 2, nothing on stdout, `error[E-CLI-001]: …` and a hint on stderr.
    fn assert_refused(&self, message_part: &str) {
        assert_eq!(self.code, Some(2), "stderr: {}", self.stderr);
        assert_eq!(self.stdout, "", "a refused pull prints no summary");
        // The code on the first line and the hint on the last; a command line clap refuses
        // keeps clap's own rendering (its tip and usage) between them.
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert!(
            lines.len() >= 2
                && lines[0].starts_with("error[E-CLI-001]: ")
                && lines[lines.len() - 1].starts_with("  hint: "),
            "stderr: {:?}",
            self.stderr
        );
        assert!(
            self.stderr.contains(message_part),
            "{message_part:?} not in {:?}",
            self.stderr
        );
    }
}

fn pull(args: &[&str]) -> Exited {
    pull_with_env(args, &[])
}

/// `resource-plane pull ARGS` with `env` set, run to its end within [`RUN_TIMEOUT`].
fn pull_with_env(args: &[&str], env: &[(&str, &str)]) -> Exited {
    let args: Vec<String> = std::iter::once("pull")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    let mut launch = Launch::new(&args).label("pull").within(RUN_TIMEOUT);
    for (key, value) in env {
        launch = launch.env(key, value);
    }
    launch.run()
}

/// A `resource-plane serve` over `root/wd/` with `manifest` (written to `root/manifest.yaml`),
/// tracing to `root/trace.jsonl`; killed on drop.
fn serve(root: &Path, manifest: &str) -> Served {
    std::fs::create_dir_all(root.join("wd")).expect("workdir");
    std::fs::write(root.join("manifest.yaml"), manifest).expect("manifest");
    let args: Vec<String> = [
        "serve".to_owned(),
        "--workdir".into(),
        root.join("wd").display().to_string(),
        "--manifest".into(),
        root.join("manifest.yaml").display().to_string(),
        "--trace".into(),
        root.join("trace.jsonl").display().to_string(),
    ]
    .to_vec();
    Launch::new(&args).stderr(Stderr::Null).start()
}

// ---------------------------------------------------------------------------------------------
// Directories
// ---------------------------------------------------------------------------------------------

/// A scratch directory, canonical.
fn scratch() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical tempdir");
    (dir, root)
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("parents");
    std::fs::write(path, bytes).expect("write file");
}

/// Every path under `dir` with its type and contents (or link target).
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    snapshot_tree(dir, Leaf::Contents)
}

fn mtime_ms(path: &Path) -> u128 {
    std::fs::metadata(path)
        .expect("metadata")
        .modified()
        .expect("mtime")
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis()
}

// ---------------------------------------------------------------------------------------------
// A hostile server: canned answers per request target, every target logged.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Canned {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Add `content-length` for the body (else the body ends when the connection closes).
    length: bool,
}

impl Canned {
    fn new(status: u16, body: &[u8]) -> Canned {
        Canned {
            status,
            headers: Vec::new(),
            body: body.to_vec(),
            length: true,
        }
    }

    fn header(mut self, name: &str, value: &str) -> Canned {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// A file read as `serve` answers it.
    fn file(body: &[u8]) -> Canned {
        Canned::new(200, body).header("etag", &format!("\"sha256:{}\"", sha256_hex(body)))
    }

    fn json(status: u16, value: &Value) -> Canned {
        Canned::new(status, value.to_string().as_bytes()).header("content-type", "application/json")
    }

    fn without_length(mut self) -> Canned {
        self.length = false;
        self
    }
}

/// A listing entry for `body` at `path`.
fn listed(path: &str, body: &[u8]) -> Value {
    json!({"path": path, "size_bytes": body.len(), "mtime_ms": 1_700_000_000_000_i64,
           "sha256": sha256_hex(body)})
}

fn listing(entries: Vec<Value>, max_bytes: u64) -> Value {
    json!({"root": "out/", "mode": "read-only", "max_bytes": max_bytes, "generation": 0,
           "containment_achieved": "sealed", "entries": entries})
}

/// Answers by request target, each target's answers in turn (the last one repeating); an
/// unknown target gets 404. Optionally over TLS.
struct Hostile {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Hostile {
    fn start(routes: Vec<(&str, Vec<Canned>)>) -> Hostile {
        Self::start_with(routes, None)
    }

    fn start_with(
        routes: Vec<(&str, Vec<Canned>)>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let routes: Arc<HashMap<String, Vec<Canned>>> = Arc::new(
            routes
                .into_iter()
                .map(|(target, answers)| (target.to_owned(), answers))
                .collect(),
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let served: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let thread_log = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (routes, log, served, tls) = (
                    routes.clone(),
                    thread_log.clone(),
                    served.clone(),
                    tls.clone(),
                );
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    match tls {
                        None => answer(stream, &routes, &log, &served),
                        Some(config) => {
                            let Ok(connection) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            answer(
                                rustls::StreamOwned::new(connection, stream),
                                &routes,
                                &log,
                                &served,
                            );
                        }
                    }
                });
            }
        });
        Hostile { port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request target received so far, sorted.
    fn requests(&self) -> Vec<String> {
        let mut log = self.log.lock().expect("log").clone();
        log.sort();
        log
    }
}

fn answer(
    mut stream: impl Read + Write,
    routes: &HashMap<String, Vec<Canned>>,
    log: &Mutex<Vec<String>>,
    served: &Mutex<HashMap<String, usize>>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split(' ').nth(1).unwrap_or_default().to_owned();
    log.lock().expect("log").push(target.clone());
    let canned = match routes.get(&target) {
        Some(answers) => {
            let mut served = served.lock().expect("served");
            let turn = served.entry(target).or_default();
            let canned = answers[(*turn).min(answers.len() - 1)].clone();
            *turn += 1;
            canned
        }
        None => Canned::json(
            404,
            &json!({"error": "not_found", "message": "no such file"}),
        ),
    };
    let mut response = format!("HTTP/1.1 {} Canned\r\nconnection: close\r\n", canned.status);
    for (name, value) in &canned.headers {
        response.push_str(&format!("{name}: {value}\r\n"));
    }
    if canned.length {
        response.push_str(&format!("content-length: {}\r\n", canned.body.len()));
    }
    response.push_str("\r\n");
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.write_all(&canned.body);
    let _ = stream.flush();
}

// =============================================================================================
// Against a real capsule
// =============================================================================================

#[test]
fn mirrors_a_real_capsule_and_a_second_run_downloads_nothing() {
    let (_dir, root) = scratch();
    let big: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("a.txt", b"hello\n".to_vec()),
        (".hidden", b"h".to_vec()),
        ("sub/b.txt", b"bee".to_vec()),
        ("sp ace/q?#%+.txt", b"odd name".to_vec()),
        ("\u{e9}t\u{e9}.txt", b"summer".to_vec()),
        ("empty", Vec::new()),
        ("big.bin", big),
    ];
    for (path, bytes) in &files {
        write(&root.join("wd/out").join(path), bytes);
    }
    let serve = serve(&root, FILES_MANIFEST);
    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_str().expect("utf-8 path");
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();

    let first = pull(&[serve.url(), mirror_arg, "--jobs", "1"]);
    assert_eq!(first.code(), Some(0), "stderr: {}", first.stderr);
    assert_eq!(
        first.summary(),
        json!({"pull": "ok", "listed": 7, "downloaded": 7, "unchanged": 0, "deleted": 0,
               "failed": [], "bytes": total})
    );
    assert_eq!(
        first.stderr, "",
        "no progress when stderr is not a terminal"
    );
    assert_eq!(snapshot(&mirror), snapshot(&root.join("wd/out")));
    for (path, _) in &files {
        assert_eq!(
            mtime_ms(&mirror.join(path)),
            mtime_ms(&root.join("wd/out").join(path)),
            "{path} keeps the export's modification time"
        );
    }

    let second = pull(&[serve.url(), mirror_arg]);
    assert_eq!(second.code(), Some(0), "stderr: {}", second.stderr);
    assert_eq!(
        second.summary(),
        json!({"pull": "ok", "listed": 7, "downloaded": 0, "unchanged": 7, "deleted": 0,
               "failed": [], "bytes": 0})
    );
}

#[test]
fn changed_files_are_fetched_again_and_delete_removes_only_unlisted_regular_files() {
    let (_dir, root) = scratch();
    let out = root.join("wd/out");
    write(&out.join("a.txt"), b"one");
    write(&out.join("keep/b.txt"), b"bee");
    write(&out.join("gone.txt"), b"soon gone");
    let serve = serve(&root, FILES_MANIFEST);
    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_str().expect("utf-8 path");
    assert_eq!(pull(&[serve.url(), mirror_arg]).code(), Some(0));

    // The export changes; the mirror gains strays, a symlink out, and a copy edited locally.
    write(&out.join("a.txt"), b"two!");
    std::fs::remove_file(out.join("gone.txt")).expect("remove");
    write(&mirror.join("keep/b.txt"), b"BEE");
    write(&mirror.join("stray.txt"), b"stray");
    write(&mirror.join("old/deeper/x"), b"x");
    let outside = root.join("outside");
    write(&outside.join("precious"), b"precious");
    std::os::unix::fs::symlink(&outside, mirror.join("link")).expect("symlink");
    std::os::unix::fs::symlink(outside.join("precious"), mirror.join("filelink")).expect("symlink");

    let without = pull(&[serve.url(), mirror_arg, "--jobs", "16"]);
    assert_eq!(without.code(), Some(0), "stderr: {}", without.stderr);
    assert_eq!(
        without.summary(),
        json!({"pull": "ok", "listed": 2, "downloaded": 2, "unchanged": 0, "deleted": 0,
               "failed": [], "bytes": 7})
    );
    assert!(mirror.join("gone.txt").exists() && mirror.join("stray.txt").exists());

    let with = pull(&[serve.url(), mirror_arg, "--delete"]);
    assert_eq!(with.code(), Some(0), "stderr: {}", with.stderr);
    assert_eq!(
        with.summary(),
        json!({"pull": "ok", "listed": 2, "downloaded": 0, "unchanged": 2, "deleted": 3,
               "failed": [], "bytes": 0})
    );
    let expected: BTreeMap<String, String> = [
        ("a.txt", "file two!".to_owned()),
        ("keep", "dir".to_owned()),
        ("keep/b.txt", "file bee".to_owned()),
        ("link", format!("link -> {}", outside.display())),
        (
            "filelink",
            format!("link -> {}", outside.join("precious").display()),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(snapshot(&mirror), expected, "old/ went with its last file");
    assert_eq!(
        std::fs::read(outside.join("precious")).expect("read"),
        b"precious"
    );
}

#[test]
fn a_file_over_max_bytes_is_reported_without_a_request_and_the_rest_lands() {
    let (_dir, root) = scratch();
    write(&root.join("wd/out/small.txt"), b"12345678");
    write(&root.join("wd/out/large.txt"), b"123456789");
    let serve = serve(
        &root,
        "name: reporter\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 8 }\n",
    );
    let mirror = root.join("mirror");
    let run = pull(&[serve.url(), mirror.to_str().expect("utf-8")]);
    assert_eq!(
        run.code(),
        Some(1),
        "partial exits 1; stderr: {}",
        run.stderr
    );
    assert_eq!(
        run.summary(),
        json!({"pull": "partial", "listed": 2, "downloaded": 1, "unchanged": 0, "deleted": 0,
               "failed": [{"path": "large.txt",
                           "why": "too_large: listed at 9 bytes, over the export's max_bytes of 8"}],
               "bytes": 8})
    );
    assert_eq!(
        std::fs::read(mirror.join("small.txt")).expect("read"),
        b"12345678"
    );
    assert!(!mirror.join("large.txt").exists());
}

#[test]
fn a_capsule_without_an_operator_plane_refuses_the_pull_and_creates_nothing() {
    let (_dir, root) = scratch();
    let serve = serve(&root, "name: quiet\n");
    let mirror = root.join("mirror");
    let run = pull(&[serve.url(), mirror.to_str().expect("utf-8")]);
    run.assert_refused(&format!(
        "the listing of {}: HTTP 404 no_resource_plane",
        serve.url()
    ));
    assert!(
        !mirror.exists(),
        "nothing is created when the listing cannot be had"
    );
}

// =============================================================================================
// Refused runs
// =============================================================================================

#[test]
fn unusable_arguments_and_directories_exit_2() {
    let (_dir, root) = scratch();
    let file = root.join("file");
    write(&file, b"x");
    let hostile = Hostile::start(vec![(
        "/resources/files",
        vec![Canned::json(200, &listing(vec![], 10))],
    )]);
    let url = hostile.url();
    let url = url.as_str();
    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_str().expect("utf-8");
    for (args, part) in [
        (
            vec!["ftp://127.0.0.1:1", mirror_arg],
            "URL \"ftp://127.0.0.1:1\"",
        ),
        (vec!["http://127.0.0.1:1/?x", mirror_arg], "URL "),
        (vec!["http://user@127.0.0.1:1", mirror_arg], "URL "),
        (
            vec![url, file.to_str().expect("utf-8")],
            "exists and is not a directory",
        ),
        (
            vec![&url, root.join("no/such/dir").to_str().expect("utf-8")],
            "does not exist, nor does its parent directory",
        ),
        (vec![url, mirror_arg, "--jobs", "0"], "--jobs"),
        (vec![url, mirror_arg, "--jobs", "65"], "--jobs"),
        (vec![url, mirror_arg, "--jobs", "x"], "--jobs"),
        (vec![url, mirror_arg, "--timeout", "0"], "--timeout"),
        (vec![url], "DIR"),
        (
            vec![url, mirror_arg, "--ca", file.to_str().expect("utf-8")],
            "--ca",
        ),
    ] {
        let run = pull(&args);
        run.assert_refused(part);
        assert!(!mirror.exists(), "{args:?} created the mirror");
    }
    assert!(
        hostile.requests().is_empty(),
        "no request before the arguments are good"
    );
    let bare = Command::new(BIN).output().expect("run with no subcommand");
    assert_eq!(bare.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bare.stderr)
            .contains("a subcommand is required: serve, check, demo or pull")
    );
}

#[test]
fn listings_that_cannot_be_had_exit_2_and_create_nothing() {
    let (_dir, root) = scratch();
    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_str().expect("utf-8");

    // Nobody listening.
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    pull(&[&format!("http://127.0.0.1:{port}"), mirror_arg]).assert_refused("connect");

    for (canned, part) in [
        (Canned::new(200, b"<html>hello</html>"), "not JSON"),
        (
            Canned::json(200, &json!({"entries": "all of them"})),
            "not the listing's shape",
        ),
        (
            Canned::json(200, &json!({"entries": [{"path": ["a"]}]})),
            "not the listing's shape",
        ),
        (Canned::json(200, &json!([])), "not the listing's shape"),
        (
            Canned::json(200, &json!({"entries": [], "max_bytes": "lots"})),
            "not the listing's shape",
        ),
        (
            Canned::json(403, &json!({"error": "outside_root", "message": "m"})),
            "HTTP 403 outside_root",
        ),
        (
            Canned::json(500, &json!({"error": "io\nerror", "message": "m"})),
            "HTTP 500",
        ),
        (
            Canned::new(200, b"")
                .header("content-length", "314572800")
                .without_length(),
            "longer than the 268435456 bytes a listing may have",
        ),
        (
            // D-17.1: the etag is the body's sha256; one naming another body discredits it.
            Canned::json(200, &listing(vec![], 10)).header(
                "etag",
                &format!("\"sha256:{}\"", sha256_hex(b"another body")),
            ),
            "its etag is not the sha256 of its body",
        ),
        (
            Canned::json(200, &listing(vec![], 10)).header("etag", "\"sha256:\u{e9}\""),
            "its etag is not the sha256 of its body",
        ),
    ] {
        let hostile = Hostile::start(vec![("/resources/files", vec![canned.clone()])]);
        let run = pull(&[&hostile.url(), mirror_arg]);
        run.assert_refused(part);
        assert!(
            !run.stderr.contains("io\nerror"),
            "a server's text is not echoed"
        );
        assert!(!mirror.exists(), "{canned:?} created the mirror");
    }

    // A redirect is not followed.
    let hostile = Hostile::start(vec![
        (
            "/resources/files",
            vec![Canned::new(302, b"").header("location", "/elsewhere")],
        ),
        ("/elsewhere", vec![Canned::json(200, &listing(vec![], 10))]),
    ]);
    pull(&[&hostile.url(), mirror_arg])
        .assert_refused("HTTP 302 (a redirect, which pull does not follow)");
    assert_eq!(hostile.requests(), ["/resources/files"]);
    assert!(!mirror.exists());
}

#[test]
fn a_server_that_never_answers_is_abandoned_after_the_timeout() {
    let (_dir, root) = scratch();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let holder = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            holder.lock().expect("held").push(stream);
        }
    });
    let started = Instant::now();
    let run = pull(&[
        &format!("http://127.0.0.1:{port}"),
        root.join("mirror").to_str().expect("utf-8"),
        "--timeout",
        "1",
    ]);
    run.assert_refused("waiting for the answer timed out");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

// =============================================================================================
// A hostile server
// =============================================================================================

#[test]
fn a_hostile_listing_writes_nothing_outside_dir_and_is_reported_exactly() {
    let (_dir, root) = scratch();
    let outside = root.join("outside");
    write(&outside.join("target.txt"), b"untouched");
    let mirror = root.join("mirror");
    std::fs::create_dir(&mirror).expect("mirror");
    std::os::unix::fs::symlink(&outside, mirror.join("link")).expect("symlink");
    std::os::unix::fs::symlink(outside.join("target.txt"), mirror.join("planted.txt"))
        .expect("symlink");

    let good = b"good".as_slice();
    let expected_body = b"expected".as_slice();
    let entries = vec![
        listed("good.txt", good),
        listed("../x", good),
        listed("/etc/passwd", good),
        listed("a//b", good),
        listed("a\\b", good),
        listed("a\0b", good),
        listed("", good),
        listed("sub/./x", good),
        listed("mismatch.txt", expected_body),
        listed("etag.txt", good),
        listed("long.txt", good),
        listed("grows.txt", b"grow"),
        listed("link/escape.txt", good),
        listed("planted.txt", b"planted"),
        listed("dup.txt", good),
        listed("dup.txt", good),
        listed("c", good),
        listed("c/d", good),
        listed("redirect.txt", good),
        listed("denied.txt", good),
        listed("nested/deep/ok.txt", b"deep"),
        listed("big.txt", &[b'b'; 20]),
    ];
    let hostile = Hostile::start(vec![
        (
            "/resources/files",
            vec![Canned::json(200, &listing(entries, 10))],
        ),
        ("/resources/files/good.txt", vec![Canned::file(good)]),
        // A backslash is an ordinary character of a Linux name: `a\b` is one file.
        ("/resources/files/a%5Cb", vec![Canned::file(good)]),
        (
            "/resources/files/mismatch.txt",
            // Same length and the listed etag, other bytes.
            vec![
                Canned::new(200, b"tampered")
                    .header("etag", &format!("\"sha256:{}\"", sha256_hex(expected_body))),
            ],
        ),
        ("/resources/files/etag.txt", vec![Canned::file(b"GOOD")]),
        (
            "/resources/files/long.txt",
            vec![
                Canned::new(200, b"good, and more")
                    .header("etag", &format!("\"sha256:{}\"", sha256_hex(good))),
            ],
        ),
        (
            "/resources/files/grows.txt",
            vec![
                Canned::new(200, b"growing!")
                    .header("etag", &format!("\"sha256:{}\"", sha256_hex(b"grow")))
                    .without_length(),
            ],
        ),
        (
            "/resources/files/planted.txt",
            vec![Canned::file(b"planted")],
        ),
        // Served, so a pull that walked through `link` would land it outside.
        ("/resources/files/link/escape.txt", vec![Canned::file(good)]),
        (
            "/resources/files/redirect.txt",
            vec![Canned::new(302, b"").header("location", "/resources/files/good.txt")],
        ),
        (
            "/resources/files/denied.txt",
            vec![Canned::json(
                403,
                &json!({"error": "outside_root", "message": "no"}),
            )],
        ),
        (
            "/resources/files/nested/deep/ok.txt",
            vec![Canned::file(b"deep")],
        ),
    ]);
    let before_outside = snapshot(&outside);

    let run = pull(&[&hostile.url(), mirror.to_str().expect("utf-8")]);
    assert_eq!(run.code(), Some(1), "stderr: {}", run.stderr);
    let retried = |why: &str| format!("{why} (after one retry)");
    let mut failed: Vec<(String, String)> = [
        ("../x", "path_refused: `..` path component".to_owned()),
        ("/etc/passwd", "path_refused: absolute path".to_owned()),
        ("a//b", "path_refused: empty path component".to_owned()),
        ("a\0b", "path_refused: NUL byte in path".to_owned()),
        ("", "path_refused: empty path".to_owned()),
        ("sub/./x", "path_refused: `.` path component".to_owned()),
        (
            "mismatch.txt",
            retried("sha256_mismatch: the body's sha256 is not the listed one (nor the etag's)"),
        ),
        (
            "etag.txt",
            retried(
                "etag_mismatch: the etag is not the listed sha256 (the file changed after the listing)",
            ),
        ),
        ("long.txt", retried("size_mismatch: 14 bytes served, 4 listed")),
        (
            "grows.txt",
            retried("size_mismatch: more than the 4 bytes listed were served"),
        ),
        (
            "link/escape.txt",
            "local_path_refused: link is a symlink or not a directory; nothing is written through it"
                .to_owned(),
        ),
        ("dup.txt", "duplicate_path: listed more than once".to_owned()),
        ("dup.txt", "duplicate_path: listed more than once".to_owned()),
        (
            "c",
            "path_collision: another entry lies beneath it, so it would be a directory".to_owned(),
        ),
        ("c/d", "path_collision: one of its parents is listed as a file".to_owned()),
        (
            "redirect.txt",
            "http_302: a redirect, which pull does not follow".to_owned(),
        ),
        ("denied.txt", "http_403: refused outside_root".to_owned()),
        (
            "big.txt",
            "too_large: listed at 20 bytes, over the export's max_bytes of 10".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(p, w)| (p.to_owned(), w))
    .collect();
    failed.sort();
    let failed: Vec<Value> = failed
        .into_iter()
        .map(|(path, why)| json!({"path": path, "why": why}))
        .collect();
    assert_eq!(
        run.summary(),
        json!({"pull": "partial", "listed": 22, "downloaded": 4, "unchanged": 0, "deleted": 0,
               "failed": failed, "bytes": 4 + 4 + 7 + 4})
    );

    // Nothing outside DIR changed; DIR holds exactly the four good files and the old link.
    assert_eq!(snapshot(&outside), before_outside);
    let inside: BTreeMap<String, String> = [
        ("good.txt", "file good".to_owned()),
        ("a\\b", "file good".to_owned()),
        ("planted.txt", "file planted".to_owned()),
        ("nested", "dir".to_owned()),
        ("nested/deep", "dir".to_owned()),
        ("nested/deep/ok.txt", "file deep".to_owned()),
        ("link", format!("link -> {}", outside.display())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(snapshot(&mirror), inside);
    let mut everything = snapshot(&root);
    everything.retain(|path, _| !path.starts_with("mirror") && !path.starts_with("outside"));
    assert!(
        everything.is_empty(),
        "written beside the mirror: {everything:?}"
    );

    // Refused and local-refused paths were never asked for; the retryable ones twice, after
    // a second listing; nothing else was retried.
    let mut expected_requests: Vec<String> = [
        "/resources/files",
        "/resources/files",
        "/resources/files/good.txt",
        "/resources/files/a%5Cb",
        "/resources/files/planted.txt",
        "/resources/files/nested/deep/ok.txt",
        "/resources/files/redirect.txt",
        "/resources/files/denied.txt",
        "/resources/files/mismatch.txt",
        "/resources/files/mismatch.txt",
        "/resources/files/etag.txt",
        "/resources/files/etag.txt",
        "/resources/files/long.txt",
        "/resources/files/long.txt",
        "/resources/files/grows.txt",
        "/resources/files/grows.txt",
    ]
    .map(str::to_owned)
    .to_vec();
    expected_requests.sort();
    assert_eq!(hostile.requests(), expected_requests);
    for path in ["mismatch.txt", "etag.txt", "long.txt", "grows.txt"] {
        assert!(
            run.stderr.contains(&format!("pull: {path}: "))
                && run.stderr.contains("retrying once against a fresh listing"),
            "{path} reported: {}",
            run.stderr
        );
    }

    // The good files are unchanged on a second run; nothing more is downloaded.
    let again = pull(&[&hostile.url(), mirror.to_str().expect("utf-8")]);
    let summary = again.summary();
    assert_eq!(
        (
            &summary["downloaded"],
            &summary["unchanged"],
            &summary["bytes"]
        ),
        (&json!(0), &json!(4), &json!(0))
    );
}

#[test]
fn a_file_that_changed_is_retried_once_against_a_fresh_listing() {
    let (_dir, root) = scratch();
    let mirror = root.join("mirror");
    let old = b"old bytes".as_slice();
    let new = b"new bytes, longer".as_slice();
    let hostile = Hostile::start(vec![
        (
            "/resources/files",
            vec![
                Canned::json(
                    200,
                    &listing(vec![listed("f.txt", old), listed("gone.txt", old)], 100),
                ),
                Canned::json(200, &listing(vec![listed("f.txt", new)], 100)),
            ],
        ),
        // The first read already has the new bytes: the etag no longer matches the listing.
        ("/resources/files/f.txt", vec![Canned::file(new)]),
        (
            "/resources/files/gone.txt",
            vec![Canned::json(404, &json!({"error": "not_found"}))],
        ),
    ]);
    let run = pull(&[&hostile.url(), mirror.to_str().expect("utf-8")]);
    assert_eq!(run.code(), Some(1), "stderr: {}", run.stderr);
    assert_eq!(
        run.summary(),
        json!({"pull": "partial", "listed": 2, "downloaded": 1, "unchanged": 0, "deleted": 0,
               "failed": [{"path": "gone.txt", "why": "vanished: no longer listed after not_found: the file vanished after the listing (404 not_found)"}],
               "bytes": new.len()})
    );
    assert_eq!(std::fs::read(mirror.join("f.txt")).expect("read"), new);
    assert_eq!(
        hostile.requests(),
        [
            "/resources/files",
            "/resources/files",
            "/resources/files/f.txt",
            "/resources/files/f.txt",
            "/resources/files/gone.txt",
        ]
    );
    assert!(
        run.stderr.contains("pull: f.txt: etag_mismatch: "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("pull: gone.txt: not_found: "),
        "{}",
        run.stderr
    );
}

#[test]
fn a_failed_relisting_fails_the_retries_and_keeps_the_rest() {
    let (_dir, root) = scratch();
    let mirror = root.join("mirror");
    let hostile = Hostile::start(vec![
        (
            "/resources/files",
            vec![
                Canned::json(
                    200,
                    &listing(vec![listed("a", b"a"), listed("b", b"b")], 100),
                ),
                Canned::new(200, b"not json"),
            ],
        ),
        ("/resources/files/a", vec![Canned::file(b"a")]),
        (
            "/resources/files/b",
            vec![Canned::json(503, &json!({"error": "busy"}))],
        ),
    ]);
    let run = pull(&[&hostile.url(), mirror.to_str().expect("utf-8")]);
    assert_eq!(run.code(), Some(1), "stderr: {}", run.stderr);
    let summary = run.summary();
    assert_eq!(summary["downloaded"], 1);
    let why = summary["failed"][0]["why"].as_str().expect("why");
    assert!(
        why.starts_with("http_503: the server failed busy; the fresh listing failed: not JSON: "),
        "{why}"
    );
    assert_eq!(summary["failed"][0]["path"], "b");
}

// =============================================================================================
// https
// =============================================================================================

/// A CA's certificate written to `dir`, and a server configuration for `127.0.0.1` signed by it.
fn test_ca(dir: &Path) -> (PathBuf, Arc<rustls::ServerConfig>) {
    let ca = TestCa::new("pull test CA");
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, ca.pem()).expect("write CA");
    (pem, ca.server_config(&["127.0.0.1"]))
}

#[test]
fn https_is_verified_against_the_given_ca() {
    let (_dir, root) = scratch();
    let (ca, config) = test_ca(&root);
    let body = b"over tls".as_slice();
    let hostile = Hostile::start_with(
        vec![
            (
                "/resources/files",
                vec![Canned::json(
                    200,
                    &listing(vec![listed("t.txt", body)], 100),
                )],
            ),
            ("/resources/files/t.txt", vec![Canned::file(body)]),
        ],
        Some(config),
    );
    let url = format!("https://127.0.0.1:{}", hostile.port);
    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_str().expect("utf-8");

    // An empty certificate directory: the system's roots cannot vouch for the test CA.
    let no_roots = root.join("no-roots");
    std::fs::create_dir(&no_roots).expect("dir");
    let env = [("SSL_CERT_DIR", no_roots.to_str().expect("utf-8"))];
    pull_with_env(&[&url, mirror_arg], &env).assert_refused("TLS");
    assert!(!mirror.exists());

    let run = pull_with_env(
        &[&url, mirror_arg, "--ca", ca.to_str().expect("utf-8")],
        &env,
    );
    assert_eq!(run.code(), Some(0), "stderr: {}", run.stderr);
    assert_eq!(
        run.summary(),
        json!({"pull": "ok", "listed": 1, "downloaded": 1, "unchanged": 0, "deleted": 0,
               "failed": [], "bytes": body.len()})
    );
    assert_eq!(std::fs::read(mirror.join("t.txt")).expect("read"), body);
}

// =============================================================================================
// Names, signals and what a killed run leaves (D-16.1)
// =============================================================================================

#[test]
fn a_backslash_is_an_ordinary_character_and_a_clean_second_run_exits_0() {
    let (_dir, root) = scratch();
    let files: Vec<(&str, &[u8])> = vec![
        ("back\\slash.txt", b"back"),
        ("dir\\name/in\\side.txt", b"inside"),
        ("..\\up.txt", b"not a parent"),
        ("plain.txt", b"plain"),
    ];
    for (path, bytes) in &files {
        write(&root.join("wd/out").join(path), bytes);
    }
    let serve = serve(&root, FILES_MANIFEST);
    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_str().expect("utf-8 path");
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();

    let first = pull(&[serve.url(), mirror_arg]);
    assert_eq!(first.code(), Some(0), "stderr: {}", first.stderr);
    assert_eq!(
        first.summary(),
        json!({"pull": "ok", "listed": 4, "downloaded": 4, "unchanged": 0, "deleted": 0,
               "failed": [], "bytes": total})
    );
    assert_eq!(snapshot(&mirror), snapshot(&root.join("wd/out")));
    assert_eq!(
        std::fs::read(mirror.join("back\\slash.txt")).expect("landed under its own name"),
        b"back"
    );

    let second = pull(&[serve.url(), mirror_arg, "--delete"]);
    assert_eq!(second.code(), Some(0), "stderr: {}", second.stderr);
    assert_eq!(
        second.summary(),
        json!({"pull": "ok", "listed": 4, "downloaded": 0, "unchanged": 4, "deleted": 0,
               "failed": [], "bytes": 0})
    );
    assert_eq!(snapshot(&mirror), snapshot(&root.join("wd/out")));
}

/// A server whose listing names one file of `size` bytes, whose body it sends `first` bytes of
/// and then holds the connection open without another byte for up to a minute. The body
/// matches nothing, so a file could never land from it.
fn stalling_server(size: usize, first: usize) -> Hostile {
    let body = vec![b's'; size];
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let thread_log = log.clone();
    let listing_body = listing(vec![listed("big.bin", &body)], 1 << 30).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some(target) = read_head(&mut stream) else {
                continue;
            };
            thread_log.lock().expect("log").push(target.clone());
            let listing_body = listing_body.clone();
            std::thread::spawn(move || {
                if target == "/resources/files" {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{listing_body}",
                        listing_body.len()
                    );
                } else {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nconnection: close\r\netag: \"sha256:{}\"\r\ncontent-length: {size}\r\n\r\n",
                        sha256_hex(&vec![b's'; size])
                    );
                    let _ = stream.write_all(&vec![b's'; first]);
                    let _ = stream.flush();
                    std::thread::sleep(Duration::from_secs(60));
                }
            });
        }
    });
    Hostile { port, log }
}

/// Reads a request's head; its target.
fn read_head(stream: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
        if head.len() > 64 * 1024 {
            return None;
        }
    }
    let head = String::from_utf8_lossy(&head);
    head.split(' ').nth(1).map(str::to_owned)
}

/// Every path beneath `dir` whose last name ends in `.pull-part`.
fn part_files(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .into_keys()
        .filter(|path| path.ends_with(".pull-part"))
        .collect()
}

/// A pull started in the background, its output read as it comes.
struct Running {
    child: std::process::Child,
    stdout: std::sync::mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(BIN)
            .arg("pull")
            .args(args)
            .env_remove("RESOURCE_PLANE_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn pull");
        let out = child.stdout.take().expect("stdout");
        let (send, stdout) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Running {
            child,
            stdout,
            stderr: Some(stderr),
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .expect("kill(2)");
    }

    /// The next stdout line, parsed, within `timeout`.
    fn line(&self, timeout: Duration) -> Value {
        let line = self
            .stdout
            .recv_timeout(timeout)
            .unwrap_or_else(|e| panic!("no stdout line within {timeout:?}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// Waits for the end (within [`RUN_TIMEOUT`]): the status, the stdout lines not yet read,
    /// and stderr.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<String>, String) {
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the pull did not end within {RUN_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let rest: Vec<String> = self.stdout.iter().collect();
        let stderr = self.stderr.take().expect("stderr reader");
        (status, rest, stderr.join().expect("stderr reader"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `ready` holds, polling, within `timeout`.
fn eventually(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGINT and SIGTERM in the middle of a file: the run ends with the shell's status for the
/// signal, prints no summary, and leaves neither the file nor its temporary file.
#[test]
fn sigint_and_sigterm_mid_file_remove_the_temporary_file_and_exit_130_and_143() {
    use rustix::process::Signal;
    for (signal, status) in [(Signal::INT, 130), (Signal::TERM, 143)] {
        let (_dir, root) = scratch();
        let server = stalling_server(8 << 20, 512 << 10);
        let mirror = root.join("mirror");
        let running = Running::start(&[&server.url(), mirror.to_str().expect("utf-8")]);
        // The download is under way once its temporary file holds the bytes sent so far.
        eventually("a temporary file with bytes", RUN_TIMEOUT, || {
            part_files(&mirror).iter().any(|part| {
                std::fs::metadata(mirror.join(part)).is_ok_and(|m| m.len() >= 512 << 10)
            })
        });
        // A second pull into the same DIR meanwhile must not take the temporary file in
        // flight for a killed run's: the first holds DIR's lock.
        let in_flight = part_files(&mirror);
        let empty = Hostile::start(vec![(
            "/resources/files",
            vec![Canned::json(200, &listing(vec![], 10))],
        )]);
        let beside = pull(&[&empty.url(), mirror.to_str().expect("utf-8")]);
        assert_eq!(beside.code(), Some(0), "stderr: {}", beside.stderr);
        assert_eq!(beside.stderr, "", "nothing removed, nothing to say");
        assert_eq!(part_files(&mirror), in_flight);

        running.signal(signal);
        let (exit, stdout, stderr) = running.finish();
        assert_eq!(exit.code(), Some(status), "{signal:?}; stderr: {stderr}");
        assert!(stdout.is_empty(), "no summary after a stop: {stdout:?}");
        assert!(stderr.contains("received; stopped"), "{signal:?}: {stderr}");
        assert_eq!(part_files(&mirror), Vec::<String>::new(), "{signal:?}");
        assert!(!mirror.join("big.bin").exists());
    }
}

/// A killed run (SIGKILL, no chance to clean) leaves its temporary file; the next run removes
/// such files of its exact naming, wherever they are beneath DIR, and nothing else: a file
/// that merely resembles one, or one the export itself holds, stays.
#[test]
fn the_next_run_removes_what_a_killed_run_left_and_nothing_else() {
    let (_dir, root) = scratch();
    let mirror = root.join("mirror");
    let server = stalling_server(8 << 20, 256 << 10);
    let running = Running::start(&[&server.url(), mirror.to_str().expect("utf-8")]);
    eventually("a temporary file", RUN_TIMEOUT, || {
        !part_files(&mirror).is_empty()
    });
    running.signal(rustix::process::Signal::KILL);
    let (exit, _, _) = running.finish();
    assert_eq!(exit.code(), None, "killed");
    let left = part_files(&mirror);
    assert_eq!(left.len(), 1, "the killed run's part file: {left:?}");

    // More of the same naming beneath DIR, and near misses that are not ours.
    let hex = "0123456789abcdef0123456789abcdef";
    let ours = format!("sub/.{hex}.pull-part");
    write(&mirror.join(&ours), b"left by a killed run");
    let near = [
        format!(".{}.pull-part", hex.to_uppercase()),
        format!(".{}.pull-part", &hex[1..]),
        format!(".{hex}0.pull-part"),
        format!(".{hex}.pull-part.bak"),
        format!("{hex}.pull-part"),
        "notes.pull-part".to_owned(),
    ];
    for name in &near {
        write(&mirror.join(name), b"mine");
    }
    let listed_part = format!("sub/.{}.pull-part", "f".repeat(32));
    write(&root.join("wd/out/a.txt"), b"a");
    write(&root.join("wd/out").join(&listed_part), b"the export's own");
    let serve = serve(&root, FILES_MANIFEST);

    let run = pull(&[serve.url(), mirror.to_str().expect("utf-8")]);
    assert_eq!(run.code(), Some(0), "stderr: {}", run.stderr);
    assert_eq!(
        run.summary(),
        json!({"pull": "ok", "listed": 2, "downloaded": 2, "unchanged": 0, "deleted": 0,
               "failed": [], "bytes": 1 + 16})
    );
    assert!(
        run.stderr
            .contains("removed 2 temporary file(s) an interrupted run left in DIR"),
        "{}",
        run.stderr
    );
    let mut expected: Vec<String> = near
        .iter()
        .filter(|name| name.ends_with(".pull-part"))
        .cloned()
        .collect();
    expected.push(listed_part.clone());
    expected.sort();
    assert_eq!(part_files(&mirror), expected);
    for name in &near {
        assert_eq!(std::fs::read(mirror.join(name)).expect("kept"), b"mine");
    }

    // The export's own file of that naming is mirrored, not taken for a leftover.
    let again = pull(&[serve.url(), mirror.to_str().expect("utf-8")]);
    assert_eq!(again.code(), Some(0), "stderr: {}", again.stderr);
    assert_eq!(
        again.summary(),
        json!({"pull": "ok", "listed": 2, "downloaded": 0, "unchanged": 2, "deleted": 0,
               "failed": [], "bytes": 0})
    );
    assert_eq!(again.stderr, "");
}

// =============================================================================================
// --watch against a scripted watch stream (D-17.3)
// =============================================================================================

type Files = BTreeMap<String, Vec<u8>>;

fn files(entries: &[(&str, &[u8])]) -> Files {
    entries
        .iter()
        .map(|(path, bytes)| ((*path).to_owned(), bytes.to_vec()))
        .collect()
}

/// The listing body `serve` would send for `files`, and its etag (`"sha256:<body's hash>"`).
fn listing_of(files: &Files) -> (String, String) {
    let entries: Vec<Value> = files
        .iter()
        .map(|(path, bytes)| listed(path, bytes))
        .collect();
    let body = listing(entries, 1 << 30).to_string();
    let etag = format!("\"sha256:{}\"", sha256_hex(body.as_bytes()));
    (body, etag)
}

fn etag_of(files: &Files) -> String {
    listing_of(files).1
}

/// The changes from `before` to `after`, sorted by path, as D-17.3 writes them.
fn diff(before: &Files, after: &Files) -> Vec<Value> {
    let mut paths: Vec<&String> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| match (before.get(path), after.get(path)) {
            (None, Some(bytes)) => Some(change(path, "added", bytes)),
            (Some(old), Some(new)) if old != new => Some(change(path, "modified", new)),
            (Some(_), None) => Some(json!({"path": path, "change": "removed"})),
            _ => None,
        })
        .collect()
}

fn change(path: &str, kind: &str, bytes: &[u8]) -> Value {
    let mut entry = listed(path, bytes);
    entry["change"] = json!(kind);
    entry
}

/// A `change` event from the listing of `before` to that of `after`.
fn change_event(before: &Files, after: &Files) -> String {
    change_event_with(&etag_of(before), &etag_of(after), diff(before, after))
}

fn change_event_with(from: &str, to: &str, changes: Vec<Value>) -> String {
    let data = json!({"from": from, "etag": to, "generation": 0, "changes": changes});
    format!("event: change\nid: {to}\ndata: {data}\n\n")
}

/// One step of a scripted watch stream.
enum Step {
    /// The export becomes these files (listing and reads answer from them from now on).
    Export(Files),
    /// Bytes sent on the stream.
    Send(String),
    /// Many bytes sent on the stream.
    SendBytes(Vec<u8>),
    /// The stream stays open, silent, until the client leaves (or a minute passes).
    Hold,
}

/// A file read that stalls after `first` bytes until `go` is set.
struct Stall {
    path: String,
    first: usize,
    go: Arc<std::sync::atomic::AtomicBool>,
}

/// A capsule whose export the test sets and whose watch streams it scripts: one script per
/// watch request, in order (a request past the last script gets a silent held stream). It
/// records every request target and each watch request's `Last-Event-ID`.
struct Scripted {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    last_event_ids: Arc<Mutex<Vec<Option<String>>>>,
}

impl Scripted {
    fn start(export: Files, scripts: Vec<Vec<Step>>, stall: Option<Stall>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let export = Arc::new(Mutex::new(export));
        let scripts = Arc::new(Mutex::new(
            scripts
                .into_iter()
                .collect::<std::collections::VecDeque<_>>(),
        ));
        let stall = Arc::new(stall);
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let ids: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let (thread_log, thread_ids) = (log.clone(), ids.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some((target, headers)) = read_request(&mut stream) else {
                    continue;
                };
                thread_log.lock().expect("log").push(target.clone());
                let (export, stall) = (export.clone(), stall.clone());
                if target == "/resources/files?watch=1" {
                    thread_ids
                        .lock()
                        .expect("ids")
                        .push(headers.get("last-event-id").cloned());
                    let script = scripts.lock().expect("scripts").pop_front();
                    std::thread::spawn(move || {
                        play(stream, script.unwrap_or_else(|| vec![Step::Hold]), &export);
                    });
                } else {
                    std::thread::spawn(move || serve_export(stream, &target, &export, &stall));
                }
            }
        });
        Scripted {
            port,
            log,
            last_event_ids: ids,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn listings(&self) -> usize {
        let log = self.log.lock().expect("log");
        log.iter().filter(|t| *t == "/resources/files").count()
    }

    fn last_event_ids(&self) -> Vec<Option<String>> {
        self.last_event_ids.lock().expect("ids").clone()
    }
}

/// A request's target and headers (names lowercased).
fn read_request(stream: &mut impl Read) -> Option<(String, HashMap<String, String>)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Some((target, headers))
}

fn play(mut stream: TcpStream, script: Vec<Step>, export: &Mutex<Files>) {
    let _ = stream.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
    );
    for step in script {
        let sent = match step {
            Step::Export(files) => {
                *export.lock().expect("export") = files;
                Ok(())
            }
            Step::Send(text) => stream.write_all(text.as_bytes()),
            Step::SendBytes(bytes) => stream.write_all(&bytes),
            Step::Hold => {
                // Until the client closes its end (a read sees the end) or a minute passes.
                let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
                let _ = stream.read(&mut [0u8; 1]);
                return;
            }
        };
        if sent.is_err() {
            return;
        }
        let _ = stream.flush();
    }
}

fn serve_export(mut stream: TcpStream, target: &str, export: &Mutex<Files>, stall: &Option<Stall>) {
    let files = export.lock().expect("export").clone();
    if target == "/resources/files" {
        let (body, etag) = listing_of(&files);
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\netag: {etag}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let path = target.strip_prefix("/resources/files/").unwrap_or_default();
    let Some(bytes) = files.get(path) else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nconnection: close\r\netag: \"sha256:{}\"\r\ncontent-length: {}\r\n\r\n",
        sha256_hex(bytes),
        bytes.len()
    );
    let mut rest = bytes.as_slice();
    if let Some(stall) = stall.as_ref().filter(|s| s.path == path) {
        let _ = stream.write_all(&rest[..stall.first]);
        let _ = stream.flush();
        rest = &rest[stall.first..];
        while !stall.go.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = stream.write_all(rest);
}

/// What the mirror holds, as `Files` (regular files only; no directory may be empty).
fn mirrored(dir: &Path) -> Files {
    snapshot(dir)
        .into_iter()
        .filter_map(|(path, what)| {
            let bytes = what.strip_prefix("file ")?;
            Some((path, bytes.as_bytes().to_vec()))
        })
        .collect()
}

/// A watch line: the listing named by its opaque etag, without quotes, as event ids name it.
fn watch_line(etag: &str, downloaded: u64, deleted: u64, failed: Value) -> Value {
    let etag = etag.trim_start_matches("W/").trim_matches('"');
    json!({"watch": etag, "downloaded": downloaded, "deleted": deleted, "failed": failed})
}

/// The mirror follows changes, resumes a dropped stream from the last event it applied (a
/// half-sent event is not applied), lists again on `reset`, not on a `listing` event naming
/// its own listing, and ends with status 0 on SIGTERM.
#[test]
fn watch_applies_changes_resumes_after_a_drop_and_lists_again_on_reset() {
    let (_dir, root) = scratch();
    let s0 = files(&[("a.txt", b"one"), ("old.txt", b"old")]);
    let s1 = files(&[("a.txt", b"two"), ("b/c.txt", b"see"), ("old.txt", b"old")]);
    let s2 = files(&[("a.txt", b"two"), ("b/c.txt", b"see"), ("d.txt", b"dee")]);
    let never = files(&[("a.txt", b"never applied")]);
    let s3 = files(&[("a.txt", b"three"), ("d.txt", b"dee"), ("e.txt", b"e")]);
    let s4 = files(&[
        ("a.txt", b"three"),
        ("d.txt", b"dee"),
        ("e.txt", b"e"),
        ("f/g.txt", b"gee"),
    ]);
    let s5 = files(&[("f/g.txt", b"gee")]);
    let e5 = etag_of(&s5);
    let half = change_event(&s2, &never);
    let half = half[..half.len() / 2].to_owned();
    let (e0, e1, e2, e3, e4) = (
        etag_of(&s0),
        etag_of(&s1),
        etag_of(&s2),
        etag_of(&s3),
        etag_of(&s4),
    );
    let server = Scripted::start(
        s0.clone(),
        vec![
            vec![
                Step::Send(": keep-alive\n\n".into()),
                Step::Export(s1.clone()),
                Step::Send(change_event(&s0, &s1)),
                Step::Export(s2.clone()),
                Step::Send(change_event(&s1, &s2)),
                Step::Send(half),
            ],
            vec![
                Step::Export(s3.clone()),
                Step::Send(format!("event: reset\ndata: {}\n\n", json!({"etag": e3}))),
                Step::Hold,
            ],
            vec![
                Step::Send(format!(
                    "event: listing\nid: {e3}\ndata: {}\n\n",
                    json!({"etag": e3, "entry_count": 3})
                )),
                Step::Export(s4.clone()),
                Step::Send(change_event(&s3, &s4)),
                // A listing event naming another listing: no resume is possible from it.
                Step::Export(s5.clone()),
                Step::Send(format!(
                    "event: listing\nid: {e5}\ndata: {}\n\n",
                    json!({"etag": e5, "entry_count": 1})
                )),
                Step::Hold,
            ],
        ],
        None,
    );
    let mirror = root.join("mirror");
    let running = Running::start(&[
        &server.url(),
        mirror.to_str().expect("utf-8"),
        "--watch",
        "--delete",
    ]);
    let wait = Duration::from_secs(20);
    assert_eq!(
        running.line(wait),
        json!({"pull": "ok", "listed": 2, "downloaded": 2, "unchanged": 0, "deleted": 0,
               "failed": [], "bytes": 6})
    );
    assert_eq!(running.line(wait), watch_line(&e1, 2, 0, json!([])));
    assert_eq!(running.line(wait), watch_line(&e2, 1, 1, json!([])));
    // The reset's full pass: a.txt and e.txt fetched, b/c.txt deleted, d.txt unchanged.
    assert_eq!(running.line(wait), watch_line(&e3, 2, 1, json!([])));
    assert_eq!(running.line(wait), watch_line(&e4, 1, 0, json!([])));
    assert_eq!(running.line(wait), watch_line(&e5, 0, 3, json!([])));
    assert_eq!(mirrored(&mirror), s5);
    eventually("the fourth stream", wait, || {
        server.last_event_ids().len() == 4
    });
    assert_eq!(
        server.last_event_ids(),
        [Some(e0), Some(e2), Some(e3), Some(e5)],
        "each stream opened from the last listing the mirror reached"
    );
    assert_eq!(
        server.listings(),
        3,
        "the first pass, the reset's and the other listing's; none for its own listing"
    );

    running.signal(rustix::process::Signal::TERM);
    let (exit, rest, stderr) = running.finish();
    assert_eq!(exit.code(), Some(0), "stderr: {stderr}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        stderr.contains("SIGTERM received; the watch ended"),
        "{stderr}"
    );
    assert!(stderr.contains("reset"), "{stderr}");
    assert_eq!(part_files(&mirror), Vec::<String>::new());
}

/// Hostile events are refused without writing outside DIR: malformed data and an event from
/// another listing lead to a full pass, paths escaping DIR are refused alone, and a line past
/// the limit is not buffered.
#[test]
fn watch_refuses_hostile_events_cleanly() {
    let (_dir, root) = scratch();
    let s0 = files(&[("a.txt", b"a")]);
    let s1 = files(&[("a.txt", b"a"), ("ok.txt", b"ok")]);
    let (e0, e1) = (etag_of(&s0), etag_of(&s1));
    let evil = b"evil".as_slice();
    let mut changes = diff(&s0, &s1);
    changes.push(change("../escape.txt", "added", evil));
    changes.push(change("/tmp/abs.txt", "modified", evil));
    changes.push(json!({"path": "sub/../../a.txt", "change": "removed"}));
    let oversized = [b"data: ".as_slice(), &vec![b'x'; 17 << 20]].concat();
    let server = Scripted::start(
        s0.clone(),
        vec![
            vec![Step::Send(format!(
                "event: change\nid: {e1}\ndata: {{not json\n\n"
            ))],
            vec![
                Step::Export(s1.clone()),
                Step::Send(change_event_with(&e0, &e1, changes)),
                Step::SendBytes(oversized),
            ],
            vec![Step::Send(change_event_with(&e0, &e1, diff(&s0, &s1)))],
            vec![Step::Send(format!(
                "event: change\nid: {e0}\ndata: {}\n\n",
                json!({"from": e1, "etag": e1, "generation": 0, "changes": []})
            ))],
        ],
        None,
    );
    let mirror = root.join("mirror");
    let running = Running::start(&[
        &server.url(),
        mirror.to_str().expect("utf-8"),
        "--watch",
        "--delete",
    ]);
    let wait = Duration::from_secs(20);
    assert_eq!(running.line(wait)["pull"], "ok");
    // Malformed data: nothing applied, a full pass finds nothing to do.
    assert_eq!(running.line(wait), watch_line(&e0, 0, 0, json!([])));
    assert_eq!(
        running.line(wait),
        watch_line(
            &e1,
            1,
            0,
            json!([
                {"path": "../escape.txt", "why": "path_refused: `..` path component"},
                {"path": "/tmp/abs.txt", "why": "path_refused: absolute path"},
                {"path": "sub/../../a.txt", "why": "path_refused: `..` path component"},
            ])
        )
    );
    // The oversized line, the event from a listing the mirror left, the id that is not the
    // event's etag: each a full pass that finds nothing to do.
    for _ in 0..3 {
        assert_eq!(running.line(wait), watch_line(&e1, 0, 0, json!([])));
    }
    // Reopened from where the mirror is, after a backoff.
    eventually("the fifth stream", wait, || {
        server.last_event_ids().len() == 5
    });
    running.signal(rustix::process::Signal::INT);
    let (exit, _, stderr) = running.finish();
    assert_eq!(exit.code(), Some(0), "stderr: {stderr}");
    for said in [
        "a `change` event cannot be applied: not the event's shape",
        "the stream cannot be read: a line longer than 16777216 bytes",
        &format!("a `change` event applies to {e0}, not to the mirror's listing"),
        "a `change` event's id is not its etag",
    ] {
        assert!(stderr.contains(said), "{said:?} not in {stderr}");
    }
    assert_eq!(mirrored(&mirror), s1);
    assert!(!root.join("escape.txt").exists());
    assert_eq!(
        server.last_event_ids(),
        [
            Some(e0.clone()),
            Some(e0),
            Some(e1.clone()),
            Some(e1.clone()),
            Some(e1)
        ]
    );
}

/// A signal during a watched download lets that file land whole, then ends the watch with
/// status 0 and no temporary file; a second signal drops the file in flight instead.
#[test]
fn a_signal_ends_a_watch_after_the_file_in_flight() {
    watch_signalled_mid_file(false);
    watch_signalled_mid_file(true);
}

fn watch_signalled_mid_file(twice: bool) {
    let (_dir, root) = scratch();
    let s0 = files(&[("a.txt", b"a")]);
    let big: Vec<u8> = (0..4 << 20).map(|i| (i % 253) as u8).collect();
    let mut s1 = s0.clone();
    s1.insert("big.bin".into(), big.clone());
    let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = Scripted::start(
        s0.clone(),
        vec![vec![
            Step::Export(s1.clone()),
            Step::Send(change_event(&s0, &s1)),
            Step::Hold,
        ]],
        Some(Stall {
            path: "big.bin".into(),
            first: 1 << 20,
            go: go.clone(),
        }),
    );
    let mirror = root.join("mirror");
    let mut running = Running::start(&[&server.url(), mirror.to_str().expect("utf-8"), "--watch"]);
    assert_eq!(running.line(Duration::from_secs(20))["pull"], "ok");
    eventually("the big file under way", RUN_TIMEOUT, || {
        part_files(&mirror)
            .iter()
            .any(|part| std::fs::metadata(mirror.join(part)).is_ok_and(|m| m.len() >= 1 << 20))
    });
    running.signal(rustix::process::Signal::INT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        running.child.try_wait().expect("try_wait").is_none(),
        "the watch waits for the file in flight"
    );
    if twice {
        running.signal(rustix::process::Signal::TERM);
        let (exit, rest, stderr) = running.finish();
        go.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(exit.code(), Some(0), "stderr: {stderr}");
        assert!(
            rest.is_empty(),
            "an unfinished batch prints no line: {rest:?}"
        );
        assert!(!mirror.join("big.bin").exists());
    } else {
        go.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            running.line(Duration::from_secs(20)),
            watch_line(&etag_of(&s1), 1, 0, json!([]))
        );
        let (exit, _, stderr) = running.finish();
        assert_eq!(exit.code(), Some(0), "stderr: {stderr}");
        assert_eq!(std::fs::read(mirror.join("big.bin")).expect("landed"), big);
    }
    assert_eq!(part_files(&mirror), Vec::<String>::new());
}

/// `pull --watch` against the real server's watch stream (D-17.3): a file written, changed,
/// added in a new directory and removed in the export reaches the mirror as one batch line
/// each, with `--delete`; the mirror then equals the export; SIGTERM ends it with status 0 and
/// no temporary file.
#[test]
fn watch_keeps_a_mirror_of_a_real_server_current() {
    let (_dir, root) = scratch();
    let out = root.join("wd/out");
    write(&out.join("a.txt"), b"first");
    let server = serve(
        &root,
        "name: r\nexports:\n  files: { root: out, mode: read-only }\n",
    );
    let mirror = root.join("mirror");
    let running = Running::start(&[
        server.url(),
        mirror.to_str().expect("utf-8"),
        "--watch",
        "--delete",
    ]);
    assert_eq!(running.line(Duration::from_secs(20))["pull"], "ok");
    assert_eq!(std::fs::read(mirror.join("a.txt")).expect("a"), b"first");
    // The stream opens and the export's watcher starts (a change before it would be caught up
    // by a full pass instead: a `reset`).
    std::thread::sleep(Duration::from_millis(800));
    let steps: [(&str, &dyn Fn()); 3] = [
        ("a write", &|| write(&out.join("sub/b.txt"), b"second")),
        ("a change", &|| write(&out.join("a.txt"), b"changed")),
        ("a removal", &|| {
            std::fs::remove_file(out.join("sub/b.txt")).expect("remove")
        }),
    ];
    for (what, step) in steps {
        step();
        let line = running.line(Duration::from_secs(20));
        assert!(
            line["watch"]
                .as_str()
                .is_some_and(|e| e.starts_with("sha256:")),
            "{what}: {line}"
        );
        assert_eq!(line["failed"], json!([]), "{what}: {line}");
        let files_of = |dir: &Path| {
            let mut files = snapshot(dir);
            files.retain(|_, leaf| leaf.starts_with("file "));
            files
        };
        eventually(what, RUN_TIMEOUT, || files_of(&mirror) == files_of(&out));
    }
    running.signal(rustix::process::Signal::TERM);
    let (exit, _, stderr) = running.finish();
    assert!(
        !stderr.contains("reset"),
        "every change came as an event: {stderr}"
    );
    assert_eq!(exit.code(), Some(0), "stderr: {stderr}");
    assert_eq!(part_files(&mirror), Vec::<String>::new());
}
