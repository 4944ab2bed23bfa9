//! Two capsules behind one listener, each under its own path (`/capsules/a`, `/capsules/b` of
//! an axum app), sharing a file between each other. Each advertises its URL with its path; the
//! tools read the peer's card and redeem under that path, and the fetcher proves its redeem with
//! its identity key (the proof names the listener's origin, `scheme://host:port`, never a path).
//!
//! It serves on a loopback port, has `a` share `report.md` with `b` and `b` fetch it, prints
//! each step, checks the trace lines, and exits.
//!
//! Run: `cargo run --example nested_peers`
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::{Capsule, Manifest};
use serde_json::json;
use std::sync::Arc;

/// A capsule, its in-memory workdir and its trace.
type Launched = (Capsule, Arc<MemoryFilesystem>, Arc<RecordingTraceSink>);

/// A capsule launched from `yaml` at `url`, with its workdir and trace in memory.
fn capsule(yaml: &str, url: &str) -> Result<Launched, Box<dyn std::error::Error>> {
    let fs = Arc::new(MemoryFilesystem::new());
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::builder(&Manifest::from_yaml(yaml)?.manifest)
        .filesystem(fs.clone())
        .trace(trace.clone())
        .advertised_url(url)
        .launch()?;
    Ok((capsule, fs, trace))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (url_a, url_b) = (
        format!("http://{addr}/capsules/a"),
        format!("http://{addr}/capsules/b"),
    );
    // `a` shares only with peers that prove who they are; `b` fetches from the listener.
    let (a, a_fs, a_trace) = capsule(
        &format!(
            "name: a\n\
             exports: {{ peer_files: {{ root: out/, max_ttl: 5m, require_peer_proof: true }} }}\n\
             capabilities: {{ network: {{ allow: [\"{addr}\"] }} }}\n"
        ),
        &url_a,
    )?;
    let (b, b_fs, _) = capsule(
        &format!("name: b\ncapabilities: {{ peer_fetch: {{ allow: [\"{addr}\"] }} }}\n"),
        &url_b,
    )?;
    a_fs.add_file("out/report.md", "# Q3\nall green\n", 0);

    let app = axum::Router::new()
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

    let shared = a
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": url_b}))
        .await?;
    println!(
        "a shared report.md with {}: handle_id {}",
        shared["audience"], shared["handle_id"]
    );
    assert_eq!(shared["audience"], format!("b@{addr}"));

    let fetched = b
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": url_a, "handle": shared["handle"]}),
        )
        .await?;
    println!("b fetched {} ({} bytes)", fetched["path"], fetched["bytes"]);
    let landed = b_fs
        .file_bytes(fetched["path"].as_str().unwrap_or_default())
        .unwrap_or_default();
    assert_eq!(landed, b"# Q3\nall green\n");

    let redeem = a_trace
        .events()
        .into_iter()
        .find(|line| line["event_type"] == "peer_handle_redeem")
        .ok_or("a has no redeem line")?;
    println!(
        "a's redeem line: outcome {}, audience {}, proof {}",
        redeem["outcome"], redeem["audience_asserted"], redeem["audience_proof"]
    );
    assert_eq!(redeem["outcome"], "ok");
    assert_eq!(redeem["audience_proof"], "ed25519");

    let _ = stop.send(());
    server.await??;
    a.end_session();
    b.end_session();
    Ok(())
}
