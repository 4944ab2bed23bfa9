#![allow(clippy::disallowed_methods)] // a test client connects to the server under test
#![allow(dead_code)] // each test file uses a subset

//! One raw HTTP/1.1 client over loopback `std::net::TcpStream`, for tests that speak to a real
//! `resource-plane serve` exactly as a peer or an attacker would: the request bytes go out as
//! given (no header is added), the answer is read until the server closes, and the head is
//! parsed strictly (a malformed head fails the test).

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How long one exchange may take by default.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// One parsed response.
#[derive(Debug)]
pub struct Reply {
    /// `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    /// Lowercased names, in wire order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
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

    /// The header names sent.
    pub fn names(&self) -> BTreeSet<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
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
}

/// A connection to `addr`.
pub fn connect(addr: impl ToSocketAddrs) -> TcpStream {
    TcpStream::connect(addr).expect("connect to the server")
}

/// Reads until the server closes the connection; panics if it does not within `timeout`.
pub fn read_to_eof(stream: &mut TcpStream, timeout: Duration) -> Vec<u8> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "the server did not close the connection within {timeout:?}; got {} bytes: {:?}",
            out.len(),
            String::from_utf8_lossy(&out[..out.len().min(300)])
        );
        stream.set_read_timeout(Some(left)).expect("read timeout");
        match stream.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // A server closing with unread request bytes resets: that is a close too.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return out,
            // A signal to the test process (a child exiting) interrupts the read: retried.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

/// Parses one response: status line, header lines (names lowercased, values trimmed), body.
pub fn parse_reply(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no complete response head in {:?}",
                String::from_utf8_lossy(raw)
            )
        });
    let head = std::str::from_utf8(&raw[..end]).expect("response head is UTF-8");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().expect("version").to_owned();
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("bad header line {line:?}"));
            (name.to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    Reply {
        version,
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// Sends `request` as is and returns every byte of the answer, read until the server closes
/// (within `timeout`). A server that answers and closes before reading all of the request
/// (a 431) is no error here.
pub fn exchange_raw(addr: impl ToSocketAddrs, request: &[u8], timeout: Duration) -> Vec<u8> {
    let mut stream = connect(addr);
    let _ = stream.write_all(request);
    read_to_eof(&mut stream, timeout)
}

/// Sends `request` as is and parses the one response.
pub fn exchange(addr: impl ToSocketAddrs, request: &[u8], timeout: Duration) -> Reply {
    parse_reply(&exchange_raw(addr, request, timeout))
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
    addr: impl ToSocketAddrs,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Reply {
    exchange(addr, &request_bytes(method, target, headers), TIMEOUT)
}
