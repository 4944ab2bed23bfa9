//! The MCP endpoint (D-18.2) driven as a function: JSON-RPC over Streamable HTTP requests
//! handed to `McpService::handle`, the answers (JSON or SSE frames) read back, and compared
//! with what the operator plane answers over HTTP for the same files.

use http_body_util::BodyExt;
use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
use resource_plane::mcp::{ChangeNotice, ExportChanges, McpConfig, McpService};
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const URL: &str = "http://127.0.0.1:41234";
const FILES: &str = "http://127.0.0.1:41234/resources/files/";

struct World {
    fs: Arc<MemoryFilesystem>,
    trace: Arc<RecordingTraceSink>,
    capsule: Capsule,
}

fn world(yaml: &str) -> World {
    let manifest = Manifest::from_yaml(yaml).unwrap().manifest;
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_dir("out");
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::launch(
        &manifest,
        CapsuleConfig::new(URL).unwrap(),
        Backends {
            fs: fs.clone(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            keys: None,
            trace: trace.clone(),
        },
    )
    .unwrap();
    World { fs, trace, capsule }
}

fn files_world() -> World {
    world("name: r\nexports: { files: { root: out/, mode: read-only, max_bytes: 64 } }")
}

/// The operator plane's own answer to `GET target` over HTTP, for comparison.
async fn http_get(
    w: &World,
    target: impl AsRef<str>,
) -> http::Response<resource_plane::http::PlaneBody> {
    let request = http::Request::get(target.as_ref()).body(()).unwrap();
    w.capsule.router().handle(request).await
}

/// An answer: status, headers, and the JSON-RPC messages of its body (JSON or SSE `data:`).
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    messages: Vec<Value>,
}

impl Answer {
    fn only(&self) -> &Value {
        assert_eq!(self.messages.len(), 1, "{:?}", self.messages);
        &self.messages[0]
    }
}

