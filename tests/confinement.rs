#![allow(clippy::disallowed_methods)] // the test builds its own worlds with std::fs and runs the probe
//! The Landlock wall, seen from a confined process: `examples/confine_probe.rs` puts up
//! `resource_plane::confine::Confinement` for a capsule whose only allow rule names one port,
//! then tries what the wall forbids and what it must allow. The same probe run without the
//! wall shows each refusal comes from the wall: unconfined, every attempt succeeds. Landlock
//! cannot be lifted, so each run is its own process.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The probe binary, built by this test if `cargo test` has not built it yet.
fn probe_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let mut build = Command::new(cargo);
            build.args(["build", "--quiet", "--example", "confine_probe"]);
            if !cfg!(debug_assertions) {
                build.arg("--release");
            }
            let status = build
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo build");
            assert!(status.success(), "cargo build --example confine_probe");
            // target/<profile>/deps/confinement-… → target/<profile>/examples/confine_probe
            let exe = std::env::current_exe().expect("this test's path");
            exe.parent()
                .and_then(Path::parent)
                .expect("target/<profile>")
                .join("examples/confine_probe")
        })
        .clone()
}

/// The probe's answer in `mode` (`confine` or `none`) over a fresh world: `work/inside.txt`
/// in the workdir, `outside.txt` beside it.
fn run(mode: &str) -> Value {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::create_dir(dir.path().join("work")).expect("workdir");
    std::fs::write(dir.path().join("work/inside.txt"), "inside\n").expect("inside");
    std::fs::write(dir.path().join("outside.txt"), "outside\n").expect("outside");
    let output = Command::new(probe_binary())
        .arg(mode)
        .arg(dir.path())
        .output()
        .expect("run the probe");
    assert!(
        output.status.success(),
        "probe {mode}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    if mode == "none" {
        assert_eq!(
            std::fs::read(dir.path().join("work/beside.txt")).expect("beside.txt"),
            b"beside\n",
            "unconfined, the write beside peer-in/ landed"
        );
    } else {
        assert!(
            !dir.path().join("work/beside.txt").exists(),
            "confined, nothing was written beside peer-in/"
        );
    }
    answer
}

fn confined() -> &'static Value {
    static ANSWER: OnceLock<Value> = OnceLock::new();
    ANSWER.get_or_init(|| run("confine"))
}

fn unconfined() -> &'static Value {
    static ANSWER: OnceLock<Value> = OnceLock::new();
    ANSWER.get_or_init(|| run("none"))
}

/// The Landlock ABI of this kernel, as the confined run reported it.
fn abi() -> u64 {
    confined()["confinement"]["landlock_abi"]
        .as_u64()
        .expect("landlock_abi")
}

/// Asserts `attempt` was refused with `errno` under the wall and succeeded without it, when
/// the kernel's ABI has the right the wall uses for it.
fn refused_only_by_the_wall(attempt: &str, errno: &str, since_abi: u64) {
    assert_eq!(
        unconfined()["results"][attempt],
        "ok",
        "{attempt} without the wall: {}",
        unconfined()
    );
    if abi() >= since_abi {
        assert_eq!(
            confined()["results"][attempt],
            errno,
            "{attempt} under the wall: {}",
            confined()
        );
    } else {
        eprintln!(
            "Landlock ABI {} < {since_abi}: {attempt} is not restricted",
            abi()
        );
    }
}

#[test]
fn the_report_says_what_the_kernel_enforced() {
    let report = &confined()["confinement"];
    if abi() == 0 {
        assert_eq!(report["status"], "none", "no Landlock: {report}");
        return;
    }
    let expected = if abi() >= 6 { "full" } else { "partial" };
    assert_eq!(report["status"], expected, "{report}");
    assert_eq!(unconfined()["confinement"]["status"], "none");
    assert_eq!(unconfined()["confinement"]["landlock_abi"], abi());
}

#[test]
fn the_wall_refuses_a_read_outside_the_workdir() {
    refused_only_by_the_wall("read_outside", "EACCES", 1);
    refused_only_by_the_wall("list_outside", "EACCES", 1);
}

#[test]
fn the_wall_refuses_a_write_beside_peer_in() {
    refused_only_by_the_wall("write_beside", "EACCES", 1);
}

#[test]
fn the_wall_refuses_a_connect_to_an_unlisted_port() {
    refused_only_by_the_wall("connect_unlisted", "EACCES", 4);
}

#[test]
fn the_wall_refuses_a_second_listener() {
    refused_only_by_the_wall("bind_listener", "EACCES", 4);
}

#[test]
fn the_wall_scopes_signals_and_abstract_unix_sockets() {
    refused_only_by_the_wall("signal_parent", "EPERM", 6);
    refused_only_by_the_wall("abstract_unix", "EPERM", 6);
}

#[test]
fn the_wall_admits_what_the_capsule_needs() {
    for attempt in [
        "read_inside",
        "read_through_plane",
        "write_landing",
        "connect_allowed",
    ] {
        assert_eq!(
            confined()["results"][attempt],
            "ok",
            "{attempt} under the wall: {}",
            confined()
        );
        assert_eq!(
            unconfined()["results"][attempt],
            "ok",
            "{attempt} without it"
        );
    }
    assert_eq!(
        confined()["results"]["certificates"],
        unconfined()["results"]["certificates"],
        "the system certificate store reads the same under the wall"
    );
}
