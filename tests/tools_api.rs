//! The tools as a runtime embeds them: names, descriptions and JSON Schemas that agree with the
//! typed inputs and outputs, the LLM function-calling list, typed calls that behave as the JSON
//! calls do, the typed `ToolError`, a per-call deadline, and a dropped call recorded as
//! cancelled or, once the session has ended, abandoned.
//!
//! Capsules run over `MemoryFilesystem` and are mounted on real loopback listeners with the
//! crate's own `http::serve`; hostile peers are raw TCP responders.
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

mod support;

use resource_plane::backends::SystemClock;
use resource_plane::http::PeerTimeouts;
use resource_plane::refusal::Code;
use resource_plane::tools::{
    FetchPeerFile, FetchPeerFileInput, FetchPeerFileOutput, PeerCode, SCHEMA_DIALECT, ShareFile,
    ShareFileInput, ShareFileOutput, ToolError, ToolErrorCode, Ttl,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::world::{Listening, World, WorldBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const REPORT: &str = "Q3: all green, written by the minter\n";
/// A timeout a healthy loopback peer never reaches, even on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(15);
/// A deadline that a silent peer always outlasts.
const SHORT_DEADLINE: Duration = Duration::from_millis(300);

const CANCELLED: &str = "cancelled: the call's future was dropped before it finished";
const ABANDONED: &str = "abandoned: the session ended before the call finished";

// ------------------------------------------------------------------------------------------------
// A small checker for the schema keywords the tools use
// ------------------------------------------------------------------------------------------------

/// Where `value` breaks `schema`, for the keywords the tool schemas use: `type`, `properties`,
/// `required`, `additionalProperties: false`, `anyOf`, `minimum`, `maximum`. (`pattern` is left
/// to the calls themselves: no regex engine here.)
fn violations(schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::String(k) => vec![k.as_str()],
            Value::Array(ks) => ks.iter().filter_map(Value::as_str).collect(),
            _ => panic!("a type that is not a string or list at {at}"),
        };
        let fits = kinds.iter().any(|k| match *k {
            "object" => value.is_object(),
            "string" => value.is_string(),
            "integer" => value.is_u64() || value.is_i64(),
            "null" => value.is_null(),
            other => panic!("type {other} is not used by the tools"),
        });
        if !fits {
            out.push(format!("{at}: {value} is not {kinds:?}"));
            return out;
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_u64)
        && let Some(v) = value.as_i64()
        && (v < 0 || (v as u64) < min)
    {
        out.push(format!("{at}: {v} < {min}"));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_u64)
        && value.as_u64().is_some_and(|v| v > max)
    {
        out.push(format!("{at}: over {max}"));
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any.iter().any(|s| violations(s, value, at).is_empty())
    {
        out.push(format!("{at}: {value} fits no anyOf branch"));
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap();
            if !object.contains_key(name) {
                out.push(format!("{at}: `{name}` is required"));
            }
        }
        for (name, v) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(s) => out.extend(violations(s, v, &format!("{at}.{name}"))),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    out.push(format!("{at}: `{name}` is not allowed"));
                }
                None => {}
            }
        }
    }
    out
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// The schema's `properties` are exactly the fields a full example serialises to, its
/// `required` exactly those serde cannot do without, and the example is valid.
fn assert_schema_matches<T>(schema: &Value, full: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    assert_eq!(schema["$schema"], SCHEMA_DIALECT);
    assert_eq!(schema["type"], "object");
    let example = serde_json::to_value(full).unwrap();
    assert_eq!(keys(&schema["properties"]), keys(&example), "{schema}");
    assert_eq!(violations(schema, &example, "$"), Vec::<String>::new());
    assert_eq!(&serde_json::from_value::<T>(example.clone()).unwrap(), full);
    for (name, property) in schema["properties"].as_object().unwrap() {
        assert!(
            property["description"]
                .as_str()
                .is_some_and(|d| d.len() > 10),
            "`{name}` has no description"
        );
    }
    let required = strings(&schema["required"]);
    for field in keys(&example) {
        let mut without = example.clone();
        without.as_object_mut().unwrap().remove(&field);
        let serde_needs_it = serde_json::from_value::<T>(without.clone()).is_err();
        let schema_needs_it = !violations(schema, &without, "$").is_empty();
        assert_eq!(
            serde_needs_it,
            required.contains(&field),
            "serde on `{field}`"
        );
        assert_eq!(
            schema_needs_it,
            required.contains(&field),
            "schema on `{field}`"
        );
    }
}

