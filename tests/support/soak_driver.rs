#![allow(clippy::disallowed_methods)] // the driver builds its world with std::fs
#![allow(dead_code)] // each includer (tests/faults.rs, tests/soak_short.rs, examples/soak.rs) uses a subset
//! Drives the real `resource-plane serve` binary from the outside (the soak, and the process
//! helpers of `tests/faults.rs`):
//!
//! - [`exchange`]: one raw HTTP/1.1 request over a fresh `std::net::TcpStream`.
//! - [`Serve`]: one `resource-plane serve --console` process: ready line, console calls,
//!   `VmHWM`, a graceful stop by closing stdin; killed when dropped.
//! - [`run_soak`]: a bounded loopback soak against ONE serve process (capsule A, with both
//!   exports over `out/`) plus a second serve process (capsule B) that only provides the
//!   agent card A's `share-file` needs. N client threads send a mix of reads, listings,
//!   attacks, redeems and forgeries while another thread rewrites files by write-temp + rename.
//!   Every answer is checked exactly; the report lists every problem found.
//!
//! Nothing here talks to anything but 127.0.0.1, and every loop is bounded in time and count.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Small pure helpers.
// ---------------------------------------------------------------------------------------------

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The etag a body must carry: `"sha256:<hex>"`, quotes included.
pub fn etag_of(body: &[u8]) -> String {
    format!("\"sha256:{}\"", sha256_hex(body))
}

/// A token's `handle_id`: the first 16 hex characters of sha256(token).
pub fn handle_id(token: &str) -> String {
    sha256_hex(token.as_bytes())[..16].to_owned()
}

/// The token with one character of its MAC segment changed to another base64url character.
/// `position` is taken modulo 40, so the last (partially used) character is never touched and
/// the forgery stays a well-formed token: the server must answer `handle_not_valid`, never
/// `malformed_handle`.
pub fn forge_mac(token: &str, position: usize) -> String {
    let mac_start = token.rfind('.').expect("a token has a MAC segment") + 1;
    let mut bytes = token.as_bytes().to_vec();
    let at = mac_start + position % 40;
    assert!(at < bytes.len() - 1, "the MAC segment is 43 characters");
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).expect("base64url is ASCII")
}

/// A small deterministic generator (SplitMix64): file contents and the driver's choices.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The largest file the soak writes.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// Version `version` of soak file `idx`: a header line `rp-soak <idx> <version> <n>\n` and `n`
/// pseudo-random bytes. Sizes are mixed: up to 1 KiB, 16 KiB, 64 KiB or 256 KiB. Any body can
/// be checked to be exactly one whole version of one file ([`verify_version`]).
pub fn version_bytes(idx: usize, version: u64) -> Vec<u8> {
    let mut rng = SplitMix::new((idx as u64).wrapping_mul(0x1000_0000_01B3) ^ version);
    let cap: u64 = match rng.below(4) {
        0 => 1024,
        1 => 16 * 1024,
        2 => 64 * 1024,
        _ => (MAX_FILE_BYTES - 64) as u64,
    };
    let payload = rng.below(cap) as usize;
    let mut out = format!("rp-soak {idx} {version} {payload}\n").into_bytes();
    let total = out.len() + payload;
    out.reserve(payload);
    while out.len() < total {
        let word = rng.next_u64().to_le_bytes();
        let take = (total - out.len()).min(8);
        out.extend_from_slice(&word[..take]);
    }
    out
}

/// Checks that `body` is exactly one whole version of file `expected_idx`; returns the version.
pub fn verify_version(body: &[u8], expected_idx: usize) -> Result<u64, String> {
    let newline = body
        .iter()
        .take(64)
        .position(|b| *b == b'\n')
        .ok_or_else(|| format!("body of {} bytes has no soak header", body.len()))?;
    let header = std::str::from_utf8(&body[..newline]).map_err(|_| "header is not UTF-8")?;
    let fields: Vec<&str> = header.split(' ').collect();
    let [magic, idx, version, _] = fields.as_slice() else {
        return Err(format!("bad soak header {header:?}"));
    };
    let idx: usize = idx.parse().map_err(|_| format!("bad header {header:?}"))?;
    let version: u64 = version
        .parse()
        .map_err(|_| format!("bad header {header:?}"))?;
    if *magic != "rp-soak" || idx != expected_idx {
        return Err(format!(
            "header {header:?} but file {expected_idx} was requested"
        ));
    }
    if version_bytes(idx, version) != body {
        return Err(format!(
            "body ({} bytes) is not whole version {version} of file {idx} (torn or mixed)",
            body.len()
        ));
    }
    Ok(version)
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1 over std TcpStream: one request per fresh connection.
// ---------------------------------------------------------------------------------------------

/// A parsed response.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Header names lowercased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked when the response was chunked).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON `error` field of a refusal body.
    pub fn error_code(&self) -> Option<String> {
        serde_json::from_slice::<Value>(&self.body)
            .ok()?
            .get("error")?
            .as_str()
            .map(str::to_owned)
    }

    /// A short description for assertion messages.
    pub fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(200)]).into_owned();
        format!("{} {body:?}", self.status)
    }
}

