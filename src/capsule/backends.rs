//! Every backend a capsule reaches the world through, in one place ([`World`]): the four every
//! capsule needs ([`Backends`], or the builder's methods of the same names) and the four set
//! like settings ([`CapsuleConfig`](super::CapsuleConfig) or the builder), each with its
//! default taken once, at launch ([`World::resolve`]).

use crate::backends::fs::Filesystem;
use crate::backends::tls::PeerTls;
use crate::backends::trace::TraceSink;
use crate::backends::{
    Clock, IdentityKey, KeyStore, OsRandom, OsRandomIdentityKey, OsRandomKeyStore, PeerTransport,
    Random, SystemClock, TcpTransport,
};
use crate::manifest::LaunchError;
use std::sync::Arc;

/// The four injectable backends every capsule needs, as one value for
/// [`Capsule::launch`](super::Capsule::launch) or
/// [`CapsuleBuilder::backends`](super::CapsuleBuilder::backends). The others, the identity key,
/// the random source, the peer transport and the TLS trust, default to the OS's and are set
/// like any other setting ([`CapsuleConfig::random`](super::CapsuleConfig::random),
/// [`CapsuleConfig::peer_transport`](super::CapsuleConfig::peer_transport), …, or the
/// builder's methods of the same names).
///
/// ```
/// use resource_plane::backends::{
///     FixedKeyStore, ManualClock, MemoryFilesystem, RecordingTraceSink,
/// };
/// use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let trace = Arc::new(RecordingTraceSink::new());
/// let backends = Backends {
///     fs: Arc::new(MemoryFilesystem::new()),
///     clock: Arc::new(ManualClock::new(1_700_000_000_000)),
///     keys: Some(Arc::new(FixedKeyStore::new([7; 32]))), // `None`: a fresh key from the OS
///     trace: trace.clone(),
/// };
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: ., mode: read-only } }");
/// let config = CapsuleConfig::new("http://127.0.0.1:41234").unwrap();
/// let capsule = Capsule::launch(&manifest.unwrap().manifest, config, backends).unwrap();
/// capsule.router().handle(http::Request::get("/resources/files").body(()).unwrap()).await;
/// let line = &trace.events()[0]; // written to the sink, stamped by the clock
/// assert_eq!(line["event_type"], "resource_list");
/// assert_eq!(line["timestamp"], 1_700_000_000_000_i64);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Backends {
    /// The workdir's filesystem.
    pub fs: Arc<dyn Filesystem>,
    /// Wall-clock time.
    pub clock: Arc<dyn Clock>,
    /// The minting key; `None` generates a fresh [`OsRandomKeyStore`] at launch. Used only
    /// when `exports.peer_files` is declared.
    pub keys: Option<Arc<dyn KeyStore>>,
    /// Where trace lines go.
    pub trace: Arc<dyn TraceSink>,
}

/// Every backend of one capsule as set so far, each `None` until set. A builder fills one;
/// a [`CapsuleConfig`](super::CapsuleConfig) fills the part set like a setting
/// ([`with_settable_of`](Self::with_settable_of)).
#[derive(Debug, Clone, Default)]
pub(crate) struct World {
    /// Required: the workdir's filesystem (the launch checks, the planes' reads, the fetcher's
    /// landings).
    pub(crate) fs: Option<Arc<dyn Filesystem>>,
    /// Required: where trace lines go.
    pub(crate) trace: Option<Arc<dyn TraceSink>>,
    /// Wall-clock time; default [`SystemClock`].
    pub(crate) clock: Option<Arc<dyn Clock>>,
    /// The crate's peer plane's minting key; default a fresh [`OsRandomKeyStore`], generated
    /// only when that plane is built.
    pub(crate) keys: Option<Arc<dyn KeyStore>>,
    /// Set like a setting: the identity key of a capsule that declares
    /// `capabilities.peer_fetch`; default a fresh [`OsRandomIdentityKey`], generated only then.
    pub(crate) identity: Option<Arc<dyn IdentityKey>>,
    /// Set like a setting: the random source; default [`OsRandom`].
    pub(crate) random: Option<Arc<dyn Random>>,
    /// Set like a setting: how the tools reach peers; default [`TcpTransport`].
    pub(crate) peer_transport: Option<Arc<dyn PeerTransport>>,
    /// Set like a setting: trust for https peers; default [`PeerTls::system`].
    pub(crate) peer_tls: Option<PeerTls>,
}

impl World {
    /// The four of `backends` in place of this world's.
    pub(crate) fn with_backends(self, backends: Backends) -> World {
        World {
            fs: Some(backends.fs),
            clock: Some(backends.clock),
            keys: backends.keys,
            trace: Some(backends.trace),
            ..self
        }
    }

    /// This world with the backends set like settings taken from `config` instead, set there
    /// or not: a configuration replaces every setting (see
    /// [`CapsuleBuilder::config`](super::CapsuleBuilder::config)).
    pub(crate) fn with_settable_of(self, config: World) -> World {
        World {
            fs: self.fs,
            trace: self.trace,
            clock: self.clock,
            keys: self.keys,
            ..config
        }
    }

    /// Every backend of a launch, each default taken.
    ///
    /// # Errors
    /// `E-CLI-001` [`LaunchError::Incomplete`] naming `filesystem` or `trace` when unset.
    pub(crate) fn resolve(self) -> Result<Resolved, LaunchError> {
        let missing = |setting| LaunchError::Incomplete { setting };
        Ok(Resolved {
            fs: self.fs.ok_or(missing("filesystem"))?,
            trace: self.trace.ok_or(missing("trace"))?,
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            keys: self.keys,
            identity: self.identity,
            random: self.random.unwrap_or_else(|| Arc::new(OsRandom)),
            peer_transport: self
                .peer_transport
                .unwrap_or_else(|| Arc::new(TcpTransport)),
            peer_tls: self.peer_tls.unwrap_or_else(PeerTls::system),
        })
    }
}

/// Every backend of one launch, defaults taken; the keys the capsule generates when none is
/// given are generated only where they are used ([`keys`](Self::keys),
/// [`identity`](Self::identity)), from the random source.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) fs: Arc<dyn Filesystem>,
    pub(crate) trace: Arc<dyn TraceSink>,
    pub(crate) clock: Arc<dyn Clock>,
    keys: Option<Arc<dyn KeyStore>>,
    identity: Option<Arc<dyn IdentityKey>>,
    pub(crate) random: Arc<dyn Random>,
    pub(crate) peer_transport: Arc<dyn PeerTransport>,
    pub(crate) peer_tls: PeerTls,
}

impl Resolved {
    /// The minting key given, or a fresh one from the random source.
    pub(crate) fn keys(&self) -> Arc<dyn KeyStore> {
        self.keys
            .clone()
            .unwrap_or_else(|| Arc::new(OsRandomKeyStore::generate_from(self.random.as_ref())))
    }

    /// The identity key given, or a fresh one from the random source.
    pub(crate) fn identity(&self) -> Arc<dyn IdentityKey> {
        self.identity
            .clone()
            .unwrap_or_else(|| Arc::new(OsRandomIdentityKey::generate_from(self.random.as_ref())))
    }
}
