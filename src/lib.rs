//! # resource-plane
//!
//! The read-only file surfaces of an AI-agent capsule: an **operator plane** that lists and
//! reads files under a declared export root, and a **peer plane** that hands one file to one
//! named peer capsule by an HMAC-signed, audience-bound, expiring handle.
//!
//! A runtime builds a [`Capsule`] at launch from a [`Manifest`] and four backends
//! ([`Filesystem`](backends::Filesystem), [`Clock`](backends::Clock),
//! [`KeyStore`](backends::KeyStore), [`TraceSink`](backends::TraceSink)), mounts its
//! [`Router`](http::Router) on its own listener, and offers its [`tools`](capsule::Capsule::tools)
//! to the model. [`Capsule::builder`] can also put the runtime's own
//! [`ResourcePlane`](planes::ResourcePlane) or [`PeerPlane`](planes::PeerPlane) in place of the
//! crate's. A capsule that may fetch from peers also holds an Ed25519
//! [`IdentityKey`](backends::IdentityKey), drawn at launch (or injected through
//! [`CapsuleConfig::identity`](capsule::CapsuleConfig::identity)) and published in its agent
//! card, with which it proves its redeems (`decisions.md` D-14). A refused launch is a
//! [`LaunchError`]. Building a configuration or a capsule reads no file.
//!
//! Everything that touches the world is a backend under [`backends`]: besides the four, the
//! [`Random`](backends::Random) source (session ids, nonces, generated keys) and the
//! [`PeerTransport`](backends::PeerTransport) the tools reach peers over, both defaulting to the
//! OS's and set through [`CapsuleBuilder::random`] and [`CapsuleBuilder::peer_transport`]. The
//! rules live outside it: [`scope`] (roots and containment), the tracer,
//! [`planes`], [`http`], [`tools`].
//!
//! With the `test-util` feature, `test_util::capsule(yaml)` launches a capsule on in-memory
//! backends in one line and mints handles for tests.
//!
//! ```
//! use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
//! use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
//! use std::sync::Arc;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let manifest = Manifest::from_yaml(
//!     "name: reporter\nexports: { files: { root: out/, mode: read-only } }",
//! ).unwrap().manifest;
//! let fs = Arc::new(MemoryFilesystem::new());
//! fs.add_file("out/report.md", "hello", 1_700_000_000_000);
//! let trace = Arc::new(RecordingTraceSink::new());
//! let capsule = Capsule::launch(
//!     &manifest,
//!     CapsuleConfig::new("http://127.0.0.1:41234").unwrap(),
//!     Backends { fs, clock: Arc::new(ManualClock::new(0)), keys: None, trace: trace.clone() },
//! ).unwrap();
//!
//! let request = http::Request::get("/resources/files/report.md").body(()).unwrap();
//! let response = capsule.router().handle(request).await;
//! assert_eq!(response.status(), 200);
//! assert_eq!(&response.body().bytes()[..], b"hello");
//! assert_eq!(trace.events()[0]["event_type"], "resource_read");
//! # }
//! ```
//!
//! Every public function documents the refusal codes it can produce and the rule it
//! implements. Rules are cited as `D-x.y`: they are numbered in `docs/spec/decisions.md`, which
//! ships with the crate beside the protocol it settles, described in the project's own words
//! (`docs/protocol.md`), and the binary's command-line contract (`docs/spec/contract.md`).

#![forbid(unsafe_code)]
#![deny(missing_docs, unreachable_pub)]

/// Declares a module that is not part of the API: crate-private, or public (and hidden from the
/// docs) with the `internals` feature, through which the crate's own benches, fuzz targets and
/// tests reach it. Inside such a module `pub` means "reachable by them", so the
/// `unreachable_pub` lint is not applied to it in a build without the feature.
macro_rules! internal_module {
    ($name:ident) => {
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        #[allow(unreachable_pub, dead_code)]
        pub(crate) mod $name;
    };
}

internal_module!(audience);
pub mod backends;
pub(crate) mod blocking;
internal_module!(budget);
pub(crate) mod cancel;
pub mod capsule;
pub mod card;
#[cfg(feature = "cli")]
pub mod cli;
pub mod confine;
internal_module!(events);
internal_module!(generation);
internal_module!(hex);
pub mod http;
pub mod manifest;
#[cfg(feature = "mcp")]
pub mod mcp;
internal_module!(page_aligned);
internal_module!(path);
pub mod planes;
internal_module!(policy);
internal_module!(redact);
pub mod refusal;
pub mod scope;
#[cfg(feature = "test-util")]
pub mod test_util;
pub mod tools;
internal_module!(trace);
internal_module!(units);
pub(crate) mod wire;

pub use capsule::{Backends, Capsule, CapsuleBuilder, CapsuleConfig};
pub use manifest::{LaunchError, Manifest};
pub use refusal::{Code, Refusal};
