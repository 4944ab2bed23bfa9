//! The listener (D-4.1, D-4.6): hyper 1, HTTP/1 only, keep-alive off, a timer with a header read
//! timeout, a head size limit (answered 431 by hyper), a cap on concurrent connections (excess
//! connections wait in the accept backlog), and graceful shutdown with a drain deadline.
//!
//! The hardening is the service's to share: [`serve_with`] puts it in front of any tower
//! service (a runtime's own routes, an axum app, the router [`with_fallback`] to the runtime's
//! routes) on connections from any [`Accept`] source (TCP, a Unix domain socket, an in-memory
//! listener); [`serve`] is `serve_with` for the router alone. This file holds the accept loop
//! and the drain; `connection` serves each connection.
//!
//! [`with_fallback`]: crate::http::Router::with_fallback
//! [`serve`]: crate::http::serve

use super::accept::{Accept, Accepting};
use super::config::ListenerConfig;
use super::connection::{Hardening, HttpService};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Serves any tower `service` on connections from `listener` behind the listener's hardening
/// until `shutdown` resolves, then stops accepting and drains. The connections may come from
/// anywhere that hands out byte streams ([`Accept`]: a [`TcpListener`](tokio::net::TcpListener), a
/// [`UnixListener`](tokio::net::UnixListener), an in-memory listener, a runtime's vsock
/// listener); each gets the same treatment. A runtime puts its own routes here, alone, in an
/// axum app, or beside the planes with
/// [`Router::with_fallback`](crate::http::Router::with_fallback); every connection gets what a
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
    listener: impl Accept,
    service: impl HttpService,
    config: ListenerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let graceful = GracefulShutdown::new();
    // Tells connections still being primed (not yet hyper's, so not yet watched) to give up:
    // hyper closes a connection that has read nothing at once on shutdown, and so do they.
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let hardening = Arc::new(Hardening::new(&config));
    let mut accepting = Accepting::new(listener);
    let mut failed = None;
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = accepting.next() => match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            },
        };
        let (hardening, service) = (hardening.clone(), service.clone());
        let (watcher, stop) = (graceful.watcher(), stop.clone());
        tokio::spawn(async move {
            hardening.serve(stream, service, watcher, stop).await;
            drop(slot);
        });
    }
    drop(accepting);
    stopping.send_replace(true);
    if tokio::time::timeout(config.drain_deadline, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("drain deadline passed with connections still open");
    }
    failed.map_or(Ok(()), Err)
}
