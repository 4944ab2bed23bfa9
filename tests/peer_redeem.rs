//! The peer plane's redeem, in process (no sockets): `GET /resources/peer/<token>` through
//! `Router::respond`, and `PeerPlane::redeem` directly where backends are mocked.
//!
//! Covers the spec's "Peer plane" section and decisions D-7 (token layout, redeem order,
//! identical `handle_not_valid` refusals, no percent-decoding), D-6.2/D-6.3 (one ordered
//! `peer_handle_redeem` line per request, no token in any line) and D-12 (session end revokes).
//!
//! Handles are minted either through an `HmacPeerPlane` sharing the capsule's key bytes and
//! session id (`World::mint`), or by the independent signer of `tests/support/tokens.rs` that
//! builds the token from the spec's layout
//! (`HMAC(key, "murmur-peer-handle-v1" 0x1f payload_b64 0x1f audience)`) through
//! `FixedKeyStore::sign`.
#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs

mod support;

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use http::{Method, Response};
use resource_plane::Code;
use resource_plane::backends::{Clock, FixedKeyStore, FsError, FsErrorKind, OsRandomKeyStore};
use resource_plane::budget::ByteBudget;
use resource_plane::http::PlaneBody;
use resource_plane::planes::{ExportScope, HmacPeerPlane, Origin, RedeemOutcome, RedeemRequest};
use resource_plane::scope::{Containment, RootPath};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use support::mocks::{MockClk, MockFs, clock_read, rootless_fs};
use support::response::{Shape, body_text, header, header_names, shape};
use support::sha256_hex;
use support::tokens::{NONCE, forge, handle_id, mac, payload, segments, sign_b64, sign_json};
use support::trace::{RedeemLine as Line, assert_redeem_line};
use support::world::{KEY, NOW_MS as NOW, SESSION, URL, World};

// ------------------------------------------------------------------------------------------------
// Fixtures
// ------------------------------------------------------------------------------------------------

const OTHER_KEY: [u8; 32] = [0x24; 32];
const OTHER_SESSION: &str = "ses_ffffffffffffffffffffffffffffffff";
const AUDIENCE: &str = "reader@127.0.0.1:9000";
const READER: &[&[u8]] = &[b"reader@127.0.0.1:9000"];
const MTIME: i64 = 1_787_577_000_123;
const TTL_SECS: u64 = 600;
const REPORT: &[u8] = b"# report\nhello, peer\n";
const SECRET: &[u8] = b"SENTINEL: must never be served\n";

const PEER_YAML: &str = "name: minter\nexports:\n  peer_files: { root: out/, max_ttl: 1h }\n";

/// The exact header names of a successful redeem (content-length is optional in process: hyper
/// adds it from the body's size hint).
const OK_HEADERS: [&str; 7] = [
    "connection",
    "content-type",
    "etag",
    "x-murmur-containment",
    "x-murmur-generation",
    "x-murmur-handle-id",
    "x-murmur-mtime-ms",
];

/// The minter's scope for the mocked planes.
fn peer_scope(containment: Containment) -> ExportScope {
    ExportScope {
        root: RootPath::parse("out/").unwrap(),
        max_bytes: 10 * 1024 * 1024,
        containment,
    }
}

// ------------------------------------------------------------------------------------------------
// Token layout (D-7.1) and the independent signer
// ------------------------------------------------------------------------------------------------

#[test]
fn minted_token_has_the_spec_layout_byte_for_byte() {
    let w = peer_world();
    let minted = w.mint("report.md", AUDIENCE, TTL_SECS);
    let token = &minted.token;
    let (payload_b64, mac_b64) = segments(token);

    let json = URL_SAFE_NO_PAD
        .decode(&payload_b64)
        .expect("payload is base64url-nopad");
    let json = String::from_utf8(json).expect("payload is UTF-8");
    let value: Value = serde_json::from_str(&json).expect("payload is JSON");
    let keys: Vec<&str> = support::trace::keys(&value);
    assert_eq!(keys, ["v", "iss", "p", "exp", "n"], "payload key order");
    let n = value["n"].as_str().expect("n is a string");
    assert!(
        n.len() == 32
            && n.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "n is 32 lowercase hex: {n}"
    );
    let exp = NOW + i64::try_from(TTL_SECS).unwrap() * 1000;
    assert_eq!(
        json,
        payload(SESSION, "report.md", exp, n),
        "compact payload JSON"
    );
    assert_eq!(minted.expires_at_ms, exp);

    let expected_mac = mac(KEY, &payload_b64, AUDIENCE);
    assert_eq!(
        URL_SAFE_NO_PAD
            .decode(&mac_b64)
            .expect("mac is base64url-nopad"),
        expected_mac,
        "MAC = HMAC(key, ctx 0x1f payload_b64 0x1f audience)"
    );
    assert_eq!(
        *token,
        sign_json(KEY, &json, AUDIENCE),
        "the independent signer rebuilds the minted token exactly"
    );
    assert_eq!(
        minted.handle_id,
        handle_id(token),
        "handle_id = sha256(token)[..16]"
    );
    assert_eq!(minted.handle_id.len(), 16);

    let again = w.mint("report.md", AUDIENCE, TTL_SECS);
    assert_ne!(
        again.token, minted.token,
        "two handles for one file differ by n"
    );
}

#[test]
fn independently_signed_token_redeems_like_a_minted_one() {
    let w = peer_world();
    let token = valid("report.md");
    assert_served(&w.peer(&token, READER), &token, REPORT, MTIME, 0);
    let minted = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    assert_served(&w.peer(&minted, READER), &minted, REPORT, MTIME, 0);
}

// ------------------------------------------------------------------------------------------------
// Success
// ------------------------------------------------------------------------------------------------

#[test]
fn redeem_serves_the_file_with_exactly_the_validator_headers() {
    let w = peer_world();
    assert_eq!(w.capsule.task_completed(), 1);
    assert_eq!(w.capsule.task_completed(), 2);
    let minted = w.mint("report.md", AUDIENCE, TTL_SECS);
    let resp = w.peer(&minted.token, READER);
    assert_served(&resp, &minted.token, REPORT, MTIME, 2);
    assert_eq!(
        header(&resp, "x-murmur-handle-id"),
        Some(minted.handle_id.as_str())
    );

    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), 1, "one line per request");
    assert_line(
        &lines[0],
        &Line {
            handle_id: Some(minted.handle_id.clone()),
            path: Some("report.md"),
            generation: 2,
            audience: Some(AUDIENCE),
            served: Some(REPORT),
            outcome: "ok",
        },
        "ok redeem",
    );
}

