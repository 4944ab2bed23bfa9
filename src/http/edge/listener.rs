//! The listener (D-4.1, D-4.6): hyper 1, HTTP/1 only, keep-alive off, a timer with a header read
//! timeout, a head size limit (answered 431 by hyper), a cap on concurrent connections (excess
//! connections wait in the accept backlog), and graceful shutdown with a drain deadline.
//!
//! The hardening is the service's to share: [`serve_with`] puts it in front of any tower
//! service (a runtime's own routes, an axum app, the router [`with_fallback`] to the runtime's
//! routes) on connections from any [`Accept`] source (TCP, a Unix domain socket, an in-memory
//! listener); [`serve`] is `serve_with` for the router alone.
//!
//! [`with_fallback`]: crate::http::Router::with_fallback

use super::accept::Accept;
use super::stall_guard::{DEFAULT_SEND_TIMEOUT, StallGuard};
use super::version_gate::VersionGate;
use crate::backends::{Clock, SystemClock};
use crate::http::Router;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Blocking threads a shard may start beyond one per lane of its router.
#[cfg(feature = "cli")]
const BLOCKING_MARGIN: usize = 2;

/// Listener limits, and the clock every answer is dated by. Each field has a default; a
/// runtime sets those it cares about and takes the rest from [`ListenerConfig::default`].
///
/// ```
/// use resource_plane::backends::ManualClock;
/// use resource_plane::http::{ListenerConfig, serve_with};
/// use std::sync::Arc;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let config = ListenerConfig {
///     max_connections: 64,
///     clock: Arc::new(ManualClock::new(784_111_777_000)),
///     ..ListenerConfig::default()
/// };
/// let app = tower::service_fn(|_: http::Request<hyper::body::Incoming>| async {
///     let empty = http_body_util::Empty::<bytes::Bytes>::new();
///     Ok::<_, std::convert::Infallible>(http::Response::new(empty))
/// });
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let address = listener.local_addr()?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(serve_with(listener, app, config, async { stopped.await.ok(); }));
///
/// let mut client = tokio::net::TcpStream::connect(address).await?;
/// client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await?;
/// let mut answer = String::new();
/// client.read_to_string(&mut answer).await?;
/// let answer = answer.to_ascii_lowercase();
/// assert!(answer.contains("date: sun, 06 nov 1994 08:49:37 gmt"), "{answer}");
/// stop.send(()).unwrap();
/// server.await.unwrap()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Connections served at once; more wait to be accepted. Default 2,048.
    pub max_connections: usize,
    /// A request head not complete within this is dropped. Default 10 s.
    pub header_read_timeout: Duration,
    /// The largest request head accepted (hyper answers 431 beyond it; minimum 8 KiB).
    /// Default 16 KiB.
    pub max_head_bytes: usize,
    /// How long in-flight responses may take to finish after shutdown begins. Default 5 s.
    pub drain_deadline: Duration,
    /// How long a response may make no progress (the client takes nothing) before its
    /// connection is dropped and its body's budget bytes come back (see `stall_guard`).
    /// Default 60 s.
    pub send_timeout: Duration,
    /// What the `date` header of every answer says: the service's answers and the 505 the
    /// listener writes itself (default [`SystemClock`]). A service that sets its own `date`
    /// keeps it. The 400 and 431 hyper writes for a head it cannot parse, before any service
    /// sees it, carry hyper's own reading of the system clock.
    pub clock: Arc<dyn Clock>,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            max_connections: 2048,
            header_read_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
            drain_deadline: Duration::from_secs(5),
            send_timeout: DEFAULT_SEND_TIMEOUT,
            clock: Arc::new(SystemClock),
        }
    }
}

/// hyper's header table when none is configured: a hundred entries, inline, set up for free.
const LEAN_HEADER_LINES: usize = 100;

