#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! The authenticated audience of D-14, in process:
//!
//! 1. redeem: a handle minted for a keyed audience (`<audience>#ed25519:<key>`) is served only
//!    with a fresh `x-murmur-proof` signed by that key; every mutation (token, audience, key,
//!    signature, `t`, `n`, replay, stale, future, malformed, repeated header) is the
//!    byte-identical `403 handle_not_valid` of D-7.3, its trace line naming the check that
//!    failed, and never reaches the filesystem (mocked with `times(0)`). A proof names the origin it was sent to (peer-proof v2, D-14.3.1): one naming another
//!    origin, the proof a hostile relay received, is refused the same way, its line saying
//!    `proof addressed to another origin`;
//! 2. the bounded replay memory refuses at its cap rather than forgetting, and no key holds more
//!    than an eighth of it while every other key's proofs still pass (D-14.4.1);
//! 3. mint: `share-file` against a card responder binds a keyed card's key, fails a malformed
//!    key extension `peer_unreachable`, treats a card naming only the v1 extension as keyless,
//!    and refuses keyless cards under `require_peer_proof`;
//! 4. interop: a keyless fetcher redeems what was minted for its keyless card; our keyed
//!    fetcher redeems from a minter that ignores the proof header; two capsules of this crate
//!    prove end to end; a fetcher told to fetch from a hostile relay signs a proof the relay
//!    cannot spend at the real minter.
//!
//! Handles and proofs are built by `tests/support/tokens.rs` from the spec's layouts (HMAC
//! through `FixedKeyStore`, Ed25519 through *ring* directly), not through the crate's codecs.

mod support;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::Method;
use resource_plane::Code;
use resource_plane::backends::{
    Clock, FixedIdentityKey, FixedKeyStore, ManualClock, MemoryFilesystem, SystemClock,
};
use resource_plane::budget::ByteBudget;
use resource_plane::planes::{ExportScope, HmacPeerPlane, Origin, RedeemOutcome, RedeemRequest};
use resource_plane::scope::{Containment, RootPath};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use support::doubles::{CardServer, RecordingPeer};
use support::mocks::{clock_read, rootless_fs};
use support::response::shape;
use support::sha256_hex;
use support::tokens::{PEER_PROOF_V2, Signer, forge, handle_id};
use support::world::{KEY, NOW_MS as NOW, SESSION, URL as ORIGIN, World, bind};

// ------------------------------------------------------------------------------------------------
// Fixtures
// ------------------------------------------------------------------------------------------------

const AUDIENCE: &str = "reader@127.0.0.1:9000";
const MTIME: i64 = 1_787_577_000_123;
const REPORT: &[u8] = b"# report\nproved, then served\n";
const SEED: [u8; 32] = [0x11; 32];
const OTHER_SEED: [u8; 32] = [0x22; 32];
/// The trace reason of a proof whose `o` is not the minter's origin (D-14.3.1).
const OTHER_ORIGIN: &str = "proof addressed to another origin";
const MINTER_YAML: &str = "name: minter\nexports:\n  peer_files: { root: out/, max_ttl: 1h }\n";

// ------------------------------------------------------------------------------------------------
// 1. Redeem
// ------------------------------------------------------------------------------------------------

#[test]
fn a_fresh_proof_by_the_bound_key_redeems_and_is_traced_ed25519() {
    let w = redeem_world();
    let token = keyed_token();
    let proof = signer().proof(ORIGIN, &token, NOW, nonce(1));
    let response = w.peer_proved(&token, &[AUDIENCE], &[&proof]);
    assert_eq!(response.status(), 200);
    assert_eq!(&response.body().bytes()[..], REPORT);
    let line = w.last_of("peer_handle_redeem");
    assert_eq!(line["outcome"], "ok");
    assert_eq!(line["path"], "report.md");
    assert_eq!(line["audience_asserted"], AUDIENCE, "the plain audience");
    assert_eq!(line["audience_proof"], "ed25519");
    let keys: Vec<&str> = support::trace::keys(&line);
    assert_eq!(
        keys[keys.len() - 2..],
        ["reason", "audience_proof"],
        "audience_proof follows the event's own fields"
    );
    // Either edge of the freshness window passes, with fresh nonces.
    for (i, t) in [(2, NOW - 60_000), (3, NOW + 60_000)] {
        let proof = signer().proof(ORIGIN, &token, t, nonce(i));
        assert_eq!(
            w.peer_proved(&token, &[AUDIENCE], &[&proof]).status(),
            200,
            "t = {t}"
        );
    }
    // The audience is matched as any audience is: trimmed and lowercased.
    let proof = signer().proof(ORIGIN, &token, NOW, nonce(4));
    let respelt = w.peer_proved(&token, &[" READER@127.0.0.1:9000 "], &[&proof]);
    assert_eq!(respelt.status(), 200);
}

#[test]
fn a_plain_handle_redeems_without_a_proof_as_before_and_is_traced_none() {
    let w = redeem_world();
    let token = token_for(AUDIENCE, "report.md", NOW + 600_000);
    let response = w.peer_proved(&token, &[AUDIENCE], &[]);
    assert_eq!(response.status(), 200);
    let line = w.last_of("peer_handle_redeem");
    assert_eq!(line["audience_proof"], "none");
    assert_eq!(line["path"], "report.md");
    // The same handle with a proof: the MAC is then over a keyed audience, which it was not
    // minted for.
    let proof = signer().proof(ORIGIN, &token, NOW, nonce(1));
    assert_eq!(w.peer_proved(&token, &[AUDIENCE], &[&proof]).status(), 403);
    assert_eq!(
        w.last_of("peer_handle_redeem")["audience_proof"],
        Value::Null
    );
}

/// One refused redeem: what is sent, and what the trace must say.
struct Case {
    label: &'static str,
    token: String,
    audience: String,
    proofs: Vec<String>,
    /// Whether the MAC verifies (then the line names the path and `audience_proof`).
    mac_ok: bool,
    /// A word the trace's reason must hold.
    reason: &'static str,
}

