//! The registration API: a runtime builds one [`Capsule`] at launch from a manifest, four
//! backends and a [`CapsuleConfig`] (or through [`Capsule::builder`], which can also replace
//! either plane with its own), and gets back a router to mount and the tools its model may see.

use crate::audience;
use crate::backends::fs::Filesystem;
use crate::backends::tls::PeerTls;
use crate::backends::trace::TraceSink;
use crate::backends::{
    Clock, IdentityKey, KeyStore, OsRandom, OsRandomIdentityKey, OsRandomKeyStore, PeerTransport,
    Random, SystemClock, TcpTransport,
};
use crate::budget::ByteBudget;
use crate::card::AgentSkill;
/// The capsule's export generation counter (see [`Capsule::generation`]).
pub use crate::generation::Generation;
use crate::http::client::{PeerClient, PeerTimeouts};
use crate::http::router::{FilesMount, Mount, Mounted, PeerMount, Router};
use crate::manifest::{LaunchError, Manifest};
use crate::planes::watch::{ChangeStream, Hub, Source, WatchSettings};
use crate::planes::{HmacPeerPlane, OperatorPlane, Origin, PeerPlane, ResourcePlane};
use crate::scope::{Containment, ExportScope};
use crate::tools::{FetchPeerFile, SessionEnd, ShareFile, ToolInventory};
use crate::trace::Tracer;
use std::sync::Arc;

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

/// The four injectable backends every capsule needs. The other two, the random source and the
/// peer transport, default to the OS's and are set like any other setting
/// ([`CapsuleConfig::random`], [`CapsuleConfig::peer_transport`], or the builder's methods of
/// the same names).
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

/// Everything a launch takes besides the manifest, the backends and the advertised URL.
#[derive(Debug, Clone)]
struct Settings {
    containment: Containment,
    fetch_max_bytes: u64,
    inflight_budget_bytes: u64,
    cores: usize,
    peer_tls: PeerTls,
    session_id: Option<String>,
    peer_timeouts: PeerTimeouts,
    identity: Option<Arc<dyn IdentityKey>>,
    random: Arc<dyn Random>,
    peer_transport: Arc<dyn PeerTransport>,
    skills: Vec<AgentSkill>,
    watch_notifications: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            containment: DEFAULT_CONTAINMENT,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            inflight_budget_bytes: DEFAULT_INFLIGHT_BUDGET_BYTES,
            cores: DEFAULT_CORES,
            peer_tls: PeerTls::system(),
            session_id: None,
            peer_timeouts: PeerTimeouts::default(),
            identity: None,
            random: Arc::new(OsRandom),
            peer_transport: Arc::new(TcpTransport),
            skills: Vec::new(),
            watch_notifications: true,
        }
    }
}

/// What the embedding runtime knows about this session: its advertised URL and the settings
/// below, each with a named default. Building one reads nothing: the system's certificate
/// store is read at the first https handshake with a peer, if ever (see [`PeerTls`]).
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
    advertised_url: String,
    settings: Settings,
}

/// The settings [`CapsuleConfig`] and [`CapsuleBuilder`] both take, one method each, written
/// once: both hold them in a `settings` field.
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
        pub fn containment(mut self, containment: Containment) -> Self {
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

        /// The cores the planes size their work for (default [`DEFAULT_CORES`]; 0 is taken
        /// for one). Blocking reads fill one buffer per core at a time, listings hash on at
        /// most two threads per core in all, and the router runs at most one read and one
        /// other call per core, and two listings, on the blocking pool at once, however many
        /// requests wait (D-4.6.1): waiting requests hold no thread.
        pub fn cores(mut self, cores: usize) -> Self {
            self.settings.cores = cores.max(1);
            self
        }

        /// Trust for https peers.
        pub fn peer_tls(mut self, trust: PeerTls) -> Self {
            self.settings.peer_tls = trust;
            self
        }

        /// The session id (`ses_…`) instead of a fresh one.
        pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
            self.settings.session_id = Some(session_id.into());
            self
        }

        /// Time limits for the card fetch and the redeem.
        pub fn peer_timeouts(mut self, timeouts: PeerTimeouts) -> Self {
            self.settings.peer_timeouts = timeouts;
            self
        }

        /// The identity key a capsule that declares `capabilities.peer_fetch` publishes in its
        /// card and proves its redeems with (D-14.1), instead of a fresh [`OsRandomIdentityKey`].
        /// Unused without `capabilities.peer_fetch`.
        pub fn identity(mut self, key: Arc<dyn IdentityKey>) -> Self {
            self.settings.identity = Some(key);
            self
        }

        /// The random source (default [`OsRandom`]): the session id, trace event ids,
        /// handle nonces, redeem-proof nonces, and the minting and identity keys the capsule
        /// generates when none is given. A [`SeededRandom`](crate::backends::SeededRandom)
        /// makes all of them the same on every run, for tests only.
        pub fn random(mut self, random: Arc<dyn Random>) -> Self {
            self.settings.random = random;
            self
        }

        /// How `share-file` and `fetch-peer-file` reach peers (default [`TcpTransport`]): the
        /// agent-card fetch and the redeem both connect through it.
        pub fn peer_transport(mut self, transport: Arc<dyn PeerTransport>) -> Self {
            self.settings.peer_transport = transport;
            self
        }

        /// The skills the agent card lists (D-4.7.1) instead of the default one, which
        /// describes the file surfaces the manifest declares. An empty list keeps the default:
        /// A2A 1.0 requires a card to list at least one skill. Each [`AgentSkill`] carries
        /// every field A2A requires by construction, so the card stays valid.
        pub fn skills(mut self, skills: impl IntoIterator<Item = AgentSkill>) -> Self {
            self.settings.skills = skills.into_iter().collect();
            self
        }
    };
}

