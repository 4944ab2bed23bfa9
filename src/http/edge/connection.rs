//! One connection's life behind the listener's hardening: the stall guard and the version gate
//! around its stream, its first bytes read to choose hyper's header table, the departure watch
//! that drops the service's answer when the client leaves, and the `date` on every answer.

use super::config::ListenerConfig;
use super::departure::{self, Departure};
use super::stall_guard::StallGuard;
use super::version_gate::VersionGate;
use crate::backends::Clock;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::Watcher;
use hyper_util::service::TowerToHyperService;
use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// A tower service [`serve_with`](crate::http::serve_with) can put behind the listener: it answers a request off the
/// wire with an HTTP response, is cloned once per connection and run on any thread, and its
/// errors and its body's errors box. The bound is named once here; every service that meets
/// it has it (the [`Router`](crate::http::Router), an axum app, a `tower::service_fn`), so nothing implements it by
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

/// What every connection of one listener is served with: hyper's two builders, the gate's
/// look-ahead, the timeouts, and the clock that dates each answer.
pub(super) struct Hardening {
    builders: Builders,
    /// How much of the first line the version gate holds back: the head limit.
    lookahead: usize,
    header_read_timeout: Duration,
    send_timeout: Duration,
    clock: Arc<dyn Clock>,
}

impl Hardening {
    pub(super) fn new(config: &ListenerConfig) -> Self {
        Hardening {
            builders: Builders::new(config),
            lookahead: config.max_head_bytes.max(8192),
            header_read_timeout: config.header_read_timeout,
            send_timeout: config.send_timeout,
            clock: config.clock.clone(),
        }
    }

    /// Serves `service` on `stream` until its one answer is out, the client left, or the
    /// drain `watcher` belongs to closes it. A connection whose first bytes do not come within
    /// the header read timeout, or are still awaited when `stop` says the listener stops, is
    /// closed unanswered.
    pub(super) async fn serve(
        &self,
        stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
        service: impl HttpService,
        watcher: Watcher,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let guarded = StallGuard::new(stream, self.send_timeout);
        let mut gate =
            VersionGate::with_lookahead(guarded, self.lookahead).with_clock(self.clock.clone());
        // The head's first bytes, read before hyper is built, choose its header table;
        // the time they take comes off hyper's header read timeout.
        let started = tokio::time::Instant::now();
        if !self.prime(&mut gate, &mut stop).await {
            return;
        }
        let left = self.header_read_timeout.saturating_sub(started.elapsed());
        let http = self.builders.for_head(gate.complete_head_lines(), left);
        let (io, departure) = departure::watch(gate);
        let service = leaving(
            dated(TowerToHyperService::new(service), self.clock.clone()),
            departure,
        );
        if let Err(e) = watcher
            .watch(http.serve_connection(TokioIo::new(io), service))
            .await
        {
            tracing::debug!("connection ended with an error: {e}");
        }
    }

    /// Reads the head's first bytes into `gate` ([`VersionGate::prime`]) within the header read
    /// timeout: `false` when the connection ended or stayed silent first, or `stop` said the
    /// listener stops (hyper closes a connection that has read nothing at once on shutdown,
    /// and so does this).
    async fn prime(
        &self,
        gate: &mut VersionGate<impl AsyncRead + Unpin>,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> bool {
        let primed = tokio::select! {
            primed = tokio::time::timeout(self.header_read_timeout, gate.prime()) => primed,
            _ = stop.wait_for(|stop| *stop) => return false,
        };
        match primed {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!("connection ended before a request: {e}");
                false
            }
            Err(_) => {
                tracing::debug!("no request bytes within the header timeout");
                false
            }
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
/// and the connection closes with no answer (see [`departure`]). Only a
/// request without a body is watched so: the body of any other is its service's to read.
fn leaving<S: ConnectionService>(
    service: S,
    departure: Departure<
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
