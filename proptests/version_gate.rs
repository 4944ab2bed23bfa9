//! Property tests for the listener's `VersionGate` (D-4.1, D-4.5): whatever the request line and
//! however the client's bytes are split across reads,
//!
//! * a first line naming HTTP/1.0 or HTTP/1.1 reaches the reader byte for byte, and the gate
//!   writes nothing of its own;
//! * a first line naming any other `HTTP/` version reaches the reader not at all, and the client
//!   gets a 505 that closes the connection;
//! * line ends may be `\r\n` or `\n`, and empty lines may come first, as hyper's parser allows.
//!
//! Case count: `RP_PROPTEST_CASES` (default 64).

mod common;

use proptest::prelude::*;
use resource_plane::http::version_gate::VersionGate;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `bytes` in pieces cut at `cuts`, with a pause between pieces so each is its own read;
/// returns what the gate's reader saw and what the client got back.
fn through_gate(bytes: Vec<u8>, cuts: Vec<usize>) -> (Vec<u8>, Vec<u8>) {
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
        let mut seen = Vec::new();
        gate.read_to_end(&mut seen).await.expect("gate read");
        gate.shutdown().await.expect("gate shutdown");
        drop(gate);
        (seen, feeder.await.expect("feeder"))
    })
}

fn version() -> impl Strategy<Value = (String, bool)> {
    prop_oneof![
        3 => prop_oneof![Just("HTTP/1.1"), Just("HTTP/1.0")].prop_map(|v| (v.to_owned(), true)),
        2 => prop_oneof![
            Just("HTTP/2.0".to_owned()),
            Just("HTTP/2".to_owned()),
            Just("HTTP/3".to_owned()),
            Just("HTTP/0.9".to_owned()),
            Just("HTTP/".to_owned()),
            "HTTP/[0-9]\\.[2-9]",
            "HTTP/[2-9a-z.]{1,6}",
        ]
        .prop_map(|v| (v, false)),
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
    ) {
        cuts.sort_unstable();
        let (seen, answer) = through_gate(bytes.clone(), cuts);
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
