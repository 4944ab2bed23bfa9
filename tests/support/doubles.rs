#![allow(clippy::disallowed_methods)] // a test double binds its own loopback listener
#![allow(dead_code)] // each test file uses a subset

//! Small network doubles a test owns: a card responder, a listener nobody serves, a port nobody
//! listens on. Each runs on plain threads, so it serves a test with or without a runtime.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A listener that is never served; proves whether anybody connected.
pub struct SilentPeer {
    listener: TcpListener,
}

impl SilentPeer {
    pub fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a silent listener");
        listener.set_nonblocking(true).expect("non-blocking");
        SilentPeer { listener }
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().expect("local addr").port()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// Fails the test if anybody connected.
    pub fn assert_untouched(&self, what: &str) {
        match self.listener.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Ok((_, from)) => panic!("{what}: a connection from {from} reached the peer"),
            Err(e) => panic!("{what}: accept failed: {e}"),
        }
    }
}

/// A tiny HTTP responder answering every request with `200` and a fixed JSON body (an agent
/// card, say), counting the connections it took.
pub struct CardServer {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl CardServer {
    /// Answers with `body(addr)`, where `addr` is the responder's own address.
    pub fn new(body: impl Fn(SocketAddr) -> String) -> Self {
        Self::slow(Duration::ZERO, body)
    }

    /// A card server that waits `delay` after each request before it answers.
    pub fn slow(delay: Duration, body: impl Fn(SocketAddr) -> String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the card server");
        let addr = listener.local_addr().expect("local addr");
        let body = body(addr);
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let body = body.clone();
                // One thread per connection: a client that never ends its head holds no other.
                std::thread::spawn(move || {
                    read_head(&mut stream);
                    std::thread::sleep(delay);
                    let _ = stream.write_all(json_response("200 OK", &body).as_bytes());
                });
            }
        });
        CardServer { addr, hits }
    }

    /// `host:port`, as a `peer` argument names it.
    pub fn peer(&self) -> String {
        self.addr.to_string()
    }

    /// How many connections it has taken.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A loopback port nobody listens on.
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a throwaway listener");
    listener.local_addr().expect("local addr").port()
}

/// One request a [`RecordingPeer`] received: its request line's target and its headers, names
/// lowercased, in the order sent.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub target: String,
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// Every value of header `name` (lowercase), in order.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// A hostile peer: answers every request with `status` and a fixed JSON body, and keeps each
/// request's target and headers for the test to replay elsewhere.
pub struct RecordingPeer {
    pub addr: SocketAddr,
    requests: Arc<std::sync::Mutex<Vec<Recorded>>>,
}

impl RecordingPeer {
    pub fn new(status: u16, body: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the recording peer");
        let addr = listener.local_addr().expect("local addr");
        let requests: Arc<std::sync::Mutex<Vec<Recorded>>> = Arc::default();
        let kept = requests.clone();
        let body = body.to_owned();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let head = read_head(&mut stream);
                let text = String::from_utf8_lossy(&head).into_owned();
                let mut lines = text.split("\r\n");
                let target = lines
                    .next()
                    .and_then(|l| l.split(' ').nth(1))
                    .unwrap_or_default()
                    .to_owned();
                let headers = lines
                    .take_while(|l| !l.is_empty())
                    .filter_map(|l| l.split_once(':'))
                    .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
                    .collect();
                kept.lock().unwrap().push(Recorded { target, headers });
                let status = format!("{status} Refused");
                let _ = stream.write_all(json_response(&status, &body).as_bytes());
            }
        });
        RecordingPeer { addr, requests }
    }

    /// `host:port`, as a `peer` argument names it.
    pub fn peer(&self) -> String {
        self.addr.to_string()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// A whole HTTP/1.1 answer with `status` (`200 OK`) and the JSON `body`, closing the
/// connection.
fn json_response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A request's head read from `stream`, up to its blank line (or whatever came within 5 s,
/// or before the client closed).
fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    head
}
