//! The router and what it holds: the planes, the tracer, the lanes and the watcher it answers
//! from (what the capsule builder hands a new router), shared by every clone with its count of
//! answers, and the base path it answers under.

use crate::generation::Generation;
use crate::planes::inline::{ReadsInline, RedeemsInline};
use crate::planes::watch::Hub;
use crate::planes::{PeerPlane, ResourcePlane};
use crate::scope::Containment;
use crate::trace::Tracer;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// Answers requests for the capsule's `/resources/` planes and its agent card. Cheap to clone
/// (every clone shares the planes, the trace and the counts), `Send`, `Sync` and `'static`.
///
/// Three ways to mount it:
///
/// * as a [`tower_service::Service`](https://docs.rs/tower-service/0.3/tower_service/trait.Service.html)
///   for `http::Request<B>` of any body type `B` (the body is
///   never read): `Response = Response<PlaneBody>`, `Error = Infallible`, always ready. axum's
///   `Router::nest_service("/capsules/a", router)` hands it the path with the prefix cut off,
///   which is what it routes on;
/// * under a base path of its own, [`with_base_path`](Self::with_base_path), when nothing in
///   front of it strips the prefix;
/// * beside the runtime's own routes, [`with_fallback`](Self::with_fallback): the paths it
///   [`answers`](Self::answers) go to it, every other path to the runtime's service.
///
/// ```
/// use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
/// use std::sync::Arc;
/// use tower_service::Service;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml(
///     "name: reporter\nexports: { files: { root: out/, mode: read-only } }",
/// ).unwrap().manifest;
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/report.md", "hello", 1_700_000_000_000);
/// let trace = Arc::new(RecordingTraceSink::new());
/// let capsule = Capsule::launch(
///     &manifest,
///     CapsuleConfig::new("http://127.0.0.1:41234").unwrap(),
///     Backends { fs, clock: Arc::new(ManualClock::new(0)), keys: None, trace: trace.clone() },
/// ).unwrap();
///
/// // A Service over any body type; here a String the router never reads.
/// let mut router = capsule.router().with_base_path("/capsules/a").unwrap();
/// let request = http::Request::get("/capsules/a/resources/files/report.md")
///     .body(String::from("ignored"))
///     .unwrap();
/// let response = router.call(request).await.unwrap();
/// assert_eq!(response.status(), 200);
/// assert_eq!(&response.body().bytes()[..], b"hello");
/// // The trace records the path relative to the plane, as without a base path (D-6.2).
/// assert_eq!(trace.events()[0]["path"], "report.md");
///
/// // Outside the base path: not the router's (404, nothing traced).
/// let request = http::Request::get("/resources/files/report.md").body(()).unwrap();
/// assert_eq!(router.call(request).await.unwrap().status(), 404);
/// assert_eq!(trace.events().len(), 1);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Router {
    pub(super) mounted: Arc<Mounted>,
    /// Responses given, shared by every clone.
    pub(super) answered: Arc<AtomicU64>,
    /// The raw path prefix requests arrive under, cut before routing; `None`: none.
    pub(super) base: Option<Arc<str>>,
}

impl Router {
    pub(crate) fn new(mounted: Mounted) -> Self {
        Router {
            mounted: Arc::new(mounted),
            answered: Arc::new(AtomicU64::new(0)),
            base: None,
        }
    }

    /// How many calls this router runs on the blocking pool at once.
    #[cfg(feature = "cli")]
    pub(crate) fn lane_count(&self) -> usize {
        self.mounted.lanes.count()
    }

    /// Whether the operator plane (`exports.files`) is mounted.
    #[cfg(feature = "mcp")]
    pub(crate) fn serves_files(&self) -> bool {
        self.mounted.files.is_some()
    }

    /// The containment achieved at launch, as every line and plane response states it.
    pub(super) fn containment(&self) -> &'static str {
        self.mounted.containment.as_str()
    }

    /// The operator plane's root as declared, for a `resource_list` line.
    pub(super) fn files_root(&self) -> Option<String> {
        let files = self.mounted.files.as_ref();
        files.map(|files| files.plane.scope().root.declared().to_owned())
    }
}

/// A plane as the router holds it: the plane `P`, and the same plane as `I`, how it answers on
/// an async worker, when the crate built it.
#[derive(Debug)]
pub(crate) struct Mount<P: ?Sized, I: ?Sized> {
    pub(crate) plane: Arc<P>,
    /// The same plane as [`ReadsInline`] or [`RedeemsInline`], recorded by the capsule builder
    /// for the planes it builds itself; `None` for a runtime's own plane, which is always
    /// awaited on the async worker.
    pub(crate) inline: Option<Arc<I>>,
}

/// The operator plane as mounted.
pub(crate) type FilesMount = Mount<dyn ResourcePlane, dyn ReadsInline>;
/// The peer plane as mounted.
pub(crate) type PeerMount = Mount<dyn PeerPlane, dyn RedeemsInline>;

impl<P: ?Sized, I: ?Sized> Mount<P, I> {
    /// A runtime's own plane: every call awaited on the async worker.
    pub(crate) fn own(plane: Arc<P>) -> Self {
        Mount {
            plane,
            inline: None,
        }
    }
}

impl<P: ?Sized, I: ?Sized> Clone for Mount<P, I> {
    fn clone(&self) -> Self {
        Mount {
            plane: self.plane.clone(),
            inline: self.inline.clone(),
        }
    }
}

/// The planes, the trace and the counter a router answers from.
#[derive(Debug)]
pub(crate) struct Mounted {
    pub(crate) files: Option<FilesMount>,
    pub(crate) peer: Option<PeerMount>,
    pub(crate) tracer: Tracer,
    pub(crate) generation: Generation,
    pub(crate) containment: Containment,
    pub(crate) agent_card: Vec<u8>,
    /// The calls run on the blocking pool at once, shared by every clone of the router.
    pub(crate) lanes: crate::blocking::Lanes,
    /// The path of the card's JSON-RPC URL (its `url`), as a request names it.
    pub(crate) rpc_path: String,
    /// The watcher of the operator plane's root, for long-polls and streams (D-17).
    pub(crate) watch: Option<Arc<Hub>>,
}
