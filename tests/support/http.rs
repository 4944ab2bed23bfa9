#![allow(clippy::disallowed_methods)] // a test client connects to the server under test
#![allow(dead_code)] // each test file uses a subset

//! One raw HTTP/1.1 client over loopback `std::net::TcpStream`, for tests that speak to a real
//! `resource-plane serve` exactly as a peer or an attacker would: the request bytes go out as
//! given (no header is added), the answer is read until the server closes, and the head is
//! parsed strictly (a malformed head fails the test).
//!
//! The same [`Reply`] also takes apart a `Response<PlaneBody>` answered in process
//! ([`Reply::of`]), so one set of checks serves both the router and the wire.
//!
//! Every function takes its server as anything [`Into<Target>`]: a loopback port (`u16`), a
//! `SocketAddr`, `"host:port"` text or a `("host", port)` pair.
//!
//! The `try_` functions return what went wrong instead of failing the test, for a table that
//! reports every row's failure in one run.

use resource_plane::http::PlaneBody;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How long one exchange may take by default.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The server a request goes to.
#[derive(Debug, Clone, Copy)]
pub struct Target(pub SocketAddr);

impl From<u16> for Target {
    /// `127.0.0.1:port`, where a served binary listens by default.
    fn from(port: u16) -> Self {
        Target(SocketAddr::from(([127, 0, 0, 1], port)))
    }
}

impl From<SocketAddr> for Target {
    fn from(addr: SocketAddr) -> Self {
        Target(addr)
    }
}

impl From<&str> for Target {
    /// `host:port` text; a name that does not resolve fails the test.
    fn from(addr: &str) -> Self {
        Target(resolve(addr))
    }
}

impl From<&String> for Target {
    fn from(addr: &String) -> Self {
        Target::from(addr.as_str())
    }
}

impl From<(&str, u16)> for Target {
    fn from(addr: (&str, u16)) -> Self {
        Target(resolve(addr))
    }
}

fn resolve(addr: impl ToSocketAddrs + std::fmt::Debug) -> SocketAddr {
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut all| all.next())
        .unwrap_or_else(|| panic!("{addr:?} is no socket address"))
}

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    /// Lowercased names, in wire order (in header-map order for [`Reply::of`]).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// A response answered in process, taken apart as the wire would carry it (hyper adds
    /// `date` and `content-length` later, never the router). Header values must be text.
    pub fn of(response: http::Response<PlaneBody>) -> Reply {
        Reply {
            version: "HTTP/1.1".to_owned(),
            status: response.status().as_u16(),
            headers: response
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        v.to_str().expect("header values are text").to_owned(),
                    )
                })
                .collect(),
            body: response.body().bytes().to_vec(),
        }
    }

    /// The one value of header `name` (lowercase); a header sent twice fails the test.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(n, _)| n == name);
        let first = values.next().map(|(_, v)| v.as_str());
        assert!(
            values.next().is_none(),
            "header {name} sent twice: {self:?}"
        );
        first
    }

    /// The one value of header `name`; `Err` when it is absent or repeated.
    pub fn single(&self, name: &str) -> Result<&str, String> {
        let values: Vec<&str> = self
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        match values.as_slice() {
            [one] => Ok(one),
            [] => Err(format!("no `{name}` header")),
            many => Err(format!("`{name}` repeated: {many:?}")),
        }
    }

    /// Whether header `name` was sent at all.
    pub fn has(&self, name: &str) -> bool {
        self.headers.iter().any(|(n, _)| n == name)
    }

    /// The header names sent.
    pub fn names(&self) -> BTreeSet<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Every header, sorted by name then value: the set to compare against an expected one.
    pub fn sorted_headers(&self) -> Vec<(String, String)> {
        let mut headers = self.headers.clone();
        headers.sort();
        headers
    }

    /// The body as JSON; a body that is not JSON fails the test.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The status and the start of the body, for a failure message.
    pub fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(200)]).into_owned();
        format!("{} {body:?}", self.status)
    }

    /// What every response of the binary carries: `connection: close` and an IMF-fixdate
    /// `date`.
    pub fn assert_close_and_date(&self, what: &str) {
        assert_eq!(
            self.header("connection"),
            Some("close"),
            "{what}: connection header; {self:?}"
        );
        let date = self
            .header("date")
            .unwrap_or_else(|| panic!("{what}: no date header; {self:?}"));
        assert!(
            date.len() == 29 && date.ends_with(" GMT") && date.as_bytes()[3] == b',',
            "{what}: date {date:?} is not an IMF-fixdate"
        );
    }

    /// A JSON refusal `{"error": code, "message": …}` with `status`.
    pub fn assert_refusal(&self, status: u16, code: &str, what: &str) {
        assert_eq!(self.status, status, "{what}: status; body {}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{what}"
        );
        let body = self.json();
        assert_eq!(body["error"], code, "{what}: error code; body {body}");
        assert!(body["message"].is_string(), "{what}: message; body {body}");
    }
}

/// A connection to `to`.
pub fn connect(to: impl Into<Target>) -> TcpStream {
    TcpStream::connect(to.into().0).expect("connect to the server")
}

/// [`ask`] from a client whose receive buffer is held small (64 KiB, no autotuning): one that
/// stops reading then holds far less of the answer in its kernel than a large body, whatever
/// the machine's socket defaults, so the server sees it stall.
pub fn ask_small_window(to: impl Into<Target>, path: &str) -> TcpStream {
    let stream = connect(to);
    rustix::net::sockopt::set_socket_recv_buffer_size(&stream, 64 << 10).expect("SO_RCVBUF");
    let mut stream = stream;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .expect("send a request");
    stream
}