/// Why an exchange failed; `sent` says whether the whole request head left first.
#[derive(Debug, Clone)]
pub struct TransportError {
    /// The request head was written completely.
    pub sent: bool,
    /// What went wrong.
    pub what: String,
}

/// Sends `method target` with `headers` on a fresh connection and reads the whole response
/// (the server always closes). `timeout` bounds the connect and each read and write.
pub fn exchange(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<RawResponse, TransportError> {
    let unsent = |what: String| TransportError { sent: false, what };
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| unsent(format!("connect: {e}")))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| unsent(format!("set timeouts: {e}")))?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .map_err(|e| unsent(format!("write: {e}")))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| TransportError {
        sent: true,
        what: format!("read: {e} after {} bytes", raw.len()),
    })?;
    parse_response(&raw).map_err(|what| TransportError { sent: true, what })
}

/// Parses one complete HTTP/1.x response.
pub fn parse_response(raw: &[u8]) -> Result<RawResponse, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no complete head in {} bytes", raw.len()))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "head is not UTF-8".to_owned())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split(' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {line:?}"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let rest = &raw[end + 4..];
    let mut response = RawResponse {
        status,
        headers,
        body: Vec::new(),
    };
    if response
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        response.body = dechunk(rest)?;
    } else if let Some(length) = response.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("bad content-length {length:?}"))?;
        if rest.len() != length {
            return Err(format!(
                "content-length {length} but {} body bytes arrived",
                rest.len()
            ));
        }
        response.body = rest.to_vec();
    } else {
        response.body = rest.to_vec();
    }
    Ok(response)
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).map_err(|_| "bad chunk size")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            return Err("truncated chunk".into());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

// ---------------------------------------------------------------------------------------------
// One `resource-plane serve --console` process.
// ---------------------------------------------------------------------------------------------

/// The longest the ready line or a console answer may take.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(20);
/// The longest a serve process may take to exit once its stdin is closed.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// How to start one serve process. The caller writes the manifest file.
#[derive(Debug, Clone)]
pub struct ServeSpec {
    /// The `resource-plane` binary.
    pub bin: PathBuf,
    /// A label for messages.
    pub label: String,
    /// `--workdir`.
    pub workdir: PathBuf,
    /// `--manifest`.
    pub manifest: PathBuf,
    /// `--trace`.
    pub trace: PathBuf,
    /// Where stderr is captured.
    pub stderr: PathBuf,
}

/// A running `resource-plane serve --console`; killed when dropped.
#[derive(Debug)]
pub struct Serve {
    /// The label given in the spec.
    pub label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The parsed ready line.
    pub ready: Value,
    /// The listener's address.
    pub addr: SocketAddr,
    /// The capsule's own audience, from the ready line.
    pub audience: String,
    /// The trace file.
    pub trace: PathBuf,
    stderr: PathBuf,
    exit: Option<ExitStatus>,
}

