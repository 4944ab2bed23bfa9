#![allow(clippy::disallowed_methods)] // a composition root: it binds its own loopback listeners
#![allow(dead_code)] // each test file uses a subset

//! One capsule in process: a [`World`] launched from a YAML manifest on a [`MemoryFilesystem`],
//! a [`ManualClock`], a [`RecordingTraceSink`] and a [`FixedKeyStore`], reached through its
//! router (`respond`, `handle`) as a runtime would, with its trace read back.
//!
//! [`World::builder`] gives the variations the tests need: the containment class, the clock's
//! start, the session id, the key (fixed, fresh or a store of the test's own), files in the
//! memory workdir, a filesystem, clock or trace sink of the test's own (a counting wrapper, a
//! failing sink), a workdir and clock shared with another world, an identity key, the URL.
//!
//! The trace assertions of D-6 on a world's lines are in `trace.rs`.

use super::http::Reply;
use http::{Method, Request, Response};
use resource_plane::backends::Filesystem;
use resource_plane::backends::{
    Clock, FixedKeyStore, FsError, IdentityKey, KeyStore, ManualClock, MemoryFilesystem,
    RecordingTraceSink, RootDir, TraceSink,
};
use resource_plane::budget::ByteBudget;
use resource_plane::http::{ListenerConfig, PlaneBody, Router, serve};
use resource_plane::path::RelPath;
use resource_plane::planes::{ExportScope, HmacPeerPlane, Minted, Origin, PeerPlane};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Backends, Capsule, CapsuleConfig, LaunchError, Manifest};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The URL a world advertises unless told otherwise.
pub const URL: &str = "http://127.0.0.1:41234";
/// The minting key of a world unless told otherwise.
pub const KEY: [u8; 32] = [0x42; 32];
/// A fixed session id, for worlds that name one ([`WorldBuilder::session`]).
pub const SESSION: &str = "ses_0123456789abcdef0123456789abcdef";
/// What a world's clock reads at launch unless told otherwise (Unix milliseconds).
pub const NOW_MS: i64 = 1_787_577_327_015;

/// How a world is launched; [`WorldBuilder::build`] launches it.
pub struct WorldBuilder {
    yaml: String,
    url: String,
    fs: Arc<MemoryFilesystem>,
    backend_fs: Option<Arc<dyn Filesystem>>,
    clock: Option<Arc<ManualClock>>,
    now_ms: i64,
    backend_clock: Option<Arc<dyn Clock>>,
    key: Option<[u8; 32]>,
    keys: Option<Arc<dyn KeyStore>>,
    sink: Option<Arc<dyn TraceSink>>,
    containment: Containment,
    session: Option<String>,
    identity: Option<Arc<dyn IdentityKey>>,
    configure: Option<Box<dyn FnOnce(CapsuleConfig) -> CapsuleConfig>>,
}

impl WorldBuilder {
    /// The containment class the capsule is told it achieved (default: the crate's default).
    pub fn containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// What the clock reads at launch (default [`NOW_MS`]; a clock shared through
    /// [`WorldBuilder::manual_clock`] keeps its own reading).
    pub fn now(mut self, ms: i64) -> Self {
        self.now_ms = ms;
        self
    }

    /// The advertised URL (default [`URL`]).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// A fixed session id instead of a fresh one.
    pub fn session(mut self, id: &str) -> Self {
        self.session = Some(id.to_owned());
        self
    }

    /// The minting key's bytes (default [`KEY`]).
    pub fn key(mut self, key: [u8; 32]) -> Self {
        self.key = Some(key);
        self.keys = None;
        self
    }

    /// A key store of the test's own; [`World::minter`] then has no key bytes to share.
    pub fn keys(mut self, keys: Arc<dyn KeyStore>) -> Self {
        self.key = None;
        self.keys = Some(keys);
        self
    }

    /// No key given: the launch generates a fresh random one, as a runtime's default does.
    pub fn fresh_key(mut self) -> Self {
        self.key = None;
        self.keys = None;
        self
    }

    /// A file in the memory workdir.
    pub fn file(self, path: &str, bytes: impl AsRef<[u8]>, mtime_ms: i64) -> Self {
        self.fs.add_file(path, bytes.as_ref(), mtime_ms);
        self
    }

    /// Builds the memory workdir with `build`.
    pub fn files(self, build: impl FnOnce(&MemoryFilesystem)) -> Self {
        build(&self.fs);
        self
    }

    /// An existing memory workdir (another world's, say) instead of a fresh one.
    pub fn memory(mut self, fs: Arc<MemoryFilesystem>) -> Self {
        self.fs = fs;
        self
    }

