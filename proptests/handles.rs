#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Property tests: the MAC is the oracle-free gate of a redeem (D-7.2, D-7.3).
//!
//! A valid token is minted by an [`HmacPeerPlane`] built directly over a [`FixedKeyStore`], a
//! counting wrapper around [`ManualClock`] and a counting wrapper around [`MemoryFilesystem`]
//! holding `out/report.md`. A generated mutation is then applied: a bit flip of any byte (kept
//! ASCII), a changed character in any segment, a truncation, an extension with base64url
//! characters (short or past 4 KiB), swapped payload and MAC segments, a payload re-signed with
//! another key, another token's MAC spliced on, another audience, a token minted by another
//! instance (same key, other session id), or the identity (also with the audience re-spelt in
//! case and surrounding whitespace, which normalises to the same audience).
//!
//! Properties:
//! * a mutated token is refused with `malformed_handle` or `handle_not_valid` only — never
//!   `handle_expired`, `not_found` or anything downstream of the MAC — and the identity serves
//!   the file (or `handle_expired` when the clock has been moved past `exp`, the trap that makes
//!   a leak past the MAC visible);
//! * for those refusals neither the filesystem (`open_root`) nor the clock (`now_ms`) is
//!   consulted, and the redeem names no path;
//! * through a launched capsule's router (same key, same session id) every `handle_not_valid`
//!   response is byte-identical to every other (status, headers but `x-murmur-handle-id`, body),
//!   `x-murmur-handle-id` names the token sent, the router's code equals the plane's, and the
//!   trace line's `path` is null.
//!
//! A second property (at the end of the file) does the same for handles minted for a keyed
//! audience (D-14): only a fresh proof by the bound key, addressed to the minter's origin, passes,
//! and every mutation of the token, the audience or the proof is refused without a filesystem
//! call (mockall `times(0)`).
//!
//! Case count: `RP_PROPTEST_CASES` (default 64).

mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use http::Method;
use proptest::prelude::*;
use resource_plane::backends::MemoryFilesystem;
use resource_plane::backends::{Clock, FixedKeyStore, ManualClock};
use resource_plane::budget::ByteBudget;
use resource_plane::path::RelPath;
use resource_plane::planes::handle::assemble;
use resource_plane::planes::{ExportScope, HmacPeerPlane, Origin, PeerPlane, RedeemRequest};
use resource_plane::scope::{Containment, RootPath};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::mocks::rootless_fs;
use support::response::{Shape, error_code, shape};
use support::tokens::{Signer, b64, segments, sign_b64 as sign};
use support::world::{CountingFs, KEY, NOW_MS, SESSION, URL as ORIGIN, World};

// ------------------------------------------------------------------------------------------------
// Configuration and fixed world parameters
// ------------------------------------------------------------------------------------------------

fn config() -> ProptestConfig {
    common::config(common::cases())
}

const OTHER_KEY: [u8; 32] = [0x17; 32];
const OTHER_SESSION: &str = "ses_fedcba9876543210fedcba9876543210";
const AUDIENCE: &str = "reporter@localhost:41234";
const TTL_SECS: u64 = 3600;
const FILE: &str = "report.md";
const CONTENT: &[u8] = b"# report\nthe bytes a valid handle serves\n";
const HANDLE_ID_HEADER: &str = "x-murmur-handle-id";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// ------------------------------------------------------------------------------------------------
// Counting backends
// ------------------------------------------------------------------------------------------------

/// The counting wrapper passes the filesystem conformance suite on every implementation.
#[test]
fn the_counting_filesystem_conforms() {
    support::fs_suite::run_all(support::fs_suite::Wrap {
        name: "support::world::CountingFs (prop_handles)",
        wrap: |fs| Arc::new(CountingFs::new(support::fs_suite::Shared(fs))),
    });
}

/// A [`ManualClock`] that counts how often it is read.
#[derive(Debug)]
struct CountingClock {
    inner: ManualClock,
    reads: AtomicUsize,
}

