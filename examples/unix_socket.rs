//! The operator plane over a Unix domain socket, behind the listener's hardening: `serve_with`
//! takes any source of connections (`resource_plane::http::Accept`), here a
//! `tokio::net::UnixListener`. The capsule still advertises a TCP URL, the one its peers would
//! use; the socket file is the operator's alone.
//!
//! It serves on a socket file in a temporary directory, asks itself for a listing, a read and
//! an HTTP/2 preface (refused 505 by the version gate, as over TCP), prints each answer's
//! status line and body, checks them, and exits.
//!
//! Run: `cargo run --example unix_socket`
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink, SystemClock};
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MANIFEST: &str = "
name: reporter
exports:
  files: { root: out/, mode: read-only }
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("operator.sock");
    let listener = tokio::net::UnixListener::bind(&socket)?;

    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "# Report\nall systems nominal\n", 0);
    let capsule = Capsule::launch(
        &Manifest::from_yaml(MANIFEST)?.manifest,
        // Where peers would reach the capsule over TCP: the card and audiences name it.
        CapsuleConfig::new("http://127.0.0.1:41234")?,
        Backends {
            fs,
            clock: Arc::new(SystemClock),
            keys: None,
            trace: Arc::new(RecordingTraceSink::new()),
        },
    )?;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_with(
        listener,
        capsule.router(),
        ListenerConfig::default(),
        async move {
            let _ = stopped.await;
        },
    ));

    let listing = exchange(&socket, "GET /resources/files HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    println!("GET /resources/files\n{listing}\n");
    assert!(listing.starts_with("HTTP/1.1 200 OK") && listing.contains("report.md"));

    let read = exchange(
        &socket,
        "GET /resources/files/report.md HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await?;
    println!("GET /resources/files/report.md\n{read}\n");
    assert!(read.starts_with("HTTP/1.1 200 OK") && read.contains("all systems nominal"));

    let preface = exchange(&socket, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await?;
    println!("the HTTP/2 preface\n{preface}\n");
    assert!(preface.starts_with("HTTP/1.1 505 "));

    let _ = stop.send(());
    server.await??;
    capsule.end_session();
    Ok(())
}

/// Sends `request` on a fresh connection to `socket` and returns the whole answer.
async fn exchange(socket: &Path, request: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::UnixStream::connect(socket).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_string(&mut answer),
    )
    .await??;
    Ok(answer)
}