impl Serve {
    /// Spawns the process and waits for its ready line.
    pub fn spawn(spec: &ServeSpec) -> Result<Serve, String> {
        let stderr = std::fs::File::create(&spec.stderr)
            .map_err(|e| format!("{}: create stderr capture: {e}", spec.label))?;
        let mut child = Command::new(&spec.bin)
            .arg("serve")
            .arg("--workdir")
            .arg(&spec.workdir)
            .arg("--manifest")
            .arg(&spec.manifest)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--trace")
            .arg(&spec.trace)
            .arg("--console")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .map_err(|e| format!("{}: spawn {}: {e}", spec.label, spec.bin.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut serve = Serve {
            label: spec.label.clone(),
            child,
            stdin,
            lines,
            ready: Value::Null,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            audience: String::new(),
            trace: spec.trace.clone(),
            stderr: spec.stderr.clone(),
            exit: None,
        };
        let line = serve.next_line("the ready line")?;
        serve.ready = serde_json::from_str(&line)
            .map_err(|e| format!("{}: ready line is not JSON ({e}): {line}", spec.label))?;
        let url = serve.ready["url"].as_str().unwrap_or_default();
        serve.addr = url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("{}: ready line url {url:?}", spec.label))?;
        serve.audience = serve.ready["audience"]
            .as_str()
            .ok_or_else(|| format!("{}: ready line has no audience: {line}", spec.label))?
            .to_owned();
        Ok(serve)
    }

    fn next_line(&self, what: &str) -> Result<String, String> {
        match self.lines.recv_timeout(ANSWER_DEADLINE) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "{}: no {what} within {ANSWER_DEADLINE:?}",
                self.label
            )),
            Err(RecvTimeoutError::Disconnected) => Err(format!(
                "{}: stdout closed before {what}; stderr:\n{}",
                self.label,
                self.stderr_text()
            )),
        }
    }

    /// Calls a tool on the console; returns the whole answer `{"ok":…}`.
    pub fn call(&mut self, tool: &str, input: Value) -> Result<Value, String> {
        let request = json!({"op": "call", "tool": tool, "input": input});
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: console already closed", self.label))?;
        let mut line = serde_json::to_vec(&request).expect("serialise a console request");
        line.push(b'\n');
        stdin
            .write_all(&line)
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: write console request: {e}", self.label))?;
        let answer = self.next_line(&format!("answer to {request}"))?;
        serde_json::from_str(&answer)
            .map_err(|e| format!("{}: answer is not JSON ({e}): {answer}", self.label))
    }

    /// Mints a handle for `path` for `peer` (`host:port`) with `share-file`; returns
    /// `(token, handle_id)`.
    pub fn share(&mut self, path: &str, peer: SocketAddr) -> Result<(String, String), String> {
        let answer = self.call(
            "share-file",
            json!({"path": path, "peer": peer.to_string()}),
        )?;
        let token = answer["result"]["handle"].as_str();
        let id = answer["result"]["handle_id"].as_str();
        match (answer["ok"].as_bool(), token, id) {
            (Some(true), Some(token), Some(id)) => Ok((token.to_owned(), id.to_owned())),
            _ => Err(format!(
                "{}: share-file {path} answered {answer}",
                self.label
            )),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        if self.exit.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.exit = Some(status);
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// The process's peak resident set (`VmHWM` of `/proc/<pid>/status`), in KiB.
    pub fn vm_hwm_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Ends the session as the contract says (end of stdin) and waits for the exit status.
    pub fn stop(&mut self) -> Result<ExitStatus, String> {
        drop(self.stdin.take());
        let started = Instant::now();
        loop {
            if let Some(status) = self.exit {
                return Ok(status);
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.exit = Some(status);
                    return Ok(status);
                }
                Ok(None) if started.elapsed() < EXIT_DEADLINE => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "{}: still running {EXIT_DEADLINE:?} after stdin closed; killed",
                        self.label
                    ));
                }
                Err(e) => return Err(format!("{}: wait: {e}", self.label)),
            }
        }
    }

    /// What the process wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Every line of the trace file so far.
    pub fn trace_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.trace)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The soak.
// ---------------------------------------------------------------------------------------------

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// The `resource-plane` binary.
    pub bin: PathBuf,
    /// How long the clients send requests.
    pub duration: Duration,
    /// Concurrent client threads.
    pub clients: usize,
    /// Files in the export (at least 8).
    pub files: usize,
    /// Handles minted before the run.
    pub handles: usize,
    /// The bound on the serve process's peak RSS.
    pub rss_bound_mib: u64,
    /// Per-request connect/read/write timeout.
    pub request_timeout: Duration,
}