/// Connects and sends `GET path` (`Host: x`), leaving the answer unread: the caller decides
/// how, or whether, to read it (a client that stops reading is the point of some tests).
pub fn ask(to: impl Into<Target>, path: &str) -> TcpStream {
    let mut stream = connect(to);
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .expect("send a request");
    stream
}

/// Reads until the server closes the connection; panics if it does not within `timeout`.
pub fn read_to_eof(stream: &mut TcpStream, timeout: Duration) -> Vec<u8> {
    try_read_to_eof(stream, timeout).unwrap_or_else(|e| panic!("{e}"))
}

/// [`read_to_eof`], returning a read that fails or never ends as an error.
pub fn try_read_to_eof(stream: &mut TcpStream, timeout: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the server did not close the connection within {timeout:?}; got {} bytes: {:?}",
                out.len(),
                String::from_utf8_lossy(&out[..out.len().min(300)])
            ));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| format!("read timeout: {e}"))?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // A server closing with unread request bytes resets: that is a close too.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(out),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(format!("read failed after {} bytes: {e}", out.len())),
        }
    }
}

/// Parses one response: status line, header lines (names lowercased, values trimmed), body.
pub fn parse_reply(raw: &[u8]) -> Reply {
    try_parse_reply(raw).unwrap_or_else(|e| panic!("{e} in {:?}", String::from_utf8_lossy(raw)))
}

/// `raw` after any interim (1xx) responses before the final one, which a client skips (RFC
/// 9110 §15.2): the server may send `100 Continue` to a client that ended its stream, to learn
/// whether it still reads.
pub fn skip_interim(mut raw: &[u8]) -> &[u8] {
    while raw.len() > 12 && raw.starts_with(b"HTTP/1.1 1") {
        match raw.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(end) => raw = &raw[end + 4..],
            None => break,
        }
    }
    raw
}

/// [`parse_reply`], returning a malformed head as an error.
pub fn try_parse_reply(raw: &[u8]) -> Result<Reply, String> {
    let raw = skip_interim(raw);
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no complete response head")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "the response head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default().to_owned();
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers = lines
        .map(|line| {
            line.split_once(':')
                .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
                .ok_or_else(|| format!("bad header line {line:?}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Reply {
        version,
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    })
}

/// Sends `request` as is and returns every byte of the answer, read until the server closes
/// (within `timeout`). A server that answers and closes before reading all of the request
/// (a 431) is no error here.
pub fn exchange_raw(to: impl Into<Target>, request: &[u8], timeout: Duration) -> Vec<u8> {
    let mut stream = connect(to);
    let _ = stream.write_all(request);
    read_to_eof(&mut stream, timeout)
}

/// [`exchange_raw`], returning a failed connection or read as an error.
pub fn try_exchange_raw(
    to: impl Into<Target>,
    request: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let mut stream = TcpStream::connect(to.into().0).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| format!("write timeout: {e}"))?;
    // The server may close before it has read all of an oversized head: keep its answer.
    let _ = stream.write_all(request);
    try_read_to_eof(&mut stream, timeout)
}

/// Sends `request` as is and parses the one response.
pub fn exchange(to: impl Into<Target>, request: &[u8], timeout: Duration) -> Reply {
    parse_reply(&exchange_raw(to, request, timeout))
}

/// The bytes of `method target HTTP/1.1` with `headers` (name, value) in order and no body.
pub fn request_bytes(method: &str, target: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut request = format!("{method} {target} HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.into_bytes()
}

/// `method target` with `headers` (exactly these: include `host`), answered within [`TIMEOUT`].
pub fn request(
    to: impl Into<Target>,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Reply {
    exchange(to, &request_bytes(method, target, headers), TIMEOUT)
}

/// `method target` with only `host: localhost`, answered within [`TIMEOUT`].
pub fn send(to: impl Into<Target>, method: &str, target: &str) -> Reply {
    request(to, method, target, &[("host", "localhost")])
}

/// `GET target` with only `host: localhost`.
pub fn get(to: impl Into<Target>, target: &str) -> Reply {
    send(to, "GET", target)
}

/// One `GET path` (`host: x`): the status (0 when there is no status line) and the whole
/// response as text (lossy), for answers too large or too odd to parse.
pub fn get_raw(to: impl Into<Target>, path: &str) -> (u16, String) {
    let request = request_bytes("GET", path, &[("host", "x")]);
    let text = String::from_utf8_lossy(&exchange_raw(to, &request, TIMEOUT)).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// [`exchange_raw`] on the tokio runtime, for a test whose server runs on the same runtime.
pub async fn exchange_raw_async(
    to: impl Into<Target>,
    request: &[u8],
    timeout: Duration,
) -> Vec<u8> {
    use tokio::io::AsyncWriteExt as _;
    let mut stream = tokio::net::TcpStream::connect(to.into().0)
        .await
        .expect("connect to the server");
    let _ = stream.write_all(request).await;
    read_to_eof_async(&mut stream, timeout).await
}

/// [`read_to_eof`] on the tokio runtime: `timeout` for each read.
pub async fn read_to_eof_async(stream: &mut tokio::net::TcpStream, timeout: Duration) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match tokio::time::timeout(timeout, stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no EOF within {timeout:?} after {} bytes", out.len()))
        {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // A server closing with unread request bytes resets: that is a close too.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}