impl Clock for CountingClock {
    fn now_ms(&self) -> i64 {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.now_ms()
    }
}

/// The counting clock passes the clock conformance suite, driven by its inner clock.
#[test]
fn the_counting_clock_conforms() {
    let clock = CountingClock {
        inner: ManualClock::new(0),
        reads: AtomicUsize::new(0),
    };
    support::conformance::clock_follows_manual("prop_handles::CountingClock", &clock, &clock.inner);
    assert!(
        clock.reads.load(Ordering::SeqCst) > 1_000,
        "every read is counted"
    );
}

// ------------------------------------------------------------------------------------------------
// The world
// ------------------------------------------------------------------------------------------------

/// A capsule of [`SESSION`] and [`KEY`] over counted backends holding `out/report.md`, for the
/// wire checks; and the backends, whose counters the plane under test shares (its
/// [`World::minter`] runs on them).
fn launch() -> (World, Arc<CountingFs>, Arc<CountingClock>) {
    let fs = Arc::new(CountingFs::<MemoryFilesystem>::default());
    fs.inner.add_file(&format!("out/{FILE}"), CONTENT, NOW_MS);
    let clock = Arc::new(CountingClock {
        inner: ManualClock::new(NOW_MS),
        reads: AtomicUsize::new(0),
    });
    let world = World::builder("name: minter\nexports: { peer_files: { root: out/ } }")
        .filesystem(fs.clone())
        .clock(clock.clone())
        .session(SESSION)
        .build();
    (world, fs, clock)
}

/// `(open_root calls, clock reads)` so far.
fn counters(fs: &CountingFs, clock: &CountingClock) -> (usize, usize) {
    (fs.open_roots(), clock.reads.load(Ordering::SeqCst))
}

/// The export scope of the mocked planes.
fn scope() -> ExportScope {
    ExportScope {
        root: RootPath::parse("out/").expect("root"),
        max_bytes: 1 << 20,
        containment: Containment::Advisory,
    }
}

/// A handle for [`FILE`] bound to [`AUDIENCE`], minted by `plane`.
fn mint(plane: &HmacPeerPlane) -> String {
    let path = RelPath::parse_canonical(FILE).expect("path");
    plane.mint(&path, AUDIENCE, TTL_SECS).expect("mint").token
}

// ------------------------------------------------------------------------------------------------
// Mutations
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Mutation {
    Identity,
    /// The right audience in other letter case, with surrounding whitespace: normalises the same.
    RespellAudience {
        upper_mask: u64,
        left: &'static str,
        right: &'static str,
    },
    FlipBit {
        at: prop::sample::Index,
        bit: u8,
    },
    ChangeChar {
        segment: usize,
        at: prop::sample::Index,
        to: char,
    },
    Truncate {
        at: prop::sample::Index,
    },
    Extend {
        tail: String,
    },
    ExtendPastLimit {
        extra: usize,
    },
    SwapSegments,
    ResignWithOtherKey,
    SpliceOtherMac,
    OtherAudience {
        name: &'static str,
        host: &'static str,
        port: u16,
    },
    OtherInstance,
}

fn b64url_char() -> impl Strategy<Value = char> {
    prop::sample::select(B64URL.iter().map(|b| *b as char).collect::<Vec<_>>())
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => Just(Mutation::Identity),
        1 => (any::<u64>(), prop::sample::select(vec!["", " ", "\t", "  "]), prop::sample::select(vec!["", " ", "\t"]))
            .prop_map(|(upper_mask, left, right)| Mutation::RespellAudience { upper_mask, left, right }),
        4 => (any::<prop::sample::Index>(), 0u8..7).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        4 => (0usize..3, any::<prop::sample::Index>(), prop_oneof![
                4 => b64url_char(),
                1 => prop::sample::select(vec!['.', '=', '%', '+', '/', ' ', '~', '?', '\u{7f}']),
            ])
            .prop_map(|(segment, at, to)| Mutation::ChangeChar { segment, at, to }),
        2 => any::<prop::sample::Index>().prop_map(|at| Mutation::Truncate { at }),
        2 => prop::collection::vec(b64url_char(), 1..9)
            .prop_map(|v| Mutation::Extend { tail: v.into_iter().collect() }),
        1 => (0usize..64).prop_map(|extra| Mutation::ExtendPastLimit { extra }),
        1 => Just(Mutation::SwapSegments),
        2 => Just(Mutation::ResignWithOtherKey),
        1 => Just(Mutation::SpliceOtherMac),
        2 => (
                prop::sample::select(vec!["reporter", "reporter2", "writer", "", "reporter@x"]),
                prop::sample::select(vec!["localhost", "127.0.0.1", "localhost.", "evil"]),
                prop::sample::select(vec![41234u16, 41235, 80, 443]),
            )
            .prop_map(|(name, host, port)| Mutation::OtherAudience { name, host, port }),
        2 => Just(Mutation::OtherInstance),
    ]
}

