//! [`CapsuleBuilder`]: the backends, the configuration and any plane of the runtime's own, then
//! the launch, which checks everything it can before it builds anything, and then builds the
//! planes, the tools, the agent card, the watcher and the router, each in a step of its own.

use super::backends::{Backends, Resolved, World};
use super::config::{CapsuleConfig, Settings, check_url, setting_methods};
use super::{Capsule, Generation};
use crate::audience;
use crate::backends::fs::Filesystem;
use crate::backends::trace::TraceSink;
use crate::backends::{Clock, IdentityKey, KeyStore};
use crate::budget::ByteBudget;
use crate::card::AgentSkill;
use crate::http::client::PeerClient;
use crate::http::router::{FilesMount, Mount, Mounted, PeerMount, Router};
use crate::manifest::{LaunchError, Manifest};
use crate::planes::watch::{Hub, Source, WatchSettings};
use crate::planes::{HmacPeerPlane, OperatorPlane, Origin, PeerPlane, ResourcePlane};
use crate::scope::ExportScope;
use crate::tools::{FetchPeerFile, SessionEnd, ShareFile, ToolInventory};
use crate::trace::Tracer;
use std::sync::Arc;

/// Builds a [`Capsule`] step by step: the backends, the configuration, and optionally a
/// runtime's own [`ResourcePlane`] or [`PeerPlane`] in place of the crate's. The router, the
/// trace lines, the tools and the generation counter work the same over either.
///
/// Required: a [`filesystem`](Self::filesystem), a [`trace`](Self::trace) sink and an
/// [`advertised_url`](Self::advertised_url) (or [`backends`](Self::backends) and
/// [`config`](Self::config), which set them). The clock defaults to
/// [`SystemClock`](crate::backends::SystemClock), the minting key to a fresh
/// [`OsRandomKeyStore`](crate::backends::OsRandomKeyStore), every other setting as
/// [`CapsuleConfig::new`] says.
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
    /// Every backend set so far.
    world: World,
    advertised_url: Option<String>,
    settings: Settings,
    files: Option<Arc<dyn ResourcePlane>>,
    peer: Option<Arc<dyn PeerPlane>>,
}

impl<'m> CapsuleBuilder<'m> {
    pub(super) fn new(manifest: &'m Manifest) -> Self {
        CapsuleBuilder {
            manifest,
            world: World::default(),
            advertised_url: None,
            settings: Settings::default(),
            files: None,
            peer: None,
        }
    }

    /// All four backends at once.
    pub fn backends(mut self, backends: Backends) -> Self {
        self.world = self.world.with_backends(backends);
        self
    }

    /// The workdir's filesystem: the launch checks (`E-CAP-007`) run on it, the crate's planes
    /// read from it and `fetch-peer-file` lands in it.
    pub fn filesystem(mut self, fs: Arc<dyn Filesystem>) -> Self {
        self.world.fs = Some(fs);
        self
    }

    /// Wall-clock time (default [`SystemClock`](crate::backends::SystemClock)).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.world.clock = Some(clock);
        self
    }

    /// The minting key of the crate's peer plane (default a fresh
    /// [`OsRandomKeyStore`](crate::backends::OsRandomKeyStore)).
    pub fn keys(mut self, keys: Arc<dyn KeyStore>) -> Self {
        self.world.keys = Some(keys);
        self
    }

    /// Where trace lines go.
    pub fn trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.world.trace = Some(trace);
        self
    }

    /// The advertised URL and every setting of `config`, the backends it sets like settings
    /// included (whether it set them or not).
    pub fn config(mut self, config: CapsuleConfig) -> Self {
        self.advertised_url = Some(config.advertised_url);
        self.settings = config.settings;
        self.world = self.world.with_settable_of(config.world);
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
        let CapsuleBuilder {
            manifest,
            world,
            advertised_url,
            settings,
            files,
            peer,
        } = self;
        let world = world.resolve()?;
        let url = advertised_url.ok_or(LaunchError::Incomplete {
            setting: "advertised_url",
        })?;
        let (origin, audience) = check_launch(manifest, &world, &url, &files, &peer)?;
        let launch = Launch::start(manifest, world, settings, url, origin, audience);
        let mut tools = ToolInventory::default();
        let files = launch.files_mount(files);
        let peer = launch.peer_mount(peer, &mut tools);
        let identity = launch.fetch_tool(&mut tools);
        let watch = files.as_ref().map(|files| launch.watch_hub(files));
        let agent_card = launch.agent_card(identity.as_deref());
        let Launch {
            settings,
            url,
            audience,
            session_id,
            tracer,
            generation,
            ended,
            ..
        } = launch;
        let peer_plane = peer.as_ref().map(|mount| mount.plane.clone());
        let router = Router::new(Mounted {
            files,
            peer,
            tracer,
            generation: generation.clone(),
            containment: settings.containment,
            agent_card,
            lanes: crate::blocking::Lanes::for_cores(settings.cores),
            rpc_path: crate::policy::url_path(&url).to_owned(),
            watch,
        });
        Ok(Capsule {
            session_id,
            audience,
            advertised_url: url,
            generation,
            router,
            tools,
            peer: peer_plane,
            identity,
            ended,
        })
    }
}