fn messages_of(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    if let Ok(value) = serde_json::from_str::<Value>(&text) {
        return vec![value];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

async fn send(mcp: &McpService, request: http::Request<String>) -> Answer {
    let response = mcp.handle(request).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .expect("the answer ends")
        .unwrap()
        .to_bytes();
    Answer {
        status,
        headers,
        messages: messages_of(&body),
    }
}

fn post(session: Option<&str>, body: Value) -> http::Request<String> {
    let mut request = http::Request::post("/mcp")
        .header("host", "127.0.0.1:41234")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    request.body(body.to_string()).unwrap()
}

/// Opens a session (initialize, then initialized) and returns its id.
async fn open(mcp: &McpService, version: &str) -> String {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name":"t","version":"1"}}});
    let answer = send(mcp, post(None, init)).await;
    assert_eq!(answer.status, 200, "{:?}", answer.messages);
    assert_eq!(answer.only()["result"]["protocolVersion"], version);
    let session = answer.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let done = send(
        mcp,
        post(
            Some(&session),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        ),
    )
    .await;
    assert_eq!(done.status, 202);
    session
}

/// `resources/read` of the export's file `raw` (as it goes into the uri, unescaped).
async fn read(mcp: &McpService, session: &str, raw: &str) -> Value {
    let uri = format!("{FILES}{raw}");
    call(mcp, session, "resources/read", json!({ "uri": uri })).await
}

async fn call(mcp: &McpService, session: &str, method: &str, params: Value) -> Value {
    let answer = send(
        mcp,
        post(
            Some(session),
            json!({"jsonrpc":"2.0","id":7,"method":method,"params":params}),
        ),
    )
    .await;
    assert_eq!(answer.status, 200);
    answer.only().clone()
}

#[tokio::test]
async fn initialize_negotiates_both_required_versions_and_offers_subscribable_resources() {
    let w = files_world();
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    for version in ["2025-06-18", "2025-11-25"] {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name":"t","version":"1"}}});
        let answer = send(&mcp, post(None, init)).await;
        let result = &answer.only()["result"];
        assert_eq!(result["protocolVersion"], version);
        assert_eq!(
            result["capabilities"]["resources"],
            json!({"subscribe": true, "listChanged": true})
        );
        assert_eq!(result["serverInfo"]["name"], "resource-plane");
    }
}

#[tokio::test]
async fn resources_are_the_listing_with_uri_mime_size_and_meta_and_each_list_is_traced() {
    let w = files_world();
    w.fs.add_file("out/report.md", "# hi\n", 1_700_000_000_500);
    w.fs.add_file(
        "out/dir/a b#.bin",
        vec![0u8, 159, 146, 150],
        1_700_000_000_600,
    );
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    let listed = call(&mcp, &session, "resources/list", json!({})).await;
    let resources = listed["result"]["resources"].as_array().unwrap().clone();
    // The operator plane's own listing of the same export.
    let http = http_get(&w, "/resources/files").await;
    let listing: Value = serde_json::from_slice(&http.body().bytes()).unwrap();
    let entries = listing["entries"].as_array().unwrap();
    assert_eq!(resources.len(), entries.len());
    for (resource, entry) in resources.iter().zip(entries) {
        assert_eq!(resource["name"], entry["path"]);
        assert_eq!(resource["size"], entry["size_bytes"]);
        assert_eq!(resource["_meta"]["sha256"], entry["sha256"]);
        assert_eq!(resource["_meta"]["mtime_ms"], entry["mtime_ms"]);
        assert_eq!(resource["_meta"]["generation"], listing["generation"]);
    }
    assert_eq!(resources[0]["uri"], format!("{FILES}dir/a%20b%23.bin"));
    assert_eq!(resources[0]["mimeType"], "application/octet-stream");
    assert_eq!(resources[1]["uri"], format!("{FILES}report.md"));
    assert_eq!(resources[1]["mimeType"], "text/markdown");
    assert!(listed["result"].get("nextCursor").is_none());
    let lists = w
        .trace
        .events()
        .iter()
        .filter(|e| e["event_type"] == "resource_list")
        .count();
    assert_eq!(
        lists, 2,
        "one line for the MCP list, one for the HTTP listing"
    );
}

/// Every page of `resources/list` from the first, with `between` run after the first page:
/// the names in order, the pages, and the last cursor issued.
async fn page_all(
    mcp: &McpService,
    session: &str,
    mut between: impl FnMut(),
) -> (Vec<String>, usize, Option<String>) {
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut issued = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = call(mcp, session, "resources/list", params).await;
        let resources = page["result"]["resources"].as_array().unwrap();
        assert!(resources.len() <= 1_000);
        seen.extend(
            resources
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_owned()),
        );
        pages += 1;
        if pages == 1 {
            between();
        }
        match page["result"]["nextCursor"].as_str() {
            Some(next) => {
                cursor = Some(next.to_owned());
                issued = cursor.clone();
            }
            None => return (seen, pages, issued),
        }
    }
}

#[tokio::test]
async fn a_cursor_survives_change_without_repeat_or_skip_and_a_forged_one_is_invalid_params() {
    let w = files_world();
    for i in 0..2_500 {
        w.fs.add_file(&format!("out/f{i:05}.txt"), "x", 1_700_000_000_000);
    }
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-06-18").await;
    let (seen, pages, cursor) = page_all(&mcp, &session, || {
        // Between pages: files before and after the cursor come and go.
        w.fs.remove("out/f00010.txt");
        w.fs.remove("out/f02400.txt");
        w.fs.add_file("out/f00000a.txt", "new", 1_700_000_000_000);
        w.fs.add_file("out/f01500a.txt", "new", 1_700_000_000_000);
    })
    .await;
    assert_eq!(pages, 3);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "no path repeats");
    for i in 0..2_500 {
        let path = format!("f{i:05}.txt");
        if i != 10 && i != 2_400 {
            assert!(
                seen.contains(&path),
                "{path} was present throughout and listed"
            );
        }
    }
    // Pages after the first are cut from the first page's listing until the export's watcher
    // sees the change (this filesystem gives no notices: it re-lists every 2 s); from then
    // on a page lists afresh.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (seen, _, _) = page_all(&mcp, &session, || {}).await;
        let caught_up = seen.contains(&"f01500a.txt".to_owned())
            && !seen.contains(&"f02400.txt".to_owned())
            && seen.contains(&"f00000a.txt".to_owned());
        if caught_up {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the change is listed once the watcher saw it"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let issued = cursor.unwrap();
    let (_, tag) = issued.rsplit_once('.').unwrap();
    for forged in [
        "c1.ZjAwMDAwLnR4dA.AAAA".to_owned(),
        format!("c1.ZjAwMDAwLnR4dA.{tag}"),
        "garbage".to_owned(),
    ] {
        let refused = call(&mcp, &session, "resources/list", json!({"cursor": forged})).await;
        assert_eq!(refused["error"]["code"], -32602, "{forged}");
    }
}

