#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! The operator plane as a function (no sockets): a capsule is built from a YAML manifest over
//! a [`MemoryFilesystem`], a manual clock and a recording trace sink (support's [`World`]), and
//! its router is driven through `respond` (and `handle` in the async tests).
//!
//! Every request asserts the status, the exact header set (`date` and `content-length` are
//! added by hyper later, never by the router), the exact body, and the one trace line it left,
//! with every D-6.2 field present in order.

mod support;

use http::{Method, Request};
use resource_plane::backends::{
    FailingTraceSink, FileMeta, Filesystem, FsError, FsErrorKind, MemoryFilesystem, OpenFile,
    RootDir, TraceSink,
};
use resource_plane::path::RelPath;
use resource_plane::scope::{Containment, RootPath};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Cursor, Read};
use std::sync::Arc;
use support::http::Reply;
use support::sha256_hex;
use support::world::{CountingFs, URL, World, WorldBuilder};

/// The clock every world starts at (the trace's `timestamp`).
const NOW_MS: i64 = 1_755_950_000_123;
/// The modification time files are given (offset per file where mixups must show).
const MTIME: i64 = 1_787_577_327_015;
/// `max_bytes` of the small-limit manifests.
const MAX: usize = 200;

const REPORT: &[u8] = b"# Report\nall systems nominal\n";
const SECRET: &[u8] = b"SENTINEL-SECRET outside the export root";

// ------------------------------------------------------------------------------------------------
// 1. Listing (D-3)
// ------------------------------------------------------------------------------------------------

/// The listing tree: names chosen so byte order, walk order and locale order all differ.
fn build_listing_tree(fs: &MemoryFilesystem) {
    fs.add_file("secret.txt", SECRET, MTIME);
    fs.add_file("out/.hidden", b"hidden file", MTIME + 1);
    fs.add_file("out/.cache/x", b"inside a hidden dir", MTIME + 2);
    fs.add_file("out/B", b"upper bee", MTIME + 3);
    fs.add_file("out/Z", b"upper zed", MTIME + 4);
    fs.add_file("out/a/b", b"nested a/b", MTIME + 5);
    fs.add_file("out/a.b", b"dotted a.b", MTIME + 6);
    fs.add_file("out/a-b", b"dashed a-b", MTIME + 7);
    fs.add_file("out/a0", b"a zero", MTIME + 8);
    fs.add_file("out/é", "accented é".as_bytes(), MTIME + 9);
    fs.add_file("out/big.bin", vec![7u8; MAX + 100], MTIME + 10);
    fs.add_file("out/empty", b"", MTIME + 11);
    fs.add_fifo("out/fifo");
    fs.add_socket("out/sock");
    fs.add_char_device("out/dev");
    fs.add_fifo("out/a/nested-fifo");
    fs.add_file("out/faulty", b"unreadable", MTIME + 12);
    fs.inject_read_fault("out/faulty", io::ErrorKind::Other);
    fs.add_symlink("out/link-ok", "a.b");
    fs.add_symlink("out/sub/link-up", "../a0");
    fs.add_symlink("out/link-escape", "../secret.txt");
    fs.add_symlink("out/link-comeback", "../out/B");
    fs.add_symlink("out/link-abs", "/out/B");
    fs.add_symlink("out/link-dangle", "nowhere");
    fs.add_symlink("out/link-loop", "link-loop");
    fs.add_symlink("out/link-dir", "a");
    fs.add_symlink("out/link-fifo", "fifo");
}

/// Expected entries in byte order; the two symlinks resolving to files only when followed.
fn expected_listing(class: Containment) -> Vec<(&'static str, &'static [u8], i64)> {
    let mut entries: Vec<(&str, &[u8], i64)> = vec![
        (".cache/x", b"inside a hidden dir", MTIME + 2),
        (".hidden", b"hidden file", MTIME + 1),
        ("B", b"upper bee", MTIME + 3),
        ("Z", b"upper zed", MTIME + 4),
        ("a-b", b"dashed a-b", MTIME + 7),
        ("a.b", b"dotted a.b", MTIME + 6),
        ("a/b", b"nested a/b", MTIME + 5),
        ("a0", b"a zero", MTIME + 8),
        ("big.bin", &[7u8; MAX + 100], MTIME + 10),
        ("empty", b"", MTIME + 11),
    ];
    if class.follows_symlinks() {
        // Listed under their own path, with the target's bytes and mtime.
        entries.push(("link-ok", b"dotted a.b", MTIME + 6));
        entries.push(("sub/link-up", b"a zero", MTIME + 8));
    }
    entries.push(("é", "accented é".as_bytes(), MTIME + 9));
    entries
}

#[test]
fn listing_is_sorted_by_bytes_with_exact_body_headers_and_trace_under_each_class() {
    for class in Containment::ALL {
        let (_fs, w) = mem(&files_yaml("out/", Some(MAX)), class, build_listing_tree);
        let ctx = format!("listing ({})", class.as_str());
        let (reply, ev) = w.get("/resources/files");
        assert_eq!(reply.status, 200, "{ctx}: {}", reply.text());
        assert_headers(
            &reply,
            &listing_headers(&reply.body, 0, class, "out/"),
            &ctx,
        );
        let entries = expected_listing(class);
        let paths: Vec<&[u8]> = entries.iter().map(|e| e.0.as_bytes()).collect();
        assert!(
            paths.windows(2).all(|p| p[0] < p[1]),
            "fixture is byte-sorted"
        );
        assert_eq!(
            reply.text(),
            listing_json("out/", MAX as u64, 0, class, &entries),
            "{ctx}: exact body (order, keys, entries, omissions)"
        );
        let total: usize = entries.iter().map(|e| e.1.len()).sum();
        w.assert_list_event(
            &ev,
            Some("out/"),
            "ok",
            Some((entries.len(), total)),
            0,
            &ctx,
        );
        // The query never selects anything.
        let (again, _) = w.get("/resources/files?x=../../&root=..");
        assert_eq!(again.status, 200, "{ctx}: listing with a query");
        assert_eq!(again.body, reply.body, "{ctx}: a query changes nothing");
    }
}

#[test]
fn listing_body_key_order_and_entry_key_order() {
    let (_fs, w) = mem(&files_yaml("out/", None), Containment::Sealed, |fs| {
        fs.add_file("out/report.md", REPORT, MTIME);
    });
    let (reply, _) = w.get("/resources/files");
    let body = reply.json();
    let keys: Vec<&str> = support::trace::keys(&body);
    assert_eq!(
        keys,
        [
            "root",
            "mode",
            "max_bytes",
            "generation",
            "containment_achieved",
            "entries"
        ]
    );
    let entry = &body["entries"][0];
    let entry_keys: Vec<&str> = support::trace::keys(entry);
    assert_eq!(entry_keys, ["path", "size_bytes", "mtime_ms", "sha256"]);
    assert_eq!(body["max_bytes"], 10_485_760, "default max_bytes");
    assert_eq!(body["mode"], "read-only");
    assert_eq!(entry["mtime_ms"], MTIME);
    assert_eq!(entry["sha256"], sha256_hex(REPORT));
    assert!(
        !reply.text().contains(": ") && !reply.text().contains('\n'),
        "compact JSON"
    );
}

