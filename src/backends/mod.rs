//! Everything that touches the world: the filesystem, the clock, the keys (the minting key and
//! the identity key), the trace file and the OS random source. Ambient authority
//! (`SystemTime::now`, `std::fs`, randomness, raw syscalls) appears only under this module
//! (design habit 7; enforced by `clippy.toml`).
//!
//! Each backend is a small, synchronous, dyn-compatible trait held as `Arc<dyn _>`, with a real
//! implementation and a test double that passes the same conformance tests.

// The world lives here: this module tree is where the filesystem, the network, the clock and
// randomness are reached (clippy.toml bans them everywhere else but the CLI).
#![allow(clippy::disallowed_methods)]

pub mod clock;
pub mod fs;
pub mod identity;
pub mod keys;
pub mod net;
pub mod random;
pub mod tls;
pub mod trace;

pub use clock::{Clock, ManualClock, SystemClock};
pub use fs::{
    Containment, FileMeta, Filesystem, FsError, FsErrorKind, MemoryFilesystem, OpenFile,
    OsFilesystem, RootDir, RootPath, RootPathError,
};
pub use identity::{FixedIdentityKey, IdentityKey, OsRandomIdentityKey};
pub use keys::{FixedKeyStore, KeyStore, OsRandomKeyStore};
pub use tls::{PeerTls, TlsError};
pub use trace::{FailingTraceSink, JsonlTraceSink, RecordingTraceSink, TraceSink};
