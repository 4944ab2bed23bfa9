//! Building a configuration and a capsule reads nothing from disk (D-15.8): no `/proc`, no
//! cgroup file, no certificate store. Seen from outside, by `strace`: this test runs its own
//! binary again under `strace -f -e trace=%file,write`, and the inner run writes a marker
//! before and after the build; no file may be opened between the two markers.
//!
//! Skipped, saying so, where `strace` is not installed or may not trace (a container without
//! `ptrace`).

#![allow(clippy::disallowed_methods)] // the tests build their world with std::fs and processes

use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
use resource_plane::{Capsule, Manifest};
use std::process::Command;
use std::sync::Arc;

const BEGIN: &str = "rp-build-begins";
const END: &str = "rp-build-ends";
const INNER: &str = "RP_READS_NOTHING_INNER";

const MANIFEST: &str = "name: r\nexports:\n  files: { root: out, mode: read-only }\n  peer_files: { root: out }\ncapabilities:\n  peer_fetch: { allow: [\"127.0.0.1\"] }\n";

/// The inner run: the build between the two markers.
fn build_between_markers() {
    let manifest = Manifest::from_yaml(MANIFEST).expect("manifest").manifest;
    eprintln!("{BEGIN}");
    let capsule = Capsule::builder(&manifest)
        .filesystem(Arc::new(MemoryFilesystem::new()))
        .trace(Arc::new(RecordingTraceSink::new()))
        .advertised_url("http://127.0.0.1:41234")
        .launch()
        .expect("launch");
    eprintln!("{END}");
    drop(capsule);
}

#[test]
fn building_a_capsule_opens_no_file() {
    if std::env::var_os(INNER).is_some() {
        build_between_markers();
        return;
    }
    let strace = Command::new("strace").arg("-V").output();
    if !strace.is_ok_and(|out| out.status.success()) {
        eprintln!("skipped: strace is not installed");
        return;
    }
    let log = tempfile::NamedTempFile::new().expect("log file");
    let me = std::env::current_exe().expect("this test binary");
    let status = Command::new("strace")
        .args(["-f", "-e", "trace=%file,write", "-o"])
        .arg(log.path())
        .arg(&me)
        .args(["--exact", "building_a_capsule_opens_no_file", "--nocapture"])
        .env(INNER, "1")
        .status()
        .expect("run strace");
    let trace = std::fs::read_to_string(log.path()).expect("strace log");
    if !status.success() && !trace.contains(BEGIN) {
        eprintln!("skipped: strace could not trace here ({status})");
        return;
    }
    assert!(status.success(), "the inner run failed:\n{trace}");
    let begin = trace.find(BEGIN).expect("the begin marker is traced");
    let end = trace[begin..].find(END).expect("the end marker is traced") + begin;
    let opened: Vec<&str> = trace[begin..end]
        .lines()
        .filter(|line| line.contains("open") || line.contains("stat") || line.contains("access"))
        .collect();
    assert!(
        opened.is_empty(),
        "building a capsule touched files:\n{}",
        opened.join("\n")
    );
}
