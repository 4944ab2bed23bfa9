#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! `serve --console mcp` (D-18.3) over the real binary: stdin/stdout are an MCP server, the
//! ready line is the first line on stderr, two capsules share and fetch a file through their
//! tools, and a call cancelled by `notifications/cancelled` is recorded as cancelled.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// One `resource-plane serve --console mcp` process.
struct Capsule {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    ready: Value,
    trace: PathBuf,
    workdir: PathBuf,
    next_id: u64,
}

impl Capsule {
    fn start(dir: &Path, label: &str, manifest: &str) -> Capsule {
        let workdir = dir.join(label);
        std::fs::create_dir_all(workdir.join("out")).unwrap();
        let manifest_path = dir.join(format!("{label}.yaml"));
        std::fs::write(&manifest_path, manifest).unwrap();
        let trace = dir.join(format!("{label}.jsonl"));
        // Both spellings the contract allows: `--console=mcp` for the capsule labelled `a`,
        // `--console mcp` for any other.
        let console: &[&str] = if label == "a" {
            &["--console=mcp"]
        } else {
            &["--console", "mcp"]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_resource-plane"))
            .arg("serve")
            .args(console)
            .arg("--workdir")
            .arg(&workdir)
            .arg("--manifest")
            .arg(&manifest_path)
            .arg("--trace")
            .arg(&trace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let ready: Value =
            serde_json::from_str(&first).expect("the first stderr line is the ready line");
        std::thread::spawn(move || for _ in stderr.lines() {});
        let (send, stdout) = mpsc::channel();
        let out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut capsule = Capsule {
            child,
            stdin,
            stdout,
            ready,
            trace,
            workdir,
            next_id: 1,
        };
        let init = capsule.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        capsule.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        capsule
    }

    fn url(&self) -> &str {
        self.ready["url"].as_str().unwrap()
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn start_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The answer to request `id`; every stdout line on the way must be a JSON-RPC message.
    fn answer(&mut self, id: u64) -> Value {
        loop {
            let line = self
                .stdout
                .recv_timeout(Duration::from_secs(20))
                .expect("an answer within 20 s");
            let message: Value = serde_json::from_str(&line).expect("stdout carries only MCP");
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message["id"] == id {
                return message;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        self.answer(id)
    }

    fn trace_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.trace)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Closes stdin and waits for the exit status.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("the capsule did not end within 10 s of the end of its stdin");
    }
}

#[test]
fn two_capsules_share_and_fetch_a_file_through_their_mcp_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut fetcher = Capsule::start(
        dir.path(),
        "b",
        "name: b\ncapabilities: { peer_fetch: { allow: [\"127.0.0.1\"] } }\n",
    );
    let mut sharer = Capsule::start(
        dir.path(),
        "a",
        "name: a\nexports: { peer_files: { root: out/ } }\ncapabilities: { network: { allow: [\"127.0.0.1\"] } }\n",
    );
    std::fs::write(sharer.workdir.join("out/report.md"), "shared by MCP\n").unwrap();

    let listed = sharer.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "share-file");
    assert!(tools[0]["description"].as_str().unwrap().len() > 40);
    assert_eq!(tools[0]["inputSchema"]["type"], "object");
    assert_eq!(tools[0]["outputSchema"]["type"], "object");

    let shared = sharer.request(
        "tools/call",
        json!({"name": "share-file", "arguments": {"path": "report.md", "peer": fetcher.url()}}),
    );
    let result = &shared["result"];
    assert_ne!(result["isError"], true, "{shared}");
    let handle = result["structuredContent"]["handle"]
        .as_str()
        .unwrap()
        .to_owned();
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, result["structuredContent"],
        "one text block with the same JSON"
    );

    let fetched = fetcher.request(
        "tools/call",
        json!({"name": "fetch-peer-file", "arguments": {"peer": sharer.url(), "handle": handle}}),
    );
    let landed = &fetched["result"]["structuredContent"];
    assert_ne!(fetched["result"]["isError"], true, "{fetched}");
    let path = landed["path"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(fetcher.workdir.join(path)).unwrap(),
        "shared by MCP\n"
    );

    // A tool error is a result with isError and its code, not a protocol error.
    let refused = sharer.request(
        "tools/call",
        json!({"name": "share-file", "arguments": {"path": "../escape", "peer": fetcher.url()}}),
    );
    assert_eq!(refused["result"]["isError"], true);
    let error: Value =
        serde_json::from_str(refused["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(error["code"], "outside_root");
    // A tool the capsule was not granted: MCP's unknown-tool protocol error.
    let unknown = sharer.request(
        "tools/call",
        json!({"name": "fetch-peer-file", "arguments": {}}),
    );
    assert_eq!(unknown["error"]["code"], -32602);
    assert_eq!(unknown["error"]["data"]["error"], "unknown_tool");

    assert!(sharer.finish().success());
    assert!(fetcher.finish().success());
}

#[test]
fn a_cancelled_call_is_dropped_and_recorded_as_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    // A peer that accepts and never answers: the fetch waits on it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let _connections: Vec<_> = silent.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(15));
    });
    let mut fetcher = Capsule::start(
        dir.path(),
        "b",
        "name: b\ncapabilities: { peer_fetch: { allow: [\"127.0.0.1\"] } }\n",
    );
    let handle = "mh1.eyJ2IjoxfQ.AAAA";
    let id = fetcher.start_request(
        "tools/call",
        json!({"name": "fetch-peer-file",
               "arguments": {"peer": format!("127.0.0.1:{port}"), "handle": handle}}),
    );
    std::thread::sleep(Duration::from_millis(500));
    fetcher.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": id, "reason": "test"}}),
    );
    let mut recorded = None;
    for _ in 0..100 {
        recorded = fetcher
            .trace_lines()
            .into_iter()
            .find(|e| e["event_type"] == "peer_file_fetch");
        if recorded.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let recorded = recorded.expect("the cancelled call left its trace line within 5 s");
    assert!(
        recorded["reason"]
            .as_str()
            .unwrap()
            .starts_with("cancelled:"),
        "{recorded}"
    );
    // The session goes on after a cancellation.
    let listed = fetcher.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"][0]["name"], "fetch-peer-file");
    assert!(fetcher.finish().success());
    drop(held);
}