impl SoakConfig {
    /// Defaults: 50 files, 16 handles, 300 MiB, 30 s per request.
    pub fn new(bin: PathBuf, duration: Duration, clients: usize) -> Self {
        SoakConfig {
            bin,
            duration,
            clients,
            files: 50,
            handles: 16,
            rss_bound_mib: 300,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Requests whose head was sent.
    pub requests: u64,
    /// Answers by status.
    pub by_status: BTreeMap<u16, u64>,
    /// Requests by kind (`read`, `listing`, `attack`, `redeem`, `forgery`).
    pub by_kind: BTreeMap<&'static str, u64>,
    /// How long the clients ran.
    pub duration: Duration,
    /// Peak RSS of the serve process, KiB.
    pub vm_hwm_kib: u64,
    /// The bound it was held to, MiB.
    pub rss_bound_mib: u64,
    /// Files rewritten during the run.
    pub rewrites: u64,
    /// Lines in A's trace.
    pub trace_lines: u64,
    /// Latency percentiles, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest request.
    pub max_ms: f64,
    /// Everything that went wrong (the first 50 in full).
    pub problems: Vec<String>,
    /// How many problems there were in all.
    pub problem_count: u64,
}

impl SoakReport {
    /// No problem at all.
    pub fn passed(&self) -> bool {
        self.problem_count == 0
    }

    /// Requests per second over the run.
    pub fn req_per_s(&self) -> f64 {
        self.requests as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    /// The one-line JSON summary.
    pub fn summary_json(&self) -> String {
        let round = |x: f64| (x * 10.0).round() / 10.0;
        let by_status: serde_json::Map<String, Value> = self
            .by_status
            .iter()
            .map(|(s, n)| (s.to_string(), json!(n)))
            .collect();
        json!({
            "soak": if self.passed() { "pass" } else { "fail" },
            "requests": self.requests,
            "by_status": by_status,
            "by_kind": self.by_kind,
            "duration_s": round(self.duration.as_secs_f64()),
            "req_per_s": round(self.req_per_s()),
            "p50_ms": round(self.p50_ms),
            "p99_ms": round(self.p99_ms),
            "max_ms": round(self.max_ms),
            "vm_hwm_mib": round(self.vm_hwm_kib as f64 / 1024.0),
            "rss_bound_mib": self.rss_bound_mib,
            "rewrites": self.rewrites,
            "trace_lines": self.trace_lines,
            "problems": self.problem_count,
        })
        .to_string()
    }
}

/// Collected problems: all counted, the first 50 kept.
#[derive(Debug, Default)]
struct Problems {
    kept: Mutex<Vec<String>>,
    count: AtomicU64,
}

impl Problems {
    fn add(&self, problem: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < 50 {
            kept.push(problem);
        }
    }
}

/// A minted handle and the file it names.
#[derive(Debug, Clone)]
struct Handle {
    token: String,
    id: String,
    idx: usize,
}

/// One attack and its exact expected answer.
#[derive(Debug, Clone)]
struct Attack {
    method: &'static str,
    target: String,
    audience: bool,
    status: u16,
    code: &'static str,
}

/// What every client shares.
#[derive(Debug)]
struct Plan {
    addr: SocketAddr,
    audience: String,
    files: Vec<String>,
    listing: Vec<String>,
    handles: Vec<Handle>,
    attacks: Vec<Attack>,
    secret: Vec<u8>,
    deadline: Instant,
    timeout: Duration,
}

/// One client's counts.
#[derive(Debug, Default)]
struct Tally {
    sent: u64,
    by_status: BTreeMap<u16, u64>,
    by_kind: BTreeMap<&'static str, u64>,
    /// Requests sent, by the trace event they must leave.
    by_event: BTreeMap<&'static str, u64>,
    /// 200 answers, by the trace event they must leave.
    ok_by_event: BTreeMap<&'static str, u64>,
    forgeries: u64,
    latencies_us: Vec<u32>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.sent += other.sent;
        for (k, v) in other.by_status {
            *self.by_status.entry(k).or_default() += v;
        }
        for (k, v) in other.by_kind {
            *self.by_kind.entry(k).or_default() += v;
        }
        for (k, v) in other.by_event {
            *self.by_event.entry(k).or_default() += v;
        }
        for (k, v) in other.ok_by_event {
            *self.ok_by_event.entry(k).or_default() += v;
        }
        self.forgeries += other.forgeries;
        self.latencies_us.extend(other.latencies_us);
    }
}

/// The trace event a request under `/resources` must leave (D-6.3).
fn expected_event(target: &str) -> &'static str {
    let path = target.split('?').next().unwrap_or(target);
    if path == "/resources/files" {
        "resource_list"
    } else if path == "/resources/peer" || path.starts_with("/resources/peer/") {
        "peer_handle_redeem"
    } else {
        "resource_read"
    }
}

/// The export-relative path of soak file `idx`: a third of them in subdirectories.
pub fn soak_file_path(idx: usize) -> String {
    if idx % 3 == 1 {
        format!("d{}/f{idx:02}.bin", idx % 5)
    } else {
        format!("f{idx:02}.bin")
    }
}

const SECRET: &[u8] = b"SOAK-SECRET: bytes outside the export root must never be served\n";

const MANIFEST_A: &str = "name: soak-minter
exports:
  files: { root: out/, mode: read-only, max_bytes: 1Mi }
  peer_files: { root: out/, max_ttl: 1h }
capabilities:
  network: { allow: [\"127.0.0.1\"] }
";

const MANIFEST_B: &str = "name: soak-audience\n";

fn attack_table(handles: &[Handle]) -> Vec<Attack> {
    let peer = format!("/resources/peer/{}", handles[0].token);
    let a = |method, target: &str, audience, status, code| Attack {
        method,
        target: target.to_owned(),
        audience,
        status,
        code,
    };
    // Escapes, lexical refusals and symlinks leaving the root: all 403 outside_root.
    let escapes = [
        "..%2fsecret.txt",
        "..%2F..%2Fetc%2Fpasswd",
        "%2e%2e/secret.txt",
        "d1/../f00.bin",
        "d1/..%2ff00.bin",
        "escape-rel",
        "escape-abs",
        "%zz",
        "f00.bin%2",
        "%u002e",
        "a%00b",
        "%ff",
        "/f00.bin",
        "",
    ];
    let get = |target: &str, status, code| a("GET", target, false, status, code);
    let mut attacks: Vec<Attack> = escapes
        .iter()
        .map(|rel| get(&format!("/resources/files/{rel}"), 403, "outside_root"))
        .collect();
    let not_allowed = "method_not_allowed";
    attacks.extend([
        get("/resources/files/d1", 403, "not_a_regular_file"),
        get("/resources/files/missing.bin", 404, "not_found"),
        get("/resources/other", 404, "not_found"),
        get(&peer, 400, "missing_audience"),
        a("GET", "/resources/peer/", true, 404, "not_found"),
        a("GET", "/resources/peer/bad", true, 400, "malformed_handle"),
        a("POST", "/resources/files/f00.bin", false, 405, not_allowed),
        a("PUT", "/resources/files/f00.bin", false, 405, not_allowed),
        a("DELETE", "/resources/files", false, 405, not_allowed),
        a("PATCH", "/resources", false, 405, not_allowed),
        a("PUT", &peer, true, 405, not_allowed),
    ]);
    attacks
}

/// Writes the export: `out/` with the soak files (version 0), a relative symlink inside the
/// root, two escaping symlinks, `secret.txt` beside `out/`, and `tmp/` for rewrites.
fn build_workdir(workdir: &Path, files: usize) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("build the workdir: {what}: {e}");
    let out = workdir.join("out");
    for idx in 0..files {
        let path = out.join(soak_file_path(idx));
        std::fs::create_dir_all(path.parent().expect("a parent")).map_err(|e| io("mkdir", e))?;
        std::fs::write(&path, version_bytes(idx, 0)).map_err(|e| io("write", e))?;
    }
    std::fs::create_dir_all(workdir.join("tmp")).map_err(|e| io("mkdir tmp", e))?;
    let secret = workdir.join("secret.txt");
    std::fs::write(&secret, SECRET).map_err(|e| io("secret", e))?;
    std::os::unix::fs::symlink("f00.bin", out.join("link-in")).map_err(|e| io("link-in", e))?;
    std::os::unix::fs::symlink("../secret.txt", out.join("escape-rel"))
        .map_err(|e| io("escape-rel", e))?;
    std::os::unix::fs::symlink(&secret, out.join("escape-abs")).map_err(|e| io("escape-abs", e))?;
    Ok(())
}

/// Runs the soak. `Err` only when the world cannot be set up; everything observed during the
/// run is in the report's problems.
pub fn run_soak(config: &SoakConfig) -> Result<SoakReport, String> {
    if config.files < 8 {
        return Err("the soak needs at least 8 files".into());
    }
    if !config.bin.is_file() {
        return Err(format!(
            "no binary at {} (build it: cargo build --release)",
            config.bin.display()
        ));
    }
    let world = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let root = std::fs::canonicalize(world.path()).map_err(|e| format!("tempdir: {e}"))?;
    let work_a = root.join("work-a");
    let work_b = root.join("work-b");
    for dir in [&work_a, &work_b] {
        std::fs::create_dir(dir).map_err(|e| format!("mkdir: {e}"))?;
    }
    build_workdir(&work_a, config.files)?;
    std::fs::write(root.join("a.yaml"), MANIFEST_A).map_err(|e| format!("manifest: {e}"))?;
    std::fs::write(root.join("b.yaml"), MANIFEST_B).map_err(|e| format!("manifest: {e}"))?;
    let spec = |label: &str, workdir: &Path| ServeSpec {
        bin: config.bin.clone(),
        label: label.to_owned(),
        workdir: workdir.to_owned(),
        manifest: root.join(format!("{label}.yaml")),
        trace: root.join(format!("trace-{label}.jsonl")),
        stderr: root.join(format!("{label}.stderr")),
    };
    let mut b = Serve::spawn(&spec("b", &work_b))?;
    let mut a = Serve::spawn(&spec("a", &work_a))?;

    // Handles for B's audience, minted through A's console before the run.
    let mut handles = Vec::new();
    for i in 0..config.handles.max(1) {
        let idx = (i * 7) % config.files;
        let (token, id) = a.share(&soak_file_path(idx), b.addr)?;
        handles.push(Handle { token, id, idx });
    }
    let files: Vec<String> = (0..config.files).map(soak_file_path).collect();
    let mut listing: Vec<String> = files.clone();
    listing.push("link-in".into());
    listing.sort();
    let plan = Arc::new(Plan {
        addr: a.addr,
        audience: b.audience.clone(),
        files,
        listing,
        attacks: attack_table(&handles),
        handles,
        secret: SECRET.to_vec(),
        deadline: Instant::now() + config.duration,
        timeout: config.request_timeout,
    });
    let problems = Arc::new(Problems::default());

    let stop_rewriter = Arc::new(AtomicBool::new(false));
    let rewriter = {
        let (stop, problems, workdir, files) = (
            stop_rewriter.clone(),
            problems.clone(),
            work_a.clone(),
            config.files,
        );
        std::thread::spawn(move || rewrite_loop(&workdir, files, &stop, &problems))
    };

    let started = Instant::now();
    let clients: Vec<_> = (0..config.clients)
        .map(|n| {
            let (plan, problems) = (plan.clone(), problems.clone());
            std::thread::spawn(move || client_loop(n as u64, &plan, &problems))
        })
        .collect();
    let mut tally = Tally::default();
    for client in clients {
        match client.join() {
            Ok(t) => tally.merge(t),
            Err(_) => problems.add("a client thread panicked".into()),
        }
    }
    let duration = started.elapsed();
    stop_rewriter.store(true, Ordering::Relaxed);
    let rewrites = rewriter.join().unwrap_or_else(|_| {
        problems.add("the rewriter thread panicked".into());
        0
    });

    // The process must still be alive, under its memory bound, and end gracefully.
    let alive = a.is_running();
    if !alive {
        problems.add(format!(
            "serve exited during the soak ({:?}); stderr:\n{}",
            a.exit,
            a.stderr_text()
        ));
    }
    let vm_hwm_kib = a.vm_hwm_kib().unwrap_or(0);
    if alive && vm_hwm_kib == 0 {
        problems.add("could not read VmHWM of the serve process".into());
    }
    if vm_hwm_kib > config.rss_bound_mib * 1024 {
        problems.add(format!(
            "peak RSS {} KiB exceeds the bound of {} MiB",
            vm_hwm_kib, config.rss_bound_mib
        ));
    }
    for serve in [&mut a, &mut b] {
        match serve.stop() {
            Ok(status) if status.success() => {}
            Ok(status) => problems.add(format!("{} exited with {status}", serve.label)),
            Err(e) => problems.add(e),
        }
    }

    let trace_lines = check_trace(&a, &tally, plan.handles.len() as u64, &problems);
    coverage(&tally, &problems);

    let mut latencies = std::mem::take(&mut tally.latencies_us);
    latencies.sort_unstable();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((latencies.len() - 1) as f64 * p).round() as usize;
        f64::from(latencies[i]) / 1000.0
    };
    let report = SoakReport {
        requests: tally.sent,
        by_status: tally.by_status.clone(),
        by_kind: tally.by_kind.clone(),
        duration,
        vm_hwm_kib,
        rss_bound_mib: config.rss_bound_mib,
        rewrites,
        trace_lines,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        max_ms: pct(1.0),
        problems: problems
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        problem_count: problems.count.load(Ordering::Relaxed),
    };
    Ok(report)
}

/// Every kind of request must have been exercised, and no 5xx may appear.
fn coverage(tally: &Tally, problems: &Problems) {
    for kind in ["read", "listing", "attack", "redeem", "forgery"] {
        if tally.by_kind.get(kind).copied().unwrap_or(0) == 0 {
            problems.add(format!("no `{kind}` request was sent"));
        }
    }
    let server_errors: u64 = tally
        .by_status
        .iter()
        .filter(|(s, _)| **s >= 500)
        .map(|(_, n)| n)
        .sum();
    if server_errors > 0 {
        problems.add(format!("{server_errors} answers were 5xx"));
    }
}

/// Every trace line parses; one line per request under `/resources`, of the right type; one
/// `ok` line per 200; one `handle_not_valid` line per forgery; one mint line per handle; no
/// token anywhere. Returns the number of lines.
fn check_trace(a: &Serve, tally: &Tally, mints: u64, problems: &Problems) -> u64 {
    let lines = a.trace_lines();
    let mut by_event: BTreeMap<String, u64> = BTreeMap::new();
    let mut ok_by_event: BTreeMap<String, u64> = BTreeMap::new();
    let mut not_valid = 0u64;
    for (n, line) in lines.iter().enumerate() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            problems.add(format!("trace line {} does not parse: {line:?}", n + 1));
            continue;
        };
        let kind = event["event_type"].as_str().unwrap_or("<none>").to_owned();
        let outcome = event["outcome"].as_str().unwrap_or("<none>");
        if outcome == "ok" {
            *ok_by_event.entry(kind.clone()).or_default() += 1;
        }
        if kind == "peer_handle_redeem" && outcome == "handle_not_valid" {
            not_valid += 1;
            if !event["path"].is_null() {
                problems.add(format!("a forgery's redeem line names a path: {line}"));
            }
        }
        *by_event.entry(kind).or_default() += 1;
        if line.contains("mh1.") {
            problems.add(format!("trace line {} holds a token", n + 1));
        }
    }
    let resource_lines: u64 = ["resource_list", "resource_read", "peer_handle_redeem"]
        .iter()
        .map(|k| by_event.get(*k).copied().unwrap_or(0))
        .sum();
    if resource_lines != tally.sent {
        problems.add(format!(
            "{} requests were sent under /resources but the trace has {resource_lines} lines for them",
            tally.sent
        ));
    }
    for kind in ["resource_list", "resource_read", "peer_handle_redeem"] {
        let traced = by_event.get(kind).copied().unwrap_or(0);
        let sent = tally.by_event.get(kind).copied().unwrap_or(0);
        if traced != sent {
            problems.add(format!(
                "{sent} requests must leave `{kind}` but {traced} did"
            ));
        }
        let traced_ok = ok_by_event.get(kind).copied().unwrap_or(0);
        let answered_ok = tally.ok_by_event.get(kind).copied().unwrap_or(0);
        if traced_ok != answered_ok {
            problems.add(format!(
                "{answered_ok} answers of 200 for `{kind}` but {traced_ok} `ok` lines"
            ));
        }
    }
    let minted = by_event.get("peer_handle_mint").copied().unwrap_or(0);
    if minted != mints {
        problems.add(format!("{mints} handles minted but {minted} mint lines"));
    }
    if not_valid != tally.forgeries {
        problems.add(format!(
            "{} forgeries sent but {not_valid} `handle_not_valid` redeem lines",
            tally.forgeries
        ));
    }
    let other: u64 = by_event
        .iter()
        .filter(|(k, _)| {
            ![
                "resource_list",
                "resource_read",
                "peer_handle_redeem",
                "peer_handle_mint",
            ]
            .contains(&k.as_str())
        })
        .map(|(_, n)| n)
        .sum();
    if other > 0 {
        problems.add(format!(
            "{other} trace lines of unexpected types: {by_event:?}"
        ));
    }
    lines.len() as u64
}

