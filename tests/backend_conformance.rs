//! The backend conformance suites of `tests/support/conformance.rs`, run on every
//! implementation the crate ships: the OS-backed ones and the in-memory, fixed, seeded and
//! recording doubles. (The filesystem's suite runs in `tests/fs_conformance.rs`.)

mod support;

use resource_plane::backends::{
    Clock, FailingTraceSink, FixedIdentityKey, FixedKeyStore, IdentityKey, JsonlTraceSink,
    KeyStore, ManualClock, MemoryTransport, OsRandom, OsRandomIdentityKey, OsRandomKeyStore,
    PeerTransport, Random, RecordingTraceSink, SeededRandom, SystemClock, TcpTransport, TraceSink,
};
use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use support::conformance::*;

#[test]
fn system_clock_conforms() {
    clock_reads_steadily("SystemClock", &SystemClock);
    clock_tracks_real_time("SystemClock", &SystemClock, 2_000);
}

#[test]
fn manual_clock_conforms() {
    let clock = ManualClock::new(0);
    clock_follows_manual("ManualClock", &clock, &clock);
    let dyn_clock: Arc<dyn Clock> = Arc::new(ManualClock::new(42));
    assert_eq!(dyn_clock.now_ms(), 42, "ManualClock::new sets the reading");
}

#[test]
fn os_random_key_store_conforms() {
    key_store_conforms(
        "OsRandomKeyStore",
        &|| Arc::new(OsRandomKeyStore::generate()) as Arc<dyn KeyStore>,
        None,
    );
}

#[test]
fn fixed_key_store_conforms() {
    // Each store from the factory gets its own key; the first one's is known.
    let next = AtomicU8::new(7);
    key_store_conforms(
        "FixedKeyStore",
        &|| {
            let byte = next.fetch_add(1, Ordering::SeqCst);
            Arc::new(FixedKeyStore::new([byte; 32])) as Arc<dyn KeyStore>
        },
        Some(&[7; 32]),
    );
    let key = *b"0123456789abcdef0123456789abcdef";
    key_store_is_hmac_sha256("FixedKeyStore", &FixedKeyStore::new(key), &key);
}

#[test]
fn os_random_identity_key_conforms() {
    identity_key_conforms(
        "OsRandomIdentityKey",
        &|| Arc::new(OsRandomIdentityKey::generate()) as Arc<dyn IdentityKey>,
        None,
    );
}

#[test]
fn fixed_identity_key_conforms() {
    let next = AtomicU8::new(0x5e);
    identity_key_conforms(
        "FixedIdentityKey",
        &|| {
            let byte = next.fetch_add(1, Ordering::SeqCst);
            Arc::new(FixedIdentityKey::new([byte; 32])) as Arc<dyn IdentityKey>
        },
        Some(&[0x5e; 32]),
    );
    let seed = [0x9d; 32];
    identity_key_matches_seed("FixedIdentityKey", &FixedIdentityKey::new(seed), &seed);
}

#[test]
fn jsonl_trace_sink_conforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.jsonl");
    let sink = JsonlTraceSink::open(&path).expect("open");
    #[allow(clippy::disallowed_methods)] // reading back what the sink wrote
    let read_back = || -> Vec<String> {
        std::fs::read_to_string(&path)
            .expect("read the trace")
            .lines()
            .map(str::to_owned)
            .collect()
    };
    trace_sink_conforms("JsonlTraceSink", &sink, &read_back);
    // A second sink on the same file appends after the first's lines.
    drop(sink);
    let again = JsonlTraceSink::open(&path).expect("reopen");
    let before = read_back().len();
    again.append_line(b"{\"again\":1}\n").expect("append");
    let lines = read_back();
    assert_eq!(lines.len(), before + 1, "a reopened sink truncated or lost");
    assert_eq!(lines.last().map(String::as_str), Some("{\"again\":1}"));
}

#[test]
fn recording_trace_sink_conforms() {
    let sink = RecordingTraceSink::new();
    trace_sink_conforms("RecordingTraceSink", &sink, &|| sink.lines());
    sink.fail_from_now();
    trace_sink_reports_failure("RecordingTraceSink failing", &sink, Some(&|| sink.lines()));
}

#[test]
fn failing_trace_sink_reports_failure() {
    let sink: Arc<dyn TraceSink> = Arc::new(FailingTraceSink);
    trace_sink_reports_failure("FailingTraceSink", sink.as_ref(), None);
}

#[test]
fn os_random_conforms() {
    random_fills_what_it_is_given("OsRandom", &OsRandom);
    random_draws_differ("OsRandom", &|| Arc::new(OsRandom) as Arc<dyn Random>);
}

#[test]
fn seeded_random_conforms() {
    let seeded = SeededRandom::new([3; 32]);
    random_fills_what_it_is_given("SeededRandom", &seeded);
    // One stream never repeats a draw; two seeds give two streams.
    let next = AtomicU8::new(0);
    random_draws_differ("SeededRandom", &|| {
        Arc::new(SeededRandom::new([next.fetch_add(1, Ordering::SeqCst); 32])) as Arc<dyn Random>
    });
    random_replays("SeededRandom", &|| {
        Arc::new(SeededRandom::new([9; 32])) as Arc<dyn Random>
    });
}

/// The OS transport over loopback: a listening address is reached, and a port just closed
/// refuses with the OS's `ECONNREFUSED`.
#[tokio::test]
#[allow(clippy::disallowed_methods)] // the listeners the transport is tested against
async fn tcp_transport_conforms() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(echo_one_line(stream));
        }
    });
    peer_transport_reaches("TcpTransport", &TcpTransport, "127.0.0.1", port).await;
    peer_transport_reaches("TcpTransport by name", &TcpTransport, "localhost", port).await;

    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_port = closed.local_addr().expect("address").port();
    drop(closed);
    peer_transport_refuses(
        "TcpTransport",
        &TcpTransport,
        "127.0.0.1",
        closed_port,
        ErrorKind::ConnectionRefused,
    )
    .await;
    let refused = TcpTransport
        .connect("127.0.0.1", closed_port)
        .await
        .err()
        .expect("refused");
    assert_eq!(
        refused.raw_os_error(),
        Some(rustix::io::Errno::CONNREFUSED.raw_os_error()),
        "the OS's own error: {refused:?}"
    );
}

/// The in-memory transport: a listening address is reached (its host in any case), one
/// nobody listens at, or whose listener is gone, refuses as a closed port does.
#[tokio::test]
async fn memory_transport_conforms() {
    let transport = MemoryTransport::new();
    let mut listener = transport.listen("peer.test", 8080);
    tokio::spawn(async move {
        while let Some(stream) = listener.accept().await {
            tokio::spawn(echo_one_line(stream));
        }
    });
    peer_transport_reaches("MemoryTransport", &transport, "peer.test", 8080).await;
    for (host, port) in [("peer.test", 8081), ("other.test", 8080)] {
        peer_transport_refuses(
            "MemoryTransport",
            &transport,
            host,
            port,
            ErrorKind::ConnectionRefused,
        )
        .await;
    }
    drop(transport.listen("gone.test", 1));
    peer_transport_refuses(
        "MemoryTransport, listener dropped",
        &transport,
        "gone.test",
        1,
        ErrorKind::ConnectionRefused,
    )
    .await;
}
