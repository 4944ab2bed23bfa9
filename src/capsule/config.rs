//! What the embedding runtime says about a session besides the manifest and the four
//! required backends: its advertised URL and the settings, each with a named default
//! ([`CapsuleConfig`], or the builder's methods of the same names).

use super::backends::World;
use crate::card::AgentSkill;
use crate::http::client::PeerTimeouts;
use crate::manifest::LaunchError;
use crate::planes::Origin;
use crate::scope::Containment;

/// The fetcher's own body cap when none is set: 10 MiB (D-10.2).
pub const DEFAULT_FETCH_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// The bytes in-flight reads may hold at once when no budget is set: 256 MiB (D-4.6).
pub const DEFAULT_INFLIGHT_BUDGET_BYTES: u64 = 256 * 1024 * 1024;
/// The cores the planes size their work for when none is set: 2. The crate reads nothing to
/// learn the machine's (D-15.8); a runtime that knows it says so with
/// [`CapsuleConfig::cores`], as the binary does once at start.
pub const DEFAULT_CORES: usize = crate::budget::DEFAULT_CORES;
/// The containment class assumed when none is set: `advisory`, the weakest claim.
pub const DEFAULT_CONTAINMENT: Containment = Containment::Advisory;

/// Everything a launch takes besides the manifest, the backends and the advertised URL: plain
/// values, each with its default.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) containment: Containment,
    pub(super) fetch_max_bytes: u64,
    pub(super) inflight_budget_bytes: u64,
    pub(super) cores: usize,
    pub(super) session_id: Option<String>,
    pub(super) peer_timeouts: PeerTimeouts,
    pub(super) skills: Vec<AgentSkill>,
    pub(super) watch_notifications: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            containment: DEFAULT_CONTAINMENT,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            inflight_budget_bytes: DEFAULT_INFLIGHT_BUDGET_BYTES,
            cores: DEFAULT_CORES,
            session_id: None,
            peer_timeouts: PeerTimeouts::default(),
            skills: Vec::new(),
            watch_notifications: true,
        }
    }
}

/// What the embedding runtime knows about this session: its advertised URL and the settings
/// below, each with a named default. Building one reads nothing: the system's certificate
/// store is read at the first https handshake with a peer, if ever (see
/// [`PeerTls`](crate::backends::tls::PeerTls)).
///
/// ```
/// use resource_plane::scope::Containment;
/// use resource_plane::CapsuleConfig;
///
/// let config = CapsuleConfig::new("http://127.0.0.1:41234")
///     .unwrap()
///     .containment(Containment::Scoped)
///     .fetch_max_bytes(1 << 20);
/// assert_eq!(config.advertised_url(), "http://127.0.0.1:41234");
/// assert_eq!(
///     CapsuleConfig::new("ftp://x").unwrap_err().code(),
///     "E-CLI-001",
/// );
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CapsuleConfig {
    pub(super) advertised_url: String,
    pub(super) settings: Settings,
    /// The backends set like settings (the identity key, the random source, the peer
    /// transport, the TLS trust); the others stay unset here.
    pub(super) world: World,
}