fn refused_cases() -> Vec<Case> {
    let s = &signer();
    let token = keyed_token();
    let id = handle_id(&token);
    let other = Signer::new(OTHER_SEED);
    let good = s.proof(ORIGIN, &token, NOW, nonce(9));
    let (t, n) = (NOW.to_string(), URL_SAFE_NO_PAD.encode(nonce(9)));
    let sig = s.sig(ORIGIN, &id, &t, &n);
    let mut flipped_sig = URL_SAFE_NO_PAD.decode(&sig).unwrap();
    flipped_sig[10] ^= 0x01;
    let flipped_sig = URL_SAFE_NO_PAD.encode(flipped_sig);
    let mut flipped_mac = token.clone().into_bytes();
    let last = flipped_mac.len() - 2;
    flipped_mac[last] = if flipped_mac[last] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let flipped_mac = String::from_utf8(flipped_mac).unwrap();
    let header = |key: &str, t: &str, n: &str, sig: &str| {
        format!("ed25519;key={key};o={ORIGIN};t={t};n={n};sig={sig}")
    };
    // The origin a hostile relay listens at: what a fetcher told to fetch from it signs.
    let relay = "http://127.0.0.1:41235";
    let relayed = s.header(&s.key, relay, &id, &t, &n);
    let case = |label, token: &str, audience: &str, proofs: Vec<String>, mac_ok, reason| Case {
        label,
        token: token.to_owned(),
        audience: audience.to_owned(),
        proofs,
        mac_ok,
        reason,
    };
    vec![
        case(
            "token: a MAC character changed",
            &flipped_mac,
            AUDIENCE,
            vec![s.proof(ORIGIN, &flipped_mac, NOW, nonce(1))],
            false,
            "MAC",
        ),
        case(
            "audience: another capsule's, with a good proof",
            &token,
            "mallory@127.0.0.1:9000",
            vec![good.clone()],
            false,
            "MAC",
        ),
        case(
            "key: another key's good proof",
            &token,
            AUDIENCE,
            vec![other.proof(ORIGIN, &token, NOW, nonce(1))],
            false,
            "MAC",
        ),
        case(
            "key: the bound key named, another key's signature",
            &token,
            AUDIENCE,
            vec![header(&s.key, &t, &n, &other.sig(ORIGIN, &id, &t, &n))],
            true,
            "signature",
        ),
        case(
            "sig: one bit flipped",
            &token,
            AUDIENCE,
            vec![header(&s.key, &t, &n, &flipped_sig)],
            true,
            "signature",
        ),
        case(
            "sig: signed for another handle",
            &token,
            AUDIENCE,
            vec![header(
                &s.key,
                &t,
                &n,
                &s.sig(ORIGIN, "0000000000000000", &t, &n),
            )],
            true,
            "signature",
        ),
        case(
            "o: another origin, the proof a relay received",
            &token,
            AUDIENCE,
            vec![relayed.clone()],
            true,
            "proof addressed to another origin",
        ),
        case(
            "o: another origin, and a signature by another key (the origin is checked first)",
            &token,
            AUDIENCE,
            vec![other.header(&s.key, relay, &id, &t, &n)],
            true,
            "proof addressed to another origin",
        ),
        case(
            "o: the minter's origin written over a signature for the relay's",
            &token,
            AUDIENCE,
            vec![relayed.replace(relay, ORIGIN)],
            true,
            "signature",
        ),
        case(
            "o: the same host on another port",
            &token,
            AUDIENCE,
            vec![s.header(&s.key, "http://127.0.0.1:41236", &id, &t, &n)],
            true,
            "proof addressed to another origin",
        ),
        case(
            "o: https for the minter's http",
            &token,
            AUDIENCE,
            vec![s.header(&s.key, "https://127.0.0.1:41234", &id, &t, &n)],
            true,
            "proof addressed to another origin",
        ),
        case(
            "o: absent, a peer-proof v1 header signed by the v1 layout",
            &token,
            AUDIENCE,
            vec![{
                let v1 = format!("murmur-peer-redeem-v1\x1f{id}\x1f{t}\x1f{n}");
                let v1_sig = URL_SAFE_NO_PAD.encode(s.pair.sign(v1.as_bytes()).as_ref());
                format!("ed25519;key={};t={t};n={n};sig={v1_sig}", s.key)
            }],
            true,
            "malformed",
        ),
        case(
            "o: without its port",
            &token,
            AUDIENCE,
            vec![s.header(&s.key, "http://127.0.0.1", &id, &t, &n)],
            true,
            "malformed",
        ),
        case(
            "o: in capitals",
            &token,
            AUDIENCE,
            vec![s.header(&s.key, "HTTP://127.0.0.1:41234", &id, &t, &n)],
            true,
            "malformed",
        ),
        case(
            "t: changed after signing",
            &token,
            AUDIENCE,
            vec![header(&s.key, &(NOW + 1).to_string(), &n, &sig)],
            true,
            "signature",
        ),
        case(
            "n: changed after signing",
            &token,
            AUDIENCE,
            vec![header(&s.key, &t, &URL_SAFE_NO_PAD.encode(nonce(8)), &sig)],
            true,
            "signature",
        ),
        case(
            "stale: t 60.001 s behind",
            &token,
            AUDIENCE,
            vec![s.proof(ORIGIN, &token, NOW - 60_001, nonce(2))],
            true,
            "fresh",
        ),
        case(
            "future: t 60.001 s ahead",
            &token,
            AUDIENCE,
            vec![s.proof(ORIGIN, &token, NOW + 60_001, nonce(3))],
            true,
            "fresh",
        ),
        case(
            "stale: t = 0",
            &token,
            AUDIENCE,
            vec![s.proof(ORIGIN, &token, 0, nonce(4))],
            true,
            "fresh",
        ),
        case(
            "no proof: the right audience without the key",
            &token,
            AUDIENCE,
            vec![],
            false,
            "MAC",
        ),
        case(
            "no proof: the keyed audience asserted as a plain one",
            &token,
            &s.keyed(AUDIENCE),
            vec![],
            false,
            "MAC",
        ),
        case(
            "malformed after the key: t with a leading zero",
            &token,
            AUDIENCE,
            vec![header(&s.key, &format!("0{t}"), &n, &sig)],
            true,
            "malformed",
        ),
        case(
            "malformed after the key: a sixth parameter",
            &token,
            AUDIENCE,
            vec![format!("{good};x=1")],
            true,
            "malformed",
        ),
        case(
            "malformed before the key: another scheme",
            &token,
            AUDIENCE,
            vec![good.replacen("ed25519", "rsa", 1)],
            false,
            "malformed",
        ),
        case(
            "malformed before the key: not base64url",
            &token,
            AUDIENCE,
            vec!["ed25519;key=!!".into()],
            false,
            "malformed",
        ),
        case(
            "malformed: empty",
            &token,
            AUDIENCE,
            vec![String::new()],
            false,
            "malformed",
        ),
        case(
            "two proof headers, both good",
            &token,
            AUDIENCE,
            vec![good.clone(), s.proof(ORIGIN, &token, NOW, nonce(5))],
            false,
            "more than once",
        ),
    ]
}

