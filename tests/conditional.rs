//! Conditional reads (D-13) against the real binary: `If-None-Match` with the current etag
//! answers 304 with exactly the 200's headers minus content type and length, refusals come
//! first, and each request leaves one `resource_read` line.

#![allow(clippy::disallowed_methods)] // the tests build their world with std::fs

#[path = "support/process.rs"]
mod process;

use process::{Served, Stderr, Workdir};
use std::io::{Read, Write};
use std::time::Duration;

const MANIFEST: &str =
    "name: poller\nexports:\n  files: { root: out, mode: read-only, max_bytes: 1Ki }\n";

/// A GET with extra header lines; the status, the header lines (lowercased names) and the body.
fn get(port: u16, path: &str, headers: &[&str]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: x\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .map(|l| {
            let (name, value) = l.split_once(':').expect("a header line");
            (name.to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    (status, headers, bytes[end + 4..].to_vec())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn a_matching_etag_answers_304_with_the_200s_validators_and_no_body() {
    let world = Workdir::new(MANIFEST);
    world.file("out/report.md", "hello");
    world.file("out/big.bin", vec![0u8; 2000]);
    let served = Served::start("", &world.args(&[]), Stderr::Inherit, false);
    let port = served.port();
    let (status, full, body) = get(port, "/resources/files/report.md", &[]);
    assert_eq!((status, body.as_slice()), (200, b"hello".as_slice()));
    let etag = header(&full, "etag").expect("an etag").to_owned();
    let sha = etag
        .trim_matches('"')
        .trim_start_matches("sha256:")
        .to_owned();

    for condition in [
        format!("If-None-Match: {etag}"),
        format!("if-none-match: W/{etag}"),
        format!("If-None-Match: \"x\", {etag}"),
        "If-None-Match: *".to_owned(),
    ] {
        let (status, headers, body) = get(port, "/resources/files/report.md", &[&condition]);
        assert_eq!(status, 304, "{condition}");
        assert!(body.is_empty(), "{condition}: no body");
        let mut names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "connection",
                "date",
                "etag",
                "x-murmur-containment",
                "x-murmur-export-root",
                "x-murmur-generation",
                "x-murmur-mtime-ms",
            ],
            "{condition}"
        );
        for name in [
            "etag",
            "x-murmur-containment",
            "x-murmur-export-root",
            "x-murmur-generation",
            "x-murmur-mtime-ms",
            "connection",
        ] {
            assert_eq!(
                header(&headers, name),
                header(&full, name),
                "{condition}: {name}"
            );
        }
    }
    // A list that does not match, and headers that do not parse, are a plain 200.
    for condition in [
        "If-None-Match: \"sha256:0000\"",
        "If-None-Match: sha256:abc",
        "If-None-Match: *, \"x\"",
        "If-Modified-Since: Sat, 01 Jan 2050 00:00:00 GMT",
    ] {
        let (status, _, body) = get(port, "/resources/files/report.md", &[condition]);
        assert_eq!(
            (status, body.as_slice()),
            (200, b"hello".as_slice()),
            "{condition}"
        );
    }
    // Refusals come first.
    for (path, code) in [
        ("/resources/files/big.bin", 413),
        ("/resources/files/missing", 404),
        ("/resources/files/../x", 403),
        ("/resources/files/", 403),
    ] {
        let (status, _, _) = get(port, path, &["If-None-Match: *"]);
        assert_eq!(status, code, "{path}");
    }

    let mut served = served;
    served.terminate();
    served.wait(Duration::from_secs(10)).expect("ended");
    let lines = world.trace_lines();
    let not_modified: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "not_modified")
        .collect();
    assert_eq!(not_modified.len(), 4);
    for line in not_modified {
        assert_eq!(line["event_type"], "resource_read");
        assert_eq!(line["path"], "report.md");
        assert_eq!(line["bytes"], 0);
        assert_eq!(line["sha256"], sha.as_str());
        assert!(line["reason"].is_null(), "{line}");
    }
    assert_eq!(lines.len(), 1 + 4 + 4 + 4, "one line per request");
}
