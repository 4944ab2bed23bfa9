#![allow(dead_code)] // each includer runs the suites of the traits it wraps

//! One conformance suite per backend trait other than the filesystem (whose suite is
//! `tests/support/fs_suite.rs`): the behaviour every implementation must show, the crate's own
//! and every test wrapper alike. `tests/backend_conformance.rs` runs each suite on the crate's
//! implementations; a test file that wraps a backend runs the suite on its wrapper, so a wrapper
//! that drops a method or answers differently from what it wraps fails here first.
//!
//! Each suite panics with a message naming the implementation and the broken rule.

use resource_plane::backends::{
    Clock, IdentityKey, KeyStore, ManualClock, PeerTransport, Random, TraceSink,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Lowercase hex of `bytes`, to look for key material in a `Debug` rendering.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `text` shows `bytes` in any of the usual renderings: lowercase or uppercase hex, or
/// `Debug` of the byte array.
fn shows(text: &str, bytes: &[u8]) -> bool {
    let lower = hex(bytes);
    text.contains(&lower)
        || text.contains(&lower.to_uppercase())
        || text.contains(&format!("{bytes:?}"))
}

// ------------------------------------------------------------------------------------------------
// Clock
// ------------------------------------------------------------------------------------------------

/// Every clock: a thousand consecutive readings never go backwards, the reading is shared by
/// every thread that reads it, and its `Debug` renders.
pub fn clock_reads_steadily(name: &str, clock: &dyn Clock) {
    let mut last = clock.now_ms();
    for i in 0..1_000 {
        let now = clock.now_ms();
        assert!(
            now >= last,
            "{name}: reading {i} went back from {last} to {now} with nothing moving the clock"
        );
        last = now;
    }
    assert!(
        !format!("{clock:?}").is_empty(),
        "{name}: Debug renders nothing"
    );
}

/// A clock that stands for the wall clock: within `slack_ms` of the host's reading, which is
/// taken on both sides of the clock's.
#[allow(clippy::disallowed_methods)] // the host's wall clock is the ground truth here
pub fn clock_tracks_real_time(name: &str, clock: &dyn Clock, slack_ms: i64) {
    let host = || {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch");
        i64::try_from(since.as_millis()).expect("fits")
    };
    let before = host();
    let read = clock.now_ms();
    let after = host();
    assert!(
        read >= before - slack_ms && read <= after + slack_ms,
        "{name}: reads {read}, the host read {before}..{after} (slack {slack_ms} ms)"
    );
    // 2020-01-01: a clock reading the epoch or a constant fails here too.
    assert!(
        read > 1_577_836_800_000,
        "{name}: reads {read}, before 2020"
    );
}

/// A clock driven by a [`ManualClock`] (the double itself, or a wrapper around one): it reads
/// exactly what `manual` is set to, through every `set` and `advance`, backwards jumps included,
/// and stands still between them.
pub fn clock_follows_manual(name: &str, clock: &dyn Clock, manual: &ManualClock) {
    manual.set(1_000);
    assert_eq!(clock.now_ms(), 1_000, "{name}: after set(1000)");
    assert_eq!(
        clock.now_ms(),
        1_000,
        "{name}: a second read moved the clock"
    );
    manual.advance(500);
    assert_eq!(clock.now_ms(), 1_500, "{name}: after advance(500)");
    manual.advance(-2_000);
    assert_eq!(clock.now_ms(), -500, "{name}: after advance(-2000)");
    manual.set(i64::MAX);
    assert_eq!(clock.now_ms(), i64::MAX, "{name}: after set(i64::MAX)");
    manual.set(1_787_577_327_015);
    assert_eq!(clock.now_ms(), 1_787_577_327_015, "{name}: after set back");
    // Another thread's move is seen at once.
    std::thread::scope(|s| {
        s.spawn(|| manual.advance(1));
    });
    assert_eq!(
        clock.now_ms(),
        1_787_577_327_016,
        "{name}: another thread's advance is not seen"
    );
    clock_reads_steadily(name, clock);
}

// ------------------------------------------------------------------------------------------------
// KeyStore
// ------------------------------------------------------------------------------------------------

/// Every key store `make` builds: HMAC tags that verify for the message they sign however it is
/// split, and for nothing else; no other tag (a bit flipped, cut short, extended, empty, another
/// store's) verifies; two stores from `make` hold different keys; signing is deterministic and
/// safe across threads; `Debug` shows neither a tag nor (when `key_bytes` knows them) the key;
/// `destroy` stops all signing and verifying, and is idempotent.
pub fn key_store_conforms(
    name: &str,
    make: &dyn Fn() -> Arc<dyn KeyStore>,
    key_bytes: Option<&[u8; 32]>,
) {
    let store = make();
    let tag = store.sign(&[b"a", b"b"]).unwrap_or_else(|| {
        panic!("{name}: a live key refuses to sign");
    });
    assert_eq!(
        store.sign(&[b"a", b"b"]),
        Some(tag),
        "{name}: signing is not deterministic"
    );
    // The tag covers the concatenation: how it is split does not matter.
    let splits: [&[&[u8]]; 3] = [&[b"ab"], &[b"", b"ab", b""], &[b"a", b"", b"b"]];
    for parts in splits {
        assert!(
            store.verify(parts, &tag),
            "{name}: {parts:?} does not verify"
        );
        assert_eq!(
            store.sign(parts),
            Some(tag),
            "{name}: {parts:?} signs differently"
        );
    }
    // Other messages.
    for other in [&b"abc"[..], b"a", b"", b"ba", b"AB", b"ab\0"] {
        assert!(
            !store.verify(&[other], &tag),
            "{name}: the tag of \"ab\" verifies {other:?}"
        );
        assert_ne!(
            store.sign(&[other]),
            Some(tag),
            "{name}: {other:?} signs like \"ab\""
        );
    }
    // Other tags.
    for bit in [0usize, 7, 128, 255] {
        let mut bad = tag;
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(
            !store.verify(&[b"ab"], &bad),
            "{name}: bit {bit} flipped verifies"
        );
    }
    assert!(
        !store.verify(&[b"ab"], &tag[..31]),
        "{name}: a short tag verifies"
    );
    assert!(
        !store.verify(&[b"ab"], &[]),
        "{name}: an empty tag verifies"
    );
    let mut long = tag.to_vec();
    long.push(0);
    assert!(
        !store.verify(&[b"ab"], &long),
        "{name}: an extended tag verifies"
    );
    assert!(
        !store.verify(&[b"ab"], &[0; 32]),
        "{name}: a zero tag verifies"
    );
    // Another store's key.
    let other = make();
    let other_tag = other.sign(&[b"ab"]).expect("the other store signs");
    assert_ne!(other_tag, tag, "{name}: two stores share a key");
    assert!(
        !store.verify(&[b"ab"], &other_tag),
        "{name}: another store's tag verifies"
    );
    assert!(
        !other.verify(&[b"ab"], &tag),
        "{name}: verifies a foreign tag"
    );
    // Threads see one key.
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| store.sign(&[b"ab"]))).collect();
        for h in handles {
            assert_eq!(
                h.join().expect("a signer"),
                Some(tag),
                "{name}: threads disagree"
            );
        }
    });
    // Debug redacts.
    let debug = format!("{store:?}");
    assert!(!shows(&debug, &tag), "{name}: Debug shows a tag: {debug}");
    if let Some(key) = key_bytes {
        assert!(!shows(&debug, key), "{name}: Debug shows the key: {debug}");
    }
    // Destroy.
    store.destroy();
    assert_eq!(store.sign(&[b"ab"]), None, "{name}: a destroyed key signs");
    assert!(
        !store.verify(&[b"ab"], &tag),
        "{name}: a destroyed key verifies its own tag"
    );
    store.destroy();
    assert_eq!(
        store.sign(&[b"ab"]),
        None,
        "{name}: a second destroy revived the key"
    );
    assert!(
        other.verify(&[b"ab"], &other_tag),
        "{name}: destroying one store destroyed another"
    );
}

