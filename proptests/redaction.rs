#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Property tests: token redaction (D-6.5).
//!
//! Texts are generated as token streams: random ASCII and Unicode fragments interleaved with
//! well-formed handle tokens (`mh1.<b64url>.<b64url>`), truncated tokens and loose pieces of the
//! prefix (`mh`, `mh1`, `1.`). Properties:
//!
//! * `redact_tokens` never leaves `mh1.` (in any ASCII case) in its output, is idempotent, and, when every token is
//!   delimited by non-token characters, replaces each token (and each truncated token that still
//!   starts with `mh1.`) by exactly `<handle:<first 16 hex of sha256(token)>>`, leaving every
//!   other character as it was.
//! * `redact_json` applies exactly that to every string and every key of a nested value.
//! * A [`Tracer`] with a [`RecordingTraceSink`] never emits a line holding `mh1.`, whatever field
//!   (the session id included) carried the token, and the router's trace for a read of a path
//!   holding a token carries the redacted path.
//!
//! Case count: `RP_PROPTEST_CASES` (default 64).

mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::Method;
use proptest::prelude::*;
use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
use resource_plane::events::{PeerFileFetch, PeerHandleMint, PeerHandleRedeem, ResourceRead};
use resource_plane::redact::{redact_json, redact_tokens};
use resource_plane::trace::Tracer;
use resource_plane::{Backends, Capsule, Manifest};
use serde_json::{Map, Value};
use std::sync::Arc;

// ------------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------------

fn config() -> ProptestConfig {
    common::config(common::cases())
}

// ------------------------------------------------------------------------------------------------
// Tokens and texts
// ------------------------------------------------------------------------------------------------

/// The placeholder D-6.5 demands, computed independently of the crate.
fn placeholder(token: &str) -> String {
    format!("<handle:{}>", support::tokens::handle_id(token))
}

/// A well-formed token: payload and MAC of arbitrary bytes, base64url without padding.
fn token() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(any::<u8>(), 1..48),
        prop::collection::vec(any::<u8>(), 32..=32),
    )
        .prop_map(|(payload, mac)| {
            format!(
                "mh1.{}.{}",
                URL_SAFE_NO_PAD.encode(payload),
                URL_SAFE_NO_PAD.encode(mac)
            )
        })
}

/// Whether `s` holds the token prefix in any ASCII case (D-6.5: `MH1.<payload>.<mac>` is a
/// credential one lower-casing away from a token), checked independently of the crate.
fn holds_prefix(s: &str) -> bool {
    s.to_ascii_lowercase().contains("mh1.")
}

/// Whether `s` starts with the token prefix in any ASCII case.
fn starts_with_prefix(s: &str) -> bool {
    s.get(..4)
        .is_some_and(|head| head.eq_ignore_ascii_case("mh1."))
}

/// A well-formed token, or the same with its prefix in another case.
fn token_any_case() -> impl Strategy<Value = String> {
    (
        token(),
        prop::sample::select(vec!["mh1.", "MH1.", "Mh1.", "mH1."]),
    )
        .prop_map(|(token, prefix)| format!("{prefix}{}", &token[4..]))
}

/// One piece of a generated text.
#[derive(Debug, Clone)]
enum Piece {
    /// Free text; in structured texts it never holds `mh1.` in any ASCII case.
    Text(String),
    /// A whole token.
    Token(String),
    /// A token cut at some length (possibly shorter than its prefix).
    Truncated(String),
    /// A loose piece of the prefix.
    Prefix(&'static str),
}

fn free_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(8).collect()),
        prop::sample::select(vec![
            "é",
            "日本語",
            "\u{1F600}",
            "\n",
            "\"",
            "\\",
            "<handle:x>"
        ])
        .prop_map(str::to_owned),
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => free_text().prop_map(Piece::Text),
        3 => token_any_case().prop_map(Piece::Token),
        2 => (token_any_case(), any::<prop::sample::Index>())
            .prop_map(|(t, at)| Piece::Truncated(t[..at.index(t.len() + 1)].to_owned())),
        1 => prop::sample::select(vec!["mh", "mh1", "1.", "h1.", ".", "mh1.", "MH1.", "mh1-", "MH1", "mH1-"])
            .prop_map(Piece::Prefix),
    ]
}

