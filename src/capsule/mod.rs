//! The registration API: a runtime builds one [`Capsule`] at launch from a manifest, four
//! backends and a [`CapsuleConfig`] (or through [`Capsule::builder`], which can also replace
//! either plane with its own), and gets back a router to mount and the tools its model may see.
//!
//! Every backend a capsule uses is held in one place while it is built (`backends.rs`: the
//! four of [`Backends`] and those set like settings), the settings in another (`config.rs`),
//! and the launch builds the capsule from both (`builder.rs`).

mod backends;
mod builder;
mod config;

/// The capsule's export generation counter (see [`Capsule::generation`]).
pub use crate::generation::Generation;
pub use backends::Backends;
pub use builder::CapsuleBuilder;
pub use config::{
    CapsuleConfig, DEFAULT_CONTAINMENT, DEFAULT_CORES, DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_INFLIGHT_BUDGET_BYTES,
};

use crate::audience;
use crate::backends::IdentityKey;
use crate::http::router::Router;
use crate::manifest::{LaunchError, Manifest};
use crate::planes::PeerPlane;
use crate::planes::watch::ChangeStream;
use crate::tools::{SessionEnd, ToolInventory};
use std::sync::Arc;

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
