//! The least MCP server D-18 allows for a `resources/read`, for `bench/mcp/side_by_side.sh`
//! only: the floor the 4 KiB `resources/read` of `resource-plane`'s `/mcp` is measured against.
//!
//! What D-18 makes every read through `/mcp` pay, each at its least:
//!
//! - the official SDK (D-18.1): `rmcp`'s Streamable HTTP service, its local session manager
//!   (D-18.2 asks for sessions, idle 10 min), no keep-alive comments and no priming or retry
//!   events (the least it allows);
//! - the capsule's listener, which D-18.2 puts `/mcp` on "behind the same hardening": the
//!   crate's own edge (`serve_with` at `ListenerConfig`'s defaults, as `serve` runs it), which
//!   keeps every rule of the listener: one request per connection with `connection: close`, the
//!   head limit, the connection cap, request timeouts, the version gate (D-4.1, D-4.5), the send
//!   timeout (D-4.6), the client-gone watch (D-4.6.1), a `date` on every answer; and the
//!   endpoint's own checks at their least: the listener's own `Origin` allowed and request
//!   bodies capped at 256 KiB (the SDK's checks), an in-flight byte budget (a semaphore taken
//!   without waiting); the 256-session cap is left out, as it costs a read nothing (it is
//!   checked when a session opens);
//! - with `MCP_FLOOR_EDGE=hyper`, only the hardening D-18.2 names, each at its least, on a bare
//!   hyper accept loop: `connection: close`, a 16 KiB head limit and a connection cap (a
//!   semaphore) besides the checks above: the floor of what `/mcp` and the listener add to
//!   hyper together;
//! - the Landlock wall D-19 puts up: the crate's own [`Confinement`] for the manifest and
//!   workdir, the very call `serve` makes, put up as `serve` does it (after the socket is bound
//!   and the trace file opened, before the runtime starts); `MCP_FLOOR_WALL=none` leaves it
//!   down, to measure what it costs;
//! - one single-threaded tokio runtime, as one `serve` shard (the default on two cores);
//! - the operator read (D-18.2: every rule of D-2): D-2.6's probe and reopen through the crate's
//!   `OsFilesystem`, one read into a page-aligned buffer and its sha256, on the async thread (a
//!   4 KiB file is under the router's inline limit, so the router reads it there too);
//! - the answer D-18.2 describes: `text` for a `.txt` file that is UTF-8, else `blob` (base64),
//!   with its `mimeType` and `_meta.sha256`; a refusal as a JSON-RPC error carrying its code;
//! - one `resource_read` trace line per read (D-18.2, D-6), appended by the crate's own
//!   `JsonlTraceSink`.
//!
//! And nothing else: no listing, no subscriptions, no router, no hash cache, no change feed, no
//! keep-alive clock of its own. One thing it pays that `resource-plane` does not:
//! the SDK writes an answer's head before its event (two `writev`s per request, seen with
//! strace), where `resource-plane`'s endpoint holds the head until the first event and sends
//! both in one; so this floor sits a little above the least.
//!
//! ```sh
//! cargo run --release --manifest-path bench/floors/Cargo.toml --bin mcp_floor -- \
//!     <workdir> <manifest.yaml> 127.0.0.1:18084 <trace.jsonl>
//! ```
//! The export is the manifest's `exports.files.root` beneath the workdir; the trace file must
//! lie outside the workdir, as `serve` requires.
//! Prints `{"url": "http://<address>"}` once listening; resources are
//! `<url>/resources/files/<path>`, the endpoint is any path (`/mcp` for the bench).
#![allow(clippy::disallowed_methods)] // a bench floor: it binds its own socket and reads argv

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use resource_plane::backends::{JsonlTraceSink, OsFilesystem, TraceSink};
use resource_plane::confine::Confinement;
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::scope::RootPath;
use resource_plane::{Manifest, Refusal};
use resource_plane_floors::{MAX_HEAD, PREFIX, open, read_opened, read_trace_line};
use rmcp::model::{
    ErrorCode, ErrorData, MetaObject, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The largest JSON-RPC request body (D-18.2).
const MAX_BODY: usize = 256 * 1024;
/// The connection cap and the in-flight byte budget: the crate's defaults.
const MAX_CONNECTIONS: usize = 2048;
const BUDGET_BYTES: usize = 256 << 20;

/// What every session's handler reads through.
struct Shared {
    fs: OsFilesystem,
    export: RootPath,
    trace: JsonlTraceSink,
    /// `<url>/resources/files/`: what a resource's uri starts with.
    uri_prefix: String,
    buffers: Mutex<Vec<Vec<u8>>>,
    /// The in-flight byte budget: a read holds its file's size while it reads.
    budget: Semaphore,
}

/// A session's handler: resources, read only.
#[derive(Clone)]
struct Floor(Arc<Shared>);

impl ServerHandler for Floor {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_resources().build())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read(&request.uri).map(ReadResourceResponse::from)
    }
}