#[test]
fn schemas_agree_with_the_typed_inputs_and_outputs() {
    assert_schema_matches(
        &ShareFileInput::json_schema(),
        &ShareFileInput::new("report.md", "127.0.0.1:41235").with_ttl(Ttl::from("15m")),
    );
    assert_schema_matches(
        &ShareFileOutput::json_schema(),
        &serde_json::from_value::<ShareFileOutput>(json!({
            "handle": "mh1.eyJ2IjoxfQ.QUJD", "handle_id": "1eceb5b4b9d1215b",
            "expires_at_ms": 1_796_142_713_571_i64, "audience": "reader@127.0.0.1:41235"
        }))
        .unwrap(),
    );
    assert_schema_matches(
        &FetchPeerFileInput::json_schema(),
        &FetchPeerFileInput::new("127.0.0.1:41234", "mh1.eyJ2IjoxfQ.QUJD"),
    );
    let fetched = json!({
        "path": "peer-in/1eceb5b4b9d1215b-report.md", "bytes": 6,
        "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
        "generation": 7, "peer": "127.0.0.1:41234"
    });
    assert_schema_matches(
        &FetchPeerFileOutput::json_schema(),
        &serde_json::from_value::<FetchPeerFileOutput>(fetched.clone()).unwrap(),
    );
    // `generation` is required and may be null.
    let mut no_generation = fetched;
    no_generation["generation"] = Value::Null;
    assert!(violations(&FetchPeerFileOutput::json_schema(), &no_generation, "$").is_empty());
    assert_eq!(
        serde_json::from_value::<FetchPeerFileOutput>(no_generation)
            .unwrap()
            .generation,
        None
    );
}

/// Both forms of `ttl` are in the schema and in the typed input; the forms the tool refuses
/// (zero, a fraction, a negative, a boolean) are refused by the schema's types and bounds too.
#[test]
fn ttl_forms_in_the_schema_and_the_typed_input() {
    let schema = ShareFileInput::json_schema();
    for ttl in [json!(90), json!("15m"), json!(" 1h "), Value::Null] {
        let input = json!({"path": "r.md", "peer": "h:1", "ttl": ttl});
        assert!(violations(&schema, &input, "$").is_empty(), "{ttl}");
        serde_json::from_value::<ShareFileInput>(input).unwrap();
    }
    for ttl in [json!(0), json!(1.5), json!(-5), json!(true), json!([90])] {
        let input = json!({"path": "r.md", "peer": "h:1", "ttl": ttl});
        assert!(!violations(&schema, &input, "$").is_empty(), "{ttl}");
    }
    let parsed: ShareFileInput =
        serde_json::from_value(json!({"path": "r.md", "peer": "h:1", "ttl": 90})).unwrap();
    assert_eq!(parsed.ttl, Some(Ttl::Seconds(90)));
    let parsed: ShareFileInput =
        serde_json::from_value(json!({"path": "r.md", "peer": "h:1", "ttl": null, "x": 1}))
            .unwrap();
    assert_eq!(
        parsed.ttl, None,
        "null is absent; unknown fields are ignored"
    );
}

// ------------------------------------------------------------------------------------------------
// Capsules
// ------------------------------------------------------------------------------------------------