/// A store built from known key bytes signs exactly HMAC-SHA256 under them.
pub fn key_store_is_hmac_sha256(name: &str, store: &dyn KeyStore, key: &[u8; 32]) {
    use hmac::{Hmac, KeyInit, Mac};
    for message in [&b""[..], b"x", b"mh1 payload", &[0xff; 200]] {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
        mac.update(message);
        let want: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(
            store.sign(&[message]),
            Some(want),
            "{name}: the tag of {} bytes is not HMAC-SHA256",
            message.len()
        );
    }
}

// ------------------------------------------------------------------------------------------------
// IdentityKey
// ------------------------------------------------------------------------------------------------

fn ed25519_verifies(public: &[u8], message: &[u8], signature: &[u8]) -> bool {
    use ring::signature::{ED25519, UnparsedPublicKey};
    UnparsedPublicKey::new(&ED25519, public)
        .verify(message, signature)
        .is_ok()
}

/// Every identity key `make` builds: its signatures verify under its published key with *ring*,
/// for the message signed and no other; a changed signature fails; signing is deterministic
/// (Ed25519) and safe across threads; two keys from `make` differ; `Debug` shows neither the
/// public key, a signature nor (when `seed` knows it) the seed; `destroy` stops signing,
/// keeps the public half readable, and is idempotent.
pub fn identity_key_conforms(
    name: &str,
    make: &dyn Fn() -> Arc<dyn IdentityKey>,
    seed: Option<&[u8; 32]>,
) {
    let key = make();
    let public = key.public_key();
    assert_ne!(public, [0; 32], "{name}: the public key is all zeros");
    for message in [&b"message"[..], b"", &[0x1f; 300]] {
        let sig = key
            .sign(message)
            .unwrap_or_else(|| panic!("{name}: a live key refuses to sign"));
        assert!(
            ed25519_verifies(&public, message, &sig),
            "{name}: a signature over {} bytes does not verify",
            message.len()
        );
        assert_eq!(key.sign(message), Some(sig), "{name}: not deterministic");
    }
    let sig = key.sign(b"message").expect("signs");
    assert!(
        !ed25519_verifies(&public, b"messagf", &sig),
        "{name}: verifies another message"
    );
    for byte in [0usize, 31, 32, 63] {
        let mut bad = sig;
        bad[byte] ^= 1;
        assert!(
            !ed25519_verifies(&public, b"message", &bad),
            "{name}: a signature changed at byte {byte} verifies"
        );
    }
    let other = make();
    assert_ne!(
        other.public_key(),
        public,
        "{name}: two keys share a public key"
    );
    assert!(
        !ed25519_verifies(&other.public_key(), b"message", &sig),
        "{name}: verifies under another key"
    );
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| key.sign(b"message"))).collect();
        for h in handles {
            assert_eq!(
                h.join().expect("a signer"),
                Some(sig),
                "{name}: threads disagree"
            );
        }
    });
    let debug = format!("{key:?}");
    assert!(
        !shows(&debug, &public),
        "{name}: Debug shows the public key: {debug}"
    );
    assert!(
        !shows(&debug, &sig),
        "{name}: Debug shows a signature: {debug}"
    );
    if let Some(seed) = seed {
        assert!(
            !shows(&debug, seed),
            "{name}: Debug shows the seed: {debug}"
        );
    }
    key.destroy();
    assert_eq!(key.sign(b"message"), None, "{name}: a destroyed key signs");
    assert_eq!(
        key.public_key(),
        public,
        "{name}: destroy lost the public half"
    );
    key.destroy();
    assert_eq!(
        key.sign(b"message"),
        None,
        "{name}: a second destroy revived the key"
    );
    assert!(
        other.sign(b"message").is_some(),
        "{name}: destroy reached another key"
    );
}

