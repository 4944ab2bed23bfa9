//! The router: HTTP as a function (design habit 5). Routing is on the raw path, the method is
//! checked first, and every request under `/resources` leaves exactly one trace line before its
//! response leaves, or fails closed with `500 io_error` (D-4, D-6.3, D-6.4).
//!
//! The router is a [`tower_service::Service`] for a request of any body type, so a runtime can
//! nest it in its own app (axum's `nest_service`), mount it under a base path of its own
//! ([`Router::with_base_path`]), or put it beside its own routes ([`Router::with_fallback`]).
//! It knows no socket: the edge ([`serve_with`](crate::http::serve_with)) serves it as it
//! serves any tower service.
//!
//! One request, one path through it, one file for each step:
//!
//! * `call`: what the router reads of a request, and the one plane call it makes (or its
//!   outcome, when it needs none): the route and the method checked, the plane admitted, a
//!   read's path decoded once;
//! * `answer`: that call answered where it runs best: inline on the async worker or on the
//!   blocking pool for the crate's own planes, awaited on the async worker for a runtime's own;
//! * `render`: its one outcome (`outcome`) turned into the response and the trace line;
//! * `claim`: who writes that line when the client leaves before the work answered;
//! * `listing` and `wait`: the listing route's answers, at once or once the export changes;
//! * `base` and `fallback`: where the router is mounted and the paths it answers there, and
//!   what answers the other paths beside it;
//! * `mount`: the [`Router`] itself, and the planes, tracer and lanes it answers from;
//! * `lend`: a listing lent whole, and a read's file handed over, to the MCP face.
//!
//! This file is the router's face: its entry points and its tower service.

mod answer;
mod base;
mod call;
mod claim;
mod fallback;
#[cfg(feature = "mcp")]
mod lend;
mod listing;
mod mount;
mod outcome;
mod render;
#[cfg(test)]
mod tests;
mod wait;

pub use answer::INLINE_READ_LIMIT;
pub use base::InvalidBasePath;
pub use fallback::WithFallback;
#[cfg(feature = "mcp")]
pub(crate) use lend::{LentFile, LentListing};
pub use mount::Router;
pub(crate) use mount::{FilesMount, Mount, Mounted, PeerMount};

use super::body::PlaneBody;
use crate::planes::IfNoneMatch;
use crate::planes::watch::ChangeStream;
use call::{Asking, Headers};
use claim::Claim;
use http::{Method, Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use tower_service::Service;

/// The future of the router's
/// [`Service::call`](https://docs.rs/tower-service/0.3/tower_service/trait.Service.html#tymethod.call):
/// it holds no part of the request (the headers
/// the planes read are copied out in `call`, the body is dropped there), so it is `Send` and
/// `'static` whatever the body type.
pub type RouterFuture =
    Pin<Box<dyn Future<Output = Result<Response<PlaneBody>, Infallible>> + Send + 'static>>;

/// What a session did, for its closing log line (D-15.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SessionStats {
    /// Requests the router answered (every route, refusals included).
    pub requests_answered: u64,
    /// Handles minted and recorded.
    pub handles_minted: u64,
}

impl Router {
    /// The session's counts so far: requests answered by this router (and its clones), handles
    /// minted by the tools sharing its tracer.
    pub fn stats(&self) -> SessionStats {
        SessionStats {
            requests_answered: self.answered.load(Ordering::Relaxed),
            handles_minted: self.mounted.tracer.handles_minted(),
        }
    }

    /// Answers one request. Listings, large reads and proof-checked redeems of the crate's own
    /// planes run on the blocking pool, each with its trace write; a runtime's own plane is
    /// awaited here; the request body is never read. The base path, if any, is cut off first
    /// ([`with_base_path`](Self::with_base_path)).
    pub async fn handle<B>(&self, request: Request<B>) -> Response<PlaneBody> {
        let asking = Asking::of(self, &request);
        drop(request);
        self.answer(asking).await
    }

