//! Shared by every property-test target: the case count and where regressions are kept.
#![allow(dead_code)] // each property target uses the part of this module it needs

use proptest::prelude::ProptestConfig;
use proptest::test_runner::FileFailurePersistence;

/// Cases per property: `RP_PROPTEST_CASES`, default 64 (what CI runs).
pub fn cases() -> u32 {
    std::env::var("RP_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(64)
}

/// A configuration running `cases` cases (at least one), with failures persisted to
/// `proptests/<target>.proptest-regressions` for committing.
pub fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::with_cases(cases.max(1))
    }
}

/// A capsule configuration built once per process: building one loads the system's TLS roots,
/// which is far slower than a property case.
pub fn capsule_config() -> resource_plane::CapsuleConfig {
    static CONFIG: std::sync::OnceLock<resource_plane::CapsuleConfig> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            resource_plane::CapsuleConfig::new("http://127.0.0.1:41234").expect("config")
        })
        .clone()
}