#[tokio::test]
async fn reads_are_text_or_blob_with_the_etags_sha256_and_one_read_line_each() {
    let w = files_world();
    w.fs.add_file("out/notes.txt", "héllo", 1_700_000_000_000);
    w.fs.add_file(
        "out/pic.png",
        vec![0x89, b'P', b'N', b'G', 0, 0xff],
        1_700_000_000_000,
    );
    w.fs.add_file("out/bad.txt", vec![0xff, 0xfe], 1_700_000_000_000);
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    for (name, text, blob) in [
        ("notes.txt", Some("héllo"), None),
        ("pic.png", None, Some("iVBORwD/")),
        ("bad.txt", None, Some("//4=")),
    ] {
        let uri = format!("{FILES}{name}");
        let read = call(&mcp, &session, "resources/read", json!({"uri": uri})).await;
        let content = &read["result"]["contents"][0];
        assert_eq!(content["uri"], uri);
        assert_eq!(content.get("text").and_then(Value::as_str), text, "{name}");
        assert_eq!(content.get("blob").and_then(Value::as_str), blob, "{name}");
        let http = http_get(&w, format!("/resources/files/{name}")).await;
        let etag = http.headers()["etag"].to_str().unwrap();
        assert_eq!(
            format!(
                "\"sha256:{}\"",
                content["_meta"]["sha256"].as_str().unwrap()
            ),
            etag
        );
    }
    let reads: Vec<Value> = w
        .trace
        .events()
        .into_iter()
        .filter(|e| e["event_type"] == "resource_read")
        .collect();
    assert_eq!(reads.len(), 6, "one line per MCP read and per HTTP read");
    assert_eq!(reads[0]["path"], "notes.txt");
    assert_eq!(reads[0]["outcome"], "ok");
    assert_eq!(reads[0]["sha256"], reads[1]["sha256"]);
}

/// A file past the inline limit is read on the blocking pool and handed to the MCP face from
/// the `GET`'s response: every byte, the etag's sha256, one read line like the `GET`'s.
#[tokio::test]
async fn a_read_past_the_inline_limit_is_whole_and_traced_once() {
    use base64::Engine as _;
    let w =
        world("name: r\nexports: { files: { root: out/, mode: read-only, max_bytes: 1048576 } }");
    let size = usize::try_from(resource_plane::http::INLINE_READ_LIMIT).unwrap() + 3;
    let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    w.fs.add_file("out/large.bin", bytes.clone(), 1_700_000_000_000);
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    let before = w.trace.events().len();
    let answer = read(&mcp, &session, "large.bin").await;
    let content = &answer["result"]["contents"][0];
    let blob = base64::engine::general_purpose::STANDARD
        .decode(content["blob"].as_str().unwrap())
        .unwrap();
    assert!(
        blob == bytes,
        "the blob is not the file ({} bytes)",
        blob.len()
    );
    let http = http_get(&w, "/resources/files/large.bin").await;
    let etag = http.headers()["etag"].to_str().unwrap();
    assert_eq!(
        format!(
            "\"sha256:{}\"",
            content["_meta"]["sha256"].as_str().unwrap()
        ),
        etag
    );
    let events = w.trace.events();
    assert_eq!(
        events.len(),
        before + 2,
        "one line for the MCP read, one for the GET"
    );
    assert_eq!(events[before]["event_type"], "resource_read");
    assert_eq!(events[before]["bytes"], size);
    assert_eq!(
        without_ids(events[before].clone()),
        without_ids(events[before + 1].clone()),
        "the MCP read's line is the GET's"
    );
}

/// A trace line without what differs between any two lines by design.
fn without_ids(mut line: Value) -> Value {
    for key in ["event_id", "timestamp"] {
        line.as_object_mut().unwrap().remove(key);
    }
    line
}