impl CapsuleConfig {
    /// A configuration advertising `advertised_url` (the card's `url` and the audience's tail),
    /// every other setting at its default: [`DEFAULT_CONTAINMENT`],
    /// [`DEFAULT_FETCH_MAX_BYTES`], [`DEFAULT_INFLIGHT_BUDGET_BYTES`], [`DEFAULT_CORES`],
    /// [`PeerTls::system`],
    /// a fresh session id, [`PeerTimeouts::default`], a fresh identity key, [`OsRandom`],
    /// [`TcpTransport`]. Reads nothing.
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
fn check_url(url: &str) -> Result<Origin, LaunchError> {
    Origin::of_url(url).ok_or_else(|| LaunchError::AdvertisedUrl {
        url: url.to_owned(),
    })
}

/// Builds a [`Capsule`] step by step: the backends, the configuration, and optionally a
/// runtime's own [`ResourcePlane`] or [`PeerPlane`] in place of the crate's. The router, the
/// trace lines, the tools and the generation counter work the same over either.
///
/// Required: a [`filesystem`](Self::filesystem), a [`trace`](Self::trace) sink and an
/// [`advertised_url`](Self::advertised_url) (or [`backends`](Self::backends) and
/// [`config`](Self::config), which set them). The clock defaults to [`SystemClock`], the
/// minting key to a fresh [`OsRandomKeyStore`], every other setting as [`CapsuleConfig::new`]
/// says.
///
/// ```
/// use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }")
///     .unwrap()
///     .manifest;
/// let capsule = Capsule::builder(&manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .clock(Arc::new(ManualClock::new(0)))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// assert_eq!(capsule.audience(), "r@127.0.0.1:41234");
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until launched"]
pub struct CapsuleBuilder<'m> {
    manifest: &'m Manifest,
    fs: Option<Arc<dyn Filesystem>>,
    clock: Option<Arc<dyn Clock>>,
    keys: Option<Arc<dyn KeyStore>>,
    trace: Option<Arc<dyn TraceSink>>,
    advertised_url: Option<String>,
    settings: Settings,
    files: Option<Arc<dyn ResourcePlane>>,
    peer: Option<Arc<dyn PeerPlane>>,
}

impl<'m> CapsuleBuilder<'m> {
    fn new(manifest: &'m Manifest) -> Self {
        CapsuleBuilder {
            manifest,
            fs: None,
            clock: None,
            keys: None,
            trace: None,
            advertised_url: None,
            settings: Settings::default(),
            files: None,
            peer: None,
        }
    }

    /// All four backends at once.
    pub fn backends(mut self, backends: Backends) -> Self {
        self.fs = Some(backends.fs);
        self.clock = Some(backends.clock);
        self.keys = backends.keys;
        self.trace = Some(backends.trace);
        self
    }

    /// The workdir's filesystem: the launch checks (`E-CAP-007`) run on it, the crate's planes
    /// read from it and `fetch-peer-file` lands in it.
    pub fn filesystem(mut self, fs: Arc<dyn Filesystem>) -> Self {
        self.fs = Some(fs);
        self
    }