/// A capsule over memory holding `out/report.md`, on the system clock with generous peer
/// timeouts, launched with `yaml`.
fn builder(yaml: &str) -> WorldBuilder {
    World::builder(yaml)
        .clock(Arc::new(SystemClock))
        .fresh_key()
        .file("out/report.md", REPORT, 1_787_577_327_015)
        .configure(|config| {
            config.peer_timeouts(PeerTimeouts {
                connect: GENEROUS,
                card_total: GENEROUS,
                fetch_total: GENEROUS,
            })
        })
}

/// A capsule launched with `yaml`, advertised at `url`, not served.
fn launch(yaml: &str, url: &str) -> World {
    builder(yaml).url(url).build()
}

/// A capsule launched with `yaml` and served on a loopback listener of its own.
async fn served(yaml: &str) -> Listening {
    builder(yaml).listen().await
}

fn share_tool(node: &World) -> &ShareFile {
    node.capsule
        .tools()
        .typed::<ShareFile>()
        .expect("share-file")
}

fn fetch_tool(node: &World) -> &FetchPeerFile {
    node.capsule
        .tools()
        .typed::<FetchPeerFile>()
        .expect("fetch-peer-file")
}

fn assert_trace_has_no_token(node: &World) {
    for line in node.trace.lines() {
        assert!(!line.contains("mh1."), "a token reached the trace: {line}");
    }
}

const MINTER: &str = "name: reporter\nexports:\n  peer_files: { root: out/, max_ttl: 15m }\n\
                      capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n";
const FETCHER: &str = "name: reader\ncapabilities:\n  peer_fetch: { allow: [\"127.0.0.1\"] }\n";

/// A peer that accepts connections and never says a word; its address.
async fn silent_peer() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    address
}

/// A peer that answers every request with `response`; its address.
async fn answering_peer(response: &'static [u8]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    address
}

// ------------------------------------------------------------------------------------------------
// The inventory as a runtime reads it
// ------------------------------------------------------------------------------------------------

#[test]
fn the_function_list_holds_exactly_the_granted_tools() {
    let cases = [
        ("name: bare\n", vec![]),
        (
            "name: m\nexports:\n  peer_files: { root: out/ }\n",
            vec!["share-file"],
        ),
        (FETCHER, vec!["fetch-peer-file"]),
        (
            "name: both\nexports:\n  peer_files: { root: out/ }\n\
             capabilities:\n  peer_fetch: { allow: [\"127.0.0.1\"] }\n",
            vec!["fetch-peer-file", "share-file"],
        ),
    ];
    for (yaml, expected) in cases {
        let node = launch(yaml, "http://127.0.0.1:41234");
        let tools = node.capsule.tools();
        let list = tools.function_list();
        let names: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, expected, "{yaml}");
        assert_eq!(tools.names(), expected);
        for function in list.as_array().unwrap() {
            assert_eq!(
                keys(function),
                keys(&json!({"name":0,"description":0,"parameters":0}))
            );
            let tool = tools.get(function["name"].as_str().unwrap()).unwrap();
            assert_eq!(function["description"], tool.description());
            assert!(tool.description().contains("never"), "{}", tool.name());
            let mut parameters = tool.input_schema();
            parameters.as_object_mut().unwrap().remove("$schema");
            assert_eq!(function["parameters"], parameters);
            // In the schema's own order, as a model reads it.
            let order: Vec<&String> = function["parameters"].as_object().unwrap().keys().collect();
            assert_eq!(order, ["title", "type", "properties", "required"]);
            assert_eq!(function["parameters"]["type"], "object");
        }
        assert_eq!(
            tools.typed::<ShareFile>().is_some(),
            expected.contains(&"share-file")
        );
        assert_eq!(
            tools.typed::<FetchPeerFile>().is_some(),
            expected.contains(&"fetch-peer-file")
        );
    }
}

// ------------------------------------------------------------------------------------------------
// Calls
// ------------------------------------------------------------------------------------------------