/// The launch checks after the backends and the URL are known, in their order: a replacement
/// plane's export is declared, the manifest's launch checks pass on the filesystem, the URL is
/// an http(s) URL with a host, and the manifest's name can head an audience. Returns the URL's
/// origin and the capsule's audience.
///
/// # Errors
/// As [`CapsuleBuilder::launch`], after its `Incomplete`.
fn check_launch(
    manifest: &Manifest,
    world: &Resolved,
    url: &str,
    files: &Option<Arc<dyn ResourcePlane>>,
    peer: &Option<Arc<dyn PeerPlane>>,
) -> Result<(Origin, String), LaunchError> {
    if files.is_some() && manifest.files.is_none() {
        return Err(LaunchError::UndeclaredPlane {
            export: "exports.files",
        });
    }
    if peer.is_some() && manifest.peer_files.is_none() {
        return Err(LaunchError::UndeclaredPlane {
            export: "exports.peer_files",
        });
    }
    manifest.check_launch(|root| Ok(world.fs.check_root(root)?))?;
    let origin = check_url(url)?;
    let audience = audience::audience(&manifest.name, url).ok_or_else(|| {
        LaunchError::malformed("name", "a non-empty string without control characters")
    })?;
    Ok((origin, audience))
}

/// A launch past its checks: what every part it builds shares.
struct Launch<'m> {
    manifest: &'m Manifest,
    world: Resolved,
    settings: Settings,
    url: String,
    origin: Origin,
    audience: String,
    session_id: String,
    tracer: Tracer,
    budget: ByteBudget,
    generation: Generation,
    client: PeerClient,
    /// Raised when the session ends; the tools refuse once it is.
    ended: SessionEnd,
}

impl<'m> Launch<'m> {
    /// The session's own parts: its id (the one given, or drawn from the random source), its
    /// tracer, in-flight budget, generation counter and peer client.
    fn start(
        manifest: &'m Manifest,
        world: Resolved,
        settings: Settings,
        url: String,
        origin: Origin,
        audience: String,
    ) -> Self {
        let random = world.random.as_ref();
        let session_id = settings
            .session_id
            .clone()
            .unwrap_or_else(|| format!("ses_{}", random.hex::<16>()));
        let tracer = Tracer::with_random(
            world.trace.clone(),
            world.clock.clone(),
            session_id.clone(),
            random,
        );
        let budget = ByteBudget::with_cores(settings.inflight_budget_bytes, settings.cores);
        let client = PeerClient::new(world.peer_tls.client_config())
            .with_transport(world.peer_transport.clone());
        Launch {
            manifest,
            world,
            settings,
            url,
            origin,
            audience,
            session_id,
            tracer,
            budget,
            generation: Generation::new(),
            client,
            ended: SessionEnd::default(),
        }
    }