/// Rewrites random files by writing `tmp/rw-<idx>` and renaming it over `out/<path>`, until
/// told to stop. Returns the number of rewrites.
fn rewrite_loop(workdir: &Path, files: usize, stop: &AtomicBool, problems: &Problems) -> u64 {
    let mut rng = SplitMix::new(0x005E_ED0F_4E57);
    let mut versions = vec![0u64; files];
    let mut rewrites = 0u64;
    // Bounded in count as well as by the stop flag.
    while !stop.load(Ordering::Relaxed) && rewrites < 10_000_000 {
        let idx = rng.below(files as u64) as usize;
        versions[idx] += 1;
        let temp = workdir.join(format!("tmp/rw-{idx}"));
        let target = workdir.join("out").join(soak_file_path(idx));
        let written = std::fs::write(&temp, version_bytes(idx, versions[idx]))
            .and_then(|()| std::fs::rename(&temp, &target));
        if let Err(e) = written {
            problems.add(format!("rewrite of {}: {e}", target.display()));
            return rewrites;
        }
        rewrites += 1;
        // Pacing, so the rewriter does not take a whole core from the server.
        std::thread::sleep(Duration::from_millis(2));
    }
    rewrites
}

/// One client: fresh connection per request until the deadline.
fn client_loop(n: u64, plan: &Plan, problems: &Problems) -> Tally {
    let mut rng = SplitMix::new(0xC11E_0000 + n);
    let mut tally = Tally::default();
    // Bounded in count as well as in time.
    for _ in 0..1_000_000u32 {
        if Instant::now() >= plan.deadline {
            break;
        }
        let roll = rng.below(100);
        let (kind, outcome) = match roll {
            0..40 => ("read", one_read(plan, &mut rng, &mut tally)),
            40..44 => ("listing", one_listing(plan, &mut tally)),
            44..70 => ("attack", one_attack(plan, &mut rng, &mut tally)),
            70..90 => ("redeem", one_redeem(plan, &mut rng, &mut tally)),
            _ => ("forgery", one_forgery(plan, &mut rng, &mut tally)),
        };
        *tally.by_kind.entry(kind).or_default() += 1;
        if let Err(problem) = outcome {
            problems.add(format!("{kind}: {problem}"));
        }
    }
    tally
}