/// The settings [`CapsuleConfig`] and [`CapsuleBuilder`](super::CapsuleBuilder) both take, one
/// method each, written once: both hold the plain values in a `settings` field and the
/// backends set like settings in a `world` field.
macro_rules! setting_methods {
    () => {
        /// Whether the export's watcher asks the filesystem for change notices (inotify;
        /// default `true`). With `false` it re-lists every 2 s instead, as it does where
        /// notification is unavailable (D-17.4): for tests of that fallback, and for
        /// filesystems whose notices cannot be trusted (network mounts).
        pub fn watch_notifications(mut self, on: bool) -> Self {
            self.settings.watch_notifications = on;
            self
        }

        /// The containment class the runtime achieved, taken as given (D-2.5).
        pub fn containment(mut self, containment: crate::scope::Containment) -> Self {
            self.settings.containment = containment;
            self
        }

        /// The fetcher's own body cap (D-10.2); 0 is read as 1.
        pub fn fetch_max_bytes(mut self, bytes: u64) -> Self {
            self.settings.fetch_max_bytes = bytes.max(1);
            self
        }

        /// The bytes in-flight reads may hold at once (D-4.6); 0 is read as 1.
        pub fn inflight_budget_bytes(mut self, bytes: u64) -> Self {
            self.settings.inflight_budget_bytes = bytes.max(1);
            self
        }

        /// The cores the planes size their work for (default
        /// [`DEFAULT_CORES`](crate::capsule::DEFAULT_CORES); 0 is taken for one). Blocking reads
        /// fill one buffer per core at a time, listings hash on at most two threads per core in
        /// all, and the router runs at most one read and one other call per core, and two listings,
        /// on the blocking pool at once, however many requests wait (D-4.6.1): waiting requests
        /// hold no thread.
        pub fn cores(mut self, cores: usize) -> Self {
            self.settings.cores = cores.max(1);
            self
        }

        /// Trust for https peers.
        pub fn peer_tls(mut self, trust: crate::backends::tls::PeerTls) -> Self {
            self.world.peer_tls = Some(trust);
            self
        }

        /// The session id (`ses_…`) instead of a fresh one.
        pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
            self.settings.session_id = Some(session_id.into());
            self
        }

        /// Time limits for the card fetch and the redeem.
        pub fn peer_timeouts(mut self, timeouts: crate::http::client::PeerTimeouts) -> Self {
            self.settings.peer_timeouts = timeouts;
            self
        }

        /// The identity key a capsule that declares `capabilities.peer_fetch` publishes in its
        /// card and proves its redeems with (D-14.1), instead of a fresh
        /// [`OsRandomIdentityKey`](crate::backends::OsRandomIdentityKey).
        /// Unused without `capabilities.peer_fetch`.
        pub fn identity(mut self, key: std::sync::Arc<dyn crate::backends::IdentityKey>) -> Self {
            self.world.identity = Some(key);
            self
        }

        /// The random source (default [`OsRandom`](crate::backends::OsRandom)): the session id,
        /// trace event ids, handle nonces, redeem-proof nonces, and the minting and identity keys
        /// the capsule generates when none is given. A
        /// [`SeededRandom`](crate::backends::SeededRandom) makes all of them the same on every run,
        /// for tests only.
        pub fn random(mut self, random: std::sync::Arc<dyn crate::backends::Random>) -> Self {
            self.world.random = Some(random);
            self
        }

        /// How `share-file` and `fetch-peer-file` reach peers (default
        /// [`TcpTransport`](crate::backends::TcpTransport)): the agent-card fetch and the
        /// redeem both connect through it.
        pub fn peer_transport(
            mut self,
            transport: std::sync::Arc<dyn crate::backends::PeerTransport>,
        ) -> Self {
            self.world.peer_transport = Some(transport);
            self
        }

        /// The skills the agent card lists (D-4.7.1) instead of the default one, which
        /// describes the file surfaces the manifest declares. An empty list keeps the default:
        /// A2A 1.0 requires a card to list at least one skill. Each
        /// [`AgentSkill`](crate::card::AgentSkill) carries every field A2A requires by
        /// construction, so the card stays valid.
        pub fn skills(mut self, skills: impl IntoIterator<Item = crate::card::AgentSkill>) -> Self {
            self.settings.skills = skills.into_iter().collect();
            self
        }
    };
}

pub(super) use setting_methods;

impl CapsuleConfig {
    /// A configuration advertising `advertised_url` (the card's `url` and the audience's tail),
    /// every other setting at its default: [`DEFAULT_CONTAINMENT`],
    /// [`DEFAULT_FETCH_MAX_BYTES`], [`DEFAULT_INFLIGHT_BUDGET_BYTES`], [`DEFAULT_CORES`],
    /// [`PeerTls::system`](crate::backends::tls::PeerTls::system), a fresh session id,
    /// [`PeerTimeouts::default`], a fresh identity key, [`OsRandom`](crate::backends::OsRandom),
    /// [`TcpTransport`](crate::backends::TcpTransport). Reads nothing.
    ///
    /// # Errors
    /// [`LaunchError::AdvertisedUrl`] (`E-CLI-001`) when `advertised_url` is not an http(s)
    /// URL with a host.
    pub fn new(advertised_url: impl Into<String>) -> Result<Self, LaunchError> {
        let advertised_url = advertised_url.into();
        check_url(&advertised_url)?;
        Ok(CapsuleConfig {
            advertised_url,
            settings: Settings::default(),
            world: World::default(),
        })
    }

    /// The advertised URL.
    pub fn advertised_url(&self) -> &str {
        &self.advertised_url
    }

    setting_methods!();
}

/// The origin of `url` (where peers send redeems, D-14.3.1); `E-CLI-001` unless `url` is an
/// http(s) URL with a host.
pub(super) fn check_url(url: &str) -> Result<Origin, LaunchError> {
    Origin::of_url(url).ok_or_else(|| LaunchError::AdvertisedUrl {
        url: url.to_owned(),
    })
}
