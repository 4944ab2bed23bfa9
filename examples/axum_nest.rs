//! The planes of two capsules nested in an axum app, under `/capsules/a` and `/capsules/b`,
//! with `nest_service`: axum cuts the prefix off and the router routes on the rest. The app is
//! served behind the listener's hardening (`serve_with`); `axum::serve(listener, app)` would
//! serve it too, without it (a raw `#` in a request target is then cut off by hyper, and the
//! head limits and connection cap are axum's).
//!
//! It serves on a loopback port, asks itself a few things with a raw TCP client, prints each
//! answer's status line and body, and exits.
//!
//! Run: `cargo run --example axum_nest`
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

use axum::routing::get;
use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink, SystemClock};
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A capsule named `name` exporting `out/` with one file, advertised under `url`.
fn capsule(name: &str, url: String) -> Result<Capsule, Box<dyn std::error::Error>> {
    let manifest = format!("name: {name}\nexports:\n  files: {{ root: out/, mode: read-only }}\n");
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", format!("capsule {name}'s report\n"), 0);
    Ok(Capsule::launch(
        &Manifest::from_yaml(&manifest)?.manifest,
        CapsuleConfig::new(url)?,
        Backends {
            fs,
            clock: Arc::new(SystemClock),
            keys: None,
            trace: Arc::new(RecordingTraceSink::new()),
        },
    )?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let a = capsule("a", format!("http://{addr}/capsules/a"))?;
    let b = capsule("b", format!("http://{addr}/capsules/b"))?;

    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .nest_service("/capsules/a", a.router())
        .nest_service("/capsules/b", b.router());

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
        "/capsules/a/resources/files/report.md",
        "/capsules/b/resources/files",
        "/capsules/b/.well-known/agent-card.json",
        // Not under a prefix, raw byte for byte: axum's 404, no plane sees it.
        "/capsules/a%2Fresources/files",
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let answer = tokio::task::spawn_blocking(move || exchange(addr, &request)).await??;
        println!("GET {target}\n{answer}\n");
    }

    let _ = stop.send(());
    server.await??;
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