/// Sends one request, counting it; `Err` on a transport failure.
fn send(
    plan: &Plan,
    tally: &mut Tally,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Result<RawResponse, String> {
    let started = Instant::now();
    let result = exchange(plan.addr, method, target, headers, plan.timeout);
    let elapsed = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
    let event = expected_event(target);
    match result {
        Ok(response) => {
            tally.sent += 1;
            tally.latencies_us.push(elapsed);
            *tally.by_event.entry(event).or_default() += 1;
            *tally.by_status.entry(response.status).or_default() += 1;
            if response.status == 200 {
                *tally.ok_by_event.entry(event).or_default() += 1;
            }
            Ok(response)
        }
        Err(e) => {
            if e.sent {
                tally.sent += 1;
                *tally.by_event.entry(event).or_default() += 1;
            }
            Err(format!("{method} {target}: transport error: {}", e.what))
        }
    }
}

/// A 200 file body: etag, length and whole-version checks.
fn check_file_body(response: &RawResponse, idx: usize, what: &str) -> Result<(), String> {
    if response.status != 200 {
        return Err(format!("{what}: expected 200, got {}", response.describe()));
    }
    let etag = etag_of(&response.body);
    if response.header("etag") != Some(etag.as_str()) {
        return Err(format!(
            "{what}: etag {:?} but the body hashes to {etag}",
            response.header("etag")
        ));
    }
    if response.header("content-type") != Some("application/octet-stream") {
        return Err(format!(
            "{what}: content-type {:?}",
            response.header("content-type")
        ));
    }
    verify_version(&response.body, idx)
        .map(drop)
        .map_err(|e| format!("{what}: {e}"))
}

fn one_read(plan: &Plan, rng: &mut SplitMix, tally: &mut Tally) -> Result<(), String> {
    // One read in twenty goes through the relative symlink inside the root.
    let (idx, path) = if rng.below(20) == 0 {
        (0, "link-in".to_owned())
    } else {
        let idx = rng.below(plan.files.len() as u64) as usize;
        (idx, plan.files[idx].clone())
    };
    let target = format!("/resources/files/{path}");
    let response = send(plan, tally, "GET", &target, &[])?;
    check_file_body(&response, idx, &target)?;
    if response.header("x-murmur-export-root") != Some("out/") {
        return Err(format!(
            "{target}: x-murmur-export-root {:?}",
            response.header("x-murmur-export-root")
        ));
    }
    Ok(())
}

fn one_listing(plan: &Plan, tally: &mut Tally) -> Result<(), String> {
    let response = send(plan, tally, "GET", "/resources/files", &[])?;
    if response.status != 200 {
        return Err(format!("expected 200, got {}", response.describe()));
    }
    let listing: Value =
        serde_json::from_slice(&response.body).map_err(|e| format!("listing is not JSON: {e}"))?;
    if listing["root"] != "out/" || listing["mode"] != "read-only" {
        return Err(format!("listing head {}", response.describe()));
    }
    let entries = listing["entries"].as_array().ok_or("no entries array")?;
    let paths: Vec<&str> = entries.iter().filter_map(|e| e["path"].as_str()).collect();
    if paths != plan.listing {
        return Err(format!(
            "listing paths {paths:?}, expected {:?}",
            plan.listing
        ));
    }
    for entry in entries {
        let hash = entry["sha256"].as_str().unwrap_or_default();
        let size = entry["size_bytes"].as_u64().unwrap_or(u64::MAX);
        if hash.len() != 64 || size > MAX_FILE_BYTES as u64 {
            return Err(format!("bad listing entry {entry}"));
        }
    }
    Ok(())
}

fn one_attack(plan: &Plan, rng: &mut SplitMix, tally: &mut Tally) -> Result<(), String> {
    let attack = &plan.attacks[rng.below(plan.attacks.len() as u64) as usize];
    let audience = [("x-murmur-audience", plan.audience.as_str())];
    let headers: &[(&str, &str)] = if attack.audience { &audience } else { &[] };
    let response = send(plan, tally, attack.method, &attack.target, headers)?;
    let what = format!("{} {}", attack.method, attack.target);
    if response.status != attack.status || response.error_code().as_deref() != Some(attack.code) {
        return Err(format!(
            "{what}: expected {} {}, got {}",
            attack.status,
            attack.code,
            response.describe()
        ));
    }
    if attack.status == 405 && response.header("allow") != Some("GET") {
        return Err(format!("{what}: 405 without `allow: GET`"));
    }
    if contains(&response.body, &plan.secret[..12]) {
        return Err(format!("{what}: the body holds the secret"));
    }
    Ok(())
}

fn one_redeem(plan: &Plan, rng: &mut SplitMix, tally: &mut Tally) -> Result<(), String> {
    let handle = &plan.handles[rng.below(plan.handles.len() as u64) as usize];
    let target = format!("/resources/peer/{}", handle.token);
    let response = send(
        plan,
        tally,
        "GET",
        &target,
        &[("x-murmur-audience", &plan.audience)],
    )?;
    let what = format!("redeem of handle {}", handle.id);
    check_file_body(&response, handle.idx, &what)?;
    if response.header("x-murmur-handle-id") != Some(handle.id.as_str()) {
        return Err(format!(
            "{what}: x-murmur-handle-id {:?}",
            response.header("x-murmur-handle-id")
        ));
    }
    if response.header("x-murmur-export-root").is_some() {
        return Err(format!("{what}: a redeem carries x-murmur-export-root"));
    }
    Ok(())
}

fn one_forgery(plan: &Plan, rng: &mut SplitMix, tally: &mut Tally) -> Result<(), String> {
    let handle = &plan.handles[rng.below(plan.handles.len() as u64) as usize];
    // Two in three flip a MAC character; one in three present a real handle for another
    // audience. Both must be the one indistinguishable refusal.
    let (token, audience) = if rng.below(3) == 0 {
        (handle.token.clone(), "mallory@127.0.0.1:1".to_owned())
    } else {
        (
            forge_mac(&handle.token, rng.below(40) as usize),
            plan.audience.clone(),
        )
    };
    let target = format!("/resources/peer/{token}");
    let sent = send(
        plan,
        tally,
        "GET",
        &target,
        &[("x-murmur-audience", &audience)],
    );
    tally.forgeries += 1;
    let response = sent?;
    let id = handle_id(&token);
    if response.status != 403 || response.error_code().as_deref() != Some("handle_not_valid") {
        return Err(format!(
            "forgery of {}: expected 403 handle_not_valid, got {}",
            handle.id,
            response.describe()
        ));
    }
    if response.header("x-murmur-handle-id") != Some(id.as_str()) {
        return Err(format!(
            "forgery: x-murmur-handle-id {:?}, expected {id}",
            response.header("x-murmur-handle-id")
        ));
    }
    Ok(())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