/// A typed share and a typed fetch between two served capsules, then the same through JSON:
/// the results agree with the output schemas and with each other, the file lands at
/// `peer-in/<handle_id>-<basename>` in the fetcher's memory, and no token reaches a trace or a
/// `Debug` rendering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_and_json_calls_share_and_fetch_alike() {
    let minter = served(MINTER).await;
    let fetcher = served(FETCHER).await;

    let shared = share_tool(&minter)
        .share(ShareFileInput::new(" report.md ", &fetcher.url).with_ttl(Ttl::Seconds(60)))
        .await
        .expect("typed share");
    let port = fetcher.url.rsplit(':').next().unwrap();
    assert_eq!(shared.audience, format!("reader@127.0.0.1:{port}"));
    assert!(!format!("{shared:?}").contains(&shared.handle));
    let shared_json = serde_json::to_value(&shared).unwrap();
    assert!(violations(&ShareFileOutput::json_schema(), &shared_json, "$").is_empty());

    let fetched = fetch_tool(&fetcher)
        .fetch(FetchPeerFileInput::new(&minter.url, &shared.handle))
        .await
        .expect("typed fetch");
    assert_eq!(
        fetched.path,
        format!("peer-in/{}-report.md", shared.handle_id)
    );
    assert_eq!(fetched.bytes, REPORT.len() as u64);
    assert_eq!(fetched.generation, Some(0));
    assert_eq!(fetched.peer, minter.url);
    assert_eq!(
        fetcher.fs.file_bytes(&fetched.path).as_deref(),
        Some(REPORT.as_bytes())
    );
    let fetched_json = serde_json::to_value(&fetched).unwrap();
    assert!(violations(&FetchPeerFileOutput::json_schema(), &fetched_json, "$").is_empty());

    // The JSON calls give the same shapes, read back into the typed outputs.
    let again = minter
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": fetcher.url, "ttl": "1m"}),
        )
        .await
        .expect("JSON share");
    assert_eq!(keys(&again), keys(&shared_json));
    let again: ShareFileOutput = serde_json::from_value(again).unwrap();
    assert_eq!(again.audience, shared.audience);
    let fetched_again = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": minter.url, "handle": again.handle}),
        )
        .await
        .expect("JSON fetch");
    assert_eq!(keys(&fetched_again), keys(&fetched_json));
    let fetched_again: FetchPeerFileOutput = serde_json::from_value(fetched_again).unwrap();
    assert_eq!(fetched_again.sha256, fetched.sha256);

    assert_eq!(minter.events_of("peer_handle_mint").len(), 2);
    assert_eq!(fetcher.events_of("peer_file_fetch").len(), 2);
    assert_trace_has_no_token(&minter);
    assert_trace_has_no_token(&fetcher);
}