#[test]
fn every_proof_failure_is_the_same_403_and_its_line_names_the_check() {
    let w = redeem_world();
    // The reference: a real payload under an all-zero MAC, presented without a proof.
    let payload = keyed_token().split('.').nth(1).unwrap().to_owned();
    let forged = format!("mh1.{payload}.{}", URL_SAFE_NO_PAD.encode([0u8; 32]));
    let reference = shape(&w.peer_proved(&forged, &[AUDIENCE], &[]));
    assert_eq!(reference.status, 403, "the reference is a plain forgery");
    for case in refused_cases() {
        let proofs: Vec<&str> = case.proofs.iter().map(String::as_str).collect();
        let response = w.peer_proved(&case.token, &[&case.audience], &proofs);
        let label = case.label;
        assert_eq!(shape(&response), reference, "{label}: not byte-identical");
        assert_eq!(
            response.headers()["x-murmur-handle-id"],
            handle_id(&case.token).as_str(),
            "{label}"
        );
        let line = w.last_of("peer_handle_redeem");
        assert_eq!(line["outcome"], "handle_not_valid", "{label}");
        assert_eq!(line["bytes"], Value::Null, "{label}");
        let reason = line["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(case.reason), "{label}: reason {reason:?}");
        if case.reason == OTHER_ORIGIN {
            assert_eq!(
                reason, OTHER_ORIGIN,
                "{label}: the reason is exactly the check's"
            );
        }
        if case.mac_ok {
            assert_eq!(line["path"], "report.md", "{label}: the MAC verified");
            assert_eq!(line["audience_proof"], "ed25519", "{label}");
        } else {
            assert_eq!(
                line["path"],
                Value::Null,
                "{label}: a forgery names no path"
            );
            assert_eq!(line["audience_proof"], Value::Null, "{label}");
        }
    }
    // None of them spent the good proof's nonce: it still redeems once, then is a replay.
    let token = keyed_token();
    let good = signer().proof(ORIGIN, &token, NOW, nonce(9));
    assert_eq!(w.peer_proved(&token, &[AUDIENCE], &[&good]).status(), 200);
    let replay = w.peer_proved(&token, &[AUDIENCE], &[&good]);
    assert_eq!(shape(&replay), reference, "replay: not byte-identical");
    let line = w.last_of("peer_handle_redeem");
    assert_eq!(
        line["reason"], "proof replayed: its nonce was accepted for this handle within 120 s",
        "the window is twice the 60 s freshness"
    );
    assert_eq!(line["path"], "report.md");
    assert_eq!(line["audience_proof"], "ed25519");
    // A replay is refused while a copy could be fresh, whatever the clock does meanwhile.
    w.clock.advance(59_000);
    assert_eq!(w.peer_proved(&token, &[AUDIENCE], &[&good]).status(), 403);
    w.clock.advance(-120_000);
    assert_eq!(w.peer_proved(&token, &[AUDIENCE], &[&good]).status(), 403);
}

#[test]
fn the_proof_is_checked_before_the_expiry() {
    let w = redeem_world();
    let expired = token_for(&signer().keyed(AUDIENCE), "report.md", NOW - 1);
    let fresh = signer().proof(ORIGIN, &expired, NOW, nonce(1));
    let response = w.peer_proved(&expired, &[AUDIENCE], &[&fresh]);
    assert_eq!(
        response.status(),
        410,
        "a good proof reaches the expiry check"
    );
    assert_eq!(w.last_of("peer_handle_redeem")["audience_proof"], "ed25519");
    let stale = signer().proof(ORIGIN, &expired, NOW - 61_000, nonce(2));
    assert_eq!(
        w.peer_proved(&expired, &[AUDIENCE], &[&stale]).status(),
        403,
        "a stale proof stops before the expiry check"
    );
}

#[test]
fn a_keyed_audience_asserted_as_a_plain_one_never_verifies() {
    // A MAC audience whose key has no capital letter is unchanged by lowercasing: asserted as a
    // plain audience, it would verify without the key's signature. It is refused, and the same
    // handle presented with a proof is judged by the proof.
    let w = redeem_world();
    let all_lowercase = format!("{AUDIENCE}#ed25519:{}", "a".repeat(43));
    let token = token_for(&all_lowercase, "report.md", NOW + 600_000);
    assert_eq!(w.peer_proved(&token, &[&all_lowercase], &[]).status(), 403);
    assert_eq!(
        w.last_of("peer_handle_redeem")["reason"],
        "MAC verification failed"
    );
    // The control: an audience that only resembles one (41 characters after the tag) verifies.
    let resembling = format!("{AUDIENCE}#ed25519:{}", "a".repeat(41));
    let token = token_for(&resembling, "report.md", NOW + 600_000);
    assert_eq!(w.peer_proved(&token, &[&resembling], &[]).status(), 200);
}

// ------------------------------------------------------------------------------------------------
// No filesystem, and no clock before the proof's freshness check (mocked backends)
// ------------------------------------------------------------------------------------------------

fn scope() -> ExportScope {
    ExportScope {
        root: RootPath::parse("out/").unwrap(),
        max_bytes: 1 << 20,
        containment: Containment::Sealed,
    }
}

/// A plane whose filesystem may be opened `opens` times (each finding no root) and whose
/// clock may be read `reads` times.
fn mocked_plane(opens: usize, reads: usize) -> HmacPeerPlane {
    HmacPeerPlane::new(
        Arc::new(rootless_fs(opens)),
        Arc::new(clock_read(reads, NOW)),
        Arc::new(FixedKeyStore::new(KEY)),
        scope(),
        SESSION.to_owned(),
        ByteBudget::new(1 << 20),
        Origin::of_url(ORIGIN).unwrap(),
    )
}

fn redeem(plane: &HmacPeerPlane, case: &Case) -> RedeemOutcome {
    let proofs: Vec<&[u8]> = case.proofs.iter().map(|p| p.as_bytes()).collect();
    plane.redeem_blocking(
        RedeemRequest::new(&case.token, &[case.audience.as_bytes()]).with_proof(&proofs),
    )
}

#[test]
fn refused_proofs_never_reach_the_filesystem() {
    for case in refused_cases() {
        // The clock is read only once the signature has verified (the freshness check).
        let clock_reads = usize::from(case.reason == "fresh");
        let plane = mocked_plane(0, clock_reads);
        let r = redeem(&plane, &case);
        let code = r.result.as_ref().err().map(|e| e.code);
        assert_eq!(code, Some(Code::HandleNotValid), "{}", case.label);
        assert_eq!(r.path.is_some(), case.mac_ok, "{}", case.label);
        drop(plane); // the mocks check their counts here
    }
    // A replay: the first redeem reaches the filesystem once; its copy does not.
    let token = keyed_token();
    let good = signer().proof(ORIGIN, &token, NOW, nonce(1));
    let replayed = Case {
        label: "replay",
        token,
        audience: AUDIENCE.into(),
        proofs: vec![good],
        mac_ok: true,
        reason: "replayed",
    };
    let plane = mocked_plane(1, 2);
    let first = redeem(&plane, &replayed);
    assert_eq!(
        first.result.err().map(|e| e.code),
        Some(Code::NotFound),
        "the control"
    );
    let again = redeem(&plane, &replayed);
    let refusal = again.result.expect_err("a replay");
    assert_eq!(refusal.code, Code::HandleNotValid);
    assert!(refusal.reason.contains("replayed"), "{}", refusal.reason);
    assert_eq!(again.audience_proof, Some("ed25519"));
}

/// A plane of [`SESSION`] over a memory workdir holding `out/report.md`, on `clock`, at
/// [`ORIGIN`], remembering at most `capacity` accepted proofs.
fn plane_remembering(clock: Arc<ManualClock>, capacity: usize) -> HmacPeerPlane {
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", REPORT, MTIME);
    HmacPeerPlane::new(
        fs,
        clock,
        Arc::new(FixedKeyStore::new(KEY)),
        scope(),
        SESSION.to_owned(),
        ByteBudget::new(1 << 20),
        Origin::of_url(ORIGIN).unwrap(),
    )
    .with_replay_capacity(capacity)
}

/// A redeem's refusal reason, or `ok`.
fn reason(r: RedeemOutcome) -> String {
    r.result
        .map(|_| String::from("ok"))
        .unwrap_or_else(|e| e.reason)
}

#[test]
fn a_full_replay_memory_refuses_new_proofs_and_still_remembers_old_ones() {
    let clock = Arc::new(ManualClock::new(NOW));
    // Two pairs in all, so one per key: three keys fill it.
    let plane = plane_remembering(clock.clone(), 2);
    let signers = [0x31, 0x32, 0x33].map(|b| Signer::new([b; 32]));
    let tokens = signers
        .each_ref()
        .map(|s| token_for(&s.keyed(AUDIENCE), "report.md", NOW + 3_600_000));
    let redeem = |k: usize, n: u8| {
        let proof = signers[k].proof(ORIGIN, &tokens[k], clock.now_ms(), nonce(n));
        plane.redeem_blocking(
            RedeemRequest::new(&tokens[k], &[AUDIENCE.as_bytes()]).with_proof(&[proof.as_bytes()]),
        )
    };
    assert_eq!(reason(redeem(0, 1)), "ok");
    assert_eq!(reason(redeem(1, 2)), "ok");
    assert_eq!(plane.remembered_proofs(), 2);
    assert_eq!(
        reason(redeem(2, 3)),
        "proof not remembered: the replay memory is full",
        "at the cap a new proof is refused"
    );
    let copy = signers[0].proof(ORIGIN, &tokens[0], NOW, nonce(1));
    let replay = plane.redeem_blocking(
        RedeemRequest::new(&tokens[0], &[AUDIENCE.as_bytes()]).with_proof(&[copy.as_bytes()]),
    );
    assert!(
        reason(replay).contains("replayed"),
        "nothing was forgotten to make room"
    );
    // Once the first pairs' window has passed, there is room again.
    clock.advance(120_001);
    assert_eq!(reason(redeem(2, 3)), "ok");
    assert_eq!(plane.remembered_proofs(), 1);
}

/// D-14.4.1 through a capsule's router: a key that holds its eighth of the replay memory has its
/// next proof refused with the byte-identical 403 (trace reason exactly `proof replay memory
/// full for this key`), while other keys' fresh proofs still redeem, and the memory never holds
/// more than its capacity. The plane remembers 64 proofs (8 per key) so the test signs few.
#[test]
fn one_key_over_its_share_is_refused_and_every_other_key_still_passes() {
    const CAPACITY: usize = 64;
    const SHARE: usize = CAPACITY / 8;
    let clock = Arc::new(ManualClock::new(NOW));
    let plane = Arc::new(plane_remembering(clock.clone(), CAPACITY));
    let trace = Arc::new(resource_plane::backends::RecordingTraceSink::new());
    let manifest = resource_plane::Manifest::from_yaml(MINTER_YAML)
        .unwrap()
        .manifest;
    let capsule = resource_plane::Capsule::builder(&manifest)
        .filesystem({
            let fs = MemoryFilesystem::new();
            fs.add_file("out/report.md", REPORT, MTIME);
            Arc::new(fs)
        })
        .clock(clock.clone())
        .trace(trace.clone())
        .advertised_url(ORIGIN)
        .session_id(SESSION)
        .peer_plane(plane.clone())
        .launch()
        .unwrap();
    let router = capsule.router();
    let greedy = Signer::new([0x41; 32]);
    let greedy_token = token_for(&greedy.keyed(AUDIENCE), "report.md", NOW + 3_600_000);
    let send = |signer: &Signer, token: &str, n: u16| {
        let mut nonce = [0u8; 16];
        nonce[..2].copy_from_slice(&n.to_le_bytes());
        let proof = signer.proof(ORIGIN, token, clock.now_ms(), nonce);
        router.respond_with_proof(
            &Method::GET,
            &format!("/resources/peer/{token}"),
            &[AUDIENCE.as_bytes()],
            &[proof.as_bytes()],
        )
    };
    let last_reason = || {
        trace
            .events()
            .into_iter()
            .rfind(|e| e["event_type"] == "peer_handle_redeem")
            .expect("a redeem line")["reason"]
            .clone()
    };
    let forged = format!(
        "mh1.{}.{}",
        greedy_token.split('.').nth(1).unwrap(),
        URL_SAFE_NO_PAD.encode([0u8; 32])
    );
    let reference = shape(&router.respond(
        &Method::GET,
        &format!("/resources/peer/{forged}"),
        &[AUDIENCE.as_bytes()],
    ));
    assert_eq!(reference.status, 403, "the reference is a plain forgery");

    for n in 0..SHARE as u16 {
        assert_eq!(send(&greedy, &greedy_token, n).status(), 200, "proof {n}");
    }
    assert_eq!(plane.remembered_proofs(), SHARE);
    // Its next proofs, fresh and well signed, are refused; the memory does not grow.
    for n in SHARE as u16..SHARE as u16 + 20 {
        let refused = send(&greedy, &greedy_token, n);
        assert_eq!(shape(&refused), reference, "proof {n}: not byte-identical");
        assert_eq!(last_reason(), "proof replay memory full for this key");
    }
    assert_eq!(
        plane.remembered_proofs(),
        SHARE,
        "refused proofs are not kept"
    );
    // Every other key's fresh proofs pass, up to its own share.
    for seed in 0x51..0x58u8 {
        let other = Signer::new([seed; 32]);
        let token = token_for(&other.keyed(AUDIENCE), "report.md", NOW + 3_600_000);
        for n in 0..SHARE as u16 {
            let served = send(&other, &token, n);
            assert_eq!(served.status(), 200, "key {seed:#x}, proof {n}");
            assert_eq!(&served.body().bytes()[..], REPORT);
        }
    }
    // Eight keys at their share fill the memory, and it holds no more than its capacity.
    assert_eq!(plane.remembered_proofs(), CAPACITY);
    let ninth = Signer::new([0x61; 32]);
    let token = token_for(&ninth.keyed(AUDIENCE), "report.md", NOW + 3_600_000);
    assert_eq!(shape(&send(&ninth, &token, 0)), reference);
    assert_eq!(
        last_reason(),
        "proof not remembered: the replay memory is full"
    );
    assert_eq!(plane.remembered_proofs(), CAPACITY);
    // Once the window has passed, the greedy key redeems again.
    clock.advance(120_001);
    assert_eq!(send(&greedy, &greedy_token, 1_000).status(), 200);
    assert_eq!(plane.remembered_proofs(), 1);
}

// ------------------------------------------------------------------------------------------------
// 3. Mint: share-file against a card responder
// ------------------------------------------------------------------------------------------------

/// A loopback HTTP responder answering every request with `200` and `body` (JSON); returns
/// its `host:port`.
async fn card_responder(body: String) -> String {
    CardServer::new(move |_| body.clone()).peer()
}

fn card(name: &str, url: &str, extensions: Option<Value>) -> String {
    let mut card = json!({"name": name, "url": url});
    if let Some(extensions) = extensions {
        card["capabilities"] = json!({"extensions": extensions});
    }
    card.to_string()
}

fn proof_extension(alg: &str, key: &str) -> Value {
    json!({"uri": PEER_PROOF_V2, "required": false,
           "params": {"alg": alg, "key": key}})
}

/// A minter of [`SESSION`] on the clock at [`NOW`], granted the network to loopback.
fn minter(require_peer_proof: bool) -> World {
    let yaml = format!(
        "name: minter\nexports:\n  peer_files: {{ root: out/, max_ttl: 1h, require_peer_proof: {require_peer_proof} }}\n\
         capabilities:\n  network: {{ allow: [\"127.0.0.1\"] }}\n"
    );
    World::builder(&yaml)
        .session(SESSION)
        .file("out/report.md", REPORT, MTIME)
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_card_binds_its_key_and_the_result_keeps_the_plain_audience() {
    let w = minter(false);
    let signer = Signer::new(SEED);
    let peer = card_responder(card(
        "Reader",
        "http://127.0.0.1:9000",
        Some(json!([{"uri": "urn:other"}, proof_extension("Ed25519", &signer.key)])),
    ))
    .await;
    let result = w
        .capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": peer}))
        .await
        .expect("minted");
    assert_eq!(
        result["audience"], AUDIENCE,
        "the result's audience is plain"
    );
    let lines = w.events_of("peer_handle_mint");
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(
        lines[0]["audience"], AUDIENCE,
        "the line's audience is plain"
    );
    assert_eq!(lines[0]["audience_proof"], "ed25519");
    let token = result["handle"].as_str().unwrap();
    assert!(
        is_bound_to(token, &signer.keyed(AUDIENCE)),
        "MAC'd over <audience>#ed25519:<key>"
    );
    assert!(!is_bound_to(token, AUDIENCE));
    let proof = signer.proof(ORIGIN, token, NOW, nonce(1));
    assert_eq!(w.peer_proved(token, &[AUDIENCE], &[&proof]).status(), 200);
    assert_eq!(
        w.peer_proved(token, &[AUDIENCE], &[]).status(),
        403,
        "no proof"
    );
    let other = Signer::new(OTHER_SEED).proof(ORIGIN, token, NOW, nonce(2));
    assert_eq!(
        w.peer_proved(token, &[AUDIENCE], &[&other]).status(),
        403,
        "another key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_key_extension_fails_the_mint_peer_unreachable() {
    let key = Signer::new(SEED).key;
    let good = proof_extension("Ed25519", &key);
    let cases = [
        ("two of them", json!([good.clone(), good.clone()])),
        (
            "alg in lower case",
            json!([proof_extension("ed25519", &key)]),
        ),
        ("another alg", json!([proof_extension("RS256", &key)])),
        (
            "a padded key",
            json!([proof_extension("Ed25519", &format!("{key}="))]),
        ),
        (
            "a short key",
            json!([proof_extension("Ed25519", &key[..42])]),
        ),
        (
            "a 33-byte key",
            json!([proof_extension(
                "Ed25519",
                &URL_SAFE_NO_PAD.encode([1u8; 33])
            )]),
        ),
        ("no params", json!([{"uri": PEER_PROOF_V2}])),
        (
            "a key that is not a string",
            json!([{"uri": PEER_PROOF_V2, "params": {"alg": "Ed25519", "key": 5}}]),
        ),
    ];
    for (label, extensions) in cases {
        let w = minter(false);
        let peer = card_responder(card("reader", "http://127.0.0.1:9000", Some(extensions))).await;
        let error = w
            .capsule
            .tools()
            .call("share-file", json!({"path": "report.md", "peer": peer}))
            .await
            .expect_err(label);
        assert_eq!(error.code, "peer_unreachable", "{label}");
        let lines = w.events_of("peer_handle_mint");
        assert_eq!(lines.len(), 1, "{label}");
        assert_eq!(lines[0]["outcome"], "peer_unreachable", "{label}");
        assert_eq!(
            lines[0]["audience"], AUDIENCE,
            "{label}: derived before the key"
        );
        assert_eq!(lines[0]["audience_proof"], Value::Null, "{label}");
        assert_eq!(lines[0]["handle_id"], Value::Null, "{label}");
        assert!(
            lines[0]["reason"].as_str().unwrap().contains("peer-proof"),
            "{label}: {}",
            lines[0]["reason"]
        );
    }
}

/// A card that publishes its key only under the v1 `uri` is keyless (D-14.3.1): its proofs
/// would not name where they are sent, so the minter binds the plain audience, and a minter that
/// requires proofs refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_naming_only_the_v1_extension_is_keyless() {
    let key = Signer::new(SEED).key;
    let v1 = json!([{"uri": "urn:resource-plane:peer-proof:v1", "required": false,
                     "params": {"alg": "Ed25519", "key": key}}]);
    let peer = card_responder(card("reader", "http://127.0.0.1:9000", Some(v1))).await;
    let w = minter(false);
    let shared = w
        .capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": peer}))
        .await
        .expect("minted as for a keyless card");
    let token = shared["handle"].as_str().unwrap();
    assert!(
        is_bound_to(token, AUDIENCE),
        "MAC'd over the plain audience"
    );
    assert!(!is_bound_to(token, &Signer::new(SEED).keyed(AUDIENCE)));
    assert_eq!(w.events_of("peer_handle_mint")[0]["audience_proof"], "none");

    let strict = minter(true);
    let error = strict
        .capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": peer}))
        .await
        .expect_err("a v1 card carries no key a strict minter accepts");
    assert_eq!(error.code, "peer_not_authenticated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_peer_proof_refuses_a_keyless_card_and_mints_for_a_keyed_one() {
    let w = minter(true);
    let keyless = card_responder(card("reader", "http://127.0.0.1:9000", None)).await;
    let error = w
        .capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": keyless}))
        .await
        .expect_err("keyless");
    assert_eq!(error.code, "peer_not_authenticated");
    assert!(!error.message.contains("mh1."));
    let line = &w.events_of("peer_handle_mint")[0];
    assert_eq!(line["outcome"], "peer_not_authenticated");
    assert_eq!(line["audience"], AUDIENCE);
    assert_eq!(line["audience_proof"], "none");
    assert_eq!(line["path"], "report.md");

    let keyed = card_responder(card(
        "reader",
        "http://127.0.0.1:9000",
        Some(json!([proof_extension("Ed25519", &Signer::new(SEED).key)])),
    ))
    .await;
    w.capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": keyed}))
        .await
        .expect("a keyed card is minted for");
    assert_eq!(
        w.events_of("peer_handle_mint")[1]["audience_proof"],
        "ed25519"
    );

    // Without the flag, a keyless card is minted for, as before.
    let w = minter(false);
    w.capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": keyless}))
        .await
        .expect("keyless without the flag");
    assert_eq!(w.events_of("peer_handle_mint")[0]["audience_proof"], "none");
}

// ------------------------------------------------------------------------------------------------
// 4. Interop and end to end, on real listeners
// ------------------------------------------------------------------------------------------------

/// A capsule on the system clock advertising `url`, over a memory workdir holding
/// `out/report.md` when `with_report`, of session `session` when given.
fn node(yaml: &str, url: &str, with_report: bool, session: Option<&str>) -> World {
    let mut builder = World::builder(yaml).url(url).clock(Arc::new(SystemClock));
    if with_report {
        builder = builder.file("out/report.md", REPORT, MTIME);
    }
    if let Some(session) = session {
        builder = builder.session(session);
    }
    builder.build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_capsules_prove_end_to_end() {
    let (minter_listener, minter_port) = bind().await;
    let minter_port = minter_port.port();
    let (fetcher_listener, fetcher_port) = bind().await;
    let fetcher_port = fetcher_port.port();
    let minter = node(
        "name: minter\nexports:\n  peer_files: { root: out/, require_peer_proof: true }\n\
         capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n",
        &format!("http://127.0.0.1:{minter_port}"),
        true,
        None,
    );
    let fetcher = node(
        &format!(
            "name: reader\ncapabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{minter_port}\"] }}\n"
        ),
        &format!("http://127.0.0.1:{fetcher_port}"),
        false,
        None,
    );
    let _minter_serving = minter.serve(minter_listener);
    let _fetcher_serving = fetcher.serve(fetcher_listener);

    // The fetcher's card publishes its key; the minter's (no peer_fetch) does not.
    let key = fetcher
        .capsule
        .identity_key()
        .expect("a peer_fetch capsule has a key");
    assert_eq!(minter.capsule.identity_key(), None);
    let card = fetcher
        .capsule
        .router()
        .respond(&Method::GET, "/.well-known/agent-card.json", &[]);
    let card: Value = serde_json::from_slice(&card.body().bytes()).unwrap();
    assert_eq!(
        card["capabilities"],
        json!({"extensions": [{"uri": PEER_PROOF_V2, "required": false,
                               "params": {"alg": "Ed25519", "key": key}}]})
    );

    let shared = minter
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": format!("127.0.0.1:{fetcher_port}")}),
        )
        .await
        .expect("minted for a keyed peer");
    assert_eq!(shared["audience"], fetcher.capsule.audience());
    let token = shared["handle"].as_str().unwrap();
    let fetched = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": format!("127.0.0.1:{minter_port}"), "handle": token}),
        )
        .await
        .expect("fetched with a proof");
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    assert_eq!(
        minter.events_of("peer_handle_mint")[0]["audience_proof"],
        "ed25519"
    );
    let redeem = &minter.events_of("peer_handle_redeem")[0];
    assert_eq!(redeem["outcome"], "ok");
    assert_eq!(redeem["audience_proof"], "ed25519");
    assert_eq!(redeem["audience_asserted"], fetcher.capsule.audience());
    assert_eq!(fetcher.events_of("peer_file_fetch")[0]["outcome"], "ok");

    // The intercepted handle, replayed with the right audience and no key, is refused.
    let stolen = minter.capsule.router().respond(
        &Method::GET,
        &format!("/resources/peer/{token}"),
        &[fetcher.capsule.audience().as_bytes()],
    );
    assert_eq!(stolen.status(), 403);

    // Once the fetcher's session has ended, its key signs nothing: the fetch fails closed.
    fetcher.capsule.end_session();
    let after = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": format!("127.0.0.1:{minter_port}"), "handle": token}),
        )
        .await
        .expect_err("no key, no proof");
    assert_eq!(after.code, "session_ended", "D-12.1");
    assert_eq!(
        minter.events_of("peer_handle_redeem").len(),
        2,
        "nothing more reached the minter"
    );
}

/// The relay of D-14.3.1, in process: a fetcher told to fetch from a hostile peer on its allow
/// list sends it the token, its audience and a proof; the relay replays all three to the real
/// minter and is refused with the byte-identical 403, the minter's line naming the origin check;
/// the fetcher's own fetch from the minter is served. Under peer-proof v1 the relayed proof
/// verified (it signed only the handle id, `t` and `n`) and the relay got the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_relayed_to_the_minter_is_refused_and_the_direct_fetch_is_served() {
    let (minter_listener, minter_addr) = bind().await;
    let minter_origin = format!("http://{minter_addr}");
    let relay = RecordingPeer::new(404, r#"{"error":"not_found","message":"no such file"}"#);
    let minter = node(
        "name: minter\nexports:\n  peer_files: { root: out/, require_peer_proof: true }\n\
         capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n",
        &minter_origin,
        true,
        None,
    );
    let (fetcher_listener, fetcher_addr) = bind().await;
    let fetcher = node(
        &format!(
            "name: reader\ncapabilities:\n  peer_fetch: {{ allow: [\"{minter_addr}\", \"{}\"] }}\n",
            relay.peer()
        ),
        &format!("http://{fetcher_addr}"),
        false,
        None,
    );
    let _minter_serving = minter.serve(minter_listener);
    let _fetcher_serving = fetcher.serve(fetcher_listener);
    let shared = minter
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": fetcher_addr.to_string()}),
        )
        .await
        .expect("minted for the keyed fetcher");
    let token = shared["handle"].as_str().unwrap().to_owned();

    // The fetcher, told to fetch from the relay, sends it everything a redeem carries.
    let lured = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": relay.peer(), "handle": token}),
        )
        .await
        .expect_err("the relay serves nothing");
    assert_eq!(lured.code, "not_found");
    let captured = relay.requests();
    assert_eq!(captured.len(), 1);
    let captured = &captured[0];
    assert_eq!(captured.target, format!("/resources/peer/{token}"));
    let audience = captured.values("x-murmur-audience");
    assert_eq!(audience, [fetcher.capsule.audience()]);
    let proof = captured.values("x-murmur-proof");
    assert_eq!(proof.len(), 1, "{captured:?}");
    assert!(
        proof[0].contains(&format!(";o=http://{};", relay.peer())),
        "the proof names the relay it was sent to: {}",
        proof[0]
    );

    // The relay replays token, audience and proof to the minter: refused like a forgery.
    let forged = format!(
        "mh1.{}.{}",
        token.split('.').nth(1).unwrap(),
        URL_SAFE_NO_PAD.encode([0u8; 32])
    );
    let reference = shape(&minter.capsule.router().respond(
        &Method::GET,
        &format!("/resources/peer/{forged}"),
        &[audience[0].as_bytes()],
    ));
    assert_eq!(reference.status, 403);
    let replayed = minter.capsule.router().respond_with_proof(
        &Method::GET,
        &captured.target,
        &[audience[0].as_bytes()],
        &[proof[0].as_bytes()],
    );
    assert_eq!(
        shape(&replayed),
        reference,
        "the relayed proof: not byte-identical"
    );
    let line = minter.last_of("peer_handle_redeem");
    assert_eq!(line["outcome"], "handle_not_valid");
    assert_eq!(line["reason"], OTHER_ORIGIN);
    assert_eq!(
        line["path"], "report.md",
        "the MAC verified: the key is the fetcher's"
    );
    assert_eq!(line["audience_proof"], "ed25519");
    assert_eq!(line["bytes"], Value::Null);

    // The fetcher's own fetch from the minter is served.
    let fetched = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": minter_addr.to_string(), "handle": token}),
        )
        .await
        .expect("the direct fetch is served");
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    let redeems: Vec<Value> = minter
        .events_of("peer_handle_redeem")
        .into_iter()
        .map(|l| l["outcome"].clone())
        .collect();
    assert_eq!(
        redeems,
        ["handle_not_valid", "handle_not_valid", "ok"],
        "the forged reference, the relayed proof, the direct fetch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_fetcher_redeems_a_handle_minted_for_its_keyless_card() {
    // A fetcher that does not know D-14: a card without the extension, no proof header.
    let w = minter(false);
    let keyless = card_responder(card("reader", "http://127.0.0.1:9000", None)).await;
    let shared = w
        .capsule
        .tools()
        .call("share-file", json!({"path": "report.md", "peer": keyless}))
        .await
        .expect("minted");
    let token = shared["handle"].as_str().unwrap();
    assert!(
        is_bound_to(token, AUDIENCE),
        "MAC'd over the plain audience"
    );
    let response = w.peer_proved(token, &[AUDIENCE], &[]);
    assert_eq!(response.status(), 200);
    assert_eq!(&response.body().bytes()[..], REPORT);
    assert_eq!(w.last_of("peer_handle_redeem")["audience_proof"], "none");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_keyed_fetcher_redeems_from_a_minter_that_ignores_the_proof() {
    // The minter knows no proofs: it minted over the plain audience (it read no key from the
    // card) and answers redeems through `Router::respond`, which never sees the proof header.
    let (listener, minter_port) = bind().await;
    let minter_port = minter_port.port();
    let minter = node(
        MINTER_YAML,
        &format!("http://127.0.0.1:{minter_port}"),
        true,
        Some(SESSION),
    );
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let router = minter.capsule.router();
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let router = router.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let router = router.clone();
                        let record = record.clone();
                        async move {
                            let headers = request.headers();
                            if let Some(proof) = headers.get("x-murmur-proof") {
                                record
                                    .lock()
                                    .unwrap()
                                    .push(proof.to_str().unwrap().to_owned());
                            }
                            let audience: Vec<Vec<u8>> = headers
                                .get_all("x-murmur-audience")
                                .iter()
                                .map(|v| v.as_bytes().to_vec())
                                .collect();
                            let audience: Vec<&[u8]> = audience.iter().map(Vec::as_slice).collect();
                            let path = request.uri().path().to_owned();
                            let response = router.respond(request.method(), &path, &audience);
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(false)
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    let fetcher = node(
        &format!(
            "name: reader\ncapabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{minter_port}\"] }}\n"
        ),
        "http://127.0.0.1:9000",
        false,
        None,
    );
    let token = token_for(AUDIENCE, "report.md", SystemClock.now_ms() + 600_000);
    let fetched = fetcher
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": format!("127.0.0.1:{minter_port}"), "handle": token}),
        )
        .await
        .expect("an old minter serves our keyed fetcher");
    assert_eq!(fetched["sha256"], sha256_hex(REPORT));
    assert_eq!(
        minter.events_of("peer_handle_redeem")[0]["audience_proof"],
        "none"
    );

    // The fetcher did send a proof: one header, for this handle, by the key its card publishes,
    // naming the origin it sent the redeem to, stamped within a few seconds of now.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let key = fetcher.capsule.identity_key().unwrap();
    let params: Vec<&str> = seen[0].split(';').collect();
    assert_eq!(params[0], "ed25519");
    assert_eq!(params[1], format!("key={key}"));
    let origin = format!("http://127.0.0.1:{minter_port}");
    assert_eq!(params[2], format!("o={origin}"));
    let t = params[3].strip_prefix("t=").unwrap();
    let n = params[4].strip_prefix("n=").unwrap();
    let sig = URL_SAFE_NO_PAD
        .decode(params[5].strip_prefix("sig=").unwrap())
        .unwrap();
    assert_eq!(params.len(), 6);
    assert!((SystemClock.now_ms() - t.parse::<i64>().unwrap()).abs() < 30_000);
    assert_eq!(URL_SAFE_NO_PAD.decode(n).unwrap().len(), 16);
    let message = format!(
        "murmur-peer-redeem-v2\x1f{origin}\x1f{}\x1f{t}\x1f{n}",
        handle_id(&token)
    );
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::ED25519,
        URL_SAFE_NO_PAD.decode(&key).unwrap(),
    )
    .verify(message.as_bytes(), &sig)
    .expect("the proof verifies with the published key");
}

