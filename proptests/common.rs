//! Shared by every property-test target: the case count and where regressions are kept.
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets
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

/// The capsule configuration every property case launches with. Building one reads nothing
/// (the system's TLS roots are read at the first https handshake, which no case makes).
pub fn capsule_config() -> resource_plane::CapsuleConfig {
    resource_plane::CapsuleConfig::new("http://127.0.0.1:41234").expect("config")
}