/// JSON inputs of the wrong shape keep the codes, messages and order they have always had,
/// typed or not, and leave no trace line: input validation comes before any attempt.
#[tokio::test]
async fn malformed_inputs_keep_their_codes_messages_and_order() {
    let node = launch(
        "name: both\nexports:\n  peer_files: { root: out/ }\n\
         capabilities:\n  peer_fetch: { allow: [\"127.0.0.1\"] }\n",
        "http://127.0.0.1:41234",
    );
    let path_msg = "`path` must be a non-empty string";
    let peer_msg = "`peer` must be a non-empty string";
    let handle_msg = "`handle` must be a non-empty string";
    let invalid = Code::InvalidInput.message();
    let ttl_msg = Code::InvalidTtl.message();
    let cases = [
        ("share-file", json!([]), "invalid_input", invalid),
        ("share-file", json!("report.md"), "invalid_input", invalid),
        ("share-file", json!({}), "invalid_input", path_msg),
        (
            "share-file",
            json!({"path": 5, "peer": "h:1"}),
            "invalid_input",
            path_msg,
        ),
        (
            "share-file",
            json!({"path": "  ", "peer": "h:1"}),
            "invalid_input",
            path_msg,
        ),
        (
            "share-file",
            json!({"path": "r.md", "peer": null}),
            "invalid_input",
            peer_msg,
        ),
        (
            "share-file",
            json!({"path": "r.md", "peer": "h:1", "ttl": true}),
            "invalid_ttl",
            ttl_msg,
        ),
        (
            "share-file",
            json!({"path": "r.md", "peer": "h:1", "ttl": 1.5}),
            "invalid_ttl",
            ttl_msg,
        ),
        (
            "share-file",
            json!({"path": "r.md", "peer": "h:1", "ttl": -1}),
            "invalid_ttl",
            ttl_msg,
        ),
        (
            "share-file",
            json!({"path": "r.md", "peer": "h:1", "ttl": "1h30m"}),
            "invalid_ttl",
            ttl_msg,
        ),
        ("fetch-peer-file", json!(null), "invalid_input", invalid),
        (
            "fetch-peer-file",
            json!({"handle": "mh1.a.b"}),
            "invalid_input",
            peer_msg,
        ),
        (
            "fetch-peer-file",
            json!({"peer": "h:1", "handle": 7}),
            "invalid_input",
            handle_msg,
        ),
    ];
    for (tool, input, code, message) in cases {
        let error = node.capsule.tools().call(tool, input.clone()).await;
        let error = error.expect_err(&input.to_string());
        assert_eq!(error.code, code, "{tool} {input}");
        assert_eq!(error.message, message, "{tool} {input}");
    }
    // A bad peer is refused before a bad ttl, as always.
    let error = node
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "r.md", "peer": "a b", "ttl": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, Code::InvalidInput);
    assert!(error.message.starts_with("`peer` must be host"), "{error}");
    // The typed calls refuse the same way.
    let share = share_tool(&node);
    let error = share
        .share(ShareFileInput::new("", "h:1"))
        .await
        .unwrap_err();
    assert_eq!(
        (error.code.clone(), error.message.as_str()),
        (Code::InvalidInput.into(), path_msg)
    );
    let error = share
        .share(ShareFileInput::new("r.md", "h:1").with_ttl(Ttl::from("5min")))
        .await
        .unwrap_err();
    assert_eq!(error, ToolError::of(Code::InvalidTtl));
    let error = fetch_tool(&node)
        .fetch(FetchPeerFileInput::new("h:1", " "))
        .await
        .unwrap_err();
    assert_eq!(error.message, handle_msg);
    assert!(node.trace.lines().is_empty(), "{:?}", node.trace.lines());
}

/// D-12.1: once the capsule's session has ended, both tools, typed and through the inventory,
/// fail `session_ended` (not `io_error`), contact no peer and write no trace line; a peer's
/// own code other than the spec's stays the peer's word as `PeerCode::Other`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_called_after_the_session_ended_fail_session_ended() {
    let minter = served(MINTER).await;
    let fetcher = served(FETCHER).await;
    let shared = share_tool(&minter)
        .share(ShareFileInput::new("report.md", &fetcher.url))
        .await
        .unwrap();
    let (mint_lines, fetch_lines) = (minter.trace.lines().len(), fetcher.trace.lines().len());

    minter.capsule.end_session();
    fetcher.capsule.end_session();

    let error = share_tool(&minter)
        .share(ShareFileInput::new("report.md", &fetcher.url))
        .await
        .unwrap_err();
    assert_eq!(error, ToolError::of(Code::SessionEnded));
    assert_eq!(error.code_str(), "session_ended");
    let error = minter
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": fetcher.url}),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, Code::SessionEnded);

    let error = fetch_tool(&fetcher)
        .fetch(FetchPeerFileInput::new(&minter.url, &shared.handle))
        .await
        .unwrap_err();
    assert_eq!(error, ToolError::of(Code::SessionEnded));
    let error = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": minter.url, "handle": shared.handle}),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code, Code::SessionEnded);

    assert_eq!(minter.trace.lines().len(), mint_lines, "no mint line");
    assert_eq!(fetcher.trace.lines().len(), fetch_lines, "no fetch line");
    assert!(
        minter.events_of("peer_handle_redeem").is_empty(),
        "the ended fetcher contacted no peer"
    );
}