impl Floor {
    /// Reads the file `uri` names and answers it as D-18.2 describes, with its trace line.
    fn read(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let shared = &self.0;
        let Some(raw) = uri.strip_prefix(shared.uri_prefix.as_str()) else {
            return Err(ErrorData::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                "not a resource of this server",
                Some(json!({"error": "not_found"})),
            ));
        };
        let opened = open(&shared.fs, &shared.export, raw);
        // The read holds its file's size in the budget while it reads (sizes are capped by
        // `max_bytes`, far under `u32::MAX`).
        let size = opened.as_ref().map_or(0, |file| file.meta().size) as u32;
        let Ok(_held) = shared.budget.try_acquire_many(size) else {
            return Err(ErrorData::internal_error(
                "over the in-flight budget",
                Some(json!({"error": "io_error"})),
            ));
        };
        let mut buffer = shared.buffers.lock().unwrap().pop().unwrap_or_default();
        let result = opened.and_then(|file| read_opened(file, &mut buffer));
        let line = match &result {
            Ok((start, sha256, _)) => read_trace_line(raw, Ok((buffer.len() - start, sha256))),
            Err(refusal) => read_trace_line(raw, Err(refusal)),
        };
        let traced = shared.trace.append_line(&line);
        let answer = match (result, traced) {
            (Ok((start, sha256, _)), Ok(())) => Ok(contents(uri, &buffer[start..], sha256)),
            (Err(refusal), _) => Err(refused(&refusal)),
            (_, Err(e)) => Err(ErrorData::internal_error(
                format!("trace failed: {e}"),
                Some(json!({"error": "io_error"})),
            )),
        };
        shared.buffers.lock().unwrap().push(buffer);
        answer
    }
}

/// The answer for `body`: `text` for a `.txt` file that is UTF-8, else `blob`.
fn contents(uri: &str, body: &[u8], sha256: String) -> ReadResourceResult {
    let mut meta = MetaObject::default();
    meta.0.insert("sha256".into(), sha256.into());
    let text = uri
        .ends_with(".txt")
        .then(|| std::str::from_utf8(body).ok())
        .flatten();
    let contents = match text {
        Some(text) => ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("text/plain".into()),
            text: text.to_owned(),
            meta: Some(meta),
        },
        None => ResourceContents::BlobResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("application/octet-stream".into()),
            blob: STANDARD.encode(body),
            meta: Some(meta),
        },
    };
    ReadResourceResult::new(vec![contents])
}

/// A refusal as a JSON-RPC error carrying its code (`not_found` is `-32002`).
fn refused(refusal: &Refusal) -> ErrorData {
    let code = if refusal.code.as_str() == "not_found" {
        ErrorCode::RESOURCE_NOT_FOUND
    } else {
        ErrorCode::INVALID_PARAMS
    };
    ErrorData::new(
        code,
        refusal.reason.clone(),
        Some(json!({"error": refusal.code.as_str()})),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, workdir, manifest, addr, trace] = args.as_slice() else {
        eprintln!("usage: mcp_floor <workdir> <manifest.yaml> <addr> <trace.jsonl>");
        std::process::exit(2);
    };
    let fail = |what: &str| -> ! {
        eprintln!("error: {what}");
        std::process::exit(1);
    };
    let manifest = std::fs::read_to_string(manifest)
        .map_err(|e| e.to_string())
        .and_then(|text| Manifest::from_yaml(&text).map_err(|e| e.to_string()))
        .unwrap_or_else(|e| fail(&format!("manifest {manifest}: {e}")))
        .manifest;
    let export = match &manifest.files {
        Some(files) => files.root.clone(),
        None => fail("the manifest exports no files"),
    };
    let fs = OsFilesystem::open(Path::new(workdir))
        .unwrap_or_else(|e| fail(&format!("workdir {workdir}: {e}")));
    let listener = std::net::TcpListener::bind(addr.as_str())
        .unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")));
    listener.set_nonblocking(true).expect("a listening socket");
    let trace = JsonlTraceSink::open(Path::new(trace))
        .unwrap_or_else(|e| fail(&format!("trace {trace}: {e}")));
    if std::env::var("MCP_FLOOR_WALL").as_deref() != Ok("none") {
        Confinement::new(&manifest, workdir)
            .apply()
            .unwrap_or_else(|e| fail(&format!("confinement: {e}")));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener).expect("a listening socket");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let shared = Arc::new(Shared {
            fs,
            export,
            trace,
            uri_prefix: format!("{url}{PREFIX}"),
            buffers: Mutex::new(Vec::new()),
            budget: Semaphore::new(BUDGET_BYTES),
        });
        let config = StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_sse_retry(None)
            .with_allowed_origins([url.clone()])
            .with_max_request_body_bytes(MAX_BODY);
        let mut sessions = LocalSessionManager::default();
        sessions.session_config = SessionConfig::default();
        sessions.session_config.keep_alive = Some(Duration::from_secs(600));
        sessions.session_config.sse_retry = None;
        let service = StreamableHttpService::new(
            move || Ok(Floor(shared.clone())),
            Arc::new(sessions),
            config,
        );
        let edge = std::env::var("MCP_FLOOR_EDGE").unwrap_or_default();
        if !matches!(edge.as_str(), "" | "crate" | "hyper") {
            fail(&format!(
                "MCP_FLOOR_EDGE={edge}: expected crate (the default) or hyper"
            ));
        }
        println!("{}", json!({ "url": url }));
        if edge != "hyper" {
            // Every rule of the capsule's listener, as the crate's own edge keeps them.
            let never = std::future::pending::<()>();
            if let Err(e) = serve_with(listener, service, ListenerConfig::default(), never).await {
                fail(&format!("listener: {e}"));
            }
            return;
        }
        let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            // Over the cap, the connection is closed unanswered.
            let Ok(held) = connections.clone().try_acquire_owned() else {
                continue;
            };
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                // A client that vanished mid-answer is no concern of the floor.
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(false)
                    .max_buf_size(MAX_HEAD)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                drop(held);
            });
        }
    });
}
