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
//! Case count: `RP_PROPTEST_CASES` (default 64).

mod common;

use http::Method;
use proptest::prelude::*;
use resource_plane::backends::fs::{
    Containment, Filesystem, FsError, MemoryFilesystem, RootDir, RootPath,
};
use resource_plane::backends::{Clock, FixedKeyStore, KeyStore, ManualClock, RecordingTraceSink};
use resource_plane::budget::ByteBudget;
use resource_plane::http::body::PlaneBody;
use resource_plane::path::RelPath;
use resource_plane::planes::handle::{MAC_CONTEXT, MAC_SEPARATOR, assemble};
use resource_plane::planes::{ExportScope, HmacPeerPlane, PeerPlane};
use resource_plane::{Backends, Capsule, Manifest};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

// ------------------------------------------------------------------------------------------------
// Configuration and fixed world parameters
// ------------------------------------------------------------------------------------------------

fn config() -> ProptestConfig {
    common::config(common::cases())
}

const KEY: [u8; 32] = [0x42; 32];
const OTHER_KEY: [u8; 32] = [0x17; 32];
const SESSION: &str = "ses_0123456789abcdef0123456789abcdef";
const OTHER_SESSION: &str = "ses_fedcba9876543210fedcba9876543210";
const AUDIENCE: &str = "reporter@localhost:41234";
const NOW_MS: i64 = 1_787_577_327_015;
const TTL_SECS: u64 = 3600;
const FILE: &str = "report.md";
const CONTENT: &[u8] = b"# report\nthe bytes a valid handle serves\n";
const HANDLE_ID_HEADER: &str = "x-murmur-handle-id";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// ------------------------------------------------------------------------------------------------
// Counting backends
// ------------------------------------------------------------------------------------------------

/// A [`MemoryFilesystem`] that counts how often an export root is opened.
#[derive(Debug, Default)]
struct CountingFs {
    inner: MemoryFilesystem,
    open_roots: AtomicUsize,
}

impl Filesystem for CountingFs {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        self.open_roots.fetch_add(1, Ordering::SeqCst);
        self.inner.open_root(root, class)
    }

    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.inner.check_root(root)
    }

    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.inner.land(dir, name, bytes)
    }
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

// ------------------------------------------------------------------------------------------------
// The world
// ------------------------------------------------------------------------------------------------

struct World {
    fs: Arc<CountingFs>,
    clock: Arc<CountingClock>,
    /// The plane under test: `SESSION`, `KEY`.
    plane: HmacPeerPlane,
    /// Another instance: `OTHER_SESSION`, same `KEY`.
    other_instance: HmacPeerPlane,
    /// A capsule with the same key and session id, for the wire checks.
    capsule: Capsule,
    trace: Arc<RecordingTraceSink>,
}

fn scope() -> ExportScope {
    ExportScope {
        root: RootPath::parse("out/").expect("root"),
        max_bytes: 1 << 20,
        containment: Containment::Advisory,
    }
}

fn plane(fs: &Arc<CountingFs>, clock: &Arc<CountingClock>, session: &str) -> HmacPeerPlane {
    HmacPeerPlane::new(
        fs.clone(),
        clock.clone(),
        Arc::new(FixedKeyStore::new(KEY)),
        scope(),
        session.to_owned(),
        ByteBudget::new(1 << 24),
    )
}

impl World {
    fn new() -> Self {
        let fs = Arc::new(CountingFs::default());
        fs.inner.add_file(&format!("out/{FILE}"), CONTENT, NOW_MS);
        let clock = Arc::new(CountingClock {
            inner: ManualClock::new(NOW_MS),
            reads: AtomicUsize::new(0),
        });
        let manifest = Manifest::from_yaml("name: minter\nexports: { peer_files: { root: out/ } }")
            .expect("manifest")
            .manifest;
        let trace = Arc::new(RecordingTraceSink::new());
        let mut config = common::capsule_config();
        config.session_id = Some(SESSION.to_owned());
        let capsule = Capsule::launch(
            &manifest,
            config,
            Backends {
                fs: fs.clone(),
                clock: clock.clone(),
                keys: Some(Arc::new(FixedKeyStore::new(KEY))),
                trace: trace.clone(),
            },
        )
        .expect("launch");
        World {
            plane: plane(&fs, &clock, SESSION),
            other_instance: plane(&fs, &clock, OTHER_SESSION),
            fs,
            clock,
            capsule,
            trace,
        }
    }