    /// An existing manual clock (another world's, say) instead of a fresh one.
    pub fn manual_clock(mut self, clock: Arc<ManualClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// A filesystem of the test's own: the capsule reads it, not the memory workdir.
    pub fn filesystem(mut self, fs: Arc<dyn Filesystem>) -> Self {
        self.backend_fs = Some(fs);
        self
    }

    /// A clock of the test's own: the capsule reads it, not the manual clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.backend_clock = Some(clock);
        self
    }

    /// A trace sink of the test's own: the world's recorder then stays empty.
    pub fn trace_to(mut self, sink: Arc<dyn TraceSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The identity key a `peer_fetch` capsule publishes and proves with.
    pub fn identity(mut self, key: Arc<dyn IdentityKey>) -> Self {
        self.identity = Some(key);
        self
    }

    /// Any other setting of the configuration.
    pub fn configure(
        mut self,
        configure: impl FnOnce(CapsuleConfig) -> CapsuleConfig + 'static,
    ) -> Self {
        self.configure = Some(Box::new(configure));
        self
    }

    /// Launches the capsule; a manifest or launch refused is returned.
    pub fn launch(self) -> Result<World, LaunchError> {
        let manifest = Manifest::from_yaml(&self.yaml)?.manifest;
        let clock = self
            .clock
            .unwrap_or_else(|| Arc::new(ManualClock::new(self.now_ms)));
        let recorder = Arc::new(RecordingTraceSink::new());
        let backend_fs = self.backend_fs.unwrap_or_else(|| self.fs.clone());
        let backend_clock = self.backend_clock.unwrap_or_else(|| clock.clone());
        let keys = match (self.keys, self.key) {
            (Some(keys), _) => Some(keys),
            (None, Some(key)) => Some(Arc::new(FixedKeyStore::new(key)) as Arc<dyn KeyStore>),
            (None, None) => None,
        };
        let url = self.url.clone();
        let mut config = CapsuleConfig::new(self.url)?.containment(self.containment);
        if let Some(session) = self.session {
            config = config.session_id(session);
        }
        if let Some(identity) = self.identity {
            config = config.identity(identity);
        }
        if let Some(configure) = self.configure {
            config = configure(config);
        }
        let capsule = Capsule::launch(
            &manifest,
            config,
            Backends {
                fs: backend_fs.clone(),
                clock: backend_clock.clone(),
                keys,
                trace: self.sink.unwrap_or_else(|| recorder.clone()),
            },
        )?;
        Ok(World {
            capsule,
            url,
            fs: self.fs,
            clock,
            trace: recorder,
            containment: self.containment,
            key: self.key,
            backend_fs,
            backend_clock,
            messages: RefCell::default(),
        })
    }

    /// Binds a loopback listener, advertises its address, launches the capsule and serves its
    /// router there until the returned [`Listening`] drops.
    pub async fn listen(self) -> Listening {
        let (listener, addr) = bind().await;
        let world = self.url(format!("http://{addr}")).build();
        let serving = world.serve(listener);
        Listening {
            world,
            addr,
            _serving: serving,
        }
    }

    /// Launches the capsule; a refusal fails the test.
    pub fn build(self) -> World {
        let yaml = self.yaml.clone();
        self.launch()
            .unwrap_or_else(|e| panic!("launch of {yaml:?} must succeed: {e}"))
    }
}

/// One capsule over one memory workdir, recording its trace, with a book of every refusal
/// message it answered (D-4.4: one fixed message per code).
pub struct World {
    pub capsule: Capsule,
    /// The URL it advertises.
    pub url: String,
    /// The memory workdir: the capsule's filesystem unless the builder was given another.
    pub fs: Arc<MemoryFilesystem>,
    /// The manual clock: the capsule's clock unless the builder was given another.
    pub clock: Arc<ManualClock>,
    /// Every trace line, unless the builder sent them to a sink of its own.
    pub trace: Arc<RecordingTraceSink>,
    pub containment: Containment,
    key: Option<[u8; 32]>,
    backend_fs: Arc<dyn Filesystem>,
    backend_clock: Arc<dyn Clock>,
    messages: RefCell<BTreeMap<String, BTreeSet<String>>>,
}

impl World {
    /// How to launch a world from `yaml`: every setting at its default.
    pub fn builder(yaml: &str) -> WorldBuilder {
        WorldBuilder {
            yaml: yaml.to_owned(),
            url: URL.to_owned(),
            fs: Arc::new(MemoryFilesystem::new()),
            backend_fs: None,
            clock: None,
            now_ms: NOW_MS,
            backend_clock: None,
            key: Some(KEY),
            keys: None,
            sink: None,
            containment: resource_plane::capsule::DEFAULT_CONTAINMENT,
            session: None,
            identity: None,
            configure: None,
        }
    }