/// A key from a known seed publishes *ring*'s public key for that seed and signs as *ring* does.
pub fn identity_key_matches_seed(name: &str, key: &dyn IdentityKey, seed: &[u8; 32]) {
    use ring::signature::KeyPair as _;
    let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(seed).expect("a seed");
    assert_eq!(
        key.public_key().as_slice(),
        pair.public_key().as_ref(),
        "{name}: not the seed's public key"
    );
    assert_eq!(
        key.sign(b"m").expect("signs").as_slice(),
        pair.sign(b"m").as_ref(),
        "{name}: not the seed's signature"
    );
}

// ------------------------------------------------------------------------------------------------
// TraceSink
// ------------------------------------------------------------------------------------------------

/// Every working sink, with `read_back` returning the lines it holds so far (without their
/// newlines): lines appear whole and in the order appended; a line carrying JSON escapes,
/// multi-byte UTF-8 and 64 KiB of payload survives byte for byte; eight threads appending at
/// once lose no line and never interleave two within one.
pub fn trace_sink_conforms(name: &str, sink: &dyn TraceSink, read_back: &dyn Fn() -> Vec<String>) {
    let start = read_back().len();
    let big = format!("{{\"n\":\"{}\"}}", "x".repeat(64 * 1024));
    let lines = [
        r#"{"event_type":"first","n":1}"#.to_owned(),
        r#"{"event_type":"second","text":"a \"quoted\" \\ line \u0007 é ✓"}"#.to_owned(),
        big,
        "{}".to_owned(),
    ];
    for line in &lines {
        sink.append_line(format!("{line}\n").as_bytes())
            .unwrap_or_else(|e| panic!("{name}: append failed: {e}"));
    }
    let got = read_back();
    assert_eq!(
        &got[start..],
        &lines[..],
        "{name}: lines not whole or not in order"
    );

    // Concurrent appenders: each line names its thread and sequence and is long enough that an
    // interleaving would show.
    const THREADS: usize = 8;
    const PER: usize = 200;
    let pad = "p".repeat(700);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let pad = &pad;
            s.spawn(move || {
                for i in 0..PER {
                    let line = format!("{{\"t\":{t},\"i\":{i},\"pad\":\"{pad}\"}}\n");
                    sink.append_line(line.as_bytes())
                        .unwrap_or_else(|e| panic!("{name}: append from thread {t} failed: {e}"));
                }
            });
        }
    });
    let got = read_back();
    let after = &got[start + lines.len()..];
    assert_eq!(after.len(), THREADS * PER, "{name}: lines lost or split");
    let mut seen = BTreeSet::new();
    let mut next = [0usize; THREADS];
    for line in after {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name}: interleaved line ({e}): {:.120}", line));
        assert_eq!(
            value["pad"],
            pad.as_str(),
            "{name}: a line's payload changed"
        );
        let t = usize::try_from(value["t"].as_u64().expect("t")).expect("fits");
        let i = usize::try_from(value["i"].as_u64().expect("i")).expect("fits");
        assert_eq!(i, next[t], "{name}: thread {t}'s lines out of order");
        next[t] += 1;
        assert!(seen.insert((t, i)), "{name}: line {t}/{i} twice");
    }
}