fn piece_text(piece: &Piece) -> &str {
    match piece {
        Piece::Text(t) | Piece::Token(t) | Piece::Truncated(t) => t,
        Piece::Prefix(p) => p,
    }
}

/// Characters that end a token run (not base64url, not `.`).
fn delimiter() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        " ", "\"", "/", "?", "=", ",", "\n", "<", ">", ":", "'", "(", ")", "é", "\t", "%", "+",
        "~", "日",
    ])
}

/// A text whose pieces are all separated by delimiters, with free text free of `mh1.`: the exact
/// expected output is known.
fn structured_text() -> impl Strategy<Value = (String, String)> {
    prop::collection::vec((piece(), delimiter()), 0..8).prop_map(|pieces| {
        let mut input = String::new();
        let mut expected = String::new();
        for (i, (piece, delim)) in pieces.iter().enumerate() {
            if i > 0 {
                input.push_str(delim);
                expected.push_str(delim);
            }
            let text = piece_text(piece);
            input.push_str(text);
            let redacted = match piece {
                // Free text that happens to contain the prefix is dropped from structured texts.
                Piece::Text(t) if holds_prefix(t) => {
                    input.truncate(input.len() - text.len());
                    String::new()
                }
                Piece::Text(t) => t.clone(),
                Piece::Prefix(p) if starts_with_prefix(p) => placeholder(p),
                Piece::Prefix(p) => (*p).to_owned(),
                Piece::Token(t) => placeholder(t),
                Piece::Truncated(t) if starts_with_prefix(t) => placeholder(t),
                Piece::Truncated(t) => t.clone(),
            };
            expected.push_str(&redacted);
        }
        (input, expected)
    })
}

/// A text of pieces glued together with no delimiters: tokens may run into each other and into
/// loose prefix pieces.
fn glued_text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..10).prop_map(|pieces| pieces.iter().map(piece_text).collect())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![structured_text().prop_map(|(input, _)| input), glued_text()]
}

// ------------------------------------------------------------------------------------------------
// JSON
// ------------------------------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => any_text().prop_map(Value::String),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((any_text(), inner), 0..5).prop_map(|entries| {
                // An index prefix keeps keys distinct before and after redaction.
                let map: Map<String, Value> = entries
                    .into_iter()
                    .enumerate()
                    .map(|(i, (k, v))| (format!("k{i}:{k}"), v))
                    .collect();
                Value::Object(map)
            }),
        ]
    })
}

