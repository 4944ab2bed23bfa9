//! The registration API: a runtime builds one [`Capsule`] at launch from a manifest and four
//! backends, and gets back a router to mount and the tools its model may see.

use crate::audience;
use crate::backends::fs::{Containment, Filesystem};
use crate::backends::trace::{TraceSink, Tracer};
use crate::backends::{Clock, IdentityKey, KeyStore, OsRandomIdentityKey, OsRandomKeyStore};
use crate::budget::ByteBudget;
use crate::generation::Generation;
use crate::http::client::{PeerClient, PeerTimeouts};
use crate::http::router::{Mounted, Router};
use crate::manifest::{LaunchError, Manifest};
use crate::planes::{ExportScope, HmacPeerPlane, OperatorPlane, PeerPlane, ResourcePlane};
use crate::tools::{FetchPeerFile, ShareFile, ToolInventory};
use std::sync::Arc;

/// The four injectable backends.
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

/// What the embedding runtime knows about this session.
#[derive(Debug, Clone)]
pub struct CapsuleConfig {
    /// The containment class the runtime achieved, taken as given.
    pub containment: Containment,
    /// The capsule's own advertised URL: its card's `url` and its audience's tail.
    pub advertised_url: String,
    /// The fetcher's own body cap (D-10.2).
    pub fetch_max_bytes: u64,
    /// Bytes that in-flight reads may hold at once (D-4.6).
    pub inflight_budget_bytes: u64,
    /// Trust for https peers.
    pub peer_tls: Arc<rustls::ClientConfig>,
    /// The session id; `None` draws a fresh `ses_<32 hex>`.
    pub session_id: Option<String>,
    /// Time limits for the card fetch and the redeem.
    pub peer_timeouts: PeerTimeouts,
    /// The identity key a capsule that declares `capabilities.peer_fetch` publishes in its card
    /// and proves its redeems with (D-14.1); `None` draws a fresh [`OsRandomIdentityKey`] at
    /// launch. Unused without `capabilities.peer_fetch`. It sits here rather than in
    /// [`Backends`] so that struct keeps its four fields.
    pub identity: Option<Arc<dyn IdentityKey>>,
}

impl CapsuleConfig {
    /// Defaults: `advisory`, 10 MiB fetch cap, 256 MiB in-flight budget, system TLS roots.
    ///
    /// # Errors
    /// When the TLS configuration cannot be built.
    pub fn new(advertised_url: impl Into<String>) -> Result<Self, String> {
        Ok(CapsuleConfig {
            containment: Containment::Advisory,
            advertised_url: advertised_url.into(),
            fetch_max_bytes: 10 * 1024 * 1024,
            inflight_budget_bytes: 256 * 1024 * 1024,
            peer_tls: crate::backends::tls::client_config(&[])?,
            session_id: None,
            peer_timeouts: PeerTimeouts::default(),
            identity: None,
        })
    }
}

/// One capsule's resource surfaces for one session.
#[derive(Debug)]
pub struct Capsule {
    session_id: String,
    audience: String,
    generation: Generation,
    router: Router,
    tools: ToolInventory,
    peer: Option<Arc<dyn PeerPlane>>,
    identity: Option<Arc<dyn IdentityKey>>,
}

impl Capsule {
    /// Runs the launch checks, then builds the planes and tools the manifest grants. Creates
    /// nothing on the filesystem.
    ///
    /// # Errors
    /// `E-CAP-008`, `E-CAP-007`, or `E-MAN-003` when the advertised URL cannot form an audience.
    pub fn launch(
        manifest: &Manifest,
        config: CapsuleConfig,
        backends: Backends,
    ) -> Result<Self, LaunchError> {
        manifest.check_launch(backends.fs.as_ref())?;
        let audience =
            audience::audience(&manifest.name, &config.advertised_url).ok_or_else(|| {
                LaunchError {
                    code: "E-MAN-003",
                    message: format!(
                        "advertised url `{}`: an http(s) URL with a host",
                        config.advertised_url
                    ),
                    hint: "pass --url http://host:port".into(),
                }
            })?;
        let session_id = config
            .session_id
            .clone()
            .unwrap_or_else(|| format!("ses_{}", crate::backends::random::hex::<16>()));
        let tracer = Tracer::new(
            backends.trace.clone(),
            backends.clock.clone(),
            session_id.clone(),
        );
        let budget = ByteBudget::new(config.inflight_budget_bytes);
        let generation = Generation::new();
        let client = PeerClient::new(config.peer_tls.clone());

        let files: Option<Arc<dyn ResourcePlane>> = manifest.files.as_ref().map(|f| {
            Arc::new(OperatorPlane::new(
                backends.fs.clone(),
                backends.clock.clone(),
                ExportScope {
                    root: f.root.clone(),
                    max_bytes: f.max_bytes,
                    containment: config.containment,
                },
                budget.clone(),
            )) as Arc<dyn ResourcePlane>
        });
        let mut tools = ToolInventory::default();
        let peer: Option<Arc<dyn PeerPlane>> = manifest.peer_files.as_ref().map(|p| {
            let keys = backends
                .keys
                .clone()
                .unwrap_or_else(|| Arc::new(OsRandomKeyStore::generate()));
            let plane: Arc<dyn PeerPlane> = Arc::new(HmacPeerPlane::new(
                backends.fs.clone(),
                backends.clock.clone(),
                keys,
                ExportScope {
                    root: p.root.clone(),
                    max_bytes: p.max_bytes,
                    containment: config.containment,
                },
                session_id.clone(),
                budget.clone(),
            ));
            tools.register(Arc::new(
                ShareFile::new(
                    plane.clone(),
                    manifest.network.clone(),
                    client.clone(),
                    tracer.clone(),
                    p.max_ttl_secs(),
                    config.peer_timeouts,
                )
                .requiring_peer_proof(p.require_peer_proof),
            ));
            plane
        });
        let identity: Option<Arc<dyn IdentityKey>> = manifest.peer_fetch.as_ref().map(|allow| {
            let identity = config
                .identity
                .clone()
                .unwrap_or_else(|| Arc::new(OsRandomIdentityKey::generate()));
            tools.register(Arc::new(
                FetchPeerFile::new(
                    allow.clone(),
                    client.clone(),
                    backends.fs.clone(),
                    tracer.clone(),
                    audience.clone(),
                    config.fetch_max_bytes,
                    config.peer_timeouts,
                )
                .with_identity(identity.clone(), backends.clock.clone()),
            ));
            identity
        });
        let public_key = identity.as_ref().map(|i| i.public_key());
        let card = audience::agent_card_with_key(
            &manifest.name,
            &config.advertised_url,
            public_key.as_ref(),
        );
        let router = Router::new(Mounted {
            files,
            peer: peer.clone(),
            tracer,
            generation: generation.clone(),
            containment: config.containment,
            agent_card: serde_json::to_vec(&card).unwrap_or_default(),
        });
        Ok(Capsule {
            session_id,
            audience,
            generation,
            router,
            tools,
            peer,
            identity,
        })
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

    /// The generation counter.
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    /// Records that one task reached a terminal state; returns the new generation (D-5).
    pub fn task_completed(&self) -> u64 {
        self.generation.task_completed()
    }

    /// Ends the session's keys: every outstanding handle stops verifying (D-12), and the
    /// identity key signs no more proofs (D-14.1). Call after the listener has drained.
    pub fn end_session(&self) {
        if let Some(peer) = &self.peer {
            peer.end_session();
        }
        if let Some(identity) = &self.identity {
            identity.destroy();
        }
    }
}