    /// Wall-clock time (default [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The minting key of the crate's peer plane (default a fresh [`OsRandomKeyStore`]).
    pub fn keys(mut self, keys: Arc<dyn KeyStore>) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Where trace lines go.
    pub fn trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = Some(trace);
        self
    }

    /// The advertised URL and every setting of `config`.
    pub fn config(mut self, config: CapsuleConfig) -> Self {
        self.advertised_url = Some(config.advertised_url);
        self.settings = config.settings;
        self
    }

    /// The capsule's own advertised URL: its card's `url` and its audience's tail. Checked at
    /// launch.
    pub fn advertised_url(mut self, url: impl Into<String>) -> Self {
        self.advertised_url = Some(url.into());
        self
    }

    setting_methods!();

    /// Answers `/resources/files` from `plane` instead of the crate's [`OperatorPlane`]. The
    /// manifest must declare `exports.files`; the plane's own [`scope`](ResourcePlane::scope)
    /// is what headers and listings echo.
    pub fn resource_plane(mut self, plane: Arc<dyn ResourcePlane>) -> Self {
        self.files = Some(plane);
        self
    }

    /// Answers `/resources/peer` and mints for `share-file` with `plane` instead of the crate's
    /// [`HmacPeerPlane`] (the minting key is then unused). The manifest must declare
    /// `exports.peer_files`, whose `max_ttl` and `require_peer_proof` still bind `share-file`.
    pub fn peer_plane(mut self, plane: Arc<dyn PeerPlane>) -> Self {
        self.peer = Some(plane);
        self
    }

    /// Runs the launch checks, then builds the planes and tools the manifest grants. Creates
    /// nothing on the filesystem and reads no file.
    ///
    /// # Errors
    /// In this order: `E-CLI-001` [`LaunchError::Incomplete`] for a missing filesystem, trace
    /// sink or advertised URL; `E-CLI-001` [`LaunchError::UndeclaredPlane`] for a replacement
    /// plane whose export the manifest does not declare; `E-CAP-008`, `E-CAP-007` (D-1.8,
    /// D-1.9); `E-CLI-001` [`LaunchError::AdvertisedUrl`] for an advertised URL that is not an
    /// http(s) URL with a host; `E-MAN-003` naming `name` when the manifest's name cannot head
    /// an audience (only a [`Manifest`] built by hand can hold one).
    pub fn launch(self) -> Result<Capsule, LaunchError> {
        let missing = |setting| LaunchError::Incomplete { setting };
        let fs = self.fs.ok_or(missing("filesystem"))?;
        let trace = self.trace.ok_or(missing("trace"))?;
        let url = self.advertised_url.ok_or(missing("advertised_url"))?;
        let manifest = self.manifest;
        if self.files.is_some() && manifest.files.is_none() {
            return Err(LaunchError::UndeclaredPlane {
                export: "exports.files",
            });
        }
        if self.peer.is_some() && manifest.peer_files.is_none() {
            return Err(LaunchError::UndeclaredPlane {
                export: "exports.peer_files",
            });
        }
        manifest.check_launch(|root| Ok(fs.check_root(root)?))?;
        let origin = check_url(&url)?;
        let advertised_url = url.clone();
        let audience = audience::audience(&manifest.name, &url).ok_or_else(|| {
            LaunchError::malformed("name", "a non-empty string without control characters")
        })?;
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let settings = self.settings;
        let random = settings.random.clone();
        let session_id = settings
            .session_id
            .clone()
            .unwrap_or_else(|| format!("ses_{}", random.hex::<16>()));
        let tracer = Tracer::with_random(trace, clock.clone(), session_id.clone(), random.as_ref());
        let budget = ByteBudget::with_cores(settings.inflight_budget_bytes, settings.cores);
        let generation = Generation::new();
        let client = PeerClient::new(settings.peer_tls.client_config())
            .with_transport(settings.peer_transport.clone());

        // The planes the crate builds itself answer small calls on the async worker and the
        // rest on the blocking pool (`ReadsInline`, `RedeemsInline`); a runtime's own plane is
        // async, and always awaited.
        let files: Option<FilesMount> = match self.files {
            Some(plane) => Some(Mount::own(plane)),
            None => manifest.files.as_ref().map(|f| -> FilesMount {
                let plane = Arc::new(OperatorPlane::new(
                    fs.clone(),
                    clock.clone(),
                    ExportScope {
                        root: f.root.clone(),
                        max_bytes: f.max_bytes,
                        containment: settings.containment,
                    },
                    budget.clone(),
                ));
                Mount {
                    plane: plane.clone(),
                    inline: Some(plane),
                }
            }),
        };
        let mut tools = ToolInventory::default();
        let ended = SessionEnd::default();
        let peer: Option<PeerMount> = manifest.peer_files.as_ref().map(|p| {
            let mount: PeerMount = match &self.peer {
                Some(plane) => Mount::own(plane.clone()),
                None => {
                    let plane = Arc::new(
                        HmacPeerPlane::new(
                            fs.clone(),
                            clock.clone(),
                            self.keys.clone().unwrap_or_else(|| {
                                Arc::new(OsRandomKeyStore::generate_from(random.as_ref()))
                            }),
                            ExportScope {
                                root: p.root.clone(),
                                max_bytes: p.max_bytes,
                                containment: settings.containment,
                            },
                            session_id.clone(),
                            budget.clone(),
                            origin.clone(),
                        )
                        .with_random(random.clone()),
                    );
                    Mount {
                        plane: plane.clone(),
                        inline: Some(plane),
                    }
                }
            };
            tools.register(Arc::new(
                ShareFile::new(
                    mount.plane.clone(),
                    manifest.network.clone(),
                    client.clone(),
                    tracer.clone(),
                    p.max_ttl_secs(),
                    settings.peer_timeouts,
                )
                .requiring_peer_proof(p.require_peer_proof)
                .ending_with(ended.clone()),
            ));
            mount
        });
        let identity: Option<Arc<dyn IdentityKey>> = manifest.peer_fetch.as_ref().map(|allow| {
            let identity = settings
                .identity
                .clone()
                .unwrap_or_else(|| Arc::new(OsRandomIdentityKey::generate_from(random.as_ref())));
            tools.register(Arc::new(
                FetchPeerFile::new(
                    allow.clone(),
                    client.clone(),
                    fs.clone(),
                    tracer.clone(),
                    audience.clone(),
                    settings.fetch_max_bytes,
                    settings.peer_timeouts,
                )
                .with_identity(identity.clone(), clock.clone())
                .with_random(random.clone())
                .ending_with(ended.clone()),
            ));
            identity
        });
        let public_key = identity.as_ref().map(|i| i.public_key());
        let skills = if settings.skills.is_empty() {
            vec![AgentSkill::file_surfaces(
                manifest.files.is_some(),
                manifest.peer_files.is_some(),
            )]
        } else {
            settings.skills.clone()
        };
        let card =
            audience::agent_card_with_key(&manifest.name, &url, public_key.as_ref(), &skills);
        let peer_plane = peer.as_ref().map(|mount| mount.plane.clone());
        // The crate's own plane lists `fs`, whose notices then cover its root; a runtime's own
        // plane is re-listed on the fallback timer.
        let watch = files.as_ref().map(|files| {
            Hub::new(Source {
                plane: files.plane.clone(),
                inline: files.inline.clone(),
                generation: generation.clone(),
                containment: settings.containment.as_str(),
                notices: files.inline.is_some().then(|| fs.clone()),
                settings: WatchSettings {
                    notify: settings.watch_notifications,
                    ..WatchSettings::default()
                },
            })
        });
        let router = Router::new(Mounted {
            files,
            peer,
            tracer,
            generation: generation.clone(),
            containment: settings.containment,
            agent_card: serde_json::to_vec(&card).unwrap_or_default(),
            lanes: crate::blocking::Lanes::for_cores(settings.cores),
            rpc_path: crate::policy::url_path(&url).to_owned(),
            watch,
        });
        Ok(Capsule {
            session_id,
            audience,
            advertised_url,
            generation,
            router,
            tools,
            peer: peer_plane,
            identity,
            ended,
        })
    }
}