/// The two shapes of hyper connection a head can get (D-4.6 asks that every head within the
/// size limit be served, whatever its number of lines):
///
/// * `lean`, hyper's own table of [`LEAN_HEADER_LINES`] headers, for a head that arrived whole
///   in the first read with no more lines than that: nearly every request;
/// * `wide`, one header line per 16 bytes of the head limit (1,024 for 16 KiB), for any other.
///   A head of more, shorter lines is 431, as an oversized one is.
///
/// Why two: a configured table is allocated and filled on every parse, 2 × 32 KiB for 1,024
/// lines: the lean shape cut the server's CPU for a 4 KiB read by about 5% (same-run A/B). A larger table still
/// (one line per 4 bytes) made glibc hand its 256 KiB back to the kernel with an `madvise(2)`
/// on every request.
struct Builders {
    lean: hyper::server::conn::http1::Builder,
    wide: hyper::server::conn::http1::Builder,
}

impl Builders {
    fn new(config: &ListenerConfig) -> Self {
        let mut lean = hyper::server::conn::http1::Builder::new();
        // A client may shut its side down once its request is out (`nc -N`, a one-shot
        // script): half-close keeps the answer coming. hyper then does not read while the
        // service works; the listener's `departure` watch does, to stop work whose client left.
        lean.keep_alive(false)
            .half_close(true)
            .timer(TokioTimer::new())
            .header_read_timeout(config.header_read_timeout)
            .max_buf_size(config.max_head_bytes.max(8192));
        let mut wide = lean.clone();
        wide.max_headers(config.max_head_bytes.max(8192) / 16);
        Builders { lean, wide }
    }

    /// The builder for a connection whose held bytes hold a head of `head_lines` header lines
    /// (`None`: not all of it yet), with `left` of the header read timeout still to run.
    fn for_head(
        &self,
        head_lines: Option<usize>,
        left: Duration,
    ) -> hyper::server::conn::http1::Builder {
        let mut http = match head_lines {
            Some(lines) if lines <= LEAN_HEADER_LINES => self.lean.clone(),
            _ => self.wide.clone(),
        };
        // With nothing left, hyper still serves a head it already holds and drops one it
        // would have to wait for, as it drops any head late past its timeout.
        http.header_read_timeout(left);
        http
    }
}

/// A tower service [`serve_with`] can put behind the listener: it answers a request off the
/// wire with an HTTP response, is cloned once per connection and run on any thread, and its
/// errors and its body's errors box. The bound is named once here; every service that meets
/// it has it (the [`Router`], an axum app, a `tower::service_fn`), so nothing implements it by
/// hand.
///
/// ```
/// use http_body_util::Full;
/// use resource_plane::http::HttpService;
///
/// fn servable(_: &impl HttpService) {}
/// let app = tower::service_fn(|_request: http::Request<hyper::body::Incoming>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::from("ok"))))
/// });
/// servable(&app);
/// ```
pub trait HttpService:
    tower_service::Service<
        Request<Incoming>,
        Response = Response<Self::ResponseBody>,
        Future: Send + 'static,
        Error: Into<Box<dyn StdError + Send + Sync>>,
    > + Clone
    + Send
    + 'static
{
    /// The body of the service's responses.
    type ResponseBody: http_body::Body<Data: Send, Error: Into<Box<dyn StdError + Send + Sync>>>
        + Send
        + 'static;
}

impl<S, B> HttpService for S
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type ResponseBody = B;
}

/// Serves `router` on connections from `listener` (a [`TcpListener`](tokio::net::TcpListener), a
/// [`UnixListener`](tokio::net::UnixListener), any [`Accept`]) until `shutdown` resolves, then
/// stops accepting and drains: [`serve_with`] for the router alone.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::http::{ListenerConfig, serve};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: ., mode: read-only } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let shutdown = std::future::ready(()); // a real runtime waits for its signal here
/// serve(listener, capsule.router(), ListenerConfig::default(), shutdown).await?;
/// capsule.end_session(); // once the listener has drained
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`serve_with`].
pub async fn serve(
    listener: impl Accept,
    router: Router,
    config: ListenerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Watch streams end, and held long-polls answer, when shutdown begins: the drain would
    // otherwise wait on them until its deadline.
    let watches = router.clone();
    let shutdown = async move {
        shutdown.await;
        watches.shut_down_watches();
    };
    serve_with(listener, router, config, shutdown).await
}