    /// A world launched from `yaml` with every default.
    pub fn new(yaml: &str) -> World {
        World::builder(yaml).build()
    }

    pub fn router(&self) -> Router {
        self.capsule.router()
    }

    pub fn session_id(&self) -> &str {
        self.capsule.session_id()
    }

    /// The generation now.
    pub fn generation(&self) -> u64 {
        self.capsule.generation().current()
    }

    // -----------------------------------------------------------------------------------------
    // Requests.
    // -----------------------------------------------------------------------------------------

    /// `method raw_path` through the router, with `audience` as `x-murmur-audience` values.
    pub fn respond(
        &self,
        method: &Method,
        raw_path: &str,
        audience: &[&[u8]],
    ) -> Response<PlaneBody> {
        self.capsule.router().respond(method, raw_path, audience)
    }

    /// [`World::respond`] with `proofs` as `x-murmur-proof` values.
    pub fn respond_with_proof(
        &self,
        method: &Method,
        raw_path: &str,
        audience: &[&[u8]],
        proofs: &[&[u8]],
    ) -> Response<PlaneBody> {
        self.capsule
            .router()
            .respond_with_proof(method, raw_path, audience, proofs)
    }

    /// `method raw_path` with no header, taken apart; a refusal's message goes in the book.
    pub fn reply(&self, method: &Method, raw_path: &str) -> Reply {
        let reply = Reply::of(self.respond(method, raw_path, &[]));
        self.note(&reply);
        reply
    }

    /// [`World::reply`], requiring the request to leave exactly one trace line (D-6.3), which
    /// is returned.
    pub fn call(&self, method: &Method, raw_path: &str) -> (Reply, Value) {
        let before = self.trace.lines().len();
        let reply = self.reply(method, raw_path);
        let events = self.trace.events();
        assert_eq!(
            events.len(),
            before + 1,
            "{method} {raw_path:?}: exactly one trace line per request (D-6.3)"
        );
        (reply, events[before].clone())
    }

    /// `GET raw_path` as [`World::call`].
    pub fn get(&self, raw_path: &str) -> (Reply, Value) {
        self.call(&Method::GET, raw_path)
    }

    /// `GET /resources/peer/<token>` with `audience`.
    pub fn peer(&self, token: &str, audience: &[&[u8]]) -> Response<PlaneBody> {
        self.peer_request(&Method::GET, token, audience)
    }

    /// `method /resources/peer/<token>` with `audience`.
    pub fn peer_request(
        &self,
        method: &Method,
        token: &str,
        audience: &[&[u8]],
    ) -> Response<PlaneBody> {
        self.respond(method, &format!("/resources/peer/{token}"), audience)
    }

    /// `GET /resources/peer/<token>` with `audience` and `proofs` headers.
    pub fn peer_proved(
        &self,
        token: &str,
        audience: &[&str],
        proofs: &[&str],
    ) -> Response<PlaneBody> {
        let audience: Vec<&[u8]> = audience.iter().map(|a| a.as_bytes()).collect();
        let proofs: Vec<&[u8]> = proofs.iter().map(|p| p.as_bytes()).collect();
        self.respond_with_proof(
            &Method::GET,
            &format!("/resources/peer/{token}"),
            &audience,
            &proofs,
        )
    }

    /// `request` through the router's async entry point.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<PlaneBody> {
        self.capsule.router().handle(request).await
    }

    /// `GET path` through `handle`, with `audience` as `x-murmur-audience` when given.
    pub async fn ask(&self, path: &str, audience: Option<&str>) -> Reply {
        let mut request = Request::get(path);
        if let Some(audience) = audience {
            request = request.header("x-murmur-audience", audience);
        }
        Reply::of(self.handle(request.body(()).expect("a request")).await)
    }

    /// `GET /resources/peer/<token>` with `audience`, through `handle`.
    pub async fn ask_peer(&self, token: &str, audience: &str) -> Reply {
        self.ask(&format!("/resources/peer/{token}"), Some(audience))
            .await
    }

    fn note(&self, reply: &Reply) {
        if reply.status != 200
            && let Ok(body) = serde_json::from_slice::<Value>(&reply.body)
            && let (Some(code), Some(message)) = (body["error"].as_str(), body["message"].as_str())
        {
            self.messages
                .borrow_mut()
                .entry(code.to_owned())
                .or_default()
                .insert(message.to_owned());
        }
    }

    /// Every refusal message [`World::reply`] saw, by code.
    pub fn messages(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.messages.borrow().clone()
    }

    // -----------------------------------------------------------------------------------------
    // The trace.
    // -----------------------------------------------------------------------------------------