    /// Answers what was asked: the plane call it makes, run where [`run`](Self::run) decides.
    async fn answer(&self, asking: Asking) -> Response<PlaneBody> {
        let Asking {
            method,
            path,
            rpc_endpoint,
            query,
            headers,
        } = asking;
        let generation = self.mounted.generation.current();
        let call = self.call_for(&method, &path, rpc_endpoint, query.as_deref(), headers);
        self.run(call, generation, method, path).await
    }

    /// Answers one request synchronously (blocking), with no `x-murmur-proof`. `audience` holds
    /// every `x-murmur-audience` value sent, in order. The base path, if any, is cut off
    /// `raw_path` first.
    pub fn respond(
        &self,
        method: &Method,
        raw_path: &str,
        audience: &[&[u8]],
    ) -> Response<PlaneBody> {
        self.respond_with_proof(method, raw_path, audience, &[])
    }

    /// [`respond`](Self::respond) with every `x-murmur-proof` value sent, in order (D-14.3);
    /// only a redeem reads them. Every plane call runs on the caller's thread: the crate's own
    /// planes by their blocking calls, a runtime's async plane by a minimal executor of the
    /// crate's that parks the thread between polls (entering the caller's tokio runtime, if it
    /// runs in one, so a plane using tokio's I/O or blocking pool registers there). It blocks:
    /// call it from a thread that is not an async worker (a test, a blocking task); an async
    /// caller uses [`handle`](Self::handle). A watch stream needs the async router.
    pub fn respond_with_proof(
        &self,
        method: &Method,
        raw_path: &str,
        audience: &[&[u8]],
        proof: &[&[u8]],
    ) -> Response<PlaneBody> {
        let rpc_endpoint = self.is_rpc_endpoint(raw_path);
        let raw_path = self.local_path(raw_path);
        let owned = |values: &[&[u8]]| values.iter().map(|v| v.to_vec()).collect();
        let headers = Headers {
            audience: owned(audience),
            proof: owned(proof),
            if_none_match: IfNoneMatch::absent(),
            last_event_id: None,
        };
        let generation = self.mounted.generation.current();
        let query = raw_path.split_once('?').map(|(_, query)| query);
        let call = self.call_for(method, raw_path, rpc_endpoint, query, headers);
        let response = self.answer_blocking(call, generation, &Claim::sole());
        self.finish(response, method, raw_path)
    }

    /// The export's changes as an async stream, from the listing whose etag is `resume`
    /// (`sha256:<hex>`, quoted or not) or from the current listing; `None` when the router
    /// has no operator plane. See [`ChangeStream`].
    pub fn watch(&self, resume: Option<&str>) -> Option<ChangeStream> {
        let hub = self.mounted.watch.clone()?;
        let resume = resume
            .map(|etag| crate::planes::watch::client_etag(etag).unwrap_or_else(|| etag.to_owned()));
        Some(ChangeStream::new(hub, resume))
    }

    /// Ends every watch stream (and answers every held long-poll with its `304`), and stops
    /// the watcher: the server is shutting down, and a stream would otherwise hold its
    /// connection open past the drain. [`serve`](crate::http::serve) calls it when its
    /// shutdown begins; a runtime serving the router on its own listener calls it then. New
    /// streams end at once, and new long-polls answer at once, from then on.
    pub fn shut_down_watches(&self) {
        if let Some(hub) = &self.mounted.watch {
            hub.shut_down();
        }
    }
}

/// The router as a tower service, for a request of any body type (the body is dropped unread
/// in `call`). Always ready; never fails: every refusal is a response.
impl<B> Service<Request<B>> for Router {
    type Response = Response<PlaneBody>;
    type Error = Infallible;
    type Future = RouterFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> RouterFuture {
        let asking = Asking::of(self, &request);
        drop(request);
        let router = self.clone();
        Box::pin(async move { Ok(router.answer(asking).await) })
    }
}
