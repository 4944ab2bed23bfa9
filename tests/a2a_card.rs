#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! The agent card as A2A clients read it (D-4.7.1), through the real binary: the fields both
//! A2A 0.3 and 1.0 readers require, the JSON-RPC URL it advertises (a JSON-RPC error, never a
//! bare 404), the card's own 405, and the validation of the A2A Python SDK (`a2a-sdk`) for both
//! its models, run by `.ci/a2a_card_check.py` in the venv `.ci/run` creates
//! (`.ci/a2a-venv`).

mod support;

use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use support::http::{get, request, send};
use support::process::{Served, Workdir};

/// Both planes and both capabilities: the card publishes the peer-proof key too.
const FULL_MANIFEST: &str = "\
name: Reporter
exports:
  files:      { root: out/, mode: read-only }
  peer_files: { root: out/, max_ttl: 15m }
capabilities:
  peer_fetch: { allow: [\"localhost:41234\"] }
";

const FILES_MANIFEST: &str = "\
name: reporter
exports:
  files: { root: out/, mode: read-only }
";

/// The JSON-RPC error every `POST` to the card's `url` gets.
fn no_agent_error() -> Value {
    json!({"jsonrpc": "2.0", "id": null,
           "error": {"code": -32601, "message": "this capsule serves files only"}})
}

fn serve(manifest: &str, extra: &[&str]) -> (Workdir, Served) {
    let world = Workdir::new(manifest);
    world.file("out/a.txt", b"hello\n");
    let served = world.launch(&world.args(extra)).start();
    (world, served)
}

fn card_of(served: &Served) -> Value {
    let reply = get(served.port(), "/.well-known/agent-card.json");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    reply.json()
}

#[test]
fn the_card_carries_every_field_a2a_0_3_and_1_0_require() {
    for manifest in [FULL_MANIFEST, FILES_MANIFEST] {
        let (_world, served) = serve(manifest, &[]);
        let card = card_of(&served);
        for field in [
            "name",
            "description",
            "version",
            "url",
            "protocolVersion",
            "supportedInterfaces",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
        ] {
            assert!(card.get(field).is_some(), "{field} missing: {card}");
        }
        assert_eq!(card["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(card["protocolVersion"], "0.3.0");
        // What D-8 reads stays: the top-level url and the JSON-RPC interface, both the URL the
        // ready line advertises.
        assert_eq!(card["url"], served.url());
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": served.url(), "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"}])
        );
        let skills = card["skills"].as_array().expect("skills is a list");
        assert!(!skills.is_empty(), "{card}");
        for skill in skills {
            for field in ["id", "name", "description"] {
                assert!(
                    skill[field].as_str().is_some_and(|s| !s.trim().is_empty()),
                    "{field}: {skill}"
                );
            }
            assert!(!skill["tags"].as_array().unwrap().is_empty(), "{skill}");
        }
        for modes in ["defaultInputModes", "defaultOutputModes"] {
            assert!(!card[modes].as_array().unwrap().is_empty(), "{modes}");
        }
    }
}

#[test]
fn the_audience_derived_from_the_card_is_unchanged() {
    let (_world, served) = serve(FULL_MANIFEST, &[]);
    let card = card_of(&served);
    assert_eq!(card["name"], "Reporter");
    assert_eq!(
        served.ready_str("audience"),
        format!("reporter@127.0.0.1:{}", served.port())
    );
    let extension = &card["capabilities"]["extensions"][0];
    assert_eq!(extension["params"]["alg"], "Ed25519", "{card}");
}

#[test]
fn a_post_to_the_advertised_json_rpc_url_gets_a_json_rpc_error() {
    let (_world, served) = serve(FILES_MANIFEST, &[]);
    let card = card_of(&served);
    assert_eq!(card["url"], served.url());
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"message/send","params":{}}"#;
    let length = body.len().to_string();
    let raw = format!(
        "POST / HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n{body}"
    );
    let reply = support::http::exchange(served.port(), raw.as_bytes(), support::http::TIMEOUT);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json(), no_agent_error());
    // With no body, and with a query, the same.
    assert_eq!(send(served.port(), "POST", "/").json(), no_agent_error());
    assert_eq!(
        send(served.port(), "POST", "/?x=1").json(),
        no_agent_error()
    );
    // Other paths outside /resources, and other methods on `/`, stay the plain 404.
    assert_eq!(send(served.port(), "POST", "/a2a").status, 404);
    assert_eq!(get(served.port(), "/").status, 404);
}

#[test]
fn an_advertised_url_with_a_path_answers_json_rpc_at_that_path() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://127.0.0.1:{port}/a2a/v1");
    let world = Workdir::new(FILES_MANIFEST);
    let _served = world
        .launch(&world.args(&["--listen", &listen, "--url", &url]))
        .start();
    let reply = get(port, "/.well-known/agent-card.json");
    assert_eq!(reply.json()["url"], url.as_str());
    let reply = send(port, "POST", "/a2a/v1");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json(), no_agent_error());
}

#[test]
fn a_post_to_the_card_gets_the_cards_own_405() {
    let (_world, served) = serve(FILES_MANIFEST, &[]);
    for method in ["POST", "PUT", "DELETE"] {
        let reply = request(
            served.port(),
            method,
            "/.well-known/agent-card.json",
            &[("host", "localhost"), ("content-length", "0")],
        );
        assert_eq!(reply.status, 405, "{method}: {}", reply.text());
        assert_eq!(reply.header("allow"), Some("GET"), "{method}");
        let body = reply.json();
        assert_eq!(body["error"], "method_not_allowed", "{method}");
        let message = body["message"].as_str().unwrap();
        assert!(
            !message.contains("/resources") && message.contains("agent card"),
            "{method}: {message}"
        );
    }
}

/// The A2A Python SDK's own validation, both models, against the real binary: the check CI
/// runs (`.ci/run` creates the venv first). Without the venv (a machine where `.ci/run` never
/// ran) the test says so and passes, except under CI, where the venv must be there.
#[test]
fn the_a2a_python_sdk_accepts_the_card_with_its_1_0_and_0_3_models() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".ci/a2a-venv/bin/python");
    if !python.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this check: .ci/run creates {}",
            python.display()
        );
        eprintln!(
            "skipped: no {} (run .ci/run, or see README, to create it)",
            python.display()
        );
        return;
    }
    for manifest in [FULL_MANIFEST, FILES_MANIFEST] {
        let (_world, served) = serve(manifest, &[]);
        let output = Command::new(&python)
            .arg(root.join(".ci/a2a_card_check.py"))
            .arg(served.url())
            .output()
            .expect("the venv's python runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "a2a-sdk refused the card:\n{said}");
        assert!(
            said.contains("a2a-sdk: the card validates with the 1.0 and 0.3 models"),
            "{said}"
        );
    }
}