/// Every read through the face, served or refused, counts once among the router's answered
/// requests; a read whose trace line cannot be written is refused (D-6.4), nothing served.
#[tokio::test]
async fn each_read_counts_once_and_an_unwritable_trace_refuses_the_read() {
    let w = files_world();
    w.fs.add_file("out/ok.txt", "fine", 1_700_000_000_000);
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    let answered = || w.capsule.router().stats().requests_answered;
    for raw in ["ok.txt", "missing.txt", "../up.txt"] {
        let before = answered();
        let answer = read(&mcp, &session, raw).await;
        assert_eq!(answer.get("result").is_some(), raw == "ok.txt", "{answer}");
        assert_eq!(answered(), before + 1, "{raw}: counted once");
    }
    w.trace.fail_from_now();
    let refused = read(&mcp, &session, "ok.txt").await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["error"], "io_error");
    assert!(refused.get("result").is_none());
}

/// A runtime's own plane that streams its files: the MCP face reads the stream whole, and a
/// stream that fails part way is an internal error, never a short file.
#[tokio::test]
async fn a_runtime_planes_streamed_file_is_read_whole_and_a_broken_one_is_refused() {
    use resource_plane::Refusal;
    use resource_plane::path::RelPath;
    use resource_plane::planes::{
        Cancel, ExportScope, IfNoneMatch, Listing, ReadOutcome, ResourcePlane, StreamedFile,
    };
    use resource_plane::scope::{Containment, RootPath};
    const TEXT: &[u8] = b"streamed, chunk by chunk, to the end\n";
    #[derive(Debug)]
    struct Streaming(ExportScope);
    #[async_trait::async_trait]
    impl ResourcePlane for Streaming {
        fn scope(&self) -> &ExportScope {
            &self.0
        }
        async fn list(&self, _: &Cancel) -> Result<Listing, Refusal> {
            Ok(Listing::from_entries(Vec::new()))
        }
        async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
            let broken = path.as_str() == "broken.txt";
            let chunks = TEXT.chunks(5).enumerate().map(move |(i, chunk)| {
                if broken && i == 2 {
                    return Err(std::io::Error::other("the store went away"));
                }
                Ok(bytes::Bytes::copy_from_slice(chunk))
            });
            // "huge.txt" vouches for more than max_bytes, "lying.txt" for another file's hash.
            let size = match path.as_str() {
                "huge.txt" => 4096,
                _ => TEXT.len() as u64,
            };
            let sha256 = match path.as_str() {
                "lying.txt" => sha256_hex(b"another file"),
                _ => sha256_hex(TEXT),
            };
            Ok(ReadOutcome::Stream(StreamedFile::new(
                futures::stream::iter(chunks),
                sha256,
                size,
                1_700_000_000_000,
            )))
        }
    }
    let manifest =
        Manifest::from_yaml("name: r\nexports: { files: { root: out/, mode: read-only } }")
            .unwrap()
            .manifest;
    let trace = Arc::new(RecordingTraceSink::new());
    let plane = Streaming(ExportScope {
        root: RootPath::parse("out/").unwrap(),
        max_bytes: 1024,
        containment: Containment::Advisory,
    });
    let capsule = Capsule::builder(&manifest)
        .filesystem(Arc::new(MemoryFilesystem::new()))
        .clock(Arc::new(ManualClock::new(1_700_000_000_000)))
        .trace(trace.clone())
        .advertised_url(URL)
        .resource_plane(Arc::new(plane))
        .launch()
        .unwrap();
    let mcp = McpService::new(&capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    let answer = read(&mcp, &session, "whole.txt").await;
    let content = &answer["result"]["contents"][0];
    assert_eq!(content["text"].as_str().map(str::as_bytes), Some(TEXT));
    assert_eq!(content["_meta"]["sha256"], sha256_hex(TEXT));
    let broken = read(&mcp, &session, "broken.txt").await;
    assert_eq!(broken["error"]["code"], -32603, "{broken}");
    assert_eq!(broken["error"]["data"]["error"], "io_error");
    let reads: Vec<Value> = trace
        .events()
        .into_iter()
        .filter(|e| e["event_type"] == "resource_read")
        .collect();
    assert_eq!(reads.len(), 2, "one read line each");
    // The line is written before the body is read, as over HTTP: it says what the plane
    // vouched for.
    assert_eq!(reads[1]["path"], "broken.txt");
    assert_eq!(reads[1]["outcome"], "ok");
    assert_eq!(reads[1]["bytes"], TEXT.len());
    // Held whole by the face, a stream is bounded by max_bytes and checked against its hash.
    for (name, rpc, code) in [
        ("huge.txt", -32602, "too_large"),
        ("lying.txt", -32603, "io_error"),
    ] {
        let refused = read(&mcp, &session, name).await;
        assert_eq!(refused["error"]["code"], rpc, "{name}: {refused}");
        assert_eq!(refused["error"]["data"]["error"], code, "{name}");
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every hostile target the operator plane refuses is refused by `resources/read` with the
/// same code, and leaves the same trace line (but its ids and time).
#[tokio::test]
async fn hostile_reads_get_the_operator_planes_codes_and_trace_lines() {
    let w = files_world();
    w.fs.add_file("out/ok.txt", "fine", 1_700_000_000_000);
    w.fs.add_file("out/big.txt", vec![b'x'; 65], 1_700_000_000_000);
    w.fs.add_file("secret.txt", "SENTINEL", 1_700_000_000_000);
    w.fs.add_dir("out/dir");
    w.fs.add_fifo("out/fifo");
    w.fs.add_symlink("out/up", "../secret.txt");
    w.fs.add_symlink("out/abs", "/etc/passwd");
    w.fs.add_symlink("out/dangling", "nowhere");
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    let table = [
        ("../secret.txt", "outside_root", -32602),
        ("%2e%2e/secret.txt", "outside_root", -32602),
        ("ok.txt%2F..%2F..%2Fsecret.txt", "outside_root", -32602),
        ("./ok.txt", "outside_root", -32602),
        ("a//b", "outside_root", -32602),
        ("%zz", "outside_root", -32602),
        ("ok%00.txt", "outside_root", -32602),
        ("%ff", "outside_root", -32602),
        ("", "outside_root", -32602),
        ("up", "outside_root", -32602),
        ("abs", "outside_root", -32602),
        ("dangling", "not_found", -32002),
        ("missing.txt", "not_found", -32002),
        ("dir", "not_a_regular_file", -32602),
        ("fifo", "not_a_regular_file", -32602),
        ("big.txt", "too_large", -32602),
    ];
    for (raw, code, rpc) in table {
        let before = w.trace.events().len();
        let refused = read(&mcp, &session, raw).await;
        assert_eq!(refused["error"]["code"], rpc, "{raw}");
        assert_eq!(refused["error"]["data"]["error"], code, "{raw}");
        let http = http_get(&w, format!("/resources/files/{raw}")).await;
        let body: Value = serde_json::from_slice(&http.body().bytes()).unwrap();
        assert_eq!(body["error"], code, "{raw} over HTTP");
        let events = w.trace.events();
        assert_eq!(events.len(), before + 2, "{raw}: one line each");
        let strip = |mut e: Value| {
            for key in ["event_id", "timestamp"] {
                e.as_object_mut().unwrap().remove(key);
            }
            e
        };
        assert_eq!(
            strip(events[before].clone()),
            strip(events[before + 1].clone()),
            "{raw}"
        );
    }
    // Not under this capsule's URL at all: not one of its resources, nothing read.
    let before = w.trace.events().len();
    let foreign = call(
        &mcp,
        &session,
        "resources/read",
        json!({"uri": "file:///etc/passwd"}),
    )
    .await;
    assert_eq!(foreign["error"]["code"], -32002);
    assert_eq!(w.trace.events().len(), before);
}

#[tokio::test]
async fn the_template_names_every_file_under_the_export_url() {
    let w = files_world();
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let session = open(&mcp, "2025-11-25").await;
    let templates = call(&mcp, &session, "resources/templates/list", json!({})).await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        format!("{FILES}{{+path}}")
    );
}

#[tokio::test]
async fn a_foreign_origin_an_oversized_body_and_an_unknown_session_are_refused() {
    let w = files_world();
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name":"t","version":"1"}}});
    for origin in [
        "http://evil.example",
        "http://127.0.0.1:41235",
        "https://127.0.0.1:41234",
    ] {
        let mut request = post(None, init.clone());
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
        assert_eq!(send(&mcp, request).await.status, 403, "{origin}");
    }
    for own in ["http://127.0.0.1:41234"] {
        let mut request = post(None, init.clone());
        request.headers_mut().insert("origin", own.parse().unwrap());
        assert_eq!(send(&mcp, request).await.status, 200, "{own}");
    }
    let allowed = McpService::new(
        &w.capsule,
        McpConfig::default().with_allowed_origins(["https://ide.example"]),
    );
    let mut request = post(None, init.clone());
    request
        .headers_mut()
        .insert("origin", "https://ide.example".parse().unwrap());
    assert_eq!(send(&allowed, request).await.status, 200);

    let mut huge = post(None, init.clone());
    *huge.body_mut() = format!("{}{}", " ".repeat(256 * 1024), init);
    assert_eq!(send(&mcp, huge).await.status, 413);
    let mut fits = post(None, init.clone());
    *fits.body_mut() = format!("{}{}", " ".repeat(200 * 1024), init);
    assert_eq!(send(&mcp, fits).await.status, 200);

    let unknown = post(
        Some("not-a-session"),
        json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}),
    );
    assert_eq!(send(&mcp, unknown).await.status, 404);
}