/// Serves any tower `service` on connections from `listener` behind the listener's hardening
/// until `shutdown` resolves, then stops accepting and drains. The connections may come from
/// anywhere that hands out byte streams ([`Accept`]: a [`TcpListener`](tokio::net::TcpListener), a
/// [`UnixListener`](tokio::net::UnixListener), an in-memory listener, a runtime's vsock
/// listener); each gets the same treatment. A runtime puts its own routes here, alone, in an
/// axum app, or beside the planes with [`Router::with_fallback`]; every connection gets what a
/// `serve` connection gets (D-4.1, D-4.5, D-4.6):
///
/// * HTTP/1.0 and 1.1 only, one request per connection, `connection: close` on every answer;
///   a first line naming another HTTP version (the HTTP/2 preface among them) is answered 505
///   by the version gate before the service sees anything;
/// * a raw `#` in the request target reaches the service escaped as `%23` (the gate again): a
///   request target has no fragment, and hyper alone would cut it off, so that
///   `GET /resources/files/r.md#frag` read `r.md`. Here it is a request for the name
///   `r.md#frag` (404 `not_found` unless that file exists), whatever service answers it;
/// * a head larger than `max_head_bytes` is answered 431, one not complete within
///   `header_read_timeout` is dropped, both before the service sees anything;
/// * at most `max_connections` connections at once (more wait in the accept backlog);
/// * a response that makes no progress for `send_timeout` is cut;
/// * every answer of the service, and the gate's 505, carries a `date` read from
///   [`clock`](ListenerConfig::clock), unless the service set its own;
/// * on shutdown: no more accepts, connections still reading their first bytes closed,
///   requests in flight given `drain_deadline` to finish.
///
/// The service is cloned for each request (one per connection); its error, if it fails,
/// closes that connection without an answer, and the next connection goes on.
///
/// ```
/// use http_body_util::Full;
/// use resource_plane::http::{ListenerConfig, serve_with};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// // A runtime's own routes, with no plane at all (`Router::with_fallback` adds the planes).
/// let own = tower::service_fn(|_request: http::Request<hyper::body::Incoming>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::from("ok"))))
/// });
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let shutdown = std::future::ready(()); // a real runtime waits for its signal here
/// serve_with(listener, own, ListenerConfig::default(), shutdown).await?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// An accept error that is not transient: the listener cannot go on, and neither should
/// the process that relies on it. Transient ones (out of descriptors, a connection reset before
/// it was accepted) are logged and retried with a backoff of 10 ms doubling
/// up to 1 s, reset by the next accepted connection.
pub async fn serve_with(
    mut listener: impl Accept,
    service: impl HttpService,
    config: ListenerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let graceful = GracefulShutdown::new();
    // Tells connections still being primed (not yet hyper's, so not yet watched) to give up:
    // hyper closes a connection that has read nothing at once on shutdown, and so do they.
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let builders = Arc::new(Builders::new(&config));
    let lookahead = config.max_head_bytes.max(8192);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut failed = None;
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    accepted
                }
                Err(e) if transient(&e) => {
                    tracing::warn!("accept failed, retrying in {backoff:?}: {e}");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
                Err(e) => {
                    tracing::error!("accept failed, the listener stops: {e}");
                    failed = Some(e);
                    break;
                }
            },
        };
        let service = service.clone();
        let clock_for_dates = config.clock.clone();
        let watcher = graceful.watcher();
        let builders = builders.clone();
        let mut stop = stop.clone();
        let (send_timeout, header_read_timeout) = (config.send_timeout, config.header_read_timeout);
        let clock = config.clock.clone();
        tokio::spawn(async move {
            let guarded = StallGuard::new(stream, send_timeout);
            let mut gate = VersionGate::with_lookahead(guarded, lookahead).with_clock(clock);
            // The head's first bytes, read before hyper is built, choose its header table;
            // the time they take comes off hyper's header read timeout.
            let started = tokio::time::Instant::now();
            let primed = tokio::select! {
                primed = tokio::time::timeout(header_read_timeout, gate.prime()) => primed,
                _ = stop.wait_for(|stop| *stop) => return,
            };
            match primed {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!("connection ended before a request: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!("no request bytes within the header timeout");
                    return;
                }
            }
            let left = header_read_timeout.saturating_sub(started.elapsed());
            let http = builders.for_head(gate.complete_head_lines(), left);
            let (io, departure) = super::departure::watch(gate);
            let service = leaving(
                dated(TowerToHyperService::new(service), clock_for_dates),
                departure,
            );
            if let Err(e) = watcher
                .watch(http.serve_connection(TokioIo::new(io), service))
                .await
            {
                tracing::debug!("connection ended with an error: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    stopping.send_replace(true);
    if tokio::time::timeout(config.drain_deadline, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("drain deadline passed with connections still open");
    }
    failed.map_or(Ok(()), Err)
}

/// A hyper service as one connection runs it: the shape of the [`HttpService`] a connection
/// is given, and of each layer [`dated`] and [`leaving`] wrap around it.
trait ConnectionService:
    hyper::service::Service<
        Request<Incoming>,
        Response = Response<Self::ResponseBody>,
        Future: Send,
        Error: Into<Box<dyn StdError + Send + Sync>>,
    > + Send
{
    /// The body of the service's responses.
    type ResponseBody: http_body::Body;
}

impl<S, B> ConnectionService for S
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send,
    S::Future: Send,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: http_body::Body,
{
    type ResponseBody = B;
}

/// `service`, each answer dated by `clock` (see [`ListenerConfig::clock`]). hyper's own date
/// is then left out of every answer the service gives, since hyper writes one only when the
/// answer has none.
fn dated<S: ConnectionService>(
    service: S,
    clock: Arc<dyn Clock>,
) -> impl ConnectionService<ResponseBody = S::ResponseBody, Error = S::Error> {
    hyper::service::service_fn(move |request| {
        let answer = service.call(request);
        let clock = clock.clone();
        async move {
            let mut response = answer.await?;
            super::date::stamp(response.headers_mut(), clock.as_ref());
            Ok(response)
        }
    })
}

/// `service`, whose answer is given up when its client leaves first: the service's future is
/// dropped (the router then records the request as `client_gone` and stops its work, D-4.6.1)
/// and the connection closes with no answer (see [`departure`](super::departure)). Only a
/// request without a body is watched so: the body of any other is its service's to read.
fn leaving<S: ConnectionService>(
    service: S,
    departure: super::departure::Departure<
        impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    >,
) -> impl ConnectionService<ResponseBody = S::ResponseBody, Error = Box<dyn StdError + Send + Sync>>
{
    hyper::service::service_fn(move |request: Request<Incoming>| {
        let version = request.version();
        // A request with a body (a POST to a runtime's route, or to `/mcp`) is read by its
        // service: the watch would read and drop the body's bytes, so it waits for the answer
        // alone. The planes' requests (`GET`) carry none.
        let watched = http_body::Body::is_end_stream(request.body());
        let answer = service.call(request);
        let departure = departure.clone();
        async move {
            if !watched {
                return answer.await.map_err(Into::into);
            }
            tokio::select! {
                biased;
                answer = answer => answer.map_err(Into::into),
                () = departure.gone(version) => Err(Box::new(ClientGone) as Box<dyn StdError + Send + Sync>),
            }
        }
    })
}

/// The error a connection ends with when its client left before the answer was ready.
#[derive(Debug)]
struct ClientGone;

impl std::fmt::Display for ClientGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client left before its answer was ready")
    }
}

impl StdError for ClientGone {}

/// The first pause after a transient accept error.
pub(crate) const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);