#[test]
fn nested_paths_redeem() {
    let w = peer_world();
    w.fs.add_file("out/deep/er/data.bin", vec![0u8, 1, 2, 255], MTIME + 7);
    let token = w.mint("deep/er/data.bin", AUDIENCE, TTL_SECS).token;
    assert_served(
        &w.peer(&token, READER),
        &token,
        &[0, 1, 2, 255],
        MTIME + 7,
        0,
    );
}

#[test]
fn redeem_is_idempotent_and_always_serves_current_bytes() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    for i in 0..5 {
        let resp = w.peer(&token, READER);
        assert_eq!(resp.status(), 200, "redeem #{i} of the same handle");
        assert_served(&resp, &token, REPORT, MTIME, 0);
    }
    assert_eq!(w.events_of("peer_handle_redeem").len(), 5);

    // Rewritten by rename (new inode): the same handle serves the new bytes, new etag.
    let v2: &[u8] = b"# report\nversion two\n";
    w.fs.add_file("out/report.md", v2, MTIME + 1_000);
    let resp = w.peer(&token, READER);
    assert_served(&resp, &token, v2, MTIME + 1_000, 0);
    assert_ne!(
        header(&resp, "etag"),
        Some(format!("\"sha256:{}\"", sha256_hex(REPORT)).as_str()),
        "a rewrite changes the etag"
    );

    // Rewritten in place (same inode).
    let v3: &[u8] = b"three";
    w.fs.write_in_place("out/report.md", v3, MTIME + 2_000);
    assert_served(&w.peer(&token, READER), &token, v3, MTIME + 2_000, 0);

    // A completed task moves the generation, not the etag.
    w.capsule.task_completed();
    let resp = w.peer(&token, READER);
    assert_served(&resp, &token, v3, MTIME + 2_000, 1);
}

#[test]
fn asserted_audience_is_trimmed_and_lowercased() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    let variants: [&[u8]; 4] = [
        b"  Reader@127.0.0.1:9000 ",
        b"READER@127.0.0.1:9000",
        b"\treader@127.0.0.1:9000\t",
        b"reader@127.0.0.1:9000",
    ];
    for (i, aud) in variants.iter().enumerate() {
        let resp = w.peer(&token, &[aud]);
        assert_served(&resp, &token, REPORT, MTIME, 0);
        let line = &w.events_of("peer_handle_redeem")[i];
        assert_eq!(
            line["audience_asserted"],
            AUDIENCE,
            "audience {:?} is recorded normalised",
            String::from_utf8_lossy(aud)
        );
    }
    // A different identity is not a different spelling.
    let resp = w.peer(&token, &[b"reader@127.0.0.1:9001"]);
    assert_token_refusal(&resp, &token, 403, "handle_not_valid", "other port");
}

#[test]
fn query_string_is_cut_before_the_token() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    let resp = w.capsule.router().respond(
        &Method::GET,
        &format!("/resources/peer/{token}?v=2&x"),
        READER,
    );
    assert_served(&resp, &token, REPORT, MTIME, 0);
}

// ------------------------------------------------------------------------------------------------
// Refusals before the MAC: plane, method, shape, audience
// ------------------------------------------------------------------------------------------------

#[test]
fn no_peer_plane_without_exports_peer_files() {
    for yaml in [
        "name: minter\nexports:\n  files: { root: out/, mode: read-only }\n",
        "name: minter\n",
    ] {
        let w = peer_world_with(yaml, Containment::Sealed);
        let good = valid("report.md");
        for (path, token) in [
            (format!("/resources/peer/{good}"), Some(good.as_str())),
            ("/resources/peer/mh1.x.y".to_owned(), Some("mh1.x.y")),
            ("/resources/peer".to_owned(), None),
            ("/resources/peer/".to_owned(), None),
        ] {
            let resp = w.capsule.router().respond(&Method::GET, &path, READER);
            let ctx = format!("{yaml:?} {path}");
            assert_refusal(&resp, 404, "no_peer_plane", &ctx);
            assert_eq!(
                header(&resp, "x-murmur-handle-id"),
                token.map(handle_id).as_deref(),
                "{ctx}: handle id only when a token was present"
            );
        }
        let lines = w.events_of("peer_handle_redeem");
        assert_eq!(lines.len(), 4, "{yaml:?}: one line per request");
        assert!(lines.iter().all(|l| l["outcome"] == "no_peer_plane"));
        assert_eq!(lines[0]["handle_id"], handle_id(&good));
        assert_eq!(lines[2]["handle_id"], Value::Null);
    }
}

#[test]
fn peer_index_cannot_be_enumerated() {
    let w = peer_world();
    for path in [
        "/resources/peer",
        "/resources/peer/",
        "/resources/peer/?x=1",
    ] {
        let resp = w.capsule.router().respond(&Method::GET, path, READER);
        assert_refusal(&resp, 404, "not_found", path);
        assert!(
            header(&resp, "x-murmur-handle-id").is_none(),
            "{path}: no token, no id"
        );
    }
    for line in w.events_of("peer_handle_redeem") {
        assert_line(
            &line,
            &Line {
                handle_id: None,
                path: None,
                generation: 0,
                audience: Some(AUDIENCE),
                served: None,
                outcome: "not_found",
            },
            "peer index",
        );
    }
}

#[test]
fn methods_other_than_get_are_405_with_allow_get() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    for method in [
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
    ] {
        let ctx = format!("{method} redeem");
        let resp = w.peer_request(&method, &token, READER);
        assert_eq!(resp.status(), 405, "{ctx}");
        assert_eq!(header(&resp, "allow"), Some("GET"), "{ctx}: allow");
        assert_eq!(
            header(&resp, "x-murmur-handle-id"),
            Some(handle_id(&token).as_str()),
            "{ctx}"
        );
        if method != Method::HEAD {
            assert_token_refusal(&resp, &token, 405, "method_not_allowed", &ctx);
        }
        let resp = w
            .capsule
            .router()
            .respond(&method, "/resources/peer/", READER);
        assert_eq!(resp.status(), 405, "{method} on the peer index");
        assert_eq!(header(&resp, "allow"), Some("GET"));
    }
    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), 12, "one line per request");
    assert!(
        lines
            .iter()
            .all(|l| l["outcome"] == "method_not_allowed" && l["path"].is_null())
    );
}

