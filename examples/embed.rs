//! How a capsule runtime embeds resource-plane: build a `Capsule` from the manifest and its
//! backends at launch (`Capsule::builder`), put its router in front of the runtime's own routes
//! (`Router::with_fallback`), serve both behind the listener's hardening (`serve_with`), and
//! offer the granted tools to the model.
//!
//! Run: `cargo run --example embed -- <workdir>` then
//! `curl -s http://127.0.0.1:<port>/resources/files`; Ctrl-C stops it after a drain.
#![allow(clippy::disallowed_methods)] // an example runtime is a composition root

use bytes::Bytes;
use http_body_util::Full;
use resource_plane::backends::{JsonlTraceSink, OsFilesystem, SystemClock};
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::{Capsule, Manifest};
use std::convert::Infallible;
use std::sync::Arc;

const MANIFEST: &str = "
name: reporter
exports:
  files: { root: out/, mode: read-only }
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workdir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);

    // Launch: the manifest, the backends and the advertised URL. A refused launch is a
    // LaunchError whose Display is the binary's `error[…]` and `  hint:` lines.
    let manifest = Manifest::from_yaml(MANIFEST)?.manifest;
    let trace = std::env::temp_dir().join("resource-plane-embed-trace.jsonl");
    let capsule = Capsule::builder(&manifest)
        .filesystem(Arc::new(OsFilesystem::open(std::path::Path::new(
            &workdir,
        ))?))
        .clock(Arc::new(SystemClock))
        .trace(Arc::new(JsonlTraceSink::open(&trace)?))
        .advertised_url(url.clone())
        .launch()?;
    println!(
        "serving {workdir} at {url}; tools for the model: {:?}",
        capsule.tools().names()
    );

    // The runtime keeps its own routes; the paths the planes claim go to the router.
    let own = tower::service_fn(|_request: hyper::Request<hyper::body::Incoming>| async {
        let body = Full::new(Bytes::from_static(b"the runtime's own route\n"));
        Ok::<_, Infallible>(hyper::Response::new(body))
    });
    let app = capsule.router().with_fallback(own);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve_with(listener, app, ListenerConfig::default(), shutdown).await?;
    capsule.end_session();
    Ok(())
}