#[tokio::test]
async fn sessions_are_capped_at_256_delete_ends_one_and_an_idle_one_expires() {
    let w = files_world();
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let mut sessions = Vec::new();
    for _ in 0..256 {
        sessions.push(open(&mcp, "2025-11-25").await);
    }
    assert_eq!(mcp.session_count().await, 256);
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name":"t","version":"1"}}});
    let refused = send(&mcp, post(None, init.clone())).await;
    assert_eq!(refused.status, 503);
    assert_eq!(
        refused.only()["error"]["data"]["error"],
        "too_many_sessions"
    );
    // Sessions already open still work.
    let listed = call(&mcp, &sessions[0], "resources/list", json!({})).await;
    assert!(listed["result"]["resources"].is_array());

    let delete = http::Request::delete("/mcp")
        .header("host", "127.0.0.1:41234")
        .header("mcp-session-id", &sessions[1])
        .body(String::new())
        .unwrap();
    assert_eq!(send(&mcp, delete).await.status, 200);
    let gone = post(
        Some(&sessions[1]),
        json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}),
    );
    assert_eq!(send(&mcp, gone).await.status, 404);
    assert_eq!(send(&mcp, post(None, init)).await.status, 200);

    let short = McpService::new(
        &w.capsule,
        McpConfig::default().with_session_idle(Duration::from_millis(200)),
    );
    let idle = open(&short, "2025-11-25").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let expired = post(
        Some(&idle),
        json!({"jsonrpc":"2.0","id":1,"method":"resources/list"}),
    );
    assert_eq!(send(&short, expired).await.status, 404);
    assert_eq!(short.session_count().await, 0);
}

