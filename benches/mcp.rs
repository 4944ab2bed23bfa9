//! What the MCP face adds to a read, in process (`cargo bench --bench mcp`): no sockets, no
//! client, one current-thread runtime, so the difference is the endpoint's own CPU.
//!
//! | Group | `mcp` | `http` (the baseline) |
//! |---|---|---|
//! | `mcp/read_4k_blob` | `resources/read` of a 4 KiB binary file in a 2025-11-25 session, through `McpService` (JSON-RPC parse, the SDK's session worker, the handler, base64, the SSE answer), body collected | `GET` of the same file through the capsule's router, body collected |
//! | `mcp/read_4k_text` | the same for a 4 KiB text file (`text`, JSON-escaped) | the same `GET` |
//! | `mcp/ping` | the SDK's `ping` in the same session: the floor every request pays | the same `GET` |
//! | `mcp/read_refused` | `resources/read` of a uri that is not this capsule's: the request parsed, dispatched and answered, nothing read | `GET` of a file that does not exist (`404`) |
//!
//! The end of the run prints each `mcp` beside its `http`; `bench/mcp/side_by_side.sh` measures
//! the same over real connections against a real client.
#![allow(clippy::disallowed_methods)] // benches build their own worlds with std::fs

use criterion::Criterion;
use http_body_util::BodyExt;
use resource_plane::backends::{OsFilesystem, TraceSink};
use resource_plane::mcp::{McpConfig, McpService};
use resource_plane::scope::Containment;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const URL: &str = "http://127.0.0.1:41234";
const MISSING: &str = "no-such-file";

/// Each group: its name, the MCP method, the uri read, and the file the HTTP baseline gets.
const GROUPS: [(&str, &str, &str, &str); 4] = [
    (
        "mcp/read_4k_blob",
        "resources/read",
        "{URL}/resources/files/4k.bin",
        "4k.bin",
    ),
    (
        "mcp/read_4k_text",
        "resources/read",
        "{URL}/resources/files/4k.txt",
        "4k.txt",
    ),
    ("mcp/ping", "ping", "", "4k.bin"),
    (
        "mcp/read_refused",
        "resources/read",
        "http://elsewhere.invalid/resources/files/4k.bin",
        MISSING,
    ),
];

/// A trace sink that keeps nothing: the line is built, not stored.
#[derive(Debug)]
struct Discard;

impl TraceSink for Discard {
    fn append_line(&self, line: &[u8]) -> std::io::Result<()> {
        std::hint::black_box(line);
        Ok(())
    }
}

fn post(session: Option<&str>, body: &Value) -> http::Request<String> {
    let mut request = http::Request::post("/mcp")
        .header("host", "127.0.0.1:41234")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(body.to_string()).unwrap()
}

async fn answer(mcp: &McpService, request: http::Request<String>) -> (http::HeaderMap, Vec<u8>) {
    let response = mcp.handle(request).await;
    assert!(response.status().is_success(), "{}", response.status());
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (headers, body.to_vec())
}

async fn open_session(mcp: &McpService) -> String {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}});
    let (headers, _) = answer(mcp, post(None, &init)).await;
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let done = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    answer(mcp, post(Some(&session), &done)).await;
    session
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path();
    std::fs::create_dir_all(workdir.join("out")).unwrap();
    let binary: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 13) as u8).collect();
    std::fs::write(workdir.join("out/4k.bin"), binary).unwrap();
    std::fs::write(
        workdir.join("out/4k.txt"),
        "line of text\n".repeat(315) + "x",
    )
    .unwrap();
    let manifest = resource_plane::Manifest::from_yaml(
        "name: bench\nexports:\n  files: { root: out, mode: read-only }\n",
    )
    .unwrap()
    .manifest;
    let capsule = resource_plane::Capsule::builder(&manifest)
        .filesystem(Arc::new(OsFilesystem::open(workdir).unwrap()))
        .trace(Arc::new(Discard))
        .advertised_url(URL)
        .containment(Containment::Sealed)
        .launch()
        .unwrap();
    let router = capsule.router();
    let mcp = McpService::new(&capsule, McpConfig::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let session = runtime.block_on(open_session(&mcp));

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let http_get = |name: &str| {
        let request = http::Request::get(format!("/resources/files/{name}"))
            .body(())
            .unwrap();
        let status = if name == MISSING { 404 } else { 200 };
        runtime.block_on(async {
            let response = router.handle(request).await;
            assert_eq!(response.status(), status);
            response.into_body().collect().await.unwrap().to_bytes()
        })
    };
    let mcp_call = |method: &str, params: Value, refused: bool| {
        let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params});
        let (_, answer) = runtime.block_on(answer(&mcp, post(Some(&session), &body)));
        let error = answer.windows(8).any(|w| w == b"\"error\":");
        assert_eq!(error, refused, "{}", String::from_utf8_lossy(&answer));
        answer
    };
    for (group, method, uri, file) in GROUPS {
        let params = match method {
            "ping" => json!({}),
            _ => json!({"uri": uri.replace("{URL}", URL)}),
        };
        let refused = file == MISSING;
        let mut g = c.benchmark_group(group);
        g.bench_function("mcp", |b| {
            b.iter(|| mcp_call(method, params.clone(), refused))
        });
        g.bench_function("http", |b| b.iter(|| http_get(file)));
        g.finish();
    }
    c.final_summary();
    report(Path::new("target/criterion"));
}

fn report(base: &Path) {
    let mean = |group: &str, id: &str| -> Option<f64> {
        let path = base
            .join(group.replace('/', "_"))
            .join(id)
            .join("new/estimates.json");
        let value: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        value["mean"]["point_estimate"].as_f64()
    };
    println!(
        "\n{:<18} {:>12} {:>12} {:>8}",
        "group", "mcp", "http", "ratio"
    );
    for (group, ..) in GROUPS {
        if let (Some(m), Some(h)) = (mean(group, "mcp"), mean(group, "http")) {
            println!(
                "{group:<18} {:>9.2} µs {:>9.2} µs {:>7.2}x",
                m / 1e3,
                h / 1e3,
                m / h
            );
        }
    }
}
