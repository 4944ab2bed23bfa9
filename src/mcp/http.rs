//! The MCP endpoint over Streamable HTTP (D-18.2): a tower service answering `/mcp` with the
//! export's resources, and its mount beside the capsule's router.

use super::changes::ExportChanges;
use super::cursor::Cursors;
use super::event_stream::{self, Heartbeat, KEEP_ALIVE_EVERY};
use super::resources::{ResourceServer, Shared};
use crate::Capsule;
use crate::backends::{OsRandom, Random};
use crate::http::{PlaneBody, Router};
use crate::refusal::Code;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Either, Full, combinators::BoxBody};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig,
};
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// The path the MCP endpoint answers, relative to the router's base path.
pub const MCP_PATH: &str = "/mcp";

/// Sessions one service holds at once by default.
pub const DEFAULT_MAX_SESSIONS: usize = 256;
/// How long a session may stay idle before it ends, by default.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);
/// The largest JSON-RPC request body accepted, by default: a request is a few hundred bytes;
/// a larger body is refused `413` before it is parsed.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;

/// The body of an MCP response: a JSON-RPC answer, an SSE stream of them, or a refusal.
pub type McpBody = BoxBody<Bytes, Infallible>;

/// How an [`McpService`] is set up. Built with [`McpConfig::default`] and the `with_…`
/// methods; the defaults are D-18.2's.
///
/// ```
/// use resource_plane::mcp::McpConfig;
/// use std::time::Duration;
///
/// let config = McpConfig::default()
///     .with_allowed_origins(["https://ide.example"])
///     .with_max_sessions(16)
///     .with_session_idle(Duration::from_secs(60));
/// assert_eq!(config.max_sessions(), 16);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct McpConfig {
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
    max_sessions: usize,
    session_idle: Duration,
    max_body_bytes: usize,
    changes: Option<Arc<dyn ExportChanges>>,
    random: Arc<dyn Random>,
}

impl fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpConfig")
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_sessions", &self.max_sessions)
            .field("session_idle", &self.session_idle)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("changes", &self.changes)
            .finish_non_exhaustive()
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            changes: None,
            random: Arc::new(OsRandom),
        }
    }
}

impl McpConfig {
    /// Origins a browser page may call `/mcp` from, besides the capsule's own (its advertised
    /// URL's): `scheme://host[:port]`. Any other `Origin` is refused `403` (DNS rebinding).
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// `Host` names (or `host:port`) accepted besides the advertised URL's host and the
    /// loopback names; any other `Host` is refused `403`.
    pub fn with_allowed_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// Sessions held at once (at least 1); a new one past it is refused `503`.
    pub fn with_max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions.max(1);
        self
    }

    /// Idle time after which a session ends.
    pub fn with_session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// The largest request body accepted; a larger one is refused `413`.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Where subscriptions learn of change; by default, the router's own export watcher
    /// (D-17.4), shared with its long-polls and watch streams.
    pub fn with_changes(mut self, changes: Arc<dyn ExportChanges>) -> Self {
        self.changes = Some(changes);
        self
    }

    /// The random source the cursor key is drawn from (the OS's by default).
    pub fn with_random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }

    /// Sessions held at once.
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }
}

/// The MCP endpoint of one capsule, a `tower::Service` for `http::Request<B>` (any body the
/// SDK can read): the capsule's exported files as MCP resources over Streamable HTTP
/// (D-18.2). It answers every request it gets as a request to the endpoint; mount it at
/// [`MCP_PATH`] beside the router with [`Router::with_mcp`], or under a path of the
/// runtime's own choosing.
///
/// * No `exports.files`: every request is `404 no_resource_plane`.
/// * An `Origin` that is not the advertised URL's (or one allowed): `403`.
/// * A body over 256 KiB: `413`. An unknown or ended `Mcp-Session-Id`: `404`.
/// * A new session past 256 at once: `503`; a session idle 10 minutes ends; `DELETE` ends one
///   (`200`).
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::mcp::{McpConfig, McpService};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out/, mode: read-only } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let mcp = McpService::new(&capsule, McpConfig::default());
/// let foreign = http::Request::post("/mcp")
///     .header("host", "127.0.0.1:41234")
///     .header("origin", "http://evil.example")
///     .body(String::new())
///     .unwrap();
/// assert_eq!(mcp.oneshot(foreign).await.unwrap().status(), 403);
/// # }
/// ```
#[derive(Clone)]
pub struct McpService {
    /// Shared, not cloned: the SDK's service carries its configuration (the allowed hosts and
    /// origins) by value, and a clone per connection and per request copied every string.
    inner: Option<Arc<StreamableHttpService<ResourceServer, BoundedSessions>>>,
    sessions: Arc<BoundedSessions>,
    /// The keep-alive clock of this service's event streams.
    heart: Arc<Heartbeat>,
}