/// A sink that fails (a full disk): every append reports an error, from every thread, and
/// `read_back` (when the sink has one) shows no line of those appends.
pub fn trace_sink_reports_failure(
    name: &str,
    sink: &dyn TraceSink,
    read_back: Option<&dyn Fn() -> Vec<String>>,
) {
    let before = read_back.map(|r| r());
    for line in [&b"{\"a\":1}\n"[..], b"{}\n"] {
        assert!(
            sink.append_line(line).is_err(),
            "{name}: a failing append succeeded"
        );
    }
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                assert!(
                    sink.append_line(b"{\"threaded\":true}\n").is_err(),
                    "{name}: a failing append succeeded on a thread"
                );
            });
        }
    });
    if let (Some(read_back), Some(before)) = (read_back, before) {
        assert_eq!(read_back(), before, "{name}: a failed append left a line");
    }
}

// ------------------------------------------------------------------------------------------------
// Random
// ------------------------------------------------------------------------------------------------

/// Every random source: a fill writes every byte it is given, whatever its length (empty,
/// shorter than, equal to, longer than and far longer than a 32-byte block); `bytes` and `hex`
/// have the length asked for, `hex` in lowercase; draws from several threads at once all
/// complete; and `Debug` renders.
pub fn random_fills_what_it_is_given(name: &str, random: &dyn Random) {
    random.fill(&mut []);
    for len in [1usize, 2, 31, 32, 33, 64, 100, 4096] {
        // Eight draws into a buffer prefilled each time with one byte: a position the source
        // never writes keeps that byte in all eight.
        let mut seen = vec![BTreeSet::new(); len];
        for _ in 0..8 {
            let mut buffer = vec![0xa5u8; len];
            random.fill(&mut buffer);
            for (at, byte) in buffer.iter().enumerate() {
                seen[at].insert(*byte);
            }
        }
        if let Some(at) = seen.iter().position(|values| values.len() == 1) {
            panic!(
                "{name}: byte {at} of a {len}-byte fill never changes: {seen:?}",
                seen = seen[at]
            );
        }
    }
    assert_eq!(random.bytes::<0>(), [0u8; 0]);
    assert_eq!(random.bytes::<48>().len(), 48, "{name}: bytes::<48>");
    let hex = random.hex::<16>();
    assert_eq!(hex.len(), 32, "{name}: hex::<16> is {hex:?}");
    assert!(
        hex.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{name}: hex::<16> is not lowercase hex: {hex:?}"
    );
    std::thread::scope(|s| {
        let draws: Vec<_> = (0..4).map(|_| s.spawn(|| random.bytes::<32>())).collect();
        for draw in draws {
            draw.join().expect("a draw from another thread");
        }
    });
    assert!(
        !format!("{random:?}").is_empty(),
        "{name}: Debug renders nothing"
    );
}