/// A peer's code that is not one of the specification's is typed as the peer's own word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_code_outside_the_spec_is_typed_as_other() {
    let fetcher = served(FETCHER).await;
    let peer = answering_peer(
        b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
          content-length: 28\r\nconnection: close\r\n\r\n{\"error\":\"quota_exceeded_2\"}",
    )
    .await;
    let handle = "mh1.eyJ2IjoxfQ.QUJD";
    let error = fetch_tool(&fetcher)
        .fetch(FetchPeerFileInput::new(&peer, handle))
        .await
        .unwrap_err();
    assert_eq!(
        error.code.peer_code(),
        Some(&PeerCode::Other("quota_exceeded_2".into()))
    );
    assert_eq!(error.code_str(), "quota_exceeded_2");
}

/// A peer's own refusal code and `http_<status>` are typed, and keep their wire strings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_refusals_are_typed_and_keep_their_wire_strings() {
    let minter = served(MINTER).await;
    let fetcher = served(FETCHER).await;
    let shared = share_tool(&minter)
        .share(ShareFileInput::new("report.md", &fetcher.url))
        .await
        .unwrap();
    // One character inside the MAC changed (not its last, whose spare bits must stay zero for
    // the token to be well formed): the minter answers 403 handle_not_valid.
    let mut chars: Vec<char> = shared.handle.chars().collect();
    let at = chars.len() - 10;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    let forged: String = chars.into_iter().collect();
    let error = fetch_tool(&fetcher)
        .fetch(FetchPeerFileInput::new(&minter.url, &forged))
        .await
        .unwrap_err();
    assert_eq!(
        error.code,
        ToolErrorCode::Peer(PeerCode::Spec(Code::HandleNotValid))
    );
    assert_eq!(
        error.code.peer_code().and_then(PeerCode::spec),
        Some(Code::HandleNotValid)
    );
    assert_eq!(error.code_str(), "handle_not_valid");
    assert_ne!(
        error.code,
        Code::HandleNotValid,
        "the peer's word, not ours"
    );
    assert_eq!(
        error.to_string(),
        "handle_not_valid: the peer refused the handle: handle_not_valid"
    );

    let html = answering_peer(
        b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: 6\r\n\
          connection: close\r\n\r\n<html>",
    )
    .await;
    let answer = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": html, "handle": shared.handle}),
        )
        .await
        .unwrap_err();
    assert_eq!(answer.code, ToolErrorCode::Http(502));
    assert_eq!(answer.code_str(), "http_502");
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(answer);
    assert_eq!(boxed.to_string(), "http_502: the peer answered HTTP 502");
    let outcomes: Vec<Value> = fetcher
        .events_of("peer_file_fetch")
        .iter()
        .map(|l| l["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("handle_not_valid"), json!("http_502")]);
    assert_trace_has_no_token(&fetcher);
}

/// A deadline ends a call waiting on a silent peer with `io_error`, the deadline's message,
/// and one trace line whose reason says `deadline`; nothing lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_ends_the_call_with_its_one_trace_line() {
    let silent = silent_peer().await;
    let minter = launch(MINTER, "http://127.0.0.1:9");
    let started = Instant::now();
    let error = minter
        .capsule
        .tools()
        .call_with_deadline(
            "share-file",
            json!({"path": "report.md", "peer": silent}),
            SHORT_DEADLINE,
        )
        .await
        .expect_err("the silent card outlasts the deadline");
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    assert_eq!(error.code, Code::IoError);
    assert_eq!(error.message, "the call did not finish within its deadline");
    let mint = minter.events_of("peer_handle_mint");
    assert_eq!(mint.len(), 1, "{mint:#?}");
    assert_eq!(mint[0]["outcome"], "io_error");
    assert_eq!(mint[0]["path"], "report.md");
    assert_eq!(
        mint[0]["reason"],
        "deadline: the call did not finish within 300 ms"
    );

    let fetcher = launch(FETCHER, "http://127.0.0.1:9");
    let options = fetcher
        .capsule
        .tools()
        .call_options()
        .with_deadline(SHORT_DEADLINE);
    let started = Instant::now();
    let error = fetch_tool(&fetcher)
        .fetch_with(
            FetchPeerFileInput::new(&silent, "mh1.eyJ2IjoxLCJwIjoib3V0L3IubWQifQ.QUJD"),
            options,
        )
        .await
        .expect_err("the silent peer outlasts the deadline");
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    assert_eq!(error.code, Code::IoError);
    let fetch = fetcher.events_of("peer_file_fetch");
    assert_eq!(fetch.len(), 1, "{fetch:#?}");
    assert_eq!(fetch[0]["outcome"], "io_error");
    assert!(
        fetch[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("deadline: "),
        "{}",
        fetch[0]
    );
    assert!(fetcher.fs.dir_names("peer-in").is_empty());
    assert_trace_has_no_token(&fetcher);
}

/// A deadline the call meets changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_met_changes_nothing() {
    let minter = served(MINTER).await;
    let fetcher = served(FETCHER).await;
    let shared = minter
        .capsule
        .tools()
        .call_with_deadline(
            "share-file",
            json!({"path": "report.md", "peer": fetcher.url}),
            GENEROUS,
        )
        .await
        .expect("within the deadline");
    let fetched = fetcher
        .capsule
        .tools()
        .call_with_deadline(
            "fetch-peer-file",
            json!({"peer": minter.url, "handle": shared["handle"]}),
            GENEROUS,
        )
        .await
        .expect("within the deadline");
    assert_eq!(fetched["bytes"], REPORT.len());
    assert_eq!(
        fetcher.events_of("peer_file_fetch")[0]["reason"],
        Value::Null
    );
    // An unknown tool is refused at once, deadline or not.
    let unknown = minter
        .capsule
        .tools()
        .call_with_deadline("fetch-peer-file", json!({}), GENEROUS)
        .await
        .unwrap_err();
    assert_eq!(unknown, ToolError::of(Code::UnknownTool));
}

