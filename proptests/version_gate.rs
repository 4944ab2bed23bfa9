//! The listener's `VersionGate` (D-4.1, D-4.5) over real reads: named examples, then a property.
//! Whatever the request line and however the client's bytes are split across reads,
//!
//! * a first line naming HTTP/1.0 or HTTP/1.1 reaches the reader byte for byte, and the gate
//!   writes nothing of its own;
//! * a first line naming any other `HTTP/` version reaches the reader not at all, and the client
//!   gets a 505 that closes the connection;
//! * line ends may be `\r\n` or `\n`, and empty lines may come first, as hyper's parser allows;
//! * a raw `#` in the target reaches the reader escaped as `%23`, and nothing else changes;
//! * all of this holds whether or not the listener primed the gate (read the first bytes before
//!   hyper's first read), and a primed gate counts a head's lines exactly as `httparse` (hyper's
//!   parser) counts its headers, or says the head is not complete when `httparse` says so.
//!
//! Case count: `RP_PROPTEST_CASES` (default 64).

mod common;

use proptest::prelude::*;
use resource_plane::http::version_gate::VersionGate;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `bytes` in pieces cut at `cuts`, with a pause between pieces so each is its own read;
/// returns what the gate's reader saw and what the client got back. A `primed` gate reads once
/// before its reader does, as the listener's does.
fn through_gate(bytes: Vec<u8>, cuts: Vec<usize>, primed: bool) -> (Vec<u8>, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let feeder = tokio::spawn(async move {
            let mut at = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                let cut = cut.clamp(at, bytes.len());
                if cut > at {
                    // A refused connection is closed while the client may still be sending.
                    if client.write_all(&bytes[at..cut]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                at = cut;
            }
            let _ = client.shutdown().await;
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.expect("read");
            answer
        });
        let mut gate = VersionGate::new(server);
        if primed {
            gate.prime().await.expect("prime");
        }
        let mut seen = Vec::new();
        gate.read_to_end(&mut seen).await.expect("gate read");
        gate.shutdown().await.expect("gate shutdown");
        drop(gate);
        (seen, feeder.await.expect("feeder"))
    })
}

/// `through_gate` for a request sent in the given pieces, through a gate primed and one not:
/// both must come to the same.
fn in_pieces(pieces: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    let mut cuts = Vec::new();
    let mut at = 0;
    for piece in pieces {
        at += piece.len();
        cuts.push(at);
    }
    let plain = through_gate(pieces.concat(), cuts.clone(), false);
    let primed = through_gate(pieces.concat(), cuts, true);
    assert_eq!(
        (&plain.0, undated(&plain.1)),
        (&primed.0, undated(&primed.1)),
        "{pieces:?}: priming changed the outcome"
    );
    plain
}

/// `answer` without its `date` header line: the two runs `in_pieces` compares may answer in
/// different seconds.
fn undated(answer: &[u8]) -> Vec<u8> {
    let mut kept = Vec::with_capacity(answer.len());
    for line in answer.split_inclusive(|b| *b == b'\n') {
        if !line.starts_with(b"date: ") {
            kept.extend_from_slice(line);
        }
    }
    kept
}

fn assert_refused(pieces: &[&[u8]]) {
    assert_answered(pieces, "505 HTTP Version Not Supported");
}

fn assert_answered(pieces: &[&[u8]], status: &str) {
    let (seen, answer) = in_pieces(pieces);
    assert!(seen.is_empty(), "hyper must see nothing of {pieces:?}");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}\r\n")),
        "{pieces:?}: {answer}"
    );
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "{answer}");
}

#[test]
fn accepted_versions_pass_through_byte_for_byte_whole_split_or_byte_by_byte() {
    let request: &[u8] = b"GET /resources/files HTTP/1.1\r\nHost: x\r\n\r\n";
    let bytes: Vec<&[u8]> = request.chunks(1).collect();
    for pieces in [vec![request], vec![&request[..9], &request[9..]], bytes] {
        let (seen, answer) = in_pieces(&pieces);
        assert_eq!(seen, request);
        assert!(answer.is_empty(), "the gate itself writes nothing");
    }
}

