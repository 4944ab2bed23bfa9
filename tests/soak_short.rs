#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! The soak in CI: the soak driver of `examples/soak.rs`, bounded to ~8 s and 64 clients,
//! against the real `resource-plane serve` binary. See `tests/support/soak_driver.rs` for the
//! mix and every check; this test asserts that the report has no problem at all.

mod support;

use std::path::PathBuf;
use std::time::Duration;
use support::soak_driver::{SoakConfig, run_soak};

#[test]
fn soak_short_has_no_crash_no_5xx_and_a_consistent_trace() {
    let config = SoakConfig::new(
        PathBuf::from(env!("CARGO_BIN_EXE_resource-plane")),
        Duration::from_secs(8),
        64,
    );
    let report = run_soak(&config).expect("set up the soak world");
    println!("{}", report.summary_json());
    assert!(
        report.passed(),
        "{} problems; the first {}:\n{}",
        report.problem_count,
        report.problems.len(),
        report.problems.join("\n")
    );
    // The run did real work: every client sent requests, and files really changed under them.
    assert!(
        report.requests >= 64 * 5,
        "only {} requests in 8 s from 64 clients",
        report.requests
    );
    assert!(report.rewrites > 0, "the rewriter never rewrote a file");
    assert_eq!(
        report.trace_lines,
        report.requests + config.handles as u64,
        "one trace line per request plus one per mint"
    );
    assert!(
        report.by_status.keys().all(|s| *s < 500),
        "a 5xx answer: {:?}",
        report.by_status
    );
    assert!(
        report.vm_hwm_kib > 0 && report.vm_hwm_kib <= config.rss_bound_mib * 1024,
        "VmHWM {} KiB against a bound of {} MiB",
        report.vm_hwm_kib,
        config.rss_bound_mib
    );
}