/// Malformed tokens, most of them correctly signed over exactly the bytes sent, so only the
/// shape check can refuse them (a lenient parser would serve the file).
fn malformed_cases() -> Vec<(String, String)> {
    let exp = NOW + 60_000;
    let good = valid("report.md");
    let (p, m) = segments(&good);
    let json = payload(SESSION, "report.md", exp, NONCE);
    let signed = |label: &str, json: &str| (label.to_owned(), sign_json(KEY, json, AUDIENCE));
    let signed_b64 = |label: &str, b64: &str| (label.to_owned(), sign_b64(KEY, b64, AUDIENCE));

    // Padding: a payload whose nopad length is 2 mod 4 takes "==", 3 mod 4 takes "=".
    let pad2 = URL_SAFE.encode(json_len_mod3(&json, 1));
    let pad1 = URL_SAFE.encode(json_len_mod3(&json, 2));
    assert!(pad2.ends_with("==") && !pad1.ends_with("==") && pad1.ends_with('='));
    let trailing = non_canonical(&URL_SAFE_NO_PAD.encode(json_len_mod3(&json, 1)));

    let mut cases: Vec<(String, String)> = vec![
        ("bare prefix".into(), "mh1".into()),
        ("empty segments".into(), "mh1..".into()),
        ("two segments".into(), format!("mh1.{p}")),
        ("four segments".into(), format!("{good}.{m}")),
        ("trailing dot".into(), format!("{good}.")),
        ("mh2 prefix".into(), format!("mh2.{p}.{m}")),
        ("upper-case prefix".into(), format!("MH1.{p}.{m}")),
        ("mh1x prefix".into(), format!("mh1x.{p}.{m}")),
        ("no prefix".into(), format!("{p}.{m}.x")),
        ("leading dot".into(), format!(".mh1.{p}.{m}")),
        ("empty payload".into(), format!("mh1..{m}")),
        ("empty mac".into(), format!("mh1.{p}.")),
        ("standard alphabet".into(), format!("mh1.{p}+.{m}")),
        (
            "stray char".into(),
            format!("mh1.{}!{}.{m}", &p[..4], &p[4..]),
        ),
        ("mac padded".into(), format!("mh1.{p}.{m}=")),
        (
            "mac non-canonical bits".into(),
            format!("mh1.{p}.{}", non_canonical(&m)),
        ),
        (
            "mac bad length".into(),
            format!("mh1.{p}.{}", bad_length(&m)),
        ),
        (
            "not json".into(),
            format!("mh1.{}.{m}", URL_SAFE_NO_PAD.encode("not json")),
        ),
    ];
    cases.push(signed_b64("payload padded ==", &pad2));
    cases.push(signed_b64("payload padded =", &pad1));
    cases.push(signed_b64("payload non-canonical bits", &trailing));
    cases.push(signed_b64("payload bad length", &bad_length(&p)));
    for (label, body) in [
        ("not json (signed)", "not json".to_owned()),
        ("json array", "[1]".to_owned()),
        ("json string", r#""mh1""#.to_owned()),
        ("json number", "1".to_owned()),
        ("json null", "null".to_owned()),
        ("truncated json", json[..json.len() - 1].to_owned()),
        ("v 2", json.replacen(r#""v":1"#, r#""v":2"#, 1)),
        ("v 0", json.replacen(r#""v":1"#, r#""v":0"#, 1)),
        ("v -1", json.replacen(r#""v":1"#, r#""v":-1"#, 1)),
        ("v string", json.replacen(r#""v":1"#, r#""v":"1""#, 1)),
        ("v null", json.replacen(r#""v":1"#, r#""v":null"#, 1)),
        (
            "missing v",
            format!(r#"{{"iss":"{SESSION}","p":"report.md","exp":{exp},"n":"{NONCE}"}}"#),
        ),
        (
            "missing iss",
            format!(r#"{{"v":1,"p":"report.md","exp":{exp},"n":"{NONCE}"}}"#),
        ),
        (
            "missing p",
            format!(r#"{{"v":1,"iss":"{SESSION}","exp":{exp},"n":"{NONCE}"}}"#),
        ),
        (
            "missing exp",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":"report.md","n":"{NONCE}"}}"#),
        ),
        (
            "missing n",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":"report.md","exp":{exp}}}"#),
        ),
        (
            "iss number",
            format!(r#"{{"v":1,"iss":7,"p":"report.md","exp":{exp},"n":"{NONCE}"}}"#),
        ),
        (
            "p null",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":null,"exp":{exp},"n":"{NONCE}"}}"#),
        ),
        (
            "p array",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":["report.md"],"exp":{exp},"n":"{NONCE}"}}"#),
        ),
        (
            "exp string",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":"report.md","exp":"{exp}","n":"{NONCE}"}}"#),
        ),
        (
            "exp float",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":"report.md","exp":{exp}.5,"n":"{NONCE}"}}"#),
        ),
        (
            "n number",
            format!(r#"{{"v":1,"iss":"{SESSION}","p":"report.md","exp":{exp},"n":5}}"#),
        ),
    ] {
        cases.push(signed(label, &body));
    }
    cases.push((
        "payload not utf-8".into(),
        sign_b64(KEY, &URL_SAFE_NO_PAD.encode([0xff, 0xfe, 0x7b]), AUDIENCE),
    ));
    cases
}

#[test]
fn malformed_handles_are_400_malformed_handle() {
    let w = peer_world();
    let cases = malformed_cases();
    for (label, token) in &cases {
        let resp = w.peer(token, READER);
        assert_token_refusal(&resp, token, 400, "malformed_handle", label);
    }
    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), cases.len(), "one line per request");
    for ((label, token), line) in cases.iter().zip(&lines) {
        assert_line(
            line,
            &Line {
                handle_id: Some(handle_id(token)),
                path: None,
                generation: 0,
                audience: Some(AUDIENCE),
                served: None,
                outcome: "malformed_handle",
            },
            label,
        );
    }
}

#[test]
fn token_length_limit_is_4_kib() {
    let w = peer_world();
    let exp = NOW + 60_000;
    let base = payload(SESSION, "report.md", exp, "").len();
    // 4 + ceil(4L/3) + 1 + 43 bytes: L = 3036 gives exactly 4096, L = 3037 gives 4098.
    let at_limit = forge_with_nonce_len(3036 - base, exp);
    assert_eq!(at_limit.len(), 4096);
    assert_served(&w.peer(&at_limit, READER), &at_limit, REPORT, MTIME, 0);

    let over = forge_with_nonce_len(3037 - base, exp);
    assert_eq!(over.len(), 4098);
    assert_token_refusal(
        &w.peer(&over, READER),
        &over,
        400,
        "malformed_handle",
        "4098-byte token",
    );

    let huge = format!("mh1.{}.{}", "A".repeat(8192), "A".repeat(43));
    assert_token_refusal(
        &w.peer(&huge, READER),
        &huge,
        400,
        "malformed_handle",
        "8 KiB token",
    );
}

fn forge_with_nonce_len(n_len: usize, exp: i64) -> String {
    sign_json(
        KEY,
        &payload(SESSION, "report.md", exp, &"a".repeat(n_len)),
        AUDIENCE,
    )
}

#[test]
fn percent_in_a_token_is_never_decoded() {
    let w = peer_world();
    let good = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    assert_served(&w.peer(&good, READER), &good, REPORT, MTIME, 0);
    let (p, m) = segments(&good);
    let cases = [
        format!("%6Dh1.{p}.{m}"),
        format!("mh1%2E{p}.{m}"),
        format!("mh1.{p}%2E{m}"),
        format!("mh1.%{}.{m}", &p[1..]),
        format!("{good}%00"),
        format!(
            "mh1.{p}.{}%{:02X}",
            &m[..m.len() - 1],
            m.as_bytes()[m.len() - 1]
        ),
    ];
    for token in &cases {
        let resp = w.peer(token, READER);
        assert_token_refusal(&resp, token, 400, "malformed_handle", token);
    }
}

#[test]
fn missing_audience_variants_are_400() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    let cases: [(&str, &[&[u8]]); 6] = [
        ("absent", &[]),
        ("empty", &[b""]),
        ("whitespace only", &[b"   \t "]),
        (
            "sent twice, identical",
            &[b"reader@127.0.0.1:9000", b"reader@127.0.0.1:9000"],
        ),
        (
            "sent twice, different",
            &[b"reader@127.0.0.1:9000", b"other@127.0.0.1:9000"],
        ),
        ("sent twice, one empty", &[b"", b"reader@127.0.0.1:9000"]),
    ];
    for (label, aud) in cases {
        let resp = w.peer(&token, aud);
        assert_token_refusal(&resp, &token, 400, "missing_audience", label);
    }
    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), cases.len());
    for ((label, _), line) in cases.iter().zip(&lines) {
        assert_eq!(line["outcome"], "missing_audience", "{label}");
        assert_eq!(line["path"], Value::Null, "{label}: no path before the MAC");
    }
    assert_eq!(
        lines[0]["audience_asserted"],
        Value::Null,
        "absent header is null"
    );
    assert_eq!(
        lines[1]["audience_asserted"], "",
        "empty header is recorded normalised"
    );
    assert_eq!(
        lines[2]["audience_asserted"], "",
        "whitespace normalises to empty"
    );
    // And the handle was fine all along.
    assert_served(&w.peer(&token, READER), &token, REPORT, MTIME, 0);
}

// ------------------------------------------------------------------------------------------------
// The MAC: every forgery is one identical refusal (D-7.2, D-7.3)
// ------------------------------------------------------------------------------------------------

/// Forged handles and the audience each is presented with; every one must be refused
/// `handle_not_valid`.
fn forgeries(w: &World) -> Vec<(&'static str, String, &'static [u8])> {
    let good = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    let (p, m) = segments(&good);
    let json = String::from_utf8(URL_SAFE_NO_PAD.decode(&p).unwrap()).unwrap();
    let mut mac_bytes = URL_SAFE_NO_PAD.decode(&m).unwrap();
    let exp = NOW + 60_000;

    let tampered_path = URL_SAFE_NO_PAD.encode(json.replace("report.md", "secret.md"));
    let tampered_exp = {
        let v: Value = serde_json::from_str(&json).unwrap();
        let old = v["exp"].as_i64().unwrap();
        URL_SAFE_NO_PAD.encode(json.replace(&old.to_string(), &(old + 1).to_string()))
    };
    mac_bytes[0] ^= 0x01;
    let flipped = URL_SAFE_NO_PAD.encode(&mac_bytes);
    mac_bytes[0] ^= 0x01;
    let truncated = URL_SAFE_NO_PAD.encode(&mac_bytes[..16]);
    let extended = URL_SAFE_NO_PAD.encode([mac_bytes.as_slice(), &[0]].concat());

    vec![
        (
            "tampered payload p",
            format!("mh1.{tampered_path}.{m}"),
            READER[0],
        ),
        (
            "tampered payload exp",
            format!("mh1.{tampered_exp}.{m}"),
            READER[0],
        ),
        ("tampered mac", format!("mh1.{p}.{flipped}"), READER[0]),
        ("truncated mac", format!("mh1.{p}.{truncated}"), READER[0]),
        ("extended mac", format!("mh1.{p}.{extended}"), READER[0]),
        ("another key", sign_b64(OTHER_KEY, &p, AUDIENCE), READER[0]),
        (
            "another key, fresh payload",
            forge(OTHER_KEY, SESSION, "report.md", exp, AUDIENCE),
            READER[0],
        ),
        (
            "another instance's iss, right key",
            forge(KEY, OTHER_SESSION, "report.md", exp, AUDIENCE),
            READER[0],
        ),
        (
            "minted for another audience",
            forge(KEY, SESSION, "report.md", exp, "intruder@127.0.0.1:9000"),
            READER[0],
        ),
        (
            "presented by another audience",
            good.clone(),
            b"intruder@127.0.0.1:9000",
        ),
        ("presented with a prefix", good, b"xreader@127.0.0.1:9000"),
    ]
}

#[test]
fn every_forgery_is_403_handle_not_valid() {
    let w = peer_world();
    let cases = forgeries(&w);
    for (label, token, aud) in &cases {
        let resp = w.peer(token, &[aud]);
        assert_token_refusal(&resp, token, 403, "handle_not_valid", label);
    }
    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), cases.len());
    for ((label, token, aud), line) in cases.iter().zip(&lines) {
        assert_line(
            line,
            &Line {
                handle_id: Some(handle_id(token)),
                path: None,
                generation: 0,
                audience: Some(std::str::from_utf8(aud).unwrap()),
                served: None,
                outcome: "handle_not_valid",
            },
            label,
        );
    }
}

#[test]
fn every_handle_not_valid_response_is_byte_identical() {
    let w = peer_world();
    let cases = forgeries(&w);
    let mut reference: Option<(&str, Shape)> = None;
    for (label, token, aud) in &cases {
        let resp = w.peer(token, &[aud]);
        assert_eq!(resp.status(), 403, "{label}");
        assert_eq!(
            header(&resp, "x-murmur-handle-id"),
            Some(handle_id(token).as_str()),
            "{label}: only the handle id differs, and it names the token sent"
        );
        let seen = shape(&resp);
        match &reference {
            None => reference = Some((label, seen)),
            Some((first, want)) => assert_eq!(
                &seen, want,
                "{label} must be indistinguishable from {first} (D-7.3)"
            ),
        }
    }
    let (_, want) = reference.expect("cases");
    assert_eq!(
        want.body,
        br#"{"error":"handle_not_valid","message":"the handle is not valid"}"#.to_vec(),
        "the one fixed body"
    );
}

// ------------------------------------------------------------------------------------------------
// Expiry
// ------------------------------------------------------------------------------------------------

#[test]
fn exp_at_or_before_now_is_410_handle_expired() {
    let w = peer_world();
    let minted = w.mint("report.md", AUDIENCE, 30);
    let exp = minted.expires_at_ms;
    assert_eq!(exp, NOW + 30_000);

    w.clock.set(exp - 1);
    assert_served(
        &w.peer(&minted.token, READER),
        &minted.token,
        REPORT,
        MTIME,
        0,
    );

    for now in [exp, exp + 1, exp + 86_400_000] {
        w.clock.set(now);
        let resp = w.peer(&minted.token, READER);
        assert_token_refusal(
            &resp,
            &minted.token,
            410,
            "handle_expired",
            &format!("now = exp + {}", now - exp),
        );
    }
    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), 4);
    for line in &lines[1..] {
        assert_line(
            line,
            &Line {
                handle_id: Some(minted.handle_id.clone()),
                path: Some("report.md"),
                generation: 0,
                audience: Some(AUDIENCE),
                served: None,
                outcome: "handle_expired",
            },
            "expired: path is named once the MAC verified",
        );
    }

    // An independently signed handle with exp exactly now is expired too.
    w.clock.set(NOW);
    let token = forge(KEY, SESSION, "report.md", NOW, AUDIENCE);
    assert_token_refusal(
        &w.peer(&token, READER),
        &token,
        410,
        "handle_expired",
        "exp == now",
    );
}

// ------------------------------------------------------------------------------------------------
// Path refusals after verification (the operator reader's rules)
// ------------------------------------------------------------------------------------------------

#[track_caller]
fn assert_path_refusal(w: &World, token: &str, p: &str, status: u16, code: &str, ctx: &str) {
    let before = w.events_of("peer_handle_redeem").len();
    assert_token_refusal(&w.peer(token, READER), token, status, code, ctx);
    let lines = w.events_of("peer_handle_redeem");
    assert_eq!(lines.len(), before + 1, "{ctx}: one line");
    assert_line(
        &lines[before],
        &Line {
            handle_id: Some(handle_id(token)),
            path: Some(p),
            generation: 0,
            audience: Some(AUDIENCE),
            served: None,
            outcome: code,
        },
        ctx,
    );
}

#[test]
fn file_deleted_after_mint_is_404_not_found() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    w.fs.remove("out/report.md");
    assert_path_refusal(&w, &token, "report.md", 404, "not_found", "deleted file");
    w.fs.remove("out");
    assert_path_refusal(&w, &token, "report.md", 404, "not_found", "deleted root");
}

#[test]
fn file_replaced_by_escaping_symlink_is_403_outside_root() {
    for class in [Containment::Sealed, Containment::Advisory] {
        let w = peer_world_with(PEER_YAML, class);
        let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
        w.fs.add_symlink("out/report.md", "../secret");
        let ctx = format!("{class:?}: relative link out");
        assert_path_refusal(&w, &token, "report.md", 403, "outside_root", &ctx);

        w.fs.add_symlink("out/report.md", "/secret");
        let ctx = format!("{class:?}: absolute link");
        assert_path_refusal(&w, &token, "report.md", 403, "outside_root", &ctx);

        // A signed p that climbs is refused lexically, never normalised.
        let climbing = forge(KEY, SESSION, "../secret", NOW + 60_000, AUDIENCE);
        let ctx = format!("{class:?}: p = ../secret");
        assert_path_refusal(&w, &climbing, "../secret", 403, "outside_root", &ctx);

        for line in w.trace.lines() {
            assert!(
                !line.contains("SENTINEL"),
                "secret bytes never reach a trace"
            );
        }
    }
}

#[test]
fn symlink_under_scoped_is_403_symlink_refused() {
    let w = peer_world_with(PEER_YAML, Containment::Scoped);
    w.fs.add_file("out/real.md", REPORT, MTIME);
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    let resp = w.peer(&token, READER);
    assert_eq!(resp.status(), 200, "plain file serves under scoped");
    assert_eq!(header(&resp, "x-murmur-containment"), Some("scoped"));

    w.fs.add_symlink("out/report.md", "real.md");
    assert_path_refusal(
        &w,
        &token,
        "report.md",
        403,
        "symlink_refused",
        "final link",
    );

    w.fs.add_file("out/real/x.md", REPORT, MTIME);
    w.fs.add_symlink("out/dir", "real");
    let token = w.mint("dir/x.md", AUDIENCE, TTL_SECS).token;
    assert_path_refusal(
        &w,
        &token,
        "dir/x.md",
        403,
        "symlink_refused",
        "intermediate link",
    );
}

#[test]
fn inside_symlink_is_followed_under_sealed() {
    let w = peer_world();
    w.fs.add_file("out/real.md", b"real", MTIME + 5);
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    w.fs.add_symlink("out/report.md", "real.md");
    assert_served(&w.peer(&token, READER), &token, b"real", MTIME + 5, 0);
}

#[test]
fn directory_created_after_mint_is_403_not_a_regular_file() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    w.fs.remove("out/report.md");
    w.fs.add_dir("out/report.md");
    assert_path_refusal(
        &w,
        &token,
        "report.md",
        403,
        "not_a_regular_file",
        "directory",
    );
    w.fs.remove("out/report.md");
    w.fs.add_fifo("out/report.md");
    assert_path_refusal(&w, &token, "report.md", 403, "not_a_regular_file", "fifo");
}

#[test]
fn file_over_peer_max_bytes_is_413_too_large() {
    let yaml = "name: minter\nexports:\n  peer_files: { root: out/, max_bytes: 8 }\n  files: { root: out/, mode: read-only, max_bytes: 1Mi }\n";
    let w = peer_world_with(yaml, Containment::Sealed);
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    assert!(REPORT.len() > 8);
    assert_path_refusal(
        &w,
        &token,
        "report.md",
        413,
        "too_large",
        "peer max_bytes 8",
    );

    w.fs.add_file("out/report.md", b"12345678", MTIME);
    assert_served(&w.peer(&token, READER), &token, b"12345678", MTIME, 0);
    w.fs.add_file("out/report.md", b"123456789", MTIME);
    assert_path_refusal(&w, &token, "report.md", 413, "too_large", "one byte over");
}

#[test]
fn read_fault_is_500_io_error_with_generic_message() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    w.fs.inject_read_fault("out/report.md", std::io::ErrorKind::Other);
    assert_path_refusal(&w, &token, "report.md", 500, "io_error", "read fault");
    let resp = w.peer(&token, READER);
    assert!(
        !body_text(&resp).contains("EIO") && !body_text(&resp).contains("injected"),
        "the OS detail stays in the trace: {}",
        body_text(&resp)
    );
}

// ------------------------------------------------------------------------------------------------
// Order (D-7.2)
// ------------------------------------------------------------------------------------------------

#[test]
fn checks_run_in_the_d72_order() {
    let w = peer_world();
    let exp_past = NOW - 1;

    // Method before everything, even on a capsule with no peer plane.
    let bare = peer_world_with("name: bare\n", Containment::Sealed);
    let resp = bare.peer_request(&Method::POST, "garbage", &[]);
    assert_eq!(resp.status(), 405, "method first");
    assert_eq!(header(&resp, "allow"), Some("GET"));
    // Declared before shape.
    assert_refusal(
        &bare.peer("garbage", &[]),
        404,
        "no_peer_plane",
        "declared before shape",
    );

    // Shape before audience.
    assert_token_refusal(
        &w.peer("mh1.garbage", &[]),
        "mh1.garbage",
        400,
        "malformed_handle",
        "malformed, no audience",
    );
    // Audience before MAC.
    let forged = forge(OTHER_KEY, SESSION, "report.md", NOW + 60_000, AUDIENCE);
    assert_token_refusal(
        &w.peer(&forged, &[]),
        &forged,
        400,
        "missing_audience",
        "forged, no audience",
    );
    // MAC before expiry.
    let forged_expired = forge(OTHER_KEY, SESSION, "report.md", exp_past, AUDIENCE);
    assert_token_refusal(
        &w.peer(&forged_expired, READER),
        &forged_expired,
        403,
        "handle_not_valid",
        "forged and expired",
    );
    let foreign_expired = forge(KEY, OTHER_SESSION, "report.md", exp_past, AUDIENCE);
    assert_token_refusal(
        &w.peer(&foreign_expired, READER),
        &foreign_expired,
        403,
        "handle_not_valid",
        "foreign iss and expired",
    );
    // Expiry before path.
    let expired_missing = forge(KEY, SESSION, "gone.md", exp_past, AUDIENCE);
    assert_token_refusal(
        &w.peer(&expired_missing, READER),
        &expired_missing,
        410,
        "handle_expired",
        "expired and missing",
    );
    let expired_climbing = forge(KEY, SESSION, "../secret", exp_past, AUDIENCE);
    assert_token_refusal(
        &w.peer(&expired_climbing, READER),
        &expired_climbing,
        410,
        "handle_expired",
        "expired and climbing",
    );
    // And the path step last.
    let live_missing = forge(KEY, SESSION, "gone.md", NOW + 60_000, AUDIENCE);
    assert_token_refusal(
        &w.peer(&live_missing, READER),
        &live_missing,
        404,
        "not_found",
        "live and missing",
    );
}

// ------------------------------------------------------------------------------------------------
// No filesystem or clock before their turn (mocked backends, plane called directly)
// ------------------------------------------------------------------------------------------------

fn mocked_plane(fs: MockFs, clock: MockClk) -> HmacPeerPlane {
    HmacPeerPlane::new(
        Arc::new(fs),
        Arc::new(clock),
        Arc::new(FixedKeyStore::new(KEY)),
        peer_scope(Containment::Sealed),
        SESSION.to_owned(),
        ByteBudget::new(1 << 20),
        Origin::of_url(URL).unwrap(),
    )
}

fn refusal_code(redeem: &RedeemOutcome) -> Option<Code> {
    redeem.result.as_ref().err().map(|r| r.code)
}

#[test]
fn malformed_and_forged_touch_neither_filesystem_nor_clock() {
    let plane = mocked_plane(rootless_fs(0), clock_read(0, NOW));

    for (label, token) in malformed_cases() {
        let r = plane.redeem_blocking(RedeemRequest::new(&token, READER));
        assert_eq!(refusal_code(&r), Some(Code::MalformedHandle), "{label}");
        assert_eq!(r.path, None, "{label}");
        assert_eq!(r.audience_proof, None, "{label}");
    }
    let w = peer_world();
    for (label, token, aud) in forgeries(&w) {
        let r = plane.redeem_blocking(RedeemRequest::new(&token, &[aud]));
        assert_eq!(refusal_code(&r), Some(Code::HandleNotValid), "{label}");
        assert_eq!(r.path, None, "{label}: a forgery never names a path");
        // Missing audience stops before the MAC too.
        let r = plane.redeem_blocking(RedeemRequest::new(&token, &[]));
        assert_eq!(
            refusal_code(&r),
            Some(Code::MissingAudience),
            "{label}, no audience"
        );
        assert_eq!((r.path, r.audience_proof), (None, None));
    }
    // Forged and long expired: still no clock read.
    let r = plane.redeem_blocking(RedeemRequest::new(
        &forge(OTHER_KEY, SESSION, "report.md", 0, AUDIENCE),
        READER,
    ));
    assert_eq!(refusal_code(&r), Some(Code::HandleNotValid));
    drop(plane); // mock expectations are checked here as well
}

#[test]
fn expired_reads_the_clock_but_never_the_filesystem() {
    let mut clock = MockClk::new();
    clock.expect_now_ms().returning(|| NOW);
    let plane = mocked_plane(rootless_fs(0), clock);
    for (label, exp) in [("exp == now", NOW), ("exp < now", NOW - 1), ("exp = 0", 0)] {
        for p in ["report.md", "gone.md", "../secret"] {
            let token = forge(KEY, SESSION, p, exp, AUDIENCE);
            let r = plane.redeem_blocking(RedeemRequest::new(&token, &[b" READER@127.0.0.1:9000"]));
            assert_eq!(refusal_code(&r), Some(Code::HandleExpired), "{label} {p}");
            assert_eq!(
                r.path.as_deref(),
                Some(p),
                "{label}: path set after the MAC"
            );
            assert_eq!(r.audience_proof, Some("none"), "{label}: the MAC verified");
        }
    }
}

#[test]
fn a_verified_live_handle_does_reach_the_mocked_filesystem() {
    // The control for the two tests above: the mocks are wired, so `times(0)` means something.
    let mut fs = MockFs::new();
    fs.expect_open_root()
        .withf(|root, class| root.declared() == "out/" && *class == Containment::Sealed)
        .times(1)
        .returning(|_, _| Err(FsError::new(FsErrorKind::NotFound, "mock: no root")));
    fs.expect_check_root().times(0);
    fs.expect_land().times(0);
    let plane = mocked_plane(fs, clock_read(1, NOW));
    let r = plane.redeem_blocking(RedeemRequest::new(&valid("report.md"), READER));
    assert_eq!(refusal_code(&r), Some(Code::NotFound));
    assert_eq!(r.path.as_deref(), Some("report.md"));
}

// ------------------------------------------------------------------------------------------------
// Trace (D-6.2, D-6.3, D-6.5)
// ------------------------------------------------------------------------------------------------

#[test]
fn every_peer_request_leaves_one_ordered_line_and_no_token() {
    let w = peer_world();
    w.capsule.task_completed();
    let short = w.mint("report.md", AUDIENCE, 1);
    let good = w.mint("report.md", AUDIENCE, TTL_SECS);
    let gone = w.mint("gone.md", AUDIENCE, TTL_SECS);
    let forged = forge(OTHER_KEY, SESSION, "report.md", NOW + 60_000, AUDIENCE);
    let malformed = "mh1.not-a-payload.AAAA".to_owned();
    w.clock.advance(1_000);
    let now = w.clock.now_ms();

    let mut tokens: Vec<String> = vec![];
    let mut expect: Vec<Line<'_>> = vec![];
    let mut step =
        |method: Method, path: String, token: Option<&str>, aud: &[&[u8]], want: Line<'static>| {
            let before = w.events_of("peer_handle_redeem").len();
            let _ = w.capsule.router().respond(&method, &path, aud);
            let lines = w.events_of("peer_handle_redeem");
            assert_eq!(lines.len(), before + 1, "{path}: exactly one line");
            assert_eq!(
                lines[before]["timestamp"], now,
                "{path}: stamped by the clock"
            );
            assert_line(&lines[before], &want, &format!("{method} {path}"));
            if let Some(t) = token {
                tokens.push(t.to_owned());
            }
            expect.push(want);
        };
    let peer = |t: &str| format!("/resources/peer/{t}");
    let line = |token: Option<&str>,
                path: Option<&'static str>,
                audience: Option<&'static str>,
                served: Option<&'static [u8]>,
                outcome: &'static str| Line {
        handle_id: token.map(handle_id),
        path,
        generation: 1,
        audience,
        served,
        outcome,
    };

    step(
        Method::GET,
        peer(&good.token),
        Some(&good.token),
        READER,
        line(
            Some(&good.token),
            Some("report.md"),
            Some(AUDIENCE),
            Some(REPORT),
            "ok",
        ),
    );
    step(
        Method::GET,
        peer(&malformed),
        Some(&malformed),
        &[b"  Reader@127.0.0.1:9000"],
        line(
            Some(&malformed),
            None,
            Some(AUDIENCE),
            None,
            "malformed_handle",
        ),
    );
    step(
        Method::GET,
        peer(&forged),
        Some(&forged),
        READER,
        line(
            Some(&forged),
            None,
            Some(AUDIENCE),
            None,
            "handle_not_valid",
        ),
    );
    step(
        Method::GET,
        peer(&short.token),
        Some(&short.token),
        READER,
        line(
            Some(&short.token),
            Some("report.md"),
            Some(AUDIENCE),
            None,
            "handle_expired",
        ),
    );
    step(
        Method::GET,
        peer(&gone.token),
        Some(&gone.token),
        READER,
        line(
            Some(&gone.token),
            Some("gone.md"),
            Some(AUDIENCE),
            None,
            "not_found",
        ),
    );
    step(
        Method::GET,
        peer(&good.token),
        Some(&good.token),
        &[],
        line(Some(&good.token), None, None, None, "missing_audience"),
    );
    step(
        Method::GET,
        "/resources/peer/".into(),
        None,
        READER,
        line(None, None, Some(AUDIENCE), None, "not_found"),
    );
    step(
        Method::GET,
        "/resources/peer".into(),
        None,
        &[],
        line(None, None, None, None, "not_found"),
    );
    step(
        Method::POST,
        peer(&good.token),
        Some(&good.token),
        READER,
        line(
            Some(&good.token),
            None,
            Some(AUDIENCE),
            None,
            "method_not_allowed",
        ),
    );

    let all = w.trace.lines();
    assert_eq!(
        all.len(),
        expect.len(),
        "only peer_handle_redeem lines were written"
    );
    for text in &all {
        assert!(
            !text.contains("mh1."),
            "no token prefix in a trace line: {text}"
        );
        for token in &tokens {
            assert!(!text.contains(token.as_str()), "token leaked: {text}");
            for segment in token.split('.').filter(|s| s.len() > 3) {
                assert!(
                    !text.contains(segment),
                    "token segment {segment} leaked: {text}"
                );
            }
        }
    }
    assert!(
        all.iter().any(|l| l.contains(&good.handle_id)),
        "handles are named by handle_id"
    );
}

// ------------------------------------------------------------------------------------------------
// Session end (D-12)
// ------------------------------------------------------------------------------------------------

#[test]
fn end_session_revokes_every_outstanding_handle() {
    let w = peer_world();
    let a = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    let b = valid("report.md");
    assert_served(&w.peer(&a, READER), &a, REPORT, MTIME, 0);
    assert_served(&w.peer(&b, READER), &b, REPORT, MTIME, 0);

    w.capsule.end_session();
    let mut bodies = BTreeSet::new();
    for token in [&a, &b] {
        let resp = w.peer(token, READER);
        assert_token_refusal(&resp, token, 403, "handle_not_valid", "after end_session");
        bodies.insert(shape(&resp).body);
    }
    assert_eq!(
        bodies.len(),
        1,
        "revocation looks like any other invalid handle"
    );
    let lines = w.events_of("peer_handle_redeem");
    assert!(
        lines[2..].iter().all(|l| l["path"].is_null()),
        "no path after revocation"
    );
}

#[test]
fn a_new_session_over_the_same_workdir_refuses_old_handles() {
    let w = peer_world();
    let token = w.mint("report.md", AUDIENCE, TTL_SECS).token;
    assert_served(&w.peer(&token, READER), &token, REPORT, MTIME, 0);

    // Same workdir, same session id even, fresh random key: only the key differs.
    let fresh = World::builder(PEER_YAML)
        .containment(Containment::Sealed)
        .memory(w.fs.clone())
        .manual_clock(w.clock.clone())
        .session(SESSION)
        .keys(Arc::new(OsRandomKeyStore::generate()))
        .build();
    let resp = fresh.peer(&token, READER);
    assert_token_refusal(
        &resp,
        &token,
        403,
        "handle_not_valid",
        "fresh key, same session id",
    );

    // The default launch: fresh key and fresh session id.
    let relaunched = World::builder(PEER_YAML)
        .memory(w.fs.clone())
        .manual_clock(w.clock.clone())
        .fresh_key()
        .build();
    assert_ne!(relaunched.session_id(), SESSION);
    let resp = relaunched.peer(&token, READER);
    assert_token_refusal(&resp, &token, 403, "handle_not_valid", "default relaunch");

    // The first session is still alive and still honours its handle.
    assert_served(&w.peer(&token, READER), &token, REPORT, MTIME, 0);
}

// ------------------------------------------------------------------------------------------------
// Worlds
// ------------------------------------------------------------------------------------------------

/// One capsule (session [`SESSION`], key [`KEY`], clock at [`NOW`]) over a memory workdir
/// holding `out/report.md` and a `secret` beside it, declaring `yaml`.
fn peer_world_with(yaml: &str, containment: Containment) -> World {
    World::builder(yaml)
        .containment(containment)
        .session(SESSION)
        .file("out/report.md", REPORT, MTIME)
        .file("secret", SECRET, MTIME)
        .build()
}

/// [`peer_world_with`] the peer plane of [`PEER_YAML`], sealed.
fn peer_world() -> World {
    peer_world_with(PEER_YAML, Containment::Sealed)
}

/// A handle the capsule accepts: right key, right session, right audience, not expired.
fn valid(p: &str) -> String {
    forge(KEY, SESSION, p, NOW + 60_000, AUDIENCE)
}

/// `json` followed by spaces (still valid JSON) until its length is `r` modulo 3.
fn json_len_mod3(json: &str, r: usize) -> String {
    let mut out = json.to_owned();
    while out.len() % 3 != r {
        out.push(' ');
    }
    out
}

/// `b64` extended with `A`s to a length of 1 mod 4, which no base64 string can have.
fn bad_length(b64: &str) -> String {
    let mut out = b64.to_owned();
    out.push('A');
    while out.len() % 4 != 1 {
        out.push('A');
    }
    out
}

/// The base64url alphabet index of `c`.
fn b64_index(c: u8) -> u8 {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    ALPHABET
        .iter()
        .position(|a| *a == c)
        .expect("base64url char") as u8
}

/// `b64` with its last character's unused low bits set: same decoded bytes for a lenient
/// decoder, refused by a strict one.
fn non_canonical(b64: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = *b64.as_bytes().last().expect("non-empty");
    let idx = b64_index(last);
    assert_eq!(idx & 0b11, 0, "canonical encodings have zero trailing bits");
    let mut out = b64[..b64.len() - 1].to_owned();
    out.push(ALPHABET[usize::from(idx | 1)] as char);
    out
}

// ------------------------------------------------------------------------------------------------
// Checks: refusals and served handles
// ------------------------------------------------------------------------------------------------

/// Status, code, a fixed two-key JSON body, and the refusal headers.
#[track_caller]
fn assert_refusal(resp: &Response<PlaneBody>, status: u16, code: &str, ctx: &str) {
    assert_eq!(
        resp.status().as_u16(),
        status,
        "{ctx}: status (body {})",
        body_text(resp)
    );
    let body: Value = serde_json::from_slice(&resp.body().bytes())
        .unwrap_or_else(|e| panic!("{ctx}: refusal body is JSON: {e}"));
    assert_eq!(body["error"], code, "{ctx}: error code in {body}");
    let obj = body.as_object().expect("refusal body is an object");
    assert_eq!(
        obj.keys().collect::<Vec<_>>(),
        ["error", "message"],
        "{ctx}: body keys"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{ctx}: message is non-empty text"
    );
    assert_eq!(
        header(resp, "content-type"),
        Some("application/json"),
        "{ctx}"
    );
    assert_eq!(header(resp, "connection"), Some("close"), "{ctx}");
    assert!(
        header(resp, "x-murmur-generation").is_some(),
        "{ctx}: every peer-route response carries x-murmur-generation"
    );
    assert!(
        header(resp, "x-murmur-export-root").is_none(),
        "{ctx}: the peer plane never discloses a root"
    );
    assert!(
        header(resp, "etag").is_none(),
        "{ctx}: a refusal has no etag"
    );
}

/// A refusal for a request that carried `token`: its handle id names the token sent.
#[track_caller]
fn assert_token_refusal(
    resp: &Response<PlaneBody>,
    token: &str,
    status: u16,
    code: &str,
    ctx: &str,
) {
    assert_refusal(resp, status, code, ctx);
    assert_eq!(
        header(resp, "x-murmur-handle-id"),
        Some(handle_id(token).as_str()),
        "{ctx}: x-murmur-handle-id names the token sent"
    );
}

/// A 200 serving exactly `bytes` with the validator headers and nothing else.
#[track_caller]
fn assert_served(
    resp: &Response<PlaneBody>,
    token: &str,
    bytes: &[u8],
    mtime: i64,
    generation: u64,
) {
    assert_eq!(
        resp.status(),
        200,
        "redeem must succeed: {}",
        body_text(resp)
    );
    assert_eq!(&resp.body().bytes()[..], bytes, "body is the file's bytes");
    let mut names = header_names(resp);
    if let Some(len) = header(resp, "content-length") {
        assert_eq!(len, bytes.len().to_string(), "content-length");
        names.remove("content-length");
    }
    assert_eq!(
        names,
        OK_HEADERS.iter().map(|s| (*s).to_owned()).collect(),
        "exact success header set (never x-murmur-export-root)"
    );
    assert_eq!(
        header(resp, "content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(
        header(resp, "etag"),
        Some(format!("\"sha256:{}\"", sha256_hex(bytes)).as_str())
    );
    assert_eq!(
        header(resp, "x-murmur-mtime-ms"),
        Some(mtime.to_string().as_str())
    );
    assert_eq!(
        header(resp, "x-murmur-generation"),
        Some(generation.to_string().as_str())
    );
    assert_eq!(header(resp, "x-murmur-containment"), Some("sealed"));
    assert_eq!(
        header(resp, "x-murmur-handle-id"),
        Some(handle_id(token).as_str())
    );
    assert_eq!(header(resp, "connection"), Some("close"));
}

/// A `peer_handle_redeem` line of [`SESSION`] saying exactly what `want` says.
#[track_caller]
fn assert_line(line: &Value, want: &Line<'_>, ctx: &str) {
    assert_redeem_line(line, want, SESSION, ctx);
}
