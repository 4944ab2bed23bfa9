#![allow(dead_code)] // each test file uses a subset

//! Shared support for the integration tests: one place for each piece of harness.
//!
//! This directory is a module, not a test target: a test includes it with `mod support;`
//! (a proptest, outside `tests/`, with `#[path = "../tests/support/mod.rs"]`).
//! `examples/soak.rs` includes `soak_driver.rs` directly with `#[path]`.
//!
//! - [`world`]: one capsule in process (`World`, launched through a builder), with its memory
//!   workdir, manual clock and recorded trace; [`trace`] checks its lines.
//! - [`process`]: the real binary: one scratch directory (`Workdir`), one way to start it
//!   (`Launch`) into a running process (`Served`) or to its end (`Exited`).
//! - [`http`]: one raw HTTP/1.1 client over loopback, and one `Reply` for the wire and the
//!   router alike; [`response`]: accessors on a `Response<PlaneBody>`.
//! - [`tokens`]: handles and proofs built from the spec's layouts.
//! - [`doubles`]: small network doubles (a card responder, a silent peer, a closed port);
//!   [`mocks`]: mockall doubles of the filesystem and the clock, for "never touched" proofs;
//!   [`test_ca`]: a certificate authority minting server and client certificates.
//! - [`conformance`]: one suite per backend trait (clock, key store, identity key, trace
//!   sink, random source, peer transport), run on the crate's implementations and on every
//!   test wrapper.
//! - [`fs_suite`]: the filesystem conformance suite, parameterised by a wrapper.
//! - [`soak_driver`]: the serve process and soak of `tests/faults.rs` and `tests/soak_short.rs`
//!   (self-contained: `examples/soak.rs` includes it alone).

pub mod conformance;
pub mod doubles;
pub mod fs_suite;
pub mod http;
pub mod mocks;
pub mod process;
pub mod response;
pub mod soak_driver;
pub mod test_ca;
pub mod tokens;
pub mod trace;
pub mod world;

/// Lowercase hex SHA-256 of `bytes`: the digest listings, receipts and traces carry.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `text` is exactly `len` lowercase hex digits (ids, digests).
pub fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