/// A source fit for nonces and keys: a thousand 16-byte draws are all different, and so are
/// two sources' first draws.
pub fn random_draws_differ(name: &str, make: &dyn Fn() -> Arc<dyn Random>) {
    let random = make();
    let mut drawn = BTreeSet::new();
    for i in 0..1_000 {
        assert!(
            drawn.insert(random.bytes::<16>()),
            "{name}: draw {i} repeats an earlier one"
        );
    }
    assert_ne!(
        make().bytes::<16>(),
        make().bytes::<16>(),
        "{name}: two sources drew the same first bytes"
    );
}

/// A reproducible source: two sources from `make` give the same bytes for the same sequence of
/// draws, whatever their lengths, and a later draw is not an earlier one again.
pub fn random_replays(name: &str, make: &dyn Fn() -> Arc<dyn Random>) {
    let draw_all = |random: &dyn Random| -> Vec<Vec<u8>> {
        [0usize, 5, 32, 33, 200, 8]
            .iter()
            .map(|&len| {
                let mut out = vec![0u8; len];
                random.fill(&mut out);
                out
            })
            .collect()
    };
    let (a, b) = (make(), make());
    let first = draw_all(a.as_ref());
    assert_eq!(first, draw_all(b.as_ref()), "{name}: two sources disagree");
    assert_ne!(
        first,
        draw_all(a.as_ref()),
        "{name}: the stream starts over"
    );
}

// ------------------------------------------------------------------------------------------------
// PeerTransport
// ------------------------------------------------------------------------------------------------

/// Every transport, given an address something listens at that echoes one line back: the
/// connect succeeds and the stream carries bytes both ways, however the host is cased; it does
/// so for several connections at once.
pub async fn peer_transport_reaches(
    name: &str,
    transport: &dyn PeerTransport,
    host: &str,
    port: u16,
) {
    for (i, host) in [host.to_owned(), host.to_ascii_uppercase()]
        .iter()
        .enumerate()
    {
        let mut streams = Vec::new();
        for j in 0..3 {
            let stream = transport
                .connect(host, port)
                .await
                .unwrap_or_else(|e| panic!("{name}: connect {i}/{j} to {host}:{port}: {e}"));
            streams.push(stream);
        }
        for (j, stream) in streams.iter_mut().enumerate() {
            let line = format!("ping {i} {j}\n");
            stream
                .write_all(line.as_bytes())
                .await
                .unwrap_or_else(|e| panic!("{name}: write on {host}:{port}: {e}"));
            let mut back = vec![0u8; line.len()];
            stream
                .read_exact(&mut back)
                .await
                .unwrap_or_else(|e| panic!("{name}: read on {host}:{port}: {e}"));
            assert_eq!(back, line.as_bytes(), "{name}: the echo came back changed");
        }
    }
    assert!(
        !format!("{transport:?}").is_empty(),
        "{name}: Debug renders nothing"
    );
}

/// Every transport, given an address nothing listens at: the connect fails with `kind`
/// (`ConnectionRefused` for a closed port), promptly, with no stream.
pub async fn peer_transport_refuses(
    name: &str,
    transport: &dyn PeerTransport,
    host: &str,
    port: u16,
    kind: std::io::ErrorKind,
) {
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        transport.connect(host, port),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: a connect to {host}:{port} hangs"));
    match outcome {
        Ok(_) => panic!("{name}: connected to {host}:{port}, where nothing listens"),
        Err(e) => assert_eq!(e.kind(), kind, "{name}: {host}:{port} failed with {e}"),
    }
}

/// What a listener at a reachable address does with each connection for
/// [`peer_transport_reaches`]: reads one line and writes it back.
pub async fn echo_one_line<S>(stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncBufReadExt;
    let (reader, mut writer) = tokio::io::split(stream);
    let mut line = String::new();
    if tokio::io::BufReader::new(reader)
        .read_line(&mut line)
        .await
        .is_ok()
    {
        let _ = writer.write_all(line.as_bytes()).await;
    }
}
