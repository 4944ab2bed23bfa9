//! Shared helpers for the integration tests that drive the real `resource-plane` binary.
//!
//! This directory is a module, not a test target: a test includes it with `mod support;`.
//! `examples/soak.rs` includes `soak_driver.rs` directly with `#[path]`.

pub mod process;
pub mod soak_driver;
