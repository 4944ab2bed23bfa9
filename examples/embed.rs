//! How a capsule runtime embeds resource-plane: build a `Capsule` from the manifest and its
//! backends at launch, mount its router on the runtime's own hyper listener beside the
//! runtime's own routes, and offer the granted tools to the model.
//!
//! Run: `cargo run --example embed -- <workdir>` then
//! `curl -s http://127.0.0.1:<port>/resources/files`.
#![allow(clippy::disallowed_methods)] // an example runtime is a composition root

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use resource_plane::backends::{JsonlTraceSink, OsFilesystem, SystemClock};
use resource_plane::http::Router;
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
    let router = capsule.router();

    loop {
        let (stream, _) = listener.accept().await?;
        let router = router.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let router = router.clone();
                async move {
                    // The runtime keeps its own routes and hands ours to the router.
                    let response: hyper::Response<BoxBody<Bytes, Infallible>> =
                        if Router::claims(request.uri().path()) {
                            router.handle(request).await.map(|b| b.boxed())
                        } else {
                            hyper::Response::new(
                                Full::new(Bytes::from_static(b"the runtime's own route\n")).boxed(),
                            )
                        };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