/// One capsule's resource surfaces for one session: the [router](Self::router) the runtime
/// mounts on its listener, the [tools](Self::tools) its model may call, the generation counter
/// it bumps when a task ends, and [`end_session`](Self::end_session) for when the session is
/// over.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/report.md", "draft", 0);
/// let manifest = Manifest::from_yaml(
///     "name: reporter\n\
///      exports: { files: { root: out/, mode: read-only }, peer_files: { root: out/ } }",
/// ).unwrap().manifest;
/// let capsule = Capsule::builder(&manifest)
///     .filesystem(fs)
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// assert_eq!(capsule.audience(), "reporter@127.0.0.1:41234");
/// assert_eq!(capsule.tools().names(), ["share-file"]);
///
/// let router = capsule.router();
/// let read = || router.handle(http::Request::get("/resources/files/report.md").body(()).unwrap());
/// assert_eq!(read().await.headers()["x-murmur-generation"], "0");
/// assert_eq!(capsule.task_completed(), 1); // the agent's task reached a terminal state
/// assert_eq!(read().await.headers()["x-murmur-generation"], "1");
/// assert_eq!(capsule.stats().requests_answered, 2);
///
/// capsule.end_session(); // after the listener drained: no handle verifies any more
/// # }
/// ```
#[derive(Debug)]
pub struct Capsule {
    session_id: String,
    audience: String,
    advertised_url: String,
    generation: Generation,
    router: Router,
    tools: ToolInventory,
    peer: Option<Arc<dyn PeerPlane>>,
    identity: Option<Arc<dyn IdentityKey>>,
    /// Raised by [`end_session`](Capsule::end_session); the tools refuse once it is.
    ended: SessionEnd,
}