/// What a mutation should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The unchanged handle: served (or expired, when the trap is armed).
    Valid,
    /// Anything else: `malformed_handle` or `handle_not_valid`, and nothing downstream.
    Refused,
}

/// Applies `m` to `token`, giving the token and audience to present.
fn apply(
    m: &Mutation,
    token: &str,
    plane: &HmacPeerPlane,
    other_instance: &HmacPeerPlane,
) -> (String, String, Expect) {
    let (payload, mac) = segments(token);
    let refused = |t: String| (t, AUDIENCE.to_owned(), Expect::Refused);
    match m {
        Mutation::Identity => (token.to_owned(), AUDIENCE.to_owned(), Expect::Valid),
        Mutation::RespellAudience {
            upper_mask,
            left,
            right,
        } => {
            let spelt: String = AUDIENCE
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if upper_mask >> (i % 64) & 1 == 1 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            (
                token.to_owned(),
                format!("{left}{spelt}{right}"),
                Expect::Valid,
            )
        }
        Mutation::FlipBit { at, bit } => {
            let mut bytes = token.as_bytes().to_vec();
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
            refused(String::from_utf8(bytes).expect("ASCII stays ASCII"))
        }
        Mutation::ChangeChar { segment, at, to } => {
            let mut parts: Vec<Vec<char>> = ["mh1", &payload, &mac]
                .iter()
                .map(|s| s.chars().collect())
                .collect();
            let seg = &mut parts[*segment];
            let i = at.index(seg.len());
            seg[i] = if seg[i] == *to {
                // Never the identity: take the next base64url character instead.
                let pos = B64URL.iter().position(|b| *b as char == *to).unwrap_or(0);
                B64URL[(pos + 1) % B64URL.len()] as char
            } else {
                *to
            };
            refused(
                parts
                    .iter()
                    .map(|p| p.iter().collect::<String>())
                    .collect::<Vec<_>>()
                    .join("."),
            )
        }
        Mutation::Truncate { at } => refused(token[..at.index(token.len())].to_owned()),
        Mutation::Extend { tail } => refused(format!("{token}{tail}")),
        Mutation::ExtendPastLimit { extra } => {
            let pad = 4097 + extra - token.len();
            refused(format!("{token}{}", "A".repeat(pad)))
        }
        Mutation::SwapSegments => refused(format!("mh1.{mac}.{payload}")),
        Mutation::ResignWithOtherKey => refused(sign(OTHER_KEY, &payload, AUDIENCE)),
        Mutation::SpliceOtherMac => {
            let (_, other_mac) = segments(&mint(plane));
            refused(format!("mh1.{payload}.{other_mac}"))
        }
        Mutation::OtherAudience { name, host, port } => {
            let mut audience = format!("{name}@{host}:{port}");
            if audience == AUDIENCE {
                audience.push('x');
            }
            (token.to_owned(), audience, Expect::Refused)
        }
        Mutation::OtherInstance => refused(mint(other_instance)),
    }
}

// ------------------------------------------------------------------------------------------------
// Wire helpers
// ------------------------------------------------------------------------------------------------