/// A typed call dropped unfinished is recorded as cancelled; one made with the inventory's
/// options and dropped after the session ended, as abandoned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_typed_call_is_cancelled_or_abandoned_as_the_session_says() {
    let silent = silent_peer().await;
    let minter = launch(MINTER, "http://127.0.0.1:9");
    let share = share_tool(&minter).share(ShareFileInput::new("report.md", &silent));
    assert!(tokio::time::timeout(SHORT_DEADLINE, share).await.is_err());
    let lines = minter.events_of("peer_handle_mint");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["reason"], CANCELLED);

    let tools = minter.capsule.tools();
    let mut share = Box::pin(share_tool(&minter).share_with(
        ShareFileInput::new("report.md", &silent),
        tools.call_options(),
    ));
    assert!(
        tokio::time::timeout(SHORT_DEADLINE, &mut share)
            .await
            .is_err()
    );
    tools.mark_session_ended();
    drop(share);
    // A call with options outside the session knows nothing of its end.
    let outside = share_tool(&minter).share_with(
        ShareFileInput::new("report.md", &silent),
        Default::default(),
    );
    assert!(tokio::time::timeout(SHORT_DEADLINE, outside).await.is_err());
    let reasons: Vec<Value> = minter
        .events_of("peer_handle_mint")
        .iter()
        .map(|l| l["reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        [json!(CANCELLED), json!(ABANDONED), json!(CANCELLED)]
    );
}