#[test]
fn an_injected_identity_key_is_the_one_the_card_publishes() {
    let capsule = World::builder("name: reader\ncapabilities:\n  peer_fetch: { allow: [\"h\"] }\n")
        .url("http://127.0.0.1:9000")
        .identity(Arc::new(FixedIdentityKey::new(SEED)))
        .fresh_key()
        .build()
        .capsule;
    assert_eq!(capsule.identity_key(), Some(Signer::new(SEED).key));
    let card = capsule
        .router()
        .respond(&Method::GET, "/.well-known/agent-card.json", &[]);
    let card: Value = serde_json::from_slice(&card.body().bytes()).unwrap();
    assert_eq!(
        card["capabilities"]["extensions"][0]["params"]["key"],
        Signer::new(SEED).key
    );
    assert!(
        !format!("{capsule:?}").contains(&hex_of(&SEED)),
        "no secret in Debug"
    );
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ------------------------------------------------------------------------------------------------
// Worlds: a capsule on a manual clock and an in-memory workdir
// ------------------------------------------------------------------------------------------------

/// The redeem world: a minter of [`SESSION`] on the clock at [`NOW`], holding `out/report.md`
/// and a secret beside it.
fn redeem_world() -> World {
    World::builder(MINTER_YAML)
        .session(SESSION)
        .file("out/report.md", REPORT, MTIME)
        .file("secret", b"SENTINEL: outside the root\n", MTIME)
        .build()
}

/// The peer's key of every redeem world.
fn signer() -> Signer {
    Signer::new(SEED)
}

/// A live handle for `report.md` bound to the signer's key.
fn keyed_token() -> String {
    token_for(&signer().keyed(AUDIENCE), "report.md", NOW + 600_000)
}

/// A token of [`SESSION`] for `p` expiring at `exp`, MAC'd over `audience` by the spec's layout.
fn token_for(audience: &str, p: &str, exp: i64) -> String {
    forge(KEY, SESSION, p, exp, audience)
}

/// Whether `token`'s MAC is the one the spec's layout gives over `audience`.
fn is_bound_to(token: &str, audience: &str) -> bool {
    support::tokens::is_bound_to(KEY, token, audience)
}

/// A nonce that differs per call.
fn nonce(i: u8) -> [u8; 16] {
    [i; 16]
}