impl fmt::Debug for McpService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpService")
            .field("serves_files", &self.inner.is_some())
            .field("max_sessions", &self.sessions.max)
            .finish_non_exhaustive()
    }
}

impl McpService {
    /// The endpoint for `capsule`'s operator plane, resources named by its advertised URL.
    pub fn new(capsule: &Capsule, config: McpConfig) -> Self {
        Self::for_router(&capsule.router(), capsule.advertised_url(), config)
    }

    /// The endpoint for `router`'s operator plane, resources named under `advertised_url`.
    pub(crate) fn for_router(router: &Router, advertised_url: &str, config: McpConfig) -> Self {
        let mut session_config = SessionConfig::default();
        session_config.keep_alive = Some(config.session_idle);
        // No priming event before each answer: every answer here follows its request at once,
        // so an event that only names the stream for a reconnect is one more write per
        // request for nothing.
        session_config.sse_retry = None;
        let mut local = LocalSessionManager::default();
        local.session_config = session_config;
        let sessions = Arc::new(BoundedSessions {
            inner: local,
            max: config.max_sessions,
            creating: tokio::sync::Mutex::new(()),
        });
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        if !router.serves_files() {
            return McpService {
                inner: None,
                sessions,
                heart,
            };
        }
        let base = advertised_url.trim_end_matches('/');
        let shared = Arc::new(Shared {
            router: router.clone(),
            uri_prefix: format!("{base}{}/", crate::wire::route::LISTING),
            request_prefix: router.base_path().unwrap_or("").to_owned(),
            cursors: Cursors::new(config.random.as_ref()),
            changes: config.changes.clone().or_else(|| {
                Some(Arc::new(super::changes::WatcherChanges {
                    router: router.clone(),
                }) as Arc<dyn ExportChanges>)
            }),
            lent: std::sync::Mutex::new(None),
        });
        let (origin, host) = origin_and_host(base);
        let mut origins = config.allowed_origins.clone();
        origins.extend(origin);
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        hosts.extend(host);
        hosts.extend(config.allowed_hosts.iter().cloned());
        let http_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_sse_retry(None)
            // Keep-alive comments come from this service's one clock instead (event_stream).
            .with_sse_keep_alive(None)
            // A stateless (2026-07-28) answer with nothing before it is plain JSON: one body
            // with a length, no event framing. Session answers stay event streams.
            .with_json_response(true)
            .with_max_request_body_bytes(config.max_body_bytes);
        let service = StreamableHttpService::new(
            move || Ok(ResourceServer::new(shared.clone())),
            sessions.clone(),
            http_config,
        );
        McpService {
            inner: Some(Arc::new(service)),
            sessions,
            heart,
        }
    }

    /// Sessions open now.
    pub async fn session_count(&self) -> usize {
        self.sessions.count().await
    }

    /// Answers one request to the endpoint.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<McpBody>
    where
        B: http_body::Body + Send + 'static,
        B::Error: fmt::Display,
        B::Data: Send,
    {
        let Some(inner) = &self.inner else {
            return refusal(Code::NoResourcePlane);
        };
        if opens_session(&request) && self.sessions.count().await >= self.sessions.max {
            return sessions_full();
        }
        let method = request.method().clone();
        let response = inner.handle(request).await;
        let read_ahead = method == http::Method::POST;
        let mut response = event_stream::shaped(response, &self.heart, read_ahead).await;
        let delete = method == http::Method::DELETE;
        // A session ended by `DELETE` is answered `200`, which every client reads as done
        // (the SDK's `202` makes some log a failed termination).
        if delete && response.status() == http::StatusCode::ACCEPTED {
            *response.status_mut() = http::StatusCode::OK;
        }
        response
    }
}

/// Whether `request` would open a session: a `POST` with no `Mcp-Session-Id` that does not
/// name a protocol version without sessions (2026-07-28 on, whose requests are stateless).
fn opens_session<B>(request: &Request<B>) -> bool {
    let stateless = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|version| version >= "2026-07-28");
    request.method() == http::Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && !stateless
}

/// The advertised URL's origin (`scheme://host:port`) and its `Host` authority.
fn origin_and_host(url: &str) -> (Option<String>, Option<String>) {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return (None, None);
    };
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return (None, None);
    };
    let port = authority
        .port_u16()
        .or(match scheme {
            "https" => Some(443),
            _ => Some(80),
        })
        .unwrap_or(80);
    let host = authority.host();
    (
        Some(format!("{scheme}://{host}:{port}")),
        Some(host.trim_matches(['[', ']']).to_owned()),
    )
}