#[test]
fn other_versions_get_505_whole_or_split_and_the_reader_sees_nothing() {
    let long_target = format!("GET /{} HTTP/1.2\r\n\r\n", "a".repeat(300));
    let longer_target = format!("GET /{} HTTP/2.0\r\n\r\n", "a".repeat(9000));
    let cases: [&[&[u8]]; 9] = [
        &[b"GET / HTTP/1.2\r\nHost: x\r\n\r\n"],
        &[b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"],
        &[b"GET / HTTP/3\r\n\r\n"],
        &[b"GET /resources/files HTTP/1.2", b"\r\nHost: x\r\n\r\n"],
        &[b"GET / HTTP/2", b".0\r\n\r\n"],
        &[b"PRI * HTTP/2.0", b"\r\n\r\nSM\r\n\r\n"],
        &[b"GET / HTTP/1.2\nHost: x\n\n"],
        &[long_target.as_bytes()],
        &[longer_target.as_bytes()],
    ];
    for pieces in cases {
        assert_refused(pieces);
    }
}

#[test]
fn a_first_line_past_the_look_ahead_passes_to_hyper_unjudged() {
    let mut request = b"GET /".to_vec();
    request.extend(std::iter::repeat_n(b'a', 17 * 1024));
    request.extend_from_slice(b" HTTP/2.0\r\n\r\n");
    let (seen, answer) = in_pieces(&[&request]);
    assert_eq!(
        seen, request,
        "past the 16 KiB look-ahead (the head limit: hyper answers 431) the gate stays out of the way"
    );
    assert!(answer.is_empty());
}

#[test]
fn a_raw_fragment_reaches_the_reader_escaped_whole_or_split() {
    let cases: [(&[&[u8]], &[u8]); 3] = [
        (
            &[b"GET /resources/files/a.md#x HTTP/1.1\r\nHost: #\r\n\r\n"],
            b"GET /resources/files/a.md%23x HTTP/1.1\r\nHost: #\r\n\r\n",
        ),
        (
            &[b"GET /resources/files/a.md#", b"x HTTP/1.1\r\n\r\n"],
            b"GET /resources/files/a.md%23x HTTP/1.1\r\n\r\n",
        ),
        (
            &[b"\nGET /a?q#x HTTP/1.0\n\n"],
            b"\nGET /a?q%23x HTTP/1.0\n\n",
        ),
    ];
    for (pieces, escaped) in cases {
        let (seen, answer) = in_pieces(pieces);
        assert_eq!(seen, escaped, "{pieces:?}");
        assert!(answer.is_empty(), "the gate itself writes nothing");
    }
}

/// Bytes no request line may hold reach the reader (hyper, which answers 400) as they arrive,
/// on a connection the client keeps open, instead of waiting for a line end.
#[test]
fn bytes_no_request_line_may_hold_reach_the_reader_at_once() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for junk in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03AAAA"[..],
        b"GET /a\x00b",
        b"{\"json\": 1",
    ] {
        runtime.block_on(async {
            let (mut client, server) = tokio::io::duplex(1 << 16);
            client.write_all(junk).await.expect("send");
            let mut gate = VersionGate::new(server);
            let mut seen = vec![0u8; 64];
            let n = tokio::time::timeout(Duration::from_secs(2), gate.read(&mut seen))
                .await
                .expect("handed over without waiting for a line end")
                .expect("read");
            assert_eq!(&seen[..n], junk);
            drop(client);
        });
    }
}

#[test]
fn an_immediate_close_is_end_of_stream() {
    let (seen, answer) = in_pieces(&[]);
    assert!(seen.is_empty());
    assert!(answer.is_empty());
}

fn version() -> impl Strategy<Value = (String, bool)> {
    prop_oneof![
        3 => prop_oneof![Just("HTTP/1.1"), Just("HTTP/1.0")].prop_map(|v| (v.to_owned(), true)),
        2 => prop_oneof![
            Just("HTTP/2.0".to_owned()),
            Just("HTTP/2".to_owned()),
            Just("HTTP/3".to_owned()),
            Just("HTTP/0.9".to_owned()),
            "HTTP/[0-9]\\.[2-9]",
            "HTTP/[2-9]",
        ]
        .prop_map(|v| (v, false)),
        // Not a version at all: hyper's to judge (its 400), so it passes through untouched.
        1 => prop_oneof![
            Just("HTTP/".to_owned()),
            Just("HTTP/1.01".to_owned()),
            "HTTP/[a-z.]{1,6}",
        ]
        .prop_map(|v| (v, true)),
    ]
}

