#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! The binary's Landlock wall from outside (contract.md `serve`, `check`): the ready line and
//! `check` report it, `--no-confine` opts out, `--require-confinement` refuses what it cannot
//! have, and a confined `serve` still lists and reads. What the wall refuses from inside is
//! `tests/confinement.rs`; the peer flows under the wall are `tests/cli_peers.rs`, which runs
//! every capsule confined.

mod support;

use resource_plane::confine::landlock_abi;
use serde_json::{Value, json};
use std::time::Duration;
use support::http::{ask, parse_reply, read_to_eof};
use support::process::Workdir;

const FILES: &str = "name: reporter\nexports:\n  files: { root: out/, mode: read-only }\n";

/// A fetcher whose only allow rule names its port.
const FETCHER: &str =
    "name: reader\ncapabilities:\n  peer_fetch: { allow: [\"127.0.0.1:41234\"] }\n";

/// A minter whose allow rule names no port.
const ANY_PORT: &str = "name: minter\nexports:\n  peer_files: { root: out/ }\n\
                        capabilities:\n  network: { allow: [\"127.0.0.1\"] }\n";

/// The status a default `serve` reaches on this kernel for a manifest whose rules all name a
/// port.
fn best() -> Value {
    let abi = landlock_abi();
    let status = match abi {
        0 => "none",
        1..=5 => "partial",
        _ => "full",
    };
    json!({"landlock_abi": abi, "status": status})
}

fn world(manifest: &str) -> Workdir {
    let world = Workdir::new(manifest);
    world.file("out/a.txt", b"hello\n");
    world
}

fn get(port: u16, path: &str) -> support::http::Reply {
    let mut stream = ask(("127.0.0.1", port), path);
    parse_reply(&read_to_eof(&mut stream, Duration::from_secs(5)))
}

#[test]
fn a_confined_serve_reports_its_wall_and_still_lists_and_reads() {
    let world = world(FILES);
    let server = world.launch(&world.args(&[])).start();
    assert_eq!(server.ready["confinement"], best(), "{}", server.ready);
    let listing = get(server.port(), "/resources/files");
    assert_eq!(listing.status, 200);
    let listing: Value = serde_json::from_slice(&listing.body).expect("listing JSON");
    assert_eq!(listing["entries"][0]["path"], "a.txt");
    let read = get(server.port(), "/resources/files/a.txt");
    assert_eq!((read.status, read.body.as_slice()), (200, &b"hello\n"[..]));
    assert!(
        !world.path().join("peer-in").exists(),
        "no peer-in/ without capabilities.peer_fetch"
    );
}

#[test]
fn no_confine_opts_out_and_creates_nothing_for_the_wall() {
    let world = world(FETCHER);
    let server = world.launch(&world.args(&["--no-confine"])).start();
    assert_eq!(
        server.ready["confinement"],
        json!({"landlock_abi": landlock_abi(), "status": "none"})
    );
    assert!(!world.path().join("peer-in").exists());
    drop(server);

    let confined = world.launch(&world.args(&[])).start();
    assert_eq!(confined.ready["confinement"], best());
    if landlock_abi() > 0 {
        assert!(
            world.path().join("peer-in").is_dir(),
            "the wall made peer-in/ to grant writing beneath it"
        );
    }
}

#[test]
fn an_allow_rule_without_a_port_leaves_connects_open_and_says_partial() {
    let world = world(ANY_PORT);
    let server = world.launch(&world.args(&[])).start();
    let expected = if landlock_abi() == 0 {
        "none"
    } else {
        "partial"
    };
    assert_eq!(server.ready["confinement"]["status"], expected);
}

#[test]
fn require_confinement_with_no_confine_is_a_refused_launch_that_creates_nothing() {
    let world = world(FILES);
    let exited = world
        .launch(&world.args(&["--require-confinement", "--no-confine"]))
        .run();
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(
        exited.stderr.starts_with("error[E-CLI-001]:"),
        "{}",
        exited.stderr
    );
    assert!(exited.stdout.is_empty());
    assert!(!world.trace().exists(), "no trace created");
}

#[test]
fn require_confinement_starts_where_the_kernel_has_landlock() {
    let world = world(FILES);
    if landlock_abi() == 0 {
        let exited = world.launch(&world.args(&["--require-confinement"])).run();
        assert_eq!(exited.code, Some(2), "{}", exited.stderr);
        assert!(exited.stderr.contains("E-CLI-001"), "{}", exited.stderr);
        assert!(!world.trace().exists(), "no trace created");
        return;
    }
    let server = world
        .launch(&world.args(&["--require-confinement"]))
        .start();
    assert_eq!(server.ready["confinement"], best());
}

#[test]
fn check_reports_the_wall_serve_would_put_up() {
    for (manifest, status) in [
        (FETCHER, best()["status"].clone()),
        (ANY_PORT, json!("partial")),
    ] {
        let world = world(manifest);
        let exited = world.launch(&world.check_args(&[])).run();
        assert_eq!(exited.code, Some(0), "{}", exited.stderr);
        let report: Value = serde_json::from_str(exited.stdout.trim()).expect("one JSON line");
        assert_eq!(report["confinement"]["landlock_abi"], landlock_abi());
        if landlock_abi() > 0 {
            assert_eq!(report["confinement"]["status"], status, "{manifest}");
        }
        assert!(
            !world.path().join("peer-in").exists(),
            "check creates nothing"
        );
    }
}