/// The `handle_not_valid` answer every forgery must match: a zero MAC on a real payload.
fn reference_not_valid(world: &World, plane: &HmacPeerPlane) -> Shape {
    let (payload, _) = segments(&mint(plane));
    let forged = assemble(&payload, &[0u8; 32]);
    let response = world.capsule.router().respond(
        &Method::GET,
        &format!("/resources/peer/{forged}"),
        &[AUDIENCE.as_bytes()],
    );
    assert_eq!(error_code(&response), "handle_not_valid");
    shape(&response)
}

// ------------------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn only_the_unchanged_handle_passes_the_mac(
        mutations in prop::collection::vec(mutation(), 1..5),
        trap in any::<bool>(),
    ) {
        let (world, fs, clock) = launch();
        // The plane under test (`SESSION`, `KEY`) and another instance (`OTHER_SESSION`).
        let (plane, other_instance) = (world.minter(SESSION), world.minter(OTHER_SESSION));
        let token = mint(&plane);
        let reference = reference_not_valid(&world, &plane);
        if trap {
            // Past `exp`: a token that got past the MAC would now answer `handle_expired`.
            clock.inner.set(NOW_MS + TTL_SECS as i64 * 1000 + 1);
        }
        for m in &mutations {
            let (presented, audience, expect) = apply(m, &token, &plane, &other_instance);
            let before = counters(&fs, &clock);
            let redeem = plane.redeem_blocking(RedeemRequest::new(&presented, &[audience.as_bytes()]));
            let after = counters(&fs, &clock);
            let code = match &redeem.result {
                Ok(_) => "ok",
                Err(refusal) => refusal.code.as_str(),
            };
            match expect {
                Expect::Valid => {
                    let want = if trap { "handle_expired" } else { "ok" };
                    prop_assert_eq!(code, want, "{:?}: the unchanged handle", m);
                    if let Ok(file) = &redeem.result {
                        prop_assert_eq!(&file.bytes[..], CONTENT);
                    }
                    prop_assert_eq!(redeem.path.as_deref(), Some(FILE));
                    // Positive control: the counters are wired.
                    prop_assert!(after.1 > before.1, "the clock was read for an accepted MAC");
                    prop_assert_eq!(after.0 > before.0, !trap, "open_root only when not expired");
                }
                Expect::Refused => {
                    prop_assert!(
                        code == "malformed_handle" || code == "handle_not_valid",
                        "{:?} answered {} for token {:?} (audience {:?})", m, code, presented, audience
                    );
                    prop_assert_eq!(after, before,
                        "{:?}: (open_root, now_ms) consulted for a {} token", m, code);
                    prop_assert_eq!(redeem.path, None, "{:?}: a refused redeem named a path", m);
                }
            }

            // The same request on the wire, through the capsule's router.
            if presented.is_empty() || presented.contains('?') {
                continue;
            }
            let opens = fs.open_roots();
            let response = world.capsule.router().respond(
                &Method::GET,
                &format!("/resources/peer/{presented}"),
                &[audience.as_bytes()],
            );
            let wire_code = if response.status() == 200 { "ok".to_owned() } else { error_code(&response) };
            prop_assert_eq!(wire_code.as_str(), code, "{:?}: router and plane disagree", m);
            let handle_id = resource_plane::hex::handle_id(&presented);
            prop_assert_eq!(
                response.headers().get(HANDLE_ID_HEADER).map(|v| v.as_bytes().to_vec()),
                Some(handle_id.clone().into_bytes()),
                "{:?}: x-murmur-handle-id names the token sent", m
            );
            let event = world.trace.events().pop().expect("one trace line per request");
            prop_assert_eq!(&event["handle_id"], &Value::String(handle_id));
            prop_assert_eq!(event["outcome"].as_str(), Some(code));
            if code == "handle_not_valid" {
                prop_assert_eq!(shape(&response), reference.clone(),
                    "{:?}: handle_not_valid differs on the wire", m);
                prop_assert_eq!(&event["path"], &Value::Null, "a forgery never names a path");
            }
            if expect == Expect::Refused {
                prop_assert_eq!(fs.open_roots(), opens,
                    "{:?}: the router opened the root for a {} token", m, code);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Sanity checks of the harness
// ------------------------------------------------------------------------------------------------

#[test]
fn resigning_with_the_same_key_reproduces_the_token() {
    let (world, _, _) = launch();
    let token = mint(&world.minter(SESSION));
    let (payload, _) = segments(&token);
    assert_eq!(
        sign(KEY, &payload, AUDIENCE),
        token,
        "the test's MAC construction matches the crate's, so the other-key case is meaningful"
    );
}

#[test]
fn the_other_instance_token_is_well_formed_and_valid_at_its_own_instance() {
    let (world, _, _) = launch();
    let (plane, other_instance) = (world.minter(SESSION), world.minter(OTHER_SESSION));
    let token = mint(&other_instance);
    let redeem = other_instance.redeem_blocking(RedeemRequest::new(&token, &[AUDIENCE.as_bytes()]));
    assert_eq!(
        redeem.result.map(|f| f.bytes.to_vec()).ok(),
        Some(CONTENT.to_vec())
    );
    let refused = plane.redeem_blocking(RedeemRequest::new(&token, &[AUDIENCE.as_bytes()]));
    assert_eq!(
        refused.result.map(|_| ()).unwrap_err().code.as_str(),
        "handle_not_valid"
    );
}

// ------------------------------------------------------------------------------------------------
// Proofs (D-14): a handle minted for a keyed audience passes only with a fresh proof by its key
// ------------------------------------------------------------------------------------------------
//
// A handle is MAC'd over `<AUDIENCE>#ed25519:<key>` for an Ed25519 key signed with *ring*
// directly, and presented with a proof built by the layout of peer-proof v2 (D-14.3, D-14.3.1),
// naming the world's origin. A generated mutation of the token, the audience or the proof is then
// applied, among them a proof signed for another origin (what a relay receives), the same with
// the minter's origin written over it, and a v1 header. Properties:
// * the unchanged handle with a fresh proof is served, and only once per nonce;
// * every mutation is refused `handle_not_valid` (or `malformed_handle` when the token no
//   longer parses) by a plane whose mocked filesystem expects `open_root` `times(0)`, naming
//   the path only when the MAC verified;
// * a proof signed for another origin is refused as addressed to another origin, before its
//   signature is checked;
// * through the router, each of those refusals is byte-identical to a plain forgery's.

const PEER_SEED: [u8; 32] = [0x5e; 32];
const OTHER_PEER_SEED: [u8; 32] = [0x6f; 32];

#[derive(Debug, Clone)]
enum ProofMutation {
    Identity,
    FlipTokenBit {
        at: prop::sample::Index,
        bit: u8,
    },
    OtherAudience,
    NoProof,
    KeyedAudienceWithoutProof,
    OtherKeysProof,
    BoundKeyOtherSignature,
    FlipSigBit {
        at: prop::sample::Index,
        bit: u8,
    },
    ChangeT {
        delta: i64,
    },
    ChangeN {
        at: usize,
        xor: u8,
    },
    Stale {
        by: i64,
    },
    Future {
        by: i64,
    },
    Replay,
    ChangeHeaderChar {
        at: prop::sample::Index,
        to: char,
    },
    TruncateHeader {
        at: prop::sample::Index,
    },
    TwoHeaders,
    /// A proof the fetcher signed for another origin (a relay's): as signed, or with the
    /// minter's origin written over it after signing.
    OtherOrigin {
        port: u16,
        rewritten: bool,
    },
    /// A peer-proof v1 header: no `o`, signed by the v1 layout.
    V1Header,
}

fn proof_mutation() -> impl Strategy<Value = ProofMutation> {
    prop_oneof![
        2 => Just(ProofMutation::Identity),
        2 => (any::<prop::sample::Index>(), 0u8..7)
            .prop_map(|(at, bit)| ProofMutation::FlipTokenBit { at, bit }),
        1 => Just(ProofMutation::OtherAudience),
        1 => Just(ProofMutation::NoProof),
        1 => Just(ProofMutation::KeyedAudienceWithoutProof),
        1 => Just(ProofMutation::OtherKeysProof),
        1 => Just(ProofMutation::BoundKeyOtherSignature),
        2 => (any::<prop::sample::Index>(), 0u8..8)
            .prop_map(|(at, bit)| ProofMutation::FlipSigBit { at, bit }),
        2 => prop_oneof![-120_000i64..=-1, 1i64..=120_000]
            .prop_map(|delta| ProofMutation::ChangeT { delta }),
        2 => (0usize..16, 1u8..=255).prop_map(|(at, xor)| ProofMutation::ChangeN { at, xor }),
        1 => (60_001i64..10_000_000).prop_map(|by| ProofMutation::Stale { by }),
        1 => (60_001i64..10_000_000).prop_map(|by| ProofMutation::Future { by }),
        2 => Just(ProofMutation::Replay),
        3 => (any::<prop::sample::Index>(), prop_oneof![
                4 => b64url_char(),
                1 => prop::sample::select(vec![';', '=', ' ', ',', '.', '+', '/', '\u{7f}']),
            ])
            .prop_map(|(at, to)| ProofMutation::ChangeHeaderChar { at, to }),
        1 => any::<prop::sample::Index>().prop_map(|at| ProofMutation::TruncateHeader { at }),
        1 => Just(ProofMutation::TwoHeaders),
        2 => (1u16.., any::<bool>())
            .prop_filter("another port than the minter's", |(port, _)| *port != 41234)
            .prop_map(|(port, rewritten)| ProofMutation::OtherOrigin { port, rewritten }),
        1 => Just(ProofMutation::V1Header),
    ]
}

/// What is presented: token, audience, proof headers; and whether the MAC should verify.
struct Presented {
    token: String,
    audience: String,
    proofs: Vec<String>,
    mac_ok: bool,
}

fn present(m: &ProofMutation, token: &str, t: i64, n: [u8; 16]) -> Presented {
    let (peer, other) = (Signer::new(PEER_SEED), Signer::new(OTHER_PEER_SEED));
    let (key, other_key) = (peer.key.clone(), other.key.clone());
    let id = resource_plane::hex::handle_id(token);
    let (t_text, n_text) = (t.to_string(), b64(n));
    let good = peer.header(&key, ORIGIN, &id, &t_text, &n_text);
    let sent = |proofs: Vec<String>, mac_ok| Presented {
        token: token.to_owned(),
        audience: AUDIENCE.to_owned(),
        proofs,
        mac_ok,
    };
    match m {
        ProofMutation::Identity | ProofMutation::Replay => sent(vec![good], true),
        ProofMutation::FlipTokenBit { at, bit } => {
            let mut bytes = token.as_bytes().to_vec();
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
            let token = String::from_utf8(bytes).expect("ASCII stays ASCII");
            let id = resource_plane::hex::handle_id(&token);
            let proof = peer.header(&key, ORIGIN, &id, &t_text, &n_text);
            Presented {
                token,
                audience: AUDIENCE.to_owned(),
                proofs: vec![proof],
                mac_ok: false,
            }
        }
        ProofMutation::OtherAudience => Presented {
            audience: "writer@localhost:41234".to_owned(),
            ..sent(vec![good], false)
        },
        ProofMutation::NoProof => sent(vec![], false),
        ProofMutation::KeyedAudienceWithoutProof => Presented {
            audience: format!("{AUDIENCE}#ed25519:{key}"),
            ..sent(vec![], false)
        },
        ProofMutation::OtherKeysProof => sent(
            vec![other.header(&other_key, ORIGIN, &id, &t_text, &n_text)],
            false,
        ),
        ProofMutation::BoundKeyOtherSignature => sent(
            vec![other.header(&key, ORIGIN, &id, &t_text, &n_text)],
            true,
        ),
        ProofMutation::FlipSigBit { at, bit } => {
            let (head, sig) = good.rsplit_once("sig=").expect("sig");
            let mut raw = {
                use base64::Engine as _;
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(sig)
                    .expect("sig")
            };
            let i = at.index(raw.len());
            raw[i] ^= 1 << bit;
            sent(vec![format!("{head}sig={}", b64(&raw))], true)
        }
        ProofMutation::ChangeT { delta } => {
            let (_, sig) = good.rsplit_once("sig=").expect("sig");
            let t = (t + delta).to_string();
            sent(
                vec![format!(
                    "ed25519;key={key};o={ORIGIN};t={t};n={n_text};sig={sig}"
                )],
                true,
            )
        }
        ProofMutation::ChangeN { at, xor } => {
            let (_, sig) = good.rsplit_once("sig=").expect("sig");
            let mut other = n;
            other[*at] ^= xor;
            let n = b64(other);
            sent(
                vec![format!(
                    "ed25519;key={key};o={ORIGIN};t={t_text};n={n};sig={sig}"
                )],
                true,
            )
        }
        ProofMutation::Stale { by } => sent(
            vec![peer.header(&key, ORIGIN, &id, &(t - by).to_string(), &n_text)],
            true,
        ),
        ProofMutation::Future { by } => sent(
            vec![peer.header(&key, ORIGIN, &id, &(t + by).to_string(), &n_text)],
            true,
        ),
        ProofMutation::ChangeHeaderChar { at, to } => {
            let mut chars: Vec<char> = good.chars().collect();
            let i = at.index(chars.len());
            chars[i] = if chars[i] == *to {
                let pos = B64URL.iter().position(|b| *b as char == *to).unwrap_or(0);
                B64URL[(pos + 1) % B64URL.len()] as char
            } else {
                *to
            };
            // A change up to the `;` that ends the key (the scheme, the key's name, the key, the
            // separator) leaves no key or another key: the MAC does not verify. After it, the
            // MAC does, and the proof fails.
            let key_end = "ed25519;key=".len() + key.len();
            let proof: String = chars.into_iter().collect();
            sent(vec![proof], i > key_end)
        }
        ProofMutation::TruncateHeader { at } => {
            let cut = at.index(good.len());
            // Cut inside the scheme or the key: no key to check the MAC over.
            let key_end = "ed25519;key=".len() + key.len();
            sent(vec![good[..cut].to_owned()], cut >= key_end)
        }
        ProofMutation::TwoHeaders => sent(vec![good.clone(), good], false),
        ProofMutation::OtherOrigin { port, rewritten } => {
            let relay = format!("http://127.0.0.1:{port}");
            let proof = peer.header(&key, &relay, &id, &t_text, &n_text);
            let proof = if *rewritten {
                proof.replace(&relay, ORIGIN)
            } else {
                proof
            };
            sent(vec![proof], true)
        }
        ProofMutation::V1Header => {
            let v1 = format!("murmur-peer-redeem-v1\x1f{id}\x1f{t_text}\x1f{n_text}");
            let sig = b64(peer.pair.sign(v1.as_bytes()).as_ref());
            sent(
                vec![format!("ed25519;key={key};t={t_text};n={n_text};sig={sig}")],
                true,
            )
        }
    }
}

/// A plane sharing the world's key and session over a filesystem that may be opened exactly
/// `opens` times (finding no root each time).
fn mocked_plane(clock: &Arc<CountingClock>, opens: usize) -> HmacPeerPlane {
    HmacPeerPlane::new(
        Arc::new(rootless_fs(opens)),
        clock.clone(),
        Arc::new(FixedKeyStore::new(KEY)),
        scope(),
        SESSION.to_owned(),
        ByteBudget::new(1 << 24),
        Origin::of_url(ORIGIN).unwrap(),
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn only_a_fresh_proof_by_the_bound_key_passes(
        mutations in prop::collection::vec(proof_mutation(), 1..5),
        nonce_seed in any::<u8>(),
    ) {
        let (world, _, clock) = launch();
        let world_plane = world.minter(SESSION);
        let keyed = Signer::new(PEER_SEED).keyed(AUDIENCE);
        let token = sign(KEY, &segments(&mint(&world_plane)).0, &keyed);
        let reference = reference_not_valid(&world, &world_plane);
        for (i, m) in mutations.iter().enumerate() {
            // A nonce per step, so only a `Replay` step repeats an accepted one.
            let n = [nonce_seed.wrapping_add(i as u8); 16];
            let presented = present(m, &token, NOW_MS, n);
            let audience = [presented.audience.as_bytes()];
            let proofs: Vec<&[u8]> = presented.proofs.iter().map(|p| p.as_bytes()).collect();
            let router = world.capsule.router();
            let send = || router.respond_with_proof(
                &Method::GET,
                &format!("/resources/peer/{}", presented.token),
                &audience,
                &proofs,
            );
            if matches!(m, ProofMutation::Identity) {
                let served = world_plane.redeem_blocking(RedeemRequest::new(&presented.token, &audience).with_proof(&proofs));
                prop_assert_eq!(served.result.map(|f| f.bytes.to_vec()).ok(), Some(CONTENT.to_vec()));
                prop_assert_eq!(served.audience_proof, Some("ed25519"));
                let response = send();
                prop_assert_eq!(response.status(), 200, "{:?}", m);
                continue;
            }
            if matches!(m, ProofMutation::Replay) {
                prop_assert_eq!(send().status(), 200, "the first use of the proof");
            }
            // The plane, over a filesystem that fails the test if it is opened (a replay's
            // plane once: for the first use of the proof, which finds no root).
            let replay = matches!(m, ProofMutation::Replay);
            let plane = mocked_plane(&clock, usize::from(replay));
            if replay {
                let first = plane.redeem_blocking(RedeemRequest::new(&presented.token, &audience).with_proof(&proofs));
                prop_assert_eq!(first.result.err().map(|e| e.code.as_str()), Some("not_found"));
            }
            let redeem = plane.redeem_blocking(RedeemRequest::new(&presented.token, &audience).with_proof(&proofs));
            let code = redeem.result.as_ref().err().map(|e| e.code.as_str());
            prop_assert!(
                code == Some("handle_not_valid") || code == Some("malformed_handle"),
                "{:?} answered {:?} (proofs {:?})", m, code, presented.proofs
            );
            if code == Some("handle_not_valid") {
                prop_assert_eq!(redeem.path.is_some(), presented.mac_ok,
                    "{:?}: path named iff the MAC verified", m);
                prop_assert_eq!(redeem.audience_proof.is_some(), presented.mac_ok, "{:?}", m);
            } else {
                prop_assert_eq!(redeem.path, None);
            }
            if replay {
                prop_assert!(
                    redeem.result.as_ref().err().is_some_and(|e| e.reason.contains("replayed")),
                    "a replay names the check"
                );
            }
            if let ProofMutation::OtherOrigin { rewritten, .. } = m {
                // The origin is checked before the signature: a proof naming another origin is
                // refused for that; one whose `o` was rewritten to the minter's fails its
                // signature.
                let reason = redeem.result.as_ref().err().map(|e| e.reason.as_str());
                let expected = if *rewritten {
                    "proof signature does not verify"
                } else {
                    "proof addressed to another origin"
                };
                prop_assert_eq!(reason, Some(expected), "{:?}", m);
            }
            drop(plane); // the mock's times(..) is checked here too

            // The router answers the same, byte for byte as a plain forgery.
            let response = send();
            let wire = error_code(&response);
            prop_assert_eq!(Some(wire.as_str()), code, "{:?}: router and plane disagree", m);
            if wire == "handle_not_valid" {
                prop_assert_eq!(shape(&response), reference.clone(), "{:?}: not byte-identical", m);
            }
            let event = world.trace.events().pop().expect("a line");
            prop_assert_eq!(event["path"].is_string(), presented.mac_ok && wire == "handle_not_valid", "{:?}", m);
        }
    }
}