    fn mint(&self, plane: &HmacPeerPlane) -> String {
        let path = RelPath::parse_canonical(FILE).expect("path");
        plane.mint(&path, AUDIENCE, TTL_SECS).expect("mint").token
    }

    fn counters(&self) -> (usize, usize) {
        (
            self.fs.open_roots.load(Ordering::SeqCst),
            self.clock.reads.load(Ordering::SeqCst),
        )
    }
}

/// `mh1.<payload>.<mac>` split into its three segments.
fn segments(token: &str) -> (String, String) {
    let mut parts = token.splitn(3, '.');
    let _ = parts.next();
    let payload = parts.next().expect("payload").to_owned();
    let mac = parts.next().expect("mac").to_owned();
    (payload, mac)
}

fn sign(key: [u8; 32], payload_b64: &str, audience: &str) -> String {
    let mac = FixedKeyStore::new(key)
        .sign(&[
            MAC_CONTEXT,
            MAC_SEPARATOR,
            payload_b64.as_bytes(),
            MAC_SEPARATOR,
            audience.as_bytes(),
        ])
        .expect("live key");
    assemble(payload_b64, &mac)
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
fn apply(m: &Mutation, token: &str, world: &World) -> (String, String, Expect) {
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
            let (_, other_mac) = segments(&world.mint(&world.plane));
            refused(format!("mh1.{payload}.{other_mac}"))
        }
        Mutation::OtherAudience { name, host, port } => {
            let mut audience = format!("{name}@{host}:{port}");
            if audience == AUDIENCE {
                audience.push('x');
            }
            (token.to_owned(), audience, Expect::Refused)
        }
        Mutation::OtherInstance => refused(world.mint(&world.other_instance)),
    }
}

// ------------------------------------------------------------------------------------------------
// Wire helpers
// ------------------------------------------------------------------------------------------------

/// Everything a response says but `x-murmur-handle-id` and `date`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WireShape {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

fn shape(response: &http::Response<PlaneBody>) -> WireShape {
    let mut headers: Vec<(String, Vec<u8>)> = response
        .headers()
        .iter()
        .filter(|(name, _)| name.as_str() != HANDLE_ID_HEADER && name.as_str() != "date")
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    headers.sort();
    WireShape {
        status: response.status().as_u16(),
        headers,
        body: response.body().bytes().to_vec(),
    }
}

fn error_code(response: &http::Response<PlaneBody>) -> String {
    let body: Value = serde_json::from_slice(&response.body().bytes()).unwrap_or(Value::Null);
    body["error"]
        .as_str()
        .unwrap_or("<no error field>")
        .to_owned()
}

/// The `handle_not_valid` answer every forgery must match: a zero MAC on a real payload.
fn reference_not_valid(world: &World) -> WireShape {
    let (payload, _) = segments(&world.mint(&world.plane));
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
        let world = World::new();
        let token = world.mint(&world.plane);
        let reference = reference_not_valid(&world);
        if trap {
            // Past `exp`: a token that got past the MAC would now answer `handle_expired`.
            world.clock.inner.set(NOW_MS + TTL_SECS as i64 * 1000 + 1);
        }
        for m in &mutations {
            let (presented, audience, expect) = apply(m, &token, &world);
            let before = world.counters();
            let redeem = world.plane.redeem(&presented, &[audience.as_bytes()]);
            let after = world.counters();
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
            let opens = world.fs.open_roots.load(Ordering::SeqCst);
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
                prop_assert_eq!(world.fs.open_roots.load(Ordering::SeqCst), opens,
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
    let world = World::new();
    let token = world.mint(&world.plane);
    let (payload, _) = segments(&token);
    assert_eq!(
        sign(KEY, &payload, AUDIENCE),
        token,
        "the test's MAC construction matches the crate's, so the other-key case is meaningful"
    );
}

#[test]
fn the_other_instance_token_is_well_formed_and_valid_at_its_own_instance() {
    let world = World::new();
    let token = world.mint(&world.other_instance);
    let redeem = world.other_instance.redeem(&token, &[AUDIENCE.as_bytes()]);
    assert_eq!(
        redeem.result.map(|f| f.bytes.to_vec()).ok(),
        Some(CONTENT.to_vec())
    );
    let refused = world.plane.redeem(&token, &[AUDIENCE.as_bytes()]);
    assert_eq!(
        refused.result.map(|_| ()).unwrap_err().code.as_str(),
        "handle_not_valid"
    );
}