    /// How many trace lines were written.
    pub fn lines(&self) -> usize {
        self.trace.lines().len()
    }

    /// Every trace line, parsed.
    pub fn events(&self) -> Vec<Value> {
        self.trace.events()
    }

    /// The trace lines of `event_type`.
    pub fn events_of(&self, event_type: &str) -> Vec<Value> {
        events_of(&self.trace, event_type)
    }

    /// The last trace line; none fails the test.
    pub fn last_event(&self) -> Value {
        self.trace.events().pop().expect("at least one trace line")
    }

    /// The last trace line of `event_type`; none fails the test.
    pub fn last_of(&self, event_type: &str) -> Value {
        self.trace
            .events()
            .into_iter()
            .rfind(|e| e["event_type"] == event_type)
            .unwrap_or_else(|| panic!("a {event_type} line"))
    }

    // -----------------------------------------------------------------------------------------
    // Handles.
    // -----------------------------------------------------------------------------------------

    /// A peer plane over the capsule's own filesystem, clock and key bytes, exporting `out/`
    /// under the world's containment class, at the world's origin, for `session`: it mints what
    /// the capsule honours when `session` is the capsule's.
    pub fn minter(&self, session: &str) -> HmacPeerPlane {
        let key = self
            .key
            .expect("a world with key bytes (not a fresh key or a store of the test's own)");
        HmacPeerPlane::new(
            self.backend_fs.clone(),
            self.backend_clock.clone(),
            Arc::new(FixedKeyStore::new(key)),
            ExportScope {
                root: RootPath::parse("out/").expect("out/ is a root"),
                max_bytes: 10 * 1024 * 1024,
                containment: self.containment,
            },
            session.to_owned(),
            ByteBudget::new(1 << 24),
            Origin::of_url(&self.url).expect("the world's URL launched, so it has an origin"),
        )
    }

    /// A handle for `path` (canonical, under `out/`) bound to `audience`, minted now for
    /// `ttl_secs` by [`World::minter`] for the capsule's session.
    pub fn mint(&self, path: &str, audience: &str, ttl_secs: u64) -> Minted {
        let rel = RelPath::parse_canonical(path).expect("test paths are canonical");
        self.minter(self.session_id())
            .mint(&rel, audience, ttl_secs)
            .expect("a live key mints")
    }

    // -----------------------------------------------------------------------------------------
    // A real listener.
    // -----------------------------------------------------------------------------------------

    /// Serves the capsule's router on `listener` until the returned guard drops.
    pub fn serve(&self, listener: tokio::net::TcpListener) -> Serving {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(
            listener,
            self.capsule.router(),
            ListenerConfig::default(),
            async move {
                let _ = stopped.await;
            },
        ));
        Serving { _stop: stop }
    }
}

/// A world served on a loopback listener; the listener stops when this drops.
pub struct Listening {
    pub world: World,
    /// Where it listens (and what it advertises).
    pub addr: SocketAddr,
    _serving: Serving,
}

impl std::ops::Deref for Listening {
    type Target = World;

    fn deref(&self) -> &World {
        &self.world
    }
}

/// A router being served; the listener stops when this drops.
pub struct Serving {
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// A loopback listener on a free port, and its address (to advertise before launching).
pub async fn bind() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback listener");
    let addr = listener.local_addr().expect("local address");
    (listener, addr)
}

/// The lines of `event_type` in `trace`.
pub fn events_of(trace: &RecordingTraceSink, event_type: &str) -> Vec<Value> {
    trace
        .events()
        .into_iter()
        .filter(|e| e["event_type"] == event_type)
        .collect()
}

/// A filesystem wrapper counting the planes' calls: every entry point, and `open_root` alone.
#[derive(Debug, Default)]
pub struct CountingFs<F = MemoryFilesystem> {
    pub inner: F,
    pub calls: AtomicUsize,
    pub open_roots: AtomicUsize,
}

impl<F> CountingFs<F> {
    /// A wrapper around `inner`, counting from zero.
    pub fn new(inner: F) -> Self {
        CountingFs {
            inner,
            calls: AtomicUsize::new(0),
            open_roots: AtomicUsize::new(0),
        }
    }

    /// Calls of any entry point so far.
    pub fn opens(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Calls of `open_root` so far.
    pub fn open_roots(&self) -> usize {
        self.open_roots.load(Ordering::SeqCst)
    }
}

impl<F: Filesystem> Filesystem for CountingFs<F> {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.open_roots.fetch_add(1, Ordering::SeqCst);
        self.inner.open_root(root, class)
    }

    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.check_root(root)
    }

    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.land(dir, name, bytes)
    }

    fn unland(&self, dir: &str, name: &str) -> Result<(), FsError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.unland(dir, name)
    }
}
