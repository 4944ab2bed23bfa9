//! A runtime with its own listener and its own routes (`/healthz`, `/api/…`) behind the
//! listener's hardening (`serve_with`), the capsule's planes mounted beside them with
//! `Router::with_fallback`: the planes answer the paths they claim, the runtime every other.
//!
//! It serves on a loopback port, asks itself a few things with a raw TCP client, prints each
//! answer's status line and body, and exits.
//!
//! Run: `cargo run --example own_listener`
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink, SystemClock};
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

const MANIFEST: &str = "
name: reporter
exports:
  files: { root: out/, mode: read-only }
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;

    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "# Report\nall systems nominal\n", 0);
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::launch(
        &Manifest::from_yaml(MANIFEST)?.manifest,
        CapsuleConfig::new(format!("http://{addr}"))?,
        Backends {
            fs,
            clock: Arc::new(SystemClock),
            keys: None,
            trace: trace.clone(),
        },
    )?;

    // The runtime's own routes, as any tower service.
    let own = tower::service_fn(|request: Request<Incoming>| async move {
        let (status, body) = match request.uri().path() {
            "/healthz" => (StatusCode::OK, "ok\n"),
            "/api/tasks" => (StatusCode::OK, "{\"tasks\":[]}\n"),
            _ => (StatusCode::NOT_FOUND, "the runtime has no such route\n"),
        };
        let response = Response::builder()
            .status(status)
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("a response");
        Ok::<_, Infallible>(response)
    });
    let app = capsule.router().with_fallback(own);

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_with(
        listener,
        app,
        ListenerConfig::default(),
        async move {
            let _ = stopped.await;
        },
    ));

    for target in [
        "/healthz",
        "/api/tasks",
        "/elsewhere",
        "/resources/files/report.md",
        // A raw `#` is a name byte, not a fragment: there is no file of that name (404).
        "/resources/files/report.md#frag",
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let answer = tokio::task::spawn_blocking(move || exchange(addr, &request)).await??;
        println!("GET {target}\n{answer}\n");
    }
    // The hardening answers before any route: the HTTP/2 preface gets 505.
    let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let answer = tokio::task::spawn_blocking(move || exchange(addr, preface)).await??;
    println!("the HTTP/2 preface\n{answer}\n");

    let _ = stop.send(());
    server.await??;
    println!("trace lines written: {}", trace.lines().len());
    Ok(())
}

/// Sends `request` on a fresh connection and returns the answer's status line and body.
fn exchange(addr: SocketAddr, request: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.lines().next().unwrap_or_default();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let body = body.trim_end().replace('\n', "\n  ");
    Ok(format!("  {status}\n  {body}"))
}