    /// The operator plane as mounted, when `exports.files` is declared: the runtime's `own`,
    /// awaited, or the crate's, which answers small reads on the async worker and the rest on
    /// the blocking pool (`ReadsInline`).
    fn files_mount(&self, own: Option<Arc<dyn ResourcePlane>>) -> Option<FilesMount> {
        if let Some(plane) = own {
            return Some(Mount::own(plane));
        }
        let files = self.manifest.files.as_ref()?;
        let plane = Arc::new(OperatorPlane::new(
            self.world.fs.clone(),
            self.world.clock.clone(),
            ExportScope {
                root: files.root.clone(),
                max_bytes: files.max_bytes,
                containment: self.settings.containment,
            },
            self.budget.clone(),
        ));
        Some(Mount {
            plane: plane.clone(),
            inline: Some(plane),
        })
    }

    /// The peer plane as mounted, when `exports.peer_files` is declared (the runtime's `own`,
    /// or the crate's, as for [`files_mount`](Self::files_mount)), with `share-file`
    /// registered in `tools`.
    fn peer_mount(
        &self,
        own: Option<Arc<dyn PeerPlane>>,
        tools: &mut ToolInventory,
    ) -> Option<PeerMount> {
        let peer_files = self.manifest.peer_files.as_ref()?;
        let mount: PeerMount = match own {
            Some(plane) => Mount::own(plane),
            None => {
                let scope = ExportScope {
                    root: peer_files.root.clone(),
                    max_bytes: peer_files.max_bytes,
                    containment: self.settings.containment,
                };
                let plane = Arc::new(
                    HmacPeerPlane::new(
                        self.world.fs.clone(),
                        self.world.clock.clone(),
                        self.world.keys(),
                        scope,
                        self.session_id.clone(),
                        self.budget.clone(),
                        self.origin.clone(),
                    )
                    .with_random(self.world.random.clone()),
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
                self.manifest.network.clone(),
                self.client.clone(),
                self.tracer.clone(),
                peer_files.max_ttl_secs(),
                self.settings.peer_timeouts,
            )
            .requiring_peer_proof(peer_files.require_peer_proof)
            .ending_with(self.ended.clone()),
        ));
        Some(mount)
    }

    /// `fetch-peer-file`, registered in `tools` when `capabilities.peer_fetch` is declared,
    /// and the identity key it proves its redeems with, which the card publishes.
    fn fetch_tool(&self, tools: &mut ToolInventory) -> Option<Arc<dyn IdentityKey>> {
        let allow = self.manifest.peer_fetch.as_ref()?;
        let identity = self.world.identity();
        tools.register(Arc::new(
            FetchPeerFile::new(
                allow.clone(),
                self.client.clone(),
                self.world.fs.clone(),
                self.tracer.clone(),
                self.audience.clone(),
                self.settings.fetch_max_bytes,
                self.settings.peer_timeouts,
            )
            .with_identity(identity.clone(), self.world.clock.clone())
            .with_random(self.world.random.clone())
            .ending_with(self.ended.clone()),
        ));
        Some(identity)
    }

    /// The watcher of the operator plane's root. The crate's own plane lists the filesystem,
    /// whose notices then cover its root; a runtime's own plane is re-listed on the fallback
    /// timer.
    fn watch_hub(&self, files: &FilesMount) -> Arc<Hub> {
        Hub::new(Source {
            plane: files.plane.clone(),
            inline: files.inline.clone(),
            generation: self.generation.clone(),
            containment: self.settings.containment.as_str(),
            notices: files.inline.is_some().then(|| self.world.fs.clone()),
            settings: WatchSettings {
                notify: self.settings.watch_notifications,
                ..WatchSettings::default()
            },
        })
    }

    /// The agent card (D-4.7.1), publishing `identity` when there is one, as JSON.
    fn agent_card(&self, identity: Option<&dyn IdentityKey>) -> Vec<u8> {
        let skills = if self.settings.skills.is_empty() {
            vec![AgentSkill::file_surfaces(
                self.manifest.files.is_some(),
                self.manifest.peer_files.is_some(),
            )]
        } else {
            self.settings.skills.clone()
        };
        let public_key = identity.map(|i| i.public_key());
        let card = audience::agent_card_with_key(
            &self.manifest.name,
            &self.url,
            public_key.as_ref(),
            &skills,
        );
        serde_json::to_vec(&card).unwrap_or_default()
    }
}