#[tokio::test]
async fn without_exports_files_mcp_is_404_no_resource_plane() {
    let w = world("name: r\nexports: { peer_files: { root: out/ } }");
    let mcp = McpService::new(&w.capsule, McpConfig::default());
    let answer = send(&mcp, post(None, json!({}))).await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.only()["error"], "no_resource_plane");
}

/// A change source a test drives: every subscriber's sender is kept.
#[derive(Debug, Default)]
struct Scripted(Mutex<Vec<tokio::sync::mpsc::Sender<ChangeNotice>>>);

impl ExportChanges for Scripted {
    fn subscribe(&self) -> Option<tokio::sync::mpsc::Receiver<ChangeNotice>> {
        let (sender, receiver) = tokio::sync::mpsc::channel(16);
        self.0.lock().unwrap().push(sender);
        Some(receiver)
    }
}

#[tokio::test]
async fn a_subscribed_file_that_changes_is_notified_and_an_added_path_changes_the_list() {
    let w = files_world();
    w.fs.add_file("out/watched.txt", "v1", 1_700_000_000_000);
    let changes = Arc::new(Scripted::default());
    let mcp = McpService::new(
        &w.capsule,
        McpConfig::default().with_changes(changes.clone()),
    );
    let session = open(&mcp, "2025-11-25").await;
    let uri = format!("{FILES}watched.txt");
    let subscribed = call(&mcp, &session, "resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(subscribed["result"], json!({}));
    // The session's own stream, where notifications go.
    let get = http::Request::get("/mcp")
        .header("host", "127.0.0.1:41234")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(String::new())
        .unwrap();
    let response = mcp.handle(get).await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let senders = changes.0.lock().unwrap().clone();
    assert_eq!(senders.len(), 1, "one feed for the session");
    senders[0]
        .send(ChangeNotice::new(
            vec!["other.txt".into(), "watched.txt".into()],
            true,
        ))
        .await
        .unwrap();
    let seen = next_messages(&mut body, 2).await;
    assert_list_changed_then_updated(&seen, &uri);

    let unsubscribed = call(&mcp, &session, "resources/unsubscribe", json!({"uri": uri})).await;
    assert_eq!(unsubscribed["result"], json!({}));
    let foreign = call(
        &mcp,
        &session,
        "resources/subscribe",
        json!({"uri": "http://elsewhere/resources/files/x"}),
    )
    .await;
    assert_eq!(foreign["error"]["code"], -32002);
}

/// `seen` is `list_changed`, then `updated` for `uri` alone (no other path was subscribed).
fn assert_list_changed_then_updated(seen: &[Value], uri: &str) {
    let methods: Vec<&str> = seen.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        [
            "notifications/resources/list_changed",
            "notifications/resources/updated"
        ]
    );
    assert_eq!(seen[1]["params"]["uri"], uri, "only the subscribed uri");
}