/// The value `redact_json` must produce: every string and key through `redact_tokens`.
fn expected_json(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(redact_tokens(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(expected_json).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (redact_tokens(k).into_owned(), expected_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn all_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| all_strings(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                all_strings(v, out);
            }
        }
        _ => {}
    }
}

// ------------------------------------------------------------------------------------------------
// Tracer and router
// ------------------------------------------------------------------------------------------------

fn tracer(session_id: &str) -> (Tracer, Arc<RecordingTraceSink>) {
    let sink = Arc::new(RecordingTraceSink::new());
    let tracer = Tracer::new(
        sink.clone(),
        Arc::new(ManualClock::new(1_787_577_327_015)),
        session_id.to_owned(),
    );
    (tracer, sink)
}

/// A capsule exporting `out/` from memory, and its trace.
fn capsule() -> (Capsule, Arc<RecordingTraceSink>) {
    let manifest =
        Manifest::from_yaml("name: redactor\nexports: { files: { root: out/, mode: read-only } }")
            .expect("manifest")
            .manifest;
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_dir("out");
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::launch(
        &manifest,
        common::capsule_config(),
        Backends {
            fs,
            clock: Arc::new(ManualClock::new(0)),
            keys: None,
            trace: trace.clone(),
        },
    )
    .expect("launch");
    (capsule, trace)
}

fn assert_no_prefix(lines: &[String]) -> Result<(), TestCaseError> {
    for line in lines {
        prop_assert!(!holds_prefix(line), "trace line holds a token: {}", line);
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn delimited_tokens_become_exactly_their_placeholder((input, expected) in structured_text()) {
        let out = redact_tokens(&input);
        prop_assert!(!holds_prefix(&out), "output {:?} holds mh1.", out);
        prop_assert_eq!(out.as_ref(), expected.as_str(), "redact_tokens({:?})", input);
    }

    #[test]
    fn glued_texts_never_keep_the_prefix(input in glued_text()) {
        let out = redact_tokens(&input);
        prop_assert!(!holds_prefix(&out), "redact_tokens({:?}) = {:?}", input, out);
        let again = redact_tokens(&out).into_owned();
        prop_assert_eq!(again.as_str(), out.as_ref(), "idempotent on {:?}", input);
        if !holds_prefix(&input) {
            prop_assert_eq!(out.as_ref(), input.as_str(), "text without a token is unchanged");
        }
        // Whatever is not a token run survives: removing placeholders from the output leaves the
        // input with its token runs removed.
        let strip_placeholders = |s: &str| {
            let mut rest = s;
            let mut kept = String::new();
            while let Some(at) = rest.find("<handle:") {
                kept.push_str(&rest[..at]);
                let tail = &rest[at + 8..];
                let id_len = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
                if id_len == 16 && tail.as_bytes().get(16) == Some(&b'>') {
                    rest = &tail[17..];
                } else {
                    kept.push_str("<handle:");
                    rest = tail;
                }
            }
            kept.push_str(rest);
            kept
        };
        let strip_runs = |s: &str| {
            let mut kept = String::new();
            let mut i = 0;
            while i < s.len() {
                if starts_with_prefix(&s[i..]) {
                    i += 4;
                    while i < s.len() && {
                        let b = s.as_bytes()[i];
                        b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
                    } {
                        i += 1;
                    }
                } else {
                    let c = s[i..].chars().next().unwrap();
                    kept.push(c);
                    i += c.len_utf8();
                }
            }
            kept
        };
        prop_assert_eq!(strip_placeholders(&out), strip_placeholders(&strip_runs(&input)));
    }

    #[test]
    fn redact_json_redacts_every_string_and_key(value in json_value()) {
        let mut redacted = value.clone();
        redact_json(&mut redacted);
        let text = serde_json::to_string(&redacted).unwrap();
        prop_assert!(!holds_prefix(&text), "redacted JSON holds mh1.: {}", text);
        let mut strings = Vec::new();
        all_strings(&redacted, &mut strings);
        for s in &strings {
            prop_assert!(!holds_prefix(s), "string {:?} holds mh1.", s);
        }
        prop_assert_eq!(&redacted, &expected_json(&value));
    }

    #[test]
    fn tracer_lines_never_hold_a_token(
        session in any_text(),
        path in any_text(),
        reason in any_text(),
        other in any_text(),
    ) {
        let (tracer, sink) = tracer(&session);
        tracer.emit(&ResourceRead {
            path: Some(path.clone()),
            outcome: "not_found",
            bytes: None,
            sha256: Some(other.clone()),
            generation: 0,
            containment_achieved: "advisory",
            reason: Some(reason.clone()),
        }).unwrap();
        tracer.emit(&PeerHandleMint {
            handle_id: Some(other.clone()),
            path: Some(path.clone()),
            audience: Some(other.clone()),
            expires_at_ms: None,
            outcome: "peer_unreachable",
            reason: Some(reason.clone()),
        }).unwrap();
        tracer.emit(&PeerHandleRedeem {
            handle_id: None,
            path: Some(path.clone()),
            generation: 3,
            audience_asserted: Some(other.clone()),
            bytes: None,
            sha256: None,
            outcome: "handle_not_valid",
            reason: Some(reason.clone()),
        }).unwrap();
        tracer.emit(&PeerFileFetch {
            peer: Some(other.clone()),
            handle_id: None,
            stored_path: Some(path.clone()),
            bytes: None,
            sha256: None,
            outcome: other.clone(),
            reason: Some(reason.clone()),
        }).unwrap();
        let lines = sink.lines();
        prop_assert_eq!(lines.len(), 4);
        assert_no_prefix(&lines)?;
        let text = |s: &str| Value::String(redact_tokens(s).into_owned());
        let events = sink.events();
        for event in &events {
            prop_assert_eq!(&event["session_id"], &text(&session));
            prop_assert_eq!(&event["reason"], &text(&reason));
        }
        prop_assert_eq!(&events[0]["path"], &text(&path));
        prop_assert_eq!(&events[3]["outcome"], &text(&other));
    }

    #[test]
    fn router_trace_of_a_read_never_holds_a_token(
        tokens in prop::collection::vec(token_any_case(), 1..3),
        prefix in "[a-z]{1,4}",
        join in prop::sample::select(vec!["/", "-", " ", "%2F", "%20"]),
    ) {
        let (capsule, trace) = capsule();
        let raw = format!("{prefix}{join}{}", tokens.join(join));
        let response = capsule.router().respond(&Method::GET, &format!("/resources/files/{raw}"), &[]);
        prop_assert_eq!(response.status().as_u16(), 404, "{:?} names nothing", raw);
        let lines = trace.lines();
        prop_assert_eq!(lines.len(), 1);
        assert_no_prefix(&lines)?;
        for t in &tokens {
            let mac = t.rsplit('.').next().unwrap();
            prop_assert!(!lines[0].contains(mac), "the token's MAC segment reached the trace: {}", lines[0]);
        }
    }
}

#[test]
fn placeholder_matches_the_crate_handle_id() {
    let token = "mh1.eyJ2IjoxfQ.AbC-_9";
    assert_eq!(
        placeholder(token),
        format!("<handle:{}>", resource_plane::hex::handle_id(token))
    );
    assert_eq!(
        redact_tokens(&format!("a {token} b")),
        format!("a {} b", placeholder(token))
    );
}

/// `text` percent-decoded once, independently of the crate: `%` and two hex digits, either case.
fn decode_once(text: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        match (text[at] == b'%')
            .then(|| Some(hex(*text.get(at + 1)?)? * 16 + hex(*text.get(at + 2)?)?))
            .flatten()
        {
            Some(byte) => {
                out.push(byte as u8);
                at += 3;
            }
            None => {
                out.push(text[at]);
                at += 1;
            }
        }
    }
    out
}

/// A token with each of its characters percent-encoded 0 to 3 times at random (hex in a random
/// case), between two free texts.
fn encoded_token_text() -> impl Strategy<Value = String> {
    (
        token_any_case(),
        prop::collection::vec((0usize..=3, any::<bool>()), 200),
        "[ -~]{0,12}",
        "[ -~]{0,12}",
    )
        .prop_map(|(token, depths, before, after)| {
            let mut spelled = String::new();
            for (c, (depth, upper)) in token.chars().zip(depths.iter().cycle()) {
                let mut piece = c.to_string();
                for _ in 0..*depth {
                    piece = piece
                        .bytes()
                        .map(|b| {
                            if *upper {
                                format!("%{b:02X}")
                            } else {
                                format!("%{b:02x}")
                            }
                        })
                        .collect();
                }
                spelled.push_str(&piece);
            }
            format!("{before}{spelled}{after}")
        })
}

proptest! {
    #![proptest_config(config())]

    /// D-6.5: however a token is percent-encoded (each character up to 3 rounds deep here,
    /// within the 8 searched), no decoding of the redacted text, up to 8 rounds, holds the
    /// prefix.
    #[test]
    fn encoded_tokens_leave_no_prefix_in_any_decoding(input in encoded_token_text()) {
        let redacted = redact_tokens(&input).into_owned();
        let mut decoded = redacted.clone().into_bytes();
        for round in 0..=8 {
            let text = String::from_utf8_lossy(&decoded).into_owned();
            prop_assert!(!holds_prefix(&text), "round {round} of {redacted:?} from {input:?}");
            decoded = decode_once(&decoded);
        }
    }
}