fn request() -> impl Strategy<Value = (Vec<u8>, bool)> {
    (
        prop_oneof![Just("GET"), Just("HEAD"), Just("PRI"), Just("POST")],
        "/[a-zA-Z0-9/._%-]{0,300}",
        version(),
        prop_oneof![Just("\r\n"), Just("\n")],
        prop::collection::vec(prop_oneof![Just("\r\n"), Just("\n")], 0..3),
        "[A-Za-z-]{1,12}: [ -~]{0,40}",
    )
        .prop_map(
            |(method, target, (version, accepted), eol, leading, header)| {
                let text = format!(
                    "{}{method} {target} {version}{eol}{header}{eol}{eol}",
                    leading.concat()
                );
                (text.into_bytes(), accepted)
            },
        )
}

proptest! {
    #![proptest_config(common::config(common::cases()))]

    #[test]
    fn only_http_1_0_and_1_1_reach_hyper_however_the_bytes_are_split(
        (bytes, accepted) in request(),
        mut cuts in prop::collection::vec(0usize..400, 0..6),
        primed in any::<bool>(),
    ) {
        cuts.sort_unstable();
        let (seen, answer) = through_gate(bytes.clone(), cuts, primed);
        if accepted {
            prop_assert_eq!(seen, bytes, "an accepted request passes unchanged");
            prop_assert!(answer.is_empty(), "the gate writes nothing for an accepted version");
        } else {
            prop_assert!(seen.is_empty(), "a refused request never reaches hyper");
            let answer = String::from_utf8_lossy(&answer).into_owned();
            prop_assert!(answer.starts_with("HTTP/1.1 505 HTTP Version Not Supported\r\n"), "{}", answer);
            prop_assert!(answer.contains("\r\nconnection: close\r\n"), "{}", answer);
        }
    }
}

/// What a primed gate says of `bytes` sent at once: the head's line count, or `None`.
fn primed_head_lines(bytes: &[u8]) -> Option<usize> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        client.write_all(bytes).await.expect("send");
        // Nothing sent is end of stream, not a wait.
        client.shutdown().await.expect("shutdown");
        let mut gate = VersionGate::new(server);
        gate.prime().await.expect("prime");
        gate.complete_head_lines()
    })
}

/// What hyper's parser says of `bytes`: the number of headers of a complete head, `None` for a
/// partial one.
fn httparse_headers(bytes: &[u8]) -> Option<usize> {
    let mut headers = vec![httparse::EMPTY_HEADER; 4096];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes).expect("a well-formed head") {
        httparse::Status::Complete(_) => Some(request.headers.len()),
        httparse::Status::Partial => None,
    }
}

fn eol() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\r\n"), Just("\n")]
}

/// A well-formed head (leading empty lines, any mix of line ends, up to 130 headers), and a cut:
/// the bytes the first read brings may stop anywhere.
fn head_and_cut() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (
        prop::collection::vec(eol(), 0..3),
        eol(),
        prop::collection::vec(("[a-z][a-z-]{0,8}", "[!-~][ -~]{0,20}", eol()), 0..130),
        eol(),
    )
        .prop_flat_map(|(leading, first_eol, headers, last_eol)| {
            let mut head = leading.concat();
            head.push_str("GET /resources/files HTTP/1.1");
            head.push_str(first_eol);
            for (name, value, eol) in headers {
                head.push_str(&format!("{name}: {value}{eol}"));
            }
            head.push_str(last_eol);
            let len = head.len();
            (Just(head.into_bytes()), prop_oneof![Just(len), 0..=len])
        })
}

proptest! {
    #![proptest_config(common::config(common::cases()))]

    /// The listener gives hyper its small header table only on the gate's count: a count below
    /// what hyper's parser finds would turn a servable head into a 431, and a head counted
    /// complete that the parser finds partial would wait on a table too small.
    #[test]
    fn a_primed_gate_counts_a_head_as_hypers_parser_does((head, cut) in head_and_cut()) {
        let bytes = &head[..cut];
        prop_assert_eq!(primed_head_lines(bytes), httparse_headers(bytes), "{:?}", String::from_utf8_lossy(bytes));
    }
}

#[test]
fn a_primed_gate_counts_the_lines_of_a_whole_head_only() {
    for (bytes, lines) in [
        (&b"GET / HTTP/1.1\r\n\r\n"[..], Some(0)),
        (b"\r\n\nGET / HTTP/1.1\nHost: x\n\n", Some(1)),
        (b"GET / HTTP/1.1\r\nHost: x\r\nA: b\n\r\n", Some(2)),
        (b"GET / HTTP/1.1\r\nHost: x\r\n", None),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r", None),
        (b"GET / HTTP/1.1", None),
        (b"\r\n\r\n", None),
        (b"", None),
    ] {
        assert_eq!(primed_head_lines(bytes), lines, "{bytes:?}");
    }
}