/// The longest pause between accept attempts while they keep failing.
pub(crate) const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Whether an accept error passes: out of descriptors or memory (`EMFILE`, `ENFILE`,
/// `ENOBUFS`, `ENOMEM`: connections closing free them), or an error of the one connection being
/// accepted rather than of the listening socket (`ECONNABORTED`, `EINTR`, and the network
/// errors accept(2) says to treat like `EAGAIN`). Anything else (`EBADF`, `EINVAL`, ...) means
/// the listening socket itself is gone.
pub(crate) fn transient(error: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let Some(code) = error.raw_os_error() else {
        return matches!(
            error.kind(),
            std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::Interrupted
                | std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::TimedOut
        );
    };
    [
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOBUFS,
        Errno::NOMEM,
        Errno::CONNABORTED,
        Errno::CONNRESET,
        Errno::INTR,
        Errno::AGAIN,
        Errno::PROTO,
        Errno::PERM,
        Errno::NETDOWN,
        Errno::NETUNREACH,
        Errno::HOSTDOWN,
        Errno::HOSTUNREACH,
        Errno::NOPROTOOPT,
        Errno::OPNOTSUPP,
        Errno::TIMEDOUT,
    ]
    .iter()
    .any(|errno| errno.raw_os_error() == code)
}

/// One handle to the binary's listening socket, TCP or Unix domain, not yet registered with a
/// runtime.
#[cfg(feature = "cli")]
#[derive(Debug)]
pub(crate) enum ShardSocket {
    /// A TCP listening socket.
    Tcp(std::net::TcpListener),
    /// A Unix domain listening socket.
    Unix(std::os::unix::net::UnixListener),
}

/// Serves `router` on several handles to one listening socket (see
/// [`bind_shards`](crate::backends::net::bind_shards)), each on its own thread with its own
/// single-threaded runtime: a connection lives and dies on one core, with no work stealing and
/// no cross-thread wake-ups. Returns when every shard has stopped accepting and drained.
///
/// # Errors
/// When a shard's runtime cannot be built.
#[cfg(feature = "cli")]
pub(crate) fn serve_sharded(
    listeners: Vec<ShardSocket>,
    service: impl HttpService,
    lanes: usize,
    config: ListenerConfig,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let per_shard = ListenerConfig {
        max_connections: (config.max_connections / listeners.len().max(1)).max(1),
        ..config
    };
    // Set by a shard whose listener failed, so that the others stop too.
    let failed = tokio::sync::watch::Sender::new(false);
    let shards: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(index, listener)| {
            let service = service.clone();
            let per_shard = per_shard.clone();
            let mut shutdown = shutdown.clone();
            let (one_failed, mut another_failed) = (failed.clone(), failed.subscribe());
            std::thread::Builder::new()
                .name(format!("shard-{index}"))
                .spawn(move || -> std::io::Result<()> {
                    // A blocking thread per lane of the router (requests wait for a lane on
                    // the async side, holding no thread), and a margin for a thread still
                    // finishing as the next call starts. Threads start on demand.
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .max_blocking_threads(lanes + BLOCKING_MARGIN)
                        .build()?;
                    let drain_deadline = per_shard.drain_deadline;
                    let served = runtime.block_on(async move {
                        let stop = async move {
                            tokio::select! {
                                _ = shutdown.wait_for(|stop| *stop) => {}
                                _ = another_failed.wait_for(|failed| *failed) => {}
                            }
                        };
                        match listener {
                            ShardSocket::Tcp(listener) => {
                                let listener = tokio::net::TcpListener::from_std(listener)?;
                                serve_with(listener, service, per_shard, stop).await
                            }
                            ShardSocket::Unix(listener) => {
                                let listener = tokio::net::UnixListener::from_std(listener)?;
                                serve_with(listener, service, per_shard, stop).await
                            }
                        }
                    });
                    if served.is_err() {
                        // The others stop and drain too: the process is going down.
                        one_failed.send_replace(true);
                    }
                    // Dropping a runtime waits for its blocking threads without limit; a read
                    // still parked then must not keep a stopped shard, and the process, alive.
                    runtime.shutdown_timeout(drain_deadline);
                    served
                })
        })
        .collect::<Result<_, _>>()?;
    // Every shard is joined before answering: one that failed must not leave the others
    // serving unwatched. The first failure is the answer; a panic is a failure too.
    let mut outcome = Ok(());
    for shard in shards {
        let result = shard
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("a listener shard panicked")));
        if let (Ok(()), Err(e)) = (&outcome, result) {
            outcome = Err(e);
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::transient;
    use rustix::io::Errno;

    fn os(errno: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(errno.raw_os_error())
    }

    #[test]
    fn running_out_of_descriptors_passes_and_a_broken_socket_does_not() {
        for passing in [
            Errno::MFILE,
            Errno::NFILE,
            Errno::CONNABORTED,
            Errno::NOBUFS,
        ] {
            assert!(transient(&os(passing)), "{passing:?}");
        }
        for fatal in [Errno::BADF, Errno::INVAL, Errno::NOTSOCK, Errno::FAULT] {
            assert!(!transient(&os(fatal)), "{fatal:?}");
        }
        assert!(transient(&std::io::ErrorKind::ConnectionAborted.into()));
        assert!(!transient(&std::io::Error::other("the socket is gone")));
    }
}