fn full(status: u16, content_type: &'static str, body: Vec<u8>) -> Response<McpBody> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

/// The operator plane's own refusal body for `code`, with its status.
fn refusal(code: Code) -> Response<McpBody> {
    let body = serde_json::json!({"error": code.as_str(), "message": code.message()});
    full(
        code.status(),
        "application/json",
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

/// `503` with a JSON-RPC error: no session can be opened now.
fn sessions_full() -> Response<McpBody> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32000,
            "message": "this server holds as many MCP sessions as it may; end one (DELETE) or retry later",
            "data": {"error": "too_many_sessions"},
        },
    });
    full(
        503,
        "application/json",
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

impl<B> Service<Request<B>> for McpService
where
    B: http_body::Body + Send + 'static,
    B::Error: fmt::Display,
    B::Data: Send,
{
    type Response = Response<McpBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<McpBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}

/// The SDK's in-memory sessions, at most `max` at once.
struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    /// Held while a session is counted and created, so two at once cannot both pass the bound.
    creating: tokio::sync::Mutex<()>,
}

impl BoundedSessions {
    async fn count(&self) -> usize {
        self.inner.sessions.read().await.len()
    }
}

/// Why a session operation failed.
#[derive(Debug)]
pub(crate) enum SessionsError {
    /// As many sessions are open as allowed.
    Full,
    /// The SDK's own session error.
    Local(LocalSessionManagerError),
}

impl fmt::Display for SessionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionsError::Full => f.write_str("as many MCP sessions are open as allowed"),
            SessionsError::Local(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SessionsError {}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.creating.lock().await;
        if self.count().await >= self.max {
            return Err(SessionsError::Full);
        }
        self.inner
            .create_session()
            .await
            .map_err(SessionsError::Local)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner
            .initialize_session(id, message)
            .await
            .map_err(SessionsError::Local)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner
            .has_session(id)
            .await
            .map_err(SessionsError::Local)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner
            .close_session(id)
            .await
            .map_err(SessionsError::Local)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<
        impl futures_core::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        self.inner
            .create_stream(id, message)
            .await
            .map_err(SessionsError::Local)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner
            .accept_message(id, message)
            .await
            .map_err(SessionsError::Local)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<
        impl futures_core::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        self.inner
            .create_standalone_stream(id)
            .await
            .map_err(SessionsError::Local)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<
        impl futures_core::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        self.inner
            .resume(id, last_event_id)
            .await
            .map_err(SessionsError::Local)
    }
}

impl Router {
    /// This router with the MCP endpoint `mcp` at [`MCP_PATH`] (below its base path): a
    /// request for `/mcp` goes to `mcp`, every other to the router. See [`WithMcp`].
    pub fn with_mcp(&self, mcp: McpService) -> WithMcp {
        WithMcp {
            router: self.clone(),
            mcp,
        }
    }
}

/// A [`Router`] with the MCP endpoint beside it ([`Router::with_mcp`]): `/mcp` (and
/// `/mcp?…`) below the router's base path goes to the [`McpService`], every other request
/// to the router. A tower service for `http::Request<B>`; its body is
/// [`Either`]`<`[`PlaneBody`]`, `[`McpBody`]`>`. Serve it behind the listener's hardening with
/// [`serve_with`](crate::http::serve_with).
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::mcp::{McpConfig, McpService};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml("name: r\nexports: { peer_files: { root: out/ } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let app = capsule.router().with_mcp(McpService::new(&capsule, McpConfig::default()));
/// // No `exports.files`: no resources, and `/mcp` says so.
/// let request = http::Request::post("/mcp").body(String::new()).unwrap();
/// assert_eq!(app.clone().oneshot(request).await.unwrap().status(), 404);
/// let card = http::Request::get("/.well-known/agent-card.json").body(String::new()).unwrap();
/// assert_eq!(app.oneshot(card).await.unwrap().status(), 200);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WithMcp {
    router: Router,
    mcp: McpService,
}

impl<B> Service<Request<B>> for WithMcp
where
    B: http_body::Body + Send + 'static,
    B::Error: fmt::Display,
    B::Data: Send,
{
    type Response = Response<Either<PlaneBody, McpBody>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let local = self.router.local_path(request.uri().path());
        if local == MCP_PATH {
            let mcp = self.mcp.clone();
            return Box::pin(async move { Ok(mcp.handle(request).await.map(Either::Right)) });
        }
        let planes = Service::call(&mut self.router, request);
        Box::pin(async move {
            let Ok(response) = planes.await;
            Ok(response.map(Either::Left))
        })
    }
}