impl Capsule {
    /// A builder for a capsule granted what `manifest` declares.
    pub fn builder(manifest: &Manifest) -> CapsuleBuilder<'_> {
        CapsuleBuilder::new(manifest)
    }

    /// Runs the launch checks, then builds the planes and tools the manifest grants, with the
    /// crate's own planes: `Capsule::builder(manifest).config(config).backends(backends)
    /// .launch()`. Creates nothing on the filesystem and reads no file.
    ///
    /// # Errors
    /// `E-CAP-008`, `E-CAP-007`, or `E-MAN-003` for a name that cannot head an audience (see
    /// [`CapsuleBuilder::launch`]).
    pub fn launch(
        manifest: &Manifest,
        config: CapsuleConfig,
        backends: Backends,
    ) -> Result<Self, LaunchError> {
        Capsule::builder(manifest)
            .config(config)
            .backends(backends)
            .launch()
    }

    /// The peer plane this capsule mints and redeems with, when `exports.peer_files` is
    /// declared.
    pub fn peer_plane(&self) -> Option<&Arc<dyn PeerPlane>> {
        self.peer.as_ref()
    }

    /// What the session did so far: requests answered, handles minted (the binary's closing
    /// log line, D-15.1).
    pub fn stats(&self) -> crate::http::router::SessionStats {
        self.router.stats()
    }

    /// The router to mount on the runtime's listener.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// The tools the model may see.
    pub fn tools(&self) -> &ToolInventory {
        &self.tools
    }

    /// This session's id (`ses_…`).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// This capsule's own audience, `<name>@<host>:<port>`.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The identity key this capsule's card publishes, as the card writes it (unpadded
    /// base64url); `None` without `capabilities.peer_fetch` (D-14.1).
    pub fn identity_key(&self) -> Option<String> {
        self.identity
            .as_ref()
            .map(|i| audience::encode_key(&i.public_key()))
    }

    /// The URL this capsule advertises (its card's `url`), as configured.
    pub fn advertised_url(&self) -> &str {
        &self.advertised_url
    }

    /// The generation counter.
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    /// Records that one task reached a terminal state; returns the new generation (D-5).
    pub fn task_completed(&self) -> u64 {
        self.generation.task_completed()
    }

    /// The export's changes as an async stream ([`ChangeStream`]), from the listing whose etag
    /// is `resume` or from the current listing; `None` without `exports.files`. Call it inside
    /// a tokio runtime: the first subscriber starts the export's watcher there.
    pub fn watch(&self, resume: Option<&str>) -> Option<ChangeStream> {
        self.router.watch(resume)
    }

    /// Ends the session's keys: every outstanding handle stops verifying (D-12), and the
    /// identity key signs no more proofs (D-14.1). Call after the listener has drained. From
    /// then on every tool call fails `session_ended` (D-12.1), and a call still in flight that
    /// is dropped is recorded as abandoned
    /// ([`ToolInventory::mark_session_ended`](crate::tools::ToolInventory::mark_session_ended)).
    pub fn end_session(&self) {
        self.ended.mark();
        self.tools.mark_session_ended();
        self.router.shut_down_watches();
        if let Some(peer) = &self.peer {
            peer.end_session();
        }
        if let Some(identity) = &self.identity {
            identity.destroy();
        }
    }
}
