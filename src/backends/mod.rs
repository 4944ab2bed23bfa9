//! Everything that touches the world, and nothing else: the filesystem, the clock, the keys (the
//! minting key and the identity key), the random source, the peer transport and the trace
//! sinks. Ambient authority (`SystemTime::now`, `std::fs`, `std::net`, `std::env`, randomness,
//! raw syscalls) appears only under this module and the CLI: the crate's `clippy.toml` bans it
//! everywhere else, so every rule can be tested against the doubles here and runs unchanged
//! against the real world. The rules that use the world live elsewhere: the tracer beside the
//! planes, roots and containment in [`scope`](crate::scope).
//!
//! Each backend is a small, dyn-compatible trait held as `Arc<dyn _>`, with a real
//! implementation and a test double that pass the same conformance suite (the crate's
//! `tests/backend_conformance.rs` and `tests/fs_conformance.rs`), so the double cannot drift
//! from the real thing. All are synchronous but the peer transport, whose connect is a boxed
//! future.
//!
//! | Backend | Real | Double |
//! |---|---|---|
//! | [`Filesystem`] | [`OsFilesystem`] | [`MemoryFilesystem`] |
//! | [`Clock`] | [`SystemClock`] | [`ManualClock`] |
//! | [`KeyStore`] (the minting key) | [`OsRandomKeyStore`] | [`FixedKeyStore`] |
//! | [`IdentityKey`] (the fetcher's key) | [`OsRandomIdentityKey`] | [`FixedIdentityKey`] |
//! | [`Random`] | [`OsRandom`] | [`SeededRandom`] |
//! | [`PeerTransport`] | [`TcpTransport`] | [`MemoryTransport`] |
//! | [`TraceSink`] | [`JsonlTraceSink`] | [`RecordingTraceSink`], [`FailingTraceSink`] |

// The world lives here: this module tree is where the filesystem, the network, the clock and
// randomness are reached (clippy.toml bans them everywhere else but the CLI).
#![allow(clippy::disallowed_methods)]

pub(crate) mod clock;
pub(crate) mod confine;
pub(crate) mod dial;
pub(crate) mod fs;
pub(crate) mod identity;
pub(crate) mod keys;
pub(crate) mod net;
pub(crate) mod random;
mod secret;
pub(crate) mod tls;
pub(crate) mod trace;
pub(crate) mod trace_event;

pub use clock::{Clock, ManualClock, SystemClock};
pub use fs::{
    ChangeNotifier, FileMeta, Filesystem, FsError, FsErrorKind, MemoryFilesystem, Notice, OpenFile,
    OsFilesystem, RootDir, Strategy,
};
pub use identity::{FixedIdentityKey, IdentityKey, OsRandomIdentityKey};
pub use keys::{FixedKeyStore, KeyStore, OsRandomKeyStore};
pub use net::{
    Connecting, MemoryListener, MemoryTransport, PeerStream, PeerTransport, TcpTransport,
};
pub use random::{OsRandom, Random, SeededRandom};
pub use tls::{ClientIdentity, PeerTls, TlsError};
pub use trace::{FailingTraceSink, JsonlTraceSink, RecordingTraceSink, TraceSink};
pub use trace_event::{
    Envelope, PeerFileFetch, PeerHandleMint, PeerHandleRedeem, ResourceList, ResourceRead,
    TraceEvent, TraceLine,
};