/// Reads `body`'s SSE frames until `count` JSON-RPC messages came, within 5 s.
async fn next_messages<B>(body: &mut B, count: usize) -> Vec<Value>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while seen.len() < count {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("messages within 5 s")
            .expect("the stream is open")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            seen.extend(messages_of(&data));
        }
    }
    seen
}

#[tokio::test]
async fn subscriptions_listen_streams_what_was_accepted_until_the_client_leaves() {
    let w = files_world();
    w.fs.add_file("out/watched.txt", "v1", 1_700_000_000_000);
    let changes = Arc::new(Scripted::default());
    let mcp = McpService::new(
        &w.capsule,
        McpConfig::default().with_changes(changes.clone()),
    );
    let uri = format!("{FILES}watched.txt");
    let listen = json!({"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        },
        "notifications": {
            "resourcesListChanged": true,
            "resourceSubscriptions": [uri, "http://elsewhere/resources/files/x"],
        },
    }});
    let request = http::Request::post("/mcp")
        .header("host", "127.0.0.1:41234")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(listen.to_string())
        .unwrap();
    let response = mcp.handle(request).await;
    if response.status() != 200 {
        let body = response.into_body().collect().await.unwrap().to_bytes();
        panic!("listen refused: {}", String::from_utf8_lossy(&body));
    }
    assert!(
        response.headers().get("mcp-session-id").is_none(),
        "2026-07-28 has no sessions"
    );
    let mut body = response.into_body();
    let ack = next_messages(&mut body, 1).await;
    assert_eq!(ack[0]["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack[0]["params"]["notifications"]["resourceSubscriptions"],
        json!([uri]),
        "a uri that is not this server's is left out"
    );
    assert_eq!(
        ack[0]["params"]["notifications"]["resourcesListChanged"],
        true
    );

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let sender = loop {
        if let Some(sender) = changes.0.lock().unwrap().first().cloned() {
            break sender;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream follows the watcher"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    sender
        .send(ChangeNotice::new(
            vec!["other.txt".into(), "watched.txt".into()],
            true,
        ))
        .await
        .unwrap();
    let seen = next_messages(&mut body, 2).await;
    assert_list_changed_then_updated(&seen, &uri);

    // The client leaves: the stream stops following the watcher.
    drop(body);
    tokio::time::timeout(Duration::from_secs(5), sender.closed())
        .await
        .expect("the listen ends when its client leaves");
}
