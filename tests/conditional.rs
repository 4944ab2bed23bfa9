//! Conditional reads (D-13) against the real binary: `If-None-Match` with the current etag
//! answers 304 with exactly the 200's headers minus content type and length, refusals come
//! first, and each request leaves one `resource_read` line.

#![allow(clippy::disallowed_methods)] // the tests build their world with std::fs

mod support;

use std::time::Duration;
use support::process::{Served, Stderr, Workdir};

const MANIFEST: &str =
    "name: poller\nexports:\n  files: { root: out, mode: read-only, max_bytes: 1Ki }\n";

/// A GET with extra header lines; the status, the header lines (lowercased names) and the body.
fn get(port: u16, path: &str, headers: &[&str]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut all = vec![("host", "x")];
    all.extend(
        headers
            .iter()
            .map(|h| h.split_once(": ").expect("a `name: value` header")),
    );
    let request = support::http::request_bytes("GET", path, &all);
    let reply = support::http::exchange(("127.0.0.1", port), &request, Duration::from_secs(20));
    (reply.status, reply.headers, reply.body)
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