#[test]
fn listing_of_a_missing_root_or_a_file_root_is_empty() {
    type Case = (&'static str, fn(&MemoryFilesystem));
    let cases: [Case; 3] = [
        ("missing root", |_| {}),
        ("root is a regular file", |fs| {
            fs.add_file("out", b"a file", MTIME)
        }),
        ("root is a fifo", |fs| fs.add_fifo("out")),
    ];
    for (what, build) in cases {
        let (_fs, w) = mem(&files_yaml("out/", Some(MAX)), Containment::Advisory, build);
        let (reply, ev) = w.get("/resources/files");
        assert_eq!(reply.status, 200, "{what}: {}", reply.text());
        assert_headers(
            &reply,
            &listing_headers(&reply.body, 0, Containment::Advisory, "out/"),
            what,
        );
        assert_eq!(
            reply.text(),
            listing_json("out/", MAX as u64, 0, Containment::Advisory, &[]),
            "{what}"
        );
        w.assert_list_event(&ev, Some("out/"), "ok", Some((0, 0)), 0, what);
    }
}

#[test]
fn root_replaced_by_an_escaping_symlink_after_launch_is_outside_root() {
    for class in Containment::ALL {
        let (fs, w) = mem(&files_yaml("out", Some(MAX)), class, |fs| {
            fs.add_file("x/report.md", SECRET, MTIME);
        });
        // Created after launch, so the launch check (E-CAP-007) never saw it.
        fs.add_symlink("out", "../x");
        let ctx = format!("escaping root ({})", class.as_str());
        let (reply, ev) = w.get("/resources/files");
        assert_refusal(&reply, "outside_root", 0, &ctx);
        w.assert_list_event(&ev, Some("out"), "outside_root", None, 0, &ctx);
        let (read, _) = assert_read_refused(&w, "report.md", "report.md", "outside_root");
        assert!(!read.text().contains("SENTINEL"), "{ctx}: no secret bytes");
    }
}

#[test]
fn listing_echoes_each_declared_root_verbatim() {
    for (root, file) in [
        ("out/", "out/r.md"),
        ("./out", "out/r.md"),
        (".", "r.md"),
        ("out/sub/", "out/sub/r.md"),
    ] {
        let (_fs, w) = mem(&files_yaml(root, Some(MAX)), Containment::Advisory, |fs| {
            fs.add_file(file, REPORT, MTIME);
        });
        let (reply, ev) = w.get("/resources/files");
        assert_eq!(reply.status, 200, "root {root:?}");
        assert_headers(
            &reply,
            &listing_headers(&reply.body, 0, Containment::Advisory, root),
            root,
        );
        assert_eq!(
            reply.text(),
            listing_json(
                root,
                MAX as u64,
                0,
                Containment::Advisory,
                &[("r.md", REPORT, MTIME)]
            ),
            "root {root:?}"
        );
        w.assert_list_event(&ev, Some(root), "ok", Some((1, REPORT.len())), 0, root);
        assert_read_ok(&w, "r.md", "r.md", REPORT, MTIME, root);
    }
}

#[test]
fn symlinks_in_the_roots_own_path_are_followed_in_every_class() {
    for class in Containment::ALL {
        let (_fs, w) = mem(&files_yaml("data/out", Some(MAX)), class, |fs| {
            fs.add_file("store/real/report.md", REPORT, MTIME);
            fs.add_symlink("data", "store");
            fs.add_symlink("store/out", "real");
        });
        let ctx = format!("linked root ({})", class.as_str());
        let (reply, ev) = w.get("/resources/files");
        assert_eq!(reply.status, 200, "{ctx}: {}", reply.text());
        assert_eq!(
            reply.text(),
            listing_json(
                "data/out",
                MAX as u64,
                0,
                class,
                &[("report.md", REPORT, MTIME)]
            ),
            "{ctx}"
        );
        w.assert_list_event(
            &ev,
            Some("data/out"),
            "ok",
            Some((1, REPORT.len())),
            0,
            &ctx,
        );
        assert_read_ok(&w, "report.md", "report.md", REPORT, MTIME, "data/out");
    }
}

// ------------------------------------------------------------------------------------------------
// 2. Reads (D-2)
// ------------------------------------------------------------------------------------------------

fn build_read_tree(fs: &MemoryFilesystem) {
    fs.add_file("secret.txt", SECRET, MTIME);
    fs.add_file("out/report.md", REPORT, MTIME);
    fs.add_file("out/my report.md", b"spaced name", MTIME + 1);
    fs.add_file("out/sub/report.md", b"nested report", MTIME + 2);
    fs.add_file("out/a", b"plain a", MTIME + 3);
    fs.add_file("out/é.txt", b"accented", MTIME + 4);
    fs.add_file("out/.hidden", b"hidden", MTIME + 5);
    fs.add_file("out/exact.bin", vec![b'E'; MAX], MTIME + 6);
    fs.add_file("out/over.bin", vec![b'Q'; MAX + 1], MTIME + 7);
    fs.add_file("out/broken", b"BROKEN-BYTES", MTIME + 8);
    fs.inject_read_fault("out/broken", io::ErrorKind::Other);
    fs.add_file("out/what?.md", b"question", MTIME + 9);
    fs.add_file("out/100%.txt", b"percent", MTIME + 10);
    fs.add_fifo("out/fifo");
    fs.add_socket("out/sock");
    fs.add_char_device("out/dev");
}

fn read_world(class: Containment) -> (Arc<MemoryFilesystem>, World) {
    mem(&files_yaml("out/", Some(MAX)), class, build_read_tree)
}

#[test]
fn read_serves_exact_bytes_with_exact_headers_and_trace() {
    for class in Containment::ALL {
        let (_fs, w) = read_world(class);
        assert_read_ok(&w, "report.md", "report.md", REPORT, MTIME, "out/");
        assert_read_ok(&w, ".hidden", ".hidden", b"hidden", MTIME + 5, "out/");
        assert_read_ok(&w, "%C3%A9.txt", "é.txt", b"accented", MTIME + 4, "out/");
    }
}

#[test]
fn the_declared_root_is_echoed_after_trimming() {
    let (_fs, w) = mem(
        &files_yaml("  out/ ", Some(MAX)),
        Containment::Advisory,
        |fs| {
            fs.add_file("out/report.md", REPORT, MTIME);
        },
    );
    assert_read_ok(&w, "report.md", "report.md", REPORT, MTIME, "out/");
    let (reply, ev) = w.get("/resources/files");
    assert_eq!(reply.json()["root"], "out/");
    assert_eq!(reply.header("x-murmur-export-root"), Some("out/"));
    assert_eq!(ev["root"], "out/");
}

#[test]
fn read_echoes_export_root_verbatim_for_each_root_form() {
    for (root, file) in [
        ("out/", "out/report.md"),
        ("./out", "out/report.md"),
        (".", "report.md"),
    ] {
        let (_fs, w) = mem(&files_yaml(root, Some(MAX)), Containment::Sealed, |fs| {
            fs.add_file(file, REPORT, MTIME);
        });
        assert_read_ok(&w, "report.md", "report.md", REPORT, MTIME, root);
    }
}

#[test]
fn read_at_max_bytes_serves_and_one_byte_over_is_too_large() {
    let (_fs, w) = read_world(Containment::Advisory);
    assert_read_ok(
        &w,
        "exact.bin",
        "exact.bin",
        &[b'E'; MAX],
        MTIME + 6,
        "out/",
    );
    let (reply, ev) = assert_read_refused(&w, "over.bin", "over.bin", "too_large");
    assert!(
        !reply.body.contains(&b'Q'),
        "413 carries no byte of the file: {}",
        reply.text()
    );
    assert!(
        ev["reason"].as_str().unwrap().contains("201"),
        "the trace reason names the size: {ev}"
    );
}

#[test]
fn read_percent_decoding_and_query_are_handled_before_resolution() {
    let (_fs, w) = read_world(Containment::Advisory);
    assert_read_ok(
        &w,
        "my%20report.md",
        "my report.md",
        b"spaced name",
        MTIME + 1,
        "out/",
    );
    assert_read_ok(
        &w,
        "sub%2Freport.md",
        "sub/report.md",
        b"nested report",
        MTIME + 2,
        "out/",
    );
    assert_read_ok(
        &w,
        "sub%2freport.md",
        "sub/report.md",
        b"nested report",
        MTIME + 2,
        "out/",
    );
    assert_read_ok(&w, "report.md?x=../../", "report.md", REPORT, MTIME, "out/");
    assert_read_ok(&w, "report.md?", "report.md", REPORT, MTIME, "out/");
    assert_read_ok(
        &w,
        "sub/report.md?a=b?c",
        "sub/report.md",
        b"nested report",
        MTIME + 2,
        "out/",
    );
    // An encoded `?` or `%` is part of the name, never a query or a second escape.
    assert_read_ok(&w, "what%3F.md", "what?.md", b"question", MTIME + 9, "out/");
    assert_read_ok(&w, "100%25.txt", "100%.txt", b"percent", MTIME + 10, "out/");
    assert_read_refused(&w, "100%2525.txt", "100%25.txt", "not_found");
    // A `+` is a plus, not a space.
    assert_read_refused(&w, "my+report.md", "my+report.md", "not_found");
}

#[test]
fn lexical_refusals_are_outside_root_and_never_normalised() {
    for class in Containment::ALL {
        let fs = Arc::new(CountingFs::<MemoryFilesystem>::default());
        build_read_tree(&fs.inner);
        let w = world_over(&files_yaml("out/", Some(MAX)), class, fs.clone(), None);
        // Sanity: a servable request does reach the filesystem.
        let opens = fs.opens();
        assert_read_ok(&w, "report.md", "report.md", REPORT, MTIME, "out/");
        assert!(fs.opens() > opens, "a read opens the root");
        // (raw, trace path): the trace holds the decoded path, or the raw one when it does
        // not decode.
        let cases = [
            ("", ""),
            ("a//b", "a//b"),
            ("./a", "./a"),
            ("a/", "a/"),
            ("sub/../a", "sub/../a"),
            ("%2e%2e/x", "../x"),
            ("%2E%2E/secret.txt", "../secret.txt"),
            ("..%2Fsecret.txt", "../secret.txt"),
            ("a%00b", "a\0b"),
            ("report.md%00", "report.md\0"),
            ("%2Fetc", "/etc"),
            ("%2Fout%2Freport.md", "/out/report.md"),
            ("sub//report.md", "sub//report.md"),
            ("./report.md", "./report.md"),
            ("sub/../report.md", "sub/../report.md"),
            ("sub/./report.md", "sub/./report.md"),
            ("sub%2F..%2Freport.md", "sub/../report.md"),
            ("report.md/", "report.md/"),
            ("..", ".."),
            (".", "."),
            ("%zz", "%zz"),
            ("%", "%"),
            ("report%2", "report%2"),
            ("%u002e", "%u002e"),
            ("%C3", "%C3"),
        ];
        for (raw, decoded) in cases {
            let opens = fs.opens();
            let (reply, _) = assert_read_refused(&w, raw, decoded, "outside_root");
            assert!(
                !reply.text().contains("nominal") && !reply.text().contains("SENTINEL"),
                "{raw:?}: no file bytes"
            );
            assert_eq!(
                fs.opens(),
                opens,
                "{raw:?}: refused without touching the filesystem (D-2.3)"
            );
        }
    }
}

#[test]
fn non_regular_files_missing_paths_and_read_faults() {
    for class in Containment::ALL {
        let (_fs, w) = read_world(class);
        for raw in ["sub", "fifo", "sock", "dev"] {
            assert_read_refused(&w, raw, raw, "not_a_regular_file");
        }
        let too_long_name = "n".repeat(256);
        let too_long_path = ["d"; 2100].join("/");
        for raw in [
            "missing.md",
            "nope/report.md",
            "report.md/x",
            "REPORT.md",
            &too_long_name,
            &too_long_path,
        ] {
            assert_read_refused(&w, raw, raw, "not_found");
        }
        let (reply, ev) = assert_read_refused(&w, "broken", "broken", "io_error");
        assert!(
            !reply.text().contains("BROKEN") && !reply.text().contains("EIO"),
            "the wire carries neither file bytes nor OS detail: {}",
            reply.text()
        );
        let reason = ev["reason"].as_str().unwrap();
        assert!(
            reason.contains("injected read fault (EIO)"),
            "the OS detail goes to the trace reason: {reason}"
        );
    }
}

/// The counting wrapper passes the filesystem conformance suite on every implementation.
#[test]
fn the_counting_wrapper_conforms() {
    support::fs_suite::run_all(support::fs_suite::Wrap {
        name: "support::world::CountingFs (operator_router)",
        wrap: |fs| Arc::new(CountingFs::new(support::fs_suite::Shared(fs))),
    });
}

fn build_symlink_tree(fs: &MemoryFilesystem) {
    fs.add_file("secret.txt", SECRET, MTIME);
    fs.add_file("out/target.txt", b"TARGET", MTIME + 1);
    fs.add_file("out/sub/file.txt", b"SUBFILE", MTIME + 2);
    fs.add_fifo("out/fifo");
    fs.add_symlink("out/link-ok", "target.txt");
    fs.add_symlink("out/sub/link-up", "../target.txt");
    fs.add_symlink("out/link-chain", "link-ok");
    fs.add_symlink("out/link-dir", "sub");
    fs.add_symlink("out/link-escape", "../secret.txt");
    fs.add_symlink("out/link-comeback", "../out/target.txt");
    fs.add_symlink("out/link-abs", "/out/target.txt");
    fs.add_symlink("out/link-dangle", "missing.txt");
    fs.add_symlink("out/link-loop", "link-loop");
    fs.add_symlink("out/link-root", ".");
    fs.add_symlink("out/link-fifo", "fifo");
}

#[test]
fn symlink_reads_per_containment_class() {
    // (path, follow classes) -> Ok(bytes, mtime) or Err(code); scoped always refuses.
    type Row = (&'static str, Result<(&'static [u8], i64), &'static str>);
    let rows: [Row; 12] = [
        ("link-ok", Ok((b"TARGET", MTIME + 1))),
        ("sub/link-up", Ok((b"TARGET", MTIME + 1))),
        ("link-chain", Ok((b"TARGET", MTIME + 1))),
        ("link-dir/file.txt", Ok((b"SUBFILE", MTIME + 2))),
        ("link-escape", Err("outside_root")),
        ("link-comeback", Err("outside_root")),
        ("link-abs", Err("outside_root")),
        ("link-dangle", Err("not_found")),
        ("link-loop", Err("not_found")),
        ("link-dir", Err("not_a_regular_file")),
        ("link-root", Err("not_a_regular_file")),
        ("link-fifo", Err("not_a_regular_file")),
    ];
    for class in Containment::ALL {
        let (_fs, w) = mem(&files_yaml("out/", Some(MAX)), class, build_symlink_tree);
        for (path, expected) in rows {
            match (class, expected) {
                (Containment::Scoped, _) => {
                    assert_read_refused(&w, path, path, "symlink_refused");
                }
                (_, Ok((body, mtime))) => assert_read_ok(&w, path, path, body, mtime, "out/"),
                (_, Err(code)) => {
                    let (reply, _) = assert_read_refused(&w, path, path, code);
                    assert!(!reply.text().contains("SENTINEL"), "{path}: no secret");
                }
            }
        }
        // A plain file beside the links is served in every class.
        assert_read_ok(&w, "target.txt", "target.txt", b"TARGET", MTIME + 1, "out/");
    }
}

// ------------------------------------------------------------------------------------------------
// 3. Method first, and routes (D-4.2, D-4.3)
// ------------------------------------------------------------------------------------------------

fn non_get_methods() -> Vec<Method> {
    vec![
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
        Method::TRACE,
        Method::from_bytes(b"MKCOL").unwrap(),
    ]
}

#[test]
fn every_method_but_get_is_405_with_allow_get_whatever_is_declared() {
    let worlds = [
        (
            "both planes",
            mem(&both_planes_yaml(), Containment::Advisory, build_read_tree).1,
        ),
        (
            "no planes",
            mem(NO_PLANES_YAML, Containment::Advisory, build_read_tree).1,
        ),
    ];
    let x_handle_id = &sha256_hex(b"x")[..16];
    for (declared, w) in &worlds {
        for method in non_get_methods() {
            for path in [
                "/resources/files",
                "/resources/files?x=1",
                "/resources/files/x",
                "/resources/files/report.md",
                "/resources/files/..%2Fsecret.txt",
                "/resources/peer/x",
                "/resources/peer",
                "/resources/peer/",
                "/resources",
                "/resources/",
                "/resources/nope",
            ] {
                let ctx = format!("{declared}: {method} {path}");
                let (reply, ev) = w.call(&method, path);
                assert_eq!(reply.status, 405, "{ctx}: status");
                let extra: Vec<(&str, String)> = if path == "/resources/peer/x" {
                    vec![("x-murmur-handle-id", x_handle_id.to_owned())]
                } else {
                    Vec::new()
                };
                if method == Method::HEAD && reply.body.is_empty() {
                    // HEAD: same status and headers; the body may be dropped here or by hyper.
                    assert_eq!(reply.status, 405, "{ctx}: status");
                    let mut headers = refusal_headers("method_not_allowed", 0);
                    headers.extend(extra.iter().cloned());
                    assert_headers(&reply, &headers, &ctx);
                } else {
                    assert_refusal_with(&reply, "method_not_allowed", 0, &extra, &ctx);
                }
                assert!(
                    !reply.text().contains("nominal"),
                    "{ctx}: a 405 never carries file bytes"
                );
                let generation = w.generation();
                if path.starts_with("/resources/files?") || path == "/resources/files" {
                    let root = (*declared == "both planes").then_some("out/");
                    w.assert_list_event(&ev, root, "method_not_allowed", None, generation, &ctx);
                } else if path.starts_with("/resources/peer") {
                    let id = (path == "/resources/peer/x").then_some(x_handle_id);
                    w.assert_redeem_refusal_event(&ev, id, "method_not_allowed", &ctx);
                } else {
                    let trace_path = match path.strip_prefix("/resources/files/") {
                        Some(rel) => rel.replace("%2F", "/"),
                        None => path.to_owned(),
                    };
                    w.assert_read_event(
                        &ev,
                        &trace_path,
                        "method_not_allowed",
                        None,
                        generation,
                        &ctx,
                    );
                }
                // The reason says what was refused: the method, never "no such route".
                let reason = ev["reason"].as_str().unwrap_or_default();
                assert!(
                    !reason.is_empty() && !reason.contains("no such route"),
                    "{ctx}: reason {reason:?}"
                );
            }
        }
    }
}

#[test]
fn unknown_routes_under_resources_are_not_found_reads() {
    let (_fs, w) = mem(&both_planes_yaml(), Containment::Advisory, build_read_tree);
    for path in [
        "/resources",
        "/resources/",
        "/resources/other",
        "/resources/filesx",
        "/resources/files%2Freport.md",
        "/resources/nope/deeper",
    ] {
        let (reply, ev) = w.get(path);
        assert_refusal(&reply, "not_found", 0, path);
        w.assert_read_event(&ev, path, "not_found", None, 0, path);
    }
    // The query is cut before the route is recorded.
    let (reply, ev) = w.get("/resources/other?x=1");
    assert_refusal(&reply, "not_found", 0, "other with query");
    w.assert_read_event(
        &ev,
        "/resources/other",
        "not_found",
        None,
        0,
        "other with query",
    );
}

#[test]
fn undeclared_files_export_is_no_resource_plane_for_listing_and_reads() {
    let (_fs, w) = mem(NO_PLANES_YAML, Containment::Advisory, build_read_tree);
    let (reply, ev) = w.get("/resources/files");
    assert_refusal(&reply, "no_resource_plane", 0, "listing");
    w.assert_list_event(&ev, None, "no_resource_plane", None, 0, "listing");
    for (raw, decoded) in [
        ("report.md", "report.md"),
        ("missing", "missing"),
        ("..%2Fsecret.txt", "../secret.txt"),
        ("", ""),
    ] {
        let (reply, _) = assert_read_refused(&w, raw, decoded, "no_resource_plane");
        assert!(!reply.text().contains("nominal"), "{raw}: no bytes");
    }
    // A peer-only manifest still has no operator plane.
    let peer_only = "name: reporter\nexports:\n  peer_files: { root: out/ }\n";
    let (_fs, w) = mem(peer_only, Containment::Advisory, build_read_tree);
    let (reply, _) = w.get("/resources/files");
    assert_refusal(&reply, "no_resource_plane", 0, "peer-only listing");
    assert_read_refused(&w, "report.md", "report.md", "no_resource_plane");
}

#[test]
fn peer_index_is_not_found_when_declared_and_no_peer_plane_when_not() {
    let cases = [
        (both_planes_yaml(), "not_found"),
        (files_yaml("out/", Some(MAX)), "no_peer_plane"),
    ];
    for (yaml, code) in cases {
        let (_fs, w) = mem(&yaml, Containment::Advisory, build_read_tree);
        for path in ["/resources/peer", "/resources/peer/"] {
            let ctx = format!("{path} ({code})");
            let (reply, ev) = w.get(path);
            assert_refusal(&reply, code, 0, &ctx);
            w.assert_redeem_refusal_event(&ev, None, code, &ctx);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// 4. Generation (D-5)
// ------------------------------------------------------------------------------------------------

#[test]
fn generation_is_reported_everywhere_and_moves_independently_of_the_etag() {
    let (fs, w) = mem(
        &files_yaml("out/", Some(MAX)),
        Containment::Advisory,
        |fs| {
            fs.add_file("out/report.md", REPORT, MTIME);
        },
    );
    let etag = |reply: &Reply| reply.header("etag").map(str::to_owned);

    let (first, ev) = w.get("/resources/files/report.md");
    assert_eq!(first.header("x-murmur-generation"), Some("0"));
    assert_eq!(ev["generation"], 0);

    assert_eq!(
        w.capsule.task_completed(),
        1,
        "task_completed returns the new value"
    );
    assert_read_ok(&w, "report.md", "report.md", REPORT, MTIME, "out/");
    let (second, _) = w.get("/resources/files/report.md");
    assert_eq!(second.header("x-murmur-generation"), Some("1"));
    assert_eq!(etag(&first), etag(&second), "unchanged file: same etag");

    let (listing, ev) = w.get("/resources/files");
    assert_eq!(listing.header("x-murmur-generation"), Some("1"));
    assert_eq!(listing.json()["generation"], 1, "listing body generation");
    w.assert_list_event(
        &ev,
        Some("out/"),
        "ok",
        Some((1, REPORT.len())),
        1,
        "listing",
    );

    let (missing, ev) = w.get("/resources/files/missing");
    assert_refusal(&missing, "not_found", 1, "refusals carry the generation");
    assert_eq!(ev["generation"], 1);

    // Rewritten (a new inode, as a rename over it): new etag, generation unchanged.
    fs.add_file("out/report.md", b"# Report v2\n", MTIME + 60_000);
    assert_read_ok(
        &w,
        "report.md",
        "report.md",
        b"# Report v2\n",
        MTIME + 60_000,
        "out/",
    );
    let (third, _) = w.get("/resources/files/report.md");
    assert_ne!(etag(&third), etag(&second), "rewritten file: new etag");
    assert_eq!(third.header("x-murmur-generation"), Some("1"));

    assert_eq!(w.capsule.task_completed(), 2);
    assert_eq!(w.capsule.task_completed(), 3);
    let (fourth, ev) = w.get("/resources/files/report.md");
    assert_eq!(fourth.header("x-murmur-generation"), Some("3"));
    assert_eq!(ev["generation"], 3);
    assert_eq!(etag(&fourth), etag(&third));
    let (listing, ev) = w.get("/resources/files");
    assert_eq!(listing.json()["generation"], 3);
    assert_eq!(listing.header("x-murmur-generation"), Some("3"));
    assert_eq!(ev["generation"], 3);
}

// ------------------------------------------------------------------------------------------------
// 5. Trace (D-6.1, D-6.3, D-6.4)
// ------------------------------------------------------------------------------------------------

#[test]
fn trace_envelope_follows_the_clock_and_session_and_ids_are_unique() {
    let (_fs, w) = read_world(Containment::Scoped);
    let requests = [
        (Method::GET, "/resources/files"),
        (Method::GET, "/resources/files/report.md"),
        (Method::GET, "/resources/files/missing"),
        (Method::POST, "/resources/files/report.md"),
        (Method::GET, "/resources/nope"),
        (Method::GET, "/resources/peer/x"),
    ];
    let mut ids = BTreeSet::new();
    for (i, (method, path)) in requests.iter().enumerate() {
        w.clock.set(NOW_MS + 1_000 * i as i64);
        let (_, ev) = w.call(method, path);
        assert_eq!(ev["timestamp"], NOW_MS + 1_000 * i as i64, "{path}");
        assert_eq!(ev["session_id"], w.capsule.session_id(), "{path}");
        assert!(
            ids.insert(ev["event_id"].as_str().unwrap().to_owned()),
            "{path}: event ids are unique"
        );
    }
    // Each line is one compact JSON object.
    let recorder = &w.trace;
    assert_eq!(recorder.lines().len(), requests.len());
    for line in recorder.lines() {
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(line.starts_with(r#"{"event_type":""#), "{line}");
    }
}

#[test]
fn the_card_and_foreign_paths_are_not_resource_requests() {
    let (_fs, w) = read_world(Containment::Advisory);
    let before = w.lines();
    let card = w.reply(&Method::GET, "/.well-known/agent-card.json");
    assert_eq!(card.status, 200);
    assert_eq!(
        w.lines(),
        before,
        "the card is not under /resources: no trace line"
    );
    for path in ["/", "/resourcesx", "/files/report.md"] {
        let reply = w.reply(&Method::GET, path);
        assert_eq!(reply.status, 404, "{path}: not this router's");
        assert!(!reply.text().contains("nominal"), "{path}: no file bytes");
        assert_eq!(
            w.lines(),
            before,
            "{path}: not under /resources: no trace line"
        );
    }
}

#[test]
fn fail_closed_when_the_trace_cannot_be_written() {
    let fs = Arc::new(MemoryFilesystem::new());
    build_read_tree(&fs);
    let w = world_over(
        &files_yaml("out/", Some(MAX)),
        Containment::Advisory,
        fs,
        Some(Arc::new(FailingTraceSink)),
    );
    let reply = w.reply(&Method::GET, "/resources/files/report.md");
    assert_refusal(&reply, "io_error", 0, "read with a failing trace");
    assert!(
        !reply.text().contains("nominal"),
        "no file bytes leave unrecorded: {}",
        reply.text()
    );
    let reply = w.reply(&Method::GET, "/resources/files/exact.bin");
    assert_refusal(&reply, "io_error", 0, "max-size read with a failing trace");
    assert!(
        !reply.body.contains(&b'E'),
        "no file bytes: {}",
        reply.text()
    );
    let reply = w.reply(&Method::GET, "/resources/files");
    assert_refusal(&reply, "io_error", 0, "listing with a failing trace");
    assert!(!reply.text().contains("report.md"), "no listing leaks");
    // Refusals fail closed too: the answer is io_error whatever the original code.
    let reply = w.reply(&Method::GET, "/resources/files/missing");
    assert_refusal(&reply, "io_error", 0, "missing file with a failing trace");
    let reply = w.reply(&Method::POST, "/resources/files/report.md");
    assert_eq!(reply.status, 500, "405 with a failing trace fails closed");
    // The same holds after a task completed: the generation is still reported.
    w.capsule.task_completed();
    let reply = w.reply(&Method::GET, "/resources/files/report.md");
    assert_refusal(&reply, "io_error", 1, "read at generation 1");
}

// ------------------------------------------------------------------------------------------------
// 6. One fixed message per code (D-4.4)
// ------------------------------------------------------------------------------------------------

#[test]
fn one_fixed_message_per_code_whatever_the_cause() {
    let mut book: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut merge = |w: &World| {
        for (code, messages) in w.messages().iter() {
            book.entry(code.clone())
                .or_default()
                .extend(messages.iter().cloned());
        }
    };
    for class in Containment::ALL {
        let (_fs, w) = mem(&both_planes_yaml(), class, |fs| {
            build_read_tree(fs);
            build_symlink_tree(fs);
        });
        for path in [
            // not_found: missing file, missing dir, dangling, loop, unknown routes, peer index.
            "/resources/files/missing.md",
            "/resources/files/nope/x",
            "/resources/files/link-dangle",
            "/resources/files/link-loop",
            "/resources/other",
            "/resources",
            "/resources/peer",
            // outside_root: lexical, escape, invalid escape, absolute link.
            "/resources/files/",
            "/resources/files/%2e%2e/secret.txt",
            "/resources/files/%zz",
            "/resources/files/link-escape",
            "/resources/files/link-abs",
            // symlink_refused (scoped) or followed.
            "/resources/files/link-ok",
            "/resources/files/sub/link-up",
            // not_a_regular_file: directory, fifo, socket, device, link to dir.
            "/resources/files/sub",
            "/resources/files/fifo",
            "/resources/files/sock",
            "/resources/files/dev",
            "/resources/files/link-dir",
            // too_large, io_error.
            "/resources/files/over.bin",
            "/resources/files/broken",
        ] {
            w.call(&Method::GET, path);
        }
        for path in [
            "/resources/files",
            "/resources/files/x",
            "/resources/peer/x",
        ] {
            w.call(&Method::DELETE, path);
            w.call(&Method::HEAD, path);
        }
        merge(&w);
    }
    let (_fs, w) = mem(NO_PLANES_YAML, Containment::Advisory, build_read_tree);
    for path in [
        "/resources/files",
        "/resources/files/report.md",
        "/resources/peer",
        "/resources/peer/x",
    ] {
        w.call(&Method::GET, path);
    }
    w.call(&Method::PUT, "/resources/files");
    merge(&w);
    let fs = Arc::new(MemoryFilesystem::new());
    build_read_tree(&fs);
    let failing = world_over(
        &files_yaml("out/", Some(MAX)),
        Containment::Advisory,
        fs,
        Some(Arc::new(FailingTraceSink)),
    );
    failing.reply(&Method::GET, "/resources/files/report.md");
    failing.reply(&Method::GET, "/resources/files");
    merge(&failing);

    let expected_codes = [
        "io_error",
        "method_not_allowed",
        "no_peer_plane",
        "no_resource_plane",
        "not_a_regular_file",
        "not_found",
        "outside_root",
        "symlink_refused",
        "too_large",
    ];
    assert_eq!(
        book.keys().map(String::as_str).collect::<Vec<_>>(),
        expected_codes,
        "every code was exercised"
    );
    for (code, messages) in &book {
        assert_eq!(
            messages.len(),
            1,
            "{code}: one fixed message, saw {messages:?}"
        );
        let message = messages.iter().next().unwrap();
        for leak in ["secret", "SENTINEL", "report", "EIO", "link-", "out/", "%"] {
            assert!(
                !message.contains(leak),
                "{code}: message {message:?} leaks {leak:?}"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------------
// 7. The agent card (D-4.7)
// ------------------------------------------------------------------------------------------------

#[test]
fn agent_card_names_the_capsule_and_its_url() {
    let (_fs, w) = read_world(Containment::Advisory);
    let reply = w.reply(&Method::GET, "/.well-known/agent-card.json");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("connection"), Some("close"));
    let card = reply.json();
    assert_eq!(card["name"], "reporter");
    assert_eq!(card["url"], URL);
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["version"], env!("CARGO_PKG_VERSION"));
    let interfaces = card["supportedInterfaces"].as_array().expect("an array");
    assert_eq!(
        interfaces[0],
        json!({"url": URL, "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"})
    );
    // The default skill describes the planes declared: here the operator plane alone.
    let skill = &card["skills"][0];
    assert_eq!(skill["id"], "file-surfaces");
    let described = skill["description"].as_str().unwrap();
    assert!(described.contains("/resources/files"), "{described}");
    assert!(!described.contains("/resources/peer"), "{described}");
    // The card is served whatever the manifest declares, with the same name and URL.
    let (_fs, bare) = mem(NO_PLANES_YAML, Containment::Sealed, |_| {});
    let reply = bare.reply(&Method::GET, "/.well-known/agent-card.json");
    assert_eq!(reply.status, 200);
    let bare_card = reply.json();
    for field in ["name", "url", "supportedInterfaces", "version"] {
        assert_eq!(bare_card[field], card[field], "{field}");
    }
    assert_eq!(bare_card["skills"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_non_get_on_the_card_gets_the_cards_own_405_and_no_trace_line() {
    let (_fs, w) = read_world(Containment::Advisory);
    let before = w.lines();
    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let reply = w.reply(&method, "/.well-known/agent-card.json");
        assert_eq!(reply.status, 405, "{method}");
        assert_eq!(reply.header("allow"), Some("GET"), "{method}");
        assert_eq!(
            reply.json(),
            json!({"error": "method_not_allowed", "message": "only GET is allowed on the agent card"}),
            "{method}"
        );
    }
    assert_eq!(w.lines(), before, "the card is not under /resources");
}

#[test]
fn a_post_to_the_json_rpc_url_gets_the_json_rpc_error_and_no_trace_line() {
    let (_fs, w) = read_world(Containment::Advisory);
    let before = w.lines();
    let expected = json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32601, "message": "this capsule serves files only"}});
    for path in ["/", "/?q=1"] {
        let reply = w.reply(&Method::POST, path);
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.json(), expected, "{path}");
    }
    // Only POST, and only there: GET `/` and a POST elsewhere stay the router's plain 404.
    assert_eq!(w.reply(&Method::GET, "/").status, 404);
    assert_eq!(w.reply(&Method::POST, "/rpc").status, 404);
    assert_eq!(w.lines(), before, "no trace line");
    // Under a base path the endpoint is the base path itself, and still the card's URL's path
    // (`/` here).
    let nested = w.capsule.router().with_base_path("/capsules/a").unwrap();
    for path in ["/capsules/a", "/capsules/a/", "/"] {
        let reply = nested.respond(&Method::POST, path, &[]);
        assert_eq!(reply.status(), 200, "{path}");
    }
    for path in ["/capsules/ab", "/capsules/a/x", "/capsules"] {
        assert_eq!(
            nested.respond(&Method::POST, path, &[]).status(),
            404,
            "{path}"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// A file that grows during the read (D-2.7), through a test-only Filesystem
// ------------------------------------------------------------------------------------------------

/// One file, `grow.log` under `out/`, whose descriptor reports `declared` bytes but yields
/// `actual` (as if it grew between the fstat and the read).
#[derive(Debug, Clone)]
struct GrowingFs {
    declared: u64,
    actual: Vec<u8>,
}

#[derive(Debug)]
struct GrowingRoot(GrowingFs);

#[derive(Debug)]
struct GrowingFile {
    cursor: Cursor<Vec<u8>>,
    meta: FileMeta,
}

impl Read for GrowingFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.cursor.read(buf)
    }
}

impl OpenFile for GrowingFile {
    fn meta(&self) -> FileMeta {
        self.meta
    }
}

impl RootDir for GrowingRoot {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        if target.as_str() != "grow.log" {
            return Err(FsError::new(
                FsErrorKind::NotFound,
                "no such entry (ENOENT)",
            ));
        }
        Ok(Box::new(GrowingFile {
            cursor: Cursor::new(self.0.actual.clone()),
            meta: FileMeta {
                size: self.0.declared,
                mtime_ms: MTIME,
                dev: 1,
                ino: 42,
                mtime_ns: i128::from(MTIME) * 1_000_000,
                ctime_ns: i128::from(MTIME) * 1_000_000,
            },
        }))
    }

    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        Ok(vec![
            RelPath::parse_canonical("grow.log").expect("a plain name"),
        ])
    }
}

impl Filesystem for GrowingFs {
    fn open_root(&self, root: &RootPath, _class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        assert_eq!(
            root.relative(),
            "out",
            "the declared root reaches the backend"
        );
        Ok(Box::new(GrowingRoot(self.clone())))
    }

    fn check_root(&self, _root: &RootPath) -> Result<(), FsError> {
        Ok(())
    }

    fn land(&self, _dir: &str, _name: &str, _bytes: &[u8]) -> Result<(), FsError> {
        Err(FsError::new(FsErrorKind::Io, "read-only test filesystem"))
    }
}

fn growing_world(declared: usize, actual: usize) -> (Vec<u8>, World) {
    let bytes: Vec<u8> = (0..actual).map(|i| b'a' + (i % 26) as u8).collect();
    let fs = Arc::new(GrowingFs {
        declared: declared as u64,
        actual: bytes.clone(),
    });
    let w = world_over(
        &files_yaml("out/", Some(MAX)),
        Containment::Sealed,
        fs,
        None,
    );
    (bytes, w)
}

#[test]
fn a_file_that_grows_past_max_bytes_during_the_read_is_too_large() {
    for (declared, actual) in [
        (MAX - 5, MAX + 5),
        (MAX - 9, MAX + 1),
        (MAX, MAX + 10),
        (1, MAX + 1000),
    ] {
        let (bytes, w) = growing_world(declared, actual);
        let (reply, ev) = assert_read_refused(&w, "grow.log", "grow.log", "too_large");
        let tail = &bytes[..16];
        assert!(
            !reply.body.windows(tail.len()).any(|win| win == tail),
            "{declared}->{actual}: no file bytes in the 413"
        );
        assert!(ev["reason"].as_str().unwrap().contains("grew"), "{ev}");
    }
}

#[test]
fn a_file_that_grows_but_still_fits_serves_the_bytes_actually_read() {
    for (declared, actual) in [(150, 160), (MAX - 10, MAX), (0, 10)] {
        let (bytes, w) = growing_world(declared, actual);
        // etag, body and trace all describe the buffer served, not the size at open.
        assert_read_ok(&w, "grow.log", "grow.log", &bytes, MTIME, "out/");
        // A listing reads at most one byte past the size the descriptor gave: a file that
        // grew past it is being written, and is omitted (D-3.3).
        let (listing, ev) = w.get("/resources/files");
        assert_eq!(
            listing.text(),
            listing_json("out/", MAX as u64, 0, Containment::Sealed, &[]),
            "{declared}->{actual}: listing"
        );
        w.assert_list_event(&ev, Some("out/"), "ok", Some((0, 0)), 0, "grown listing");
    }
}

/// A workdir whose export root cannot be opened (`EACCES`), or whose walk fails.
#[derive(Debug)]
struct BrokenRootFs {
    fail_open: bool,
}

impl RootDir for BrokenRootFs {
    fn open_file(&self, _target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        Err(FsError::new(
            FsErrorKind::Io,
            "open: permission denied (EACCES)",
        ))
    }

    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        Err(FsError::new(
            FsErrorKind::Io,
            "getdents: permission denied (EACCES)",
        ))
    }
}

impl Filesystem for BrokenRootFs {
    fn open_root(
        &self,
        _root: &RootPath,
        _class: Containment,
    ) -> Result<Box<dyn RootDir>, FsError> {
        if self.fail_open {
            Err(FsError::new(
                FsErrorKind::Io,
                "open root: permission denied (EACCES)",
            ))
        } else {
            Ok(Box::new(BrokenRootFs { fail_open: false }))
        }
    }

    fn check_root(&self, _root: &RootPath) -> Result<(), FsError> {
        Ok(())
    }

    fn land(&self, _dir: &str, _name: &str, _bytes: &[u8]) -> Result<(), FsError> {
        Err(FsError::new(FsErrorKind::Io, "read-only test filesystem"))
    }
}

#[test]
fn an_unreadable_root_is_io_error_with_the_detail_only_in_the_trace() {
    for fail_open in [true, false] {
        let ctx = if fail_open {
            "root open fails"
        } else {
            "walk fails"
        };
        let fs = Arc::new(BrokenRootFs { fail_open });
        let w = world_over(
            &files_yaml("out/", Some(MAX)),
            Containment::Advisory,
            fs,
            None,
        );
        let (reply, ev) = w.get("/resources/files");
        assert_refusal(&reply, "io_error", 0, ctx);
        assert!(
            !reply.text().contains("EACCES"),
            "{ctx}: no OS detail on the wire"
        );
        w.assert_list_event(&ev, Some("out/"), "io_error", None, 0, ctx);
        assert!(
            ev["reason"].as_str().unwrap().contains("EACCES"),
            "{ctx}: {ev}"
        );
        let (reply, ev) = assert_read_refused(&w, "report.md", "report.md", "io_error");
        assert!(
            !reply.text().contains("EACCES"),
            "{ctx}: no OS detail on the wire"
        );
        assert!(
            ev["reason"].as_str().unwrap().contains("EACCES"),
            "{ctx}: {ev}"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// The async entry point (`handle`) answers as `respond` does
// ------------------------------------------------------------------------------------------------

async fn handle<B>(w: &World, request: Request<B>) -> (Reply, Value) {
    let before = w.lines();
    let reply = Reply::of(w.capsule.router().handle(request).await);
    let events = w.trace.events();
    assert_eq!(events.len(), before + 1, "handle: exactly one trace line");
    (reply, events[before].clone())
}

#[tokio::test]
async fn handle_reads_with_query_and_percent_escapes() {
    let (_fs, w) = read_world(Containment::Advisory);
    let request = Request::get("/resources/files/my%20report.md?x=../../")
        .body(())
        .unwrap();
    let (reply, ev) = handle(&w, request).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_headers(
        &reply,
        &read_ok_headers(b"spaced name", MTIME + 1, 0, Containment::Advisory, "out/"),
        "handle read",
    );
    assert_eq!(reply.body, b"spaced name");
    w.assert_read_event(
        &ev,
        "my report.md",
        "ok",
        Some(b"spaced name"),
        0,
        "handle read",
    );
}

#[tokio::test]
async fn handle_refuses_writes_without_reading_the_body() {
    let (_fs, w) = read_world(Containment::Advisory);
    let request = Request::post("/resources/files/report.md")
        .header("content-type", "text/plain")
        .body(String::from("payload that must never be written"))
        .unwrap();
    let (reply, ev) = handle(&w, request).await;
    assert_refusal(&reply, "method_not_allowed", 0, "handle POST");
    w.assert_read_event(
        &ev,
        "report.md",
        "method_not_allowed",
        None,
        0,
        "handle POST",
    );
    let request = Request::delete("/resources/files").body(()).unwrap();
    let (reply, ev) = handle(&w, request).await;
    assert_refusal(&reply, "method_not_allowed", 0, "handle DELETE listing");
    w.assert_list_event(
        &ev,
        Some("out/"),
        "method_not_allowed",
        None,
        0,
        "handle DELETE",
    );
}

#[tokio::test]
async fn handle_lists_and_refuses_lexically() {
    let (_fs, w) = mem(&files_yaml("out/", Some(MAX)), Containment::Sealed, |fs| {
        fs.add_file("out/report.md", REPORT, MTIME);
    });
    w.capsule.task_completed();
    let (reply, ev) = handle(&w, Request::get("/resources/files").body(()).unwrap()).await;
    assert_eq!(reply.status, 200);
    assert_headers(
        &reply,
        &listing_headers(&reply.body, 1, Containment::Sealed, "out/"),
        "listing",
    );
    assert_eq!(
        reply.text(),
        listing_json(
            "out/",
            MAX as u64,
            1,
            Containment::Sealed,
            &[("report.md", REPORT, MTIME)]
        )
    );
    w.assert_list_event(
        &ev,
        Some("out/"),
        "ok",
        Some((1, REPORT.len())),
        1,
        "listing",
    );
    let request = Request::get("/resources/files/%2e%2e/out/report.md")
        .body(())
        .unwrap();
    let (reply, ev) = handle(&w, request).await;
    assert_refusal(&reply, "outside_root", 1, "handle lexical");
    w.assert_read_event(
        &ev,
        "../out/report.md",
        "outside_root",
        None,
        1,
        "handle lexical",
    );
    let (card, _) = (
        Reply::of(
            w.capsule
                .router()
                .handle(
                    Request::get("/.well-known/agent-card.json")
                        .body(())
                        .unwrap(),
                )
                .await,
        ),
        (),
    );
    assert_eq!(card.json()["name"], "reporter");
}

// ------------------------------------------------------------------------------------------------
// Helpers: manifests, expected headers and bodies, worlds
// ------------------------------------------------------------------------------------------------

/// A manifest declaring `exports.files` at `root` with `max_bytes` (default when `None`).
fn files_yaml(root: &str, max_bytes: Option<usize>) -> String {
    let max = max_bytes.map_or(String::new(), |m| format!(", max_bytes: {m}"));
    format!("name: reporter\nexports:\n  files: {{ root: \"{root}\", mode: read-only{max} }}\n")
}

/// `exports.files` (max 200) and `exports.peer_files`, both at `out/`.
fn both_planes_yaml() -> String {
    format!(
        "name: reporter\nexports:\n  files: {{ root: out/, mode: read-only, max_bytes: {MAX} }}\n  \
         peer_files: {{ root: out/, max_ttl: 15m }}\n"
    )
}

/// Declares neither plane.
const NO_PLANES_YAML: &str = "name: reporter\n";

fn assert_headers(reply: &Reply, expected: &[(&str, String)], ctx: &str) {
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.clone()))
        .collect();
    want.sort();
    assert_eq!(reply.sorted_headers(), want, "{ctx}: exact header set");
}

fn read_ok_headers(
    body: &[u8],
    mtime_ms: i64,
    generation: u64,
    containment: Containment,
    root: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/octet-stream".into()),
        ("etag", format!("\"sha256:{}\"", sha256_hex(body))),
        ("x-murmur-mtime-ms", mtime_ms.to_string()),
        ("x-murmur-generation", generation.to_string()),
        ("x-murmur-containment", containment.as_str().into()),
        ("x-murmur-export-root", root.into()),
        ("connection", "close".into()),
    ]
}

/// A listing's headers: D-4.5's, and its etag, the sha256 of its body (D-17.1).
fn listing_headers(
    body: &[u8],
    generation: u64,
    containment: Containment,
    root: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/json".into()),
        ("etag", format!("\"sha256:{}\"", sha256_hex(body))),
        ("x-murmur-generation", generation.to_string()),
        ("x-murmur-containment", containment.as_str().into()),
        ("x-murmur-export-root", root.into()),
        ("connection", "close".into()),
    ]
}

fn refusal_headers(code: &str, generation: u64) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("content-type", "application/json".into()),
        ("x-murmur-generation", generation.to_string()),
        ("connection", "close".into()),
    ];
    if code == "method_not_allowed" {
        h.push(("allow", "GET".into()));
    }
    h
}

fn status_of(code: &str) -> u16 {
    match code {
        "no_resource_plane" | "not_found" | "no_peer_plane" => 404,
        "outside_root" | "symlink_refused" | "not_a_regular_file" => 403,
        "too_large" => 413,
        "method_not_allowed" => 405,
        "io_error" => 500,
        other => panic!("no status for {other}"),
    }
}

/// Status, headers and the `{"error","message"}` body (keys in that order, nothing else).
fn assert_refusal(reply: &Reply, code: &str, generation: u64, ctx: &str) {
    assert_refusal_with(reply, code, generation, &[], ctx);
}

/// As [`assert_refusal`], with `extra` headers expected beside the refusal's own.
fn assert_refusal_with(
    reply: &Reply,
    code: &str,
    generation: u64,
    extra: &[(&str, String)],
    ctx: &str,
) {
    assert_eq!(
        reply.status,
        status_of(code),
        "{ctx}: status (body {})",
        reply.text()
    );
    let mut headers = refusal_headers(code, generation);
    headers.extend(extra.iter().cloned());
    assert_headers(reply, &headers, ctx);
    let body = reply.json();
    let keys: Vec<&str> = support::trace::keys(&body);
    assert_eq!(keys, ["error", "message"], "{ctx}: error body keys");
    assert_eq!(body["error"], code, "{ctx}: error code");
    let message = body["message"].as_str().expect("message is a string");
    assert!(!message.is_empty(), "{ctx}: message is empty");
}

/// The listing body exactly as D-3.5 spells it: compact JSON, keys in order.
fn listing_json(
    root: &str,
    max_bytes: u64,
    generation: u64,
    containment: Containment,
    entries: &[(&str, &[u8], i64)],
) -> String {
    let entries: Vec<String> = entries
        .iter()
        .map(|(path, bytes, mtime)| {
            format!(
                r#"{{"path":{},"size_bytes":{},"mtime_ms":{mtime},"sha256":"{}"}}"#,
                json!(path),
                bytes.len(),
                sha256_hex(bytes)
            )
        })
        .collect();
    format!(
        r#"{{"root":{},"mode":"read-only","max_bytes":{max_bytes},"generation":{generation},"containment_achieved":"{}","entries":[{}]}}"#,
        json!(root),
        containment.as_str(),
        entries.join(",")
    )
}

/// A world on the clock at [`NOW_MS`] under `containment`, with a fresh key (the runtime's
/// default).
fn builder(yaml: &str, containment: Containment) -> WorldBuilder {
    World::builder(yaml)
        .containment(containment)
        .now(NOW_MS)
        .fresh_key()
}

/// A world over `fs`, tracing to `sink` when given (else recording).
fn world_over(
    yaml: &str,
    containment: Containment,
    fs: Arc<dyn Filesystem>,
    sink: Option<Arc<dyn TraceSink>>,
) -> World {
    let builder = builder(yaml, containment).filesystem(fs);
    match sink {
        Some(sink) => builder.trace_to(sink),
        None => builder,
    }
    .build()
}

/// A world over a fresh memory workdir built by `build`.
fn mem(
    yaml: &str,
    containment: Containment,
    build: impl FnOnce(&MemoryFilesystem),
) -> (Arc<MemoryFilesystem>, World) {
    let world = builder(yaml, containment).files(build).build();
    (world.fs.clone(), world)
}

/// A 200 read: exact headers, exact body, exact trace line.
fn assert_read_ok(w: &World, raw: &str, decoded: &str, body: &[u8], mtime_ms: i64, root: &str) {
    let ctx = format!("GET {raw:?} ({})", w.containment.as_str());
    let generation = w.generation();
    let (reply, ev) = w.get(&format!("/resources/files/{raw}"));
    assert_eq!(reply.status, 200, "{ctx}: status (body {})", reply.text());
    assert_headers(
        &reply,
        &read_ok_headers(body, mtime_ms, generation, w.containment, root),
        &ctx,
    );
    assert_eq!(reply.body, body, "{ctx}: body");
    w.assert_read_event(&ev, decoded, "ok", Some(body), generation, &ctx);
}

/// A refused read: exact status, headers, body shape and trace line.
fn assert_read_refused(w: &World, raw: &str, decoded: &str, code: &str) -> (Reply, Value) {
    let ctx = format!("GET {raw:?} ({})", w.containment.as_str());
    let generation = w.generation();
    let (reply, ev) = w.get(&format!("/resources/files/{raw}"));
    assert_refusal(&reply, code, generation, &ctx);
    w.assert_read_event(&ev, decoded, code, None, generation, &ctx);
    (reply, ev)
}
