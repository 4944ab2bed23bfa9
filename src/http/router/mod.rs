//! The router: HTTP as a function (design habit 5). Routing is on the raw path, the method is
//! checked first, and every request under `/resources` leaves exactly one trace line before its
//! response leaves, or fails closed with `500 io_error` (D-4, D-6.3, D-6.4).
//!
//! The router is a [`tower_service::Service`] for a request of any body type, so a runtime can
//! nest it in its own app (axum's `nest_service`), mount it under a base path of its own
//! ([`Router::with_base_path`]), or put it beside its own routes ([`Router::with_fallback`]).
//!
//! One request, one path through it: `call_for` routes, checks the method and the plane, and
//! decodes a read's path, once, into the one plane call the request makes (or its outcome, when
//! it needs none); `run` decides where that call runs: inline on the async worker or on the
//! blocking pool for the crate's own planes, awaited on the async worker for a runtime's own;
//! `render` turns its one outcome into the response and the trace line.

#[cfg(feature = "mcp")]
mod lend;
#[cfg(feature = "mcp")]
pub(crate) use lend::LentListing;
mod wait;

use super::body::PlaneBody;
use super::listing_query::ListingQuery;
use super::response::{self, header_text};
use super::watch_stream::WatchBody;
use crate::blocking;
use crate::events::{
    PeerHandleRedeem, ResourceList, ResourceListWaited, ResourceRead, WithAudienceProof,
};
use crate::generation::Generation;
use crate::path::{RelPath, percent_decode_strict, strip_query};
use crate::planes::inline::{Attempt, ReadRest, ReadsInline, RedeemRest, RedeemsInline};
use crate::planes::watch::hub::Current;
use crate::planes::watch::{ChangeStream, Hub};
use crate::planes::{
    Cancel, ExportScope, IfNoneMatch, ListingBody, ListingHead, PeerPlane, ReadOutcome,
    RedeemOutcome, RedeemRequest, ResourcePlane, ServedFile, StreamedFile,
};
use crate::refusal::{Code, Refusal};
use crate::scope::Containment;
use crate::trace::Tracer;
use crate::wire::Route;
use crate::wire::header::{
    AUDIENCE, CONTAINMENT, EXPORT_ROOT, GENERATION, HANDLE_ID, LAST_EVENT_ID, PROOF,
};
use http::header::{HeaderValue, IF_NONE_MATCH};
use http::{Method, Request, Response};
use http_body_util::Either;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tower_service::Service;

/// The largest file a read or redeem of the crate's own planes serves on the async worker that
/// received it; larger files, every listing and every proof-checked redeem of the crate's
/// planes move to the blocking pool. Small reads are cheaper inline than the two context
/// switches of a hand-off. (A runtime's own plane is async, and awaited on the worker.)
pub const INLINE_READ_LIMIT: u64 = 256 * 1024;

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
    mounted: Arc<Mounted>,
    /// Responses given, shared by every clone.
    answered: Arc<AtomicU64>,
    /// The raw path prefix requests arrive under, cut before routing; `None`: none.
    base: Option<Arc<str>>,
}

/// A base path [`Router::with_base_path`] refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBasePath {
    /// The base path as given.
    pub base: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for InvalidBasePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid base path {:?}: {}", self.base, self.reason)
    }
}

impl std::error::Error for InvalidBasePath {}

/// The future of the router's
/// [`Service::call`](https://docs.rs/tower-service/0.3/tower_service/trait.Service.html#tymethod.call):
/// it holds no part of the request (the headers
/// the planes read are copied out in `call`, the body is dropped there), so it is `Send` and
/// `'static` whatever the body type.
pub type RouterFuture =
    Pin<Box<dyn Future<Output = Result<Response<PlaneBody>, Infallible>> + Send + 'static>>;

/// What the router reads of a request, copied out of it, so that the answer needs nothing of
/// the request itself (its body type above all).
struct Asking {
    method: Method,
    /// The raw path relative to the plane (the base path cut off; empty when outside it).
    path: String,
    /// Whether the path is the card's JSON-RPC endpoint ([`Router::is_rpc_endpoint`]).
    rpc_endpoint: bool,
    /// The raw query, without its `?`.
    query: Option<String>,
    headers: Headers,
}

/// The request headers the planes read, as sent, each value in order.
struct Headers {
    /// `x-murmur-audience`.
    audience: Vec<Vec<u8>>,
    /// `x-murmur-proof`.
    proof: Vec<Vec<u8>>,
    /// `If-None-Match`, parsed (D-13).
    if_none_match: IfNoneMatch,
    /// The first `Last-Event-ID`, as sent (D-17.3).
    last_event_id: Option<Vec<u8>>,
}

impl Asking {
    fn of<B>(router: &Router, request: &Request<B>) -> Asking {
        let values = |name| -> Vec<Vec<u8>> {
            request
                .headers()
                .get_all(name)
                .iter()
                .map(|v| v.as_bytes().to_vec())
                .collect()
        };
        let if_none_match = {
            let lines: Vec<&[u8]> = request
                .headers()
                .get_all(IF_NONE_MATCH)
                .iter()
                .map(HeaderValue::as_bytes)
                .collect();
            IfNoneMatch::parse(&lines)
        };
        Asking {
            method: request.method().clone(),
            path: router.local_path(request.uri().path()).to_owned(),
            rpc_endpoint: router.is_rpc_endpoint(request.uri().path()),
            query: request.uri().query().map(str::to_owned),
            headers: Headers {
                audience: values(AUDIENCE),
                proof: values(PROOF),
                if_none_match,
                last_event_id: request
                    .headers()
                    .get(LAST_EVENT_ID)
                    .map(|v| v.as_bytes().to_vec()),
            },
        }
    }
}

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

    /// This router answering under `base` instead of at the root: `base` is cut off the raw
    /// path before routing, so `/capsules/a/resources/files/x` reads `x`, and a path not under
    /// `base` is not the router's ([`Route::Foreign`]: 404 `not_found`, nothing traced). The
    /// clone shares the planes, trace and counts of `self`; its base replaces any base `self`
    /// had.
    ///
    /// The match is on the raw bytes, before any decoding, as routing is (D-4.2): a path is
    /// under `/capsules/a` when it is `/capsules/a` itself or goes on with a raw `/`, so
    /// `/capsules/ab/…` and `/capsules/a%2Fresources/…` are not under it; neither is
    /// `/capsules/a//resources/…` (what follows the base is routed as sent, and `//resources`
    /// is no route). `/capsules/a` itself and `/capsules/a/` are under it, and no route of the
    /// router's (404). Traces record the path relative to the plane, as without a base path
    /// (D-6.2).
    ///
    /// Use it when nothing in front of the router strips the prefix; under axum's
    /// `nest_service`, which strips it, mount the router itself.
    ///
    /// # Errors
    /// [`InvalidBasePath`] when `base` does not start with `/`, has an empty, `.` or `..`
    /// segment, is `/` alone, or holds a byte other than an RFC 3986 path character (`%` too:
    /// a prefix matched on raw bytes must have one spelling). One trailing `/` is allowed and
    /// ignored: `/capsules/a/` is `/capsules/a`.
    pub fn with_base_path(&self, base: &str) -> Result<Router, InvalidBasePath> {
        let refuse = |reason| InvalidBasePath {
            base: base.to_owned(),
            reason,
        };
        let Some(rest) = base.strip_prefix('/') else {
            return Err(refuse("it must start with `/`"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(refuse("it names no segment (mount the router itself)"));
        }
        for segment in rest.split('/') {
            match segment {
                "" => return Err(refuse("it has an empty segment")),
                "." | ".." => return Err(refuse("it has a `.` or `..` segment")),
                _ if !segment.bytes().all(is_plain_path_byte) => {
                    return Err(refuse(
                        "it holds a byte other than a letter, digit or one of -._~!$&'()*+,;=:@",
                    ));
                }
                _ => {}
            }
        }
        Ok(Router {
            base: Some(Arc::from(&base[..rest.len() + 1])),
            ..self.clone()
        })
    }

    /// The base path this router answers under ([`with_base_path`](Self::with_base_path)).
    pub fn base_path(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// `raw_path` relative to the base path: the rest after it, or `""` (which no route
    /// claims) when `raw_path` is not under it.
    pub(crate) fn local_path<'a>(&self, raw_path: &'a str) -> &'a str {
        let Some(base) = self.base.as_deref() else {
            return raw_path;
        };
        match raw_path.strip_prefix(base) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => "",
        }
    }

    /// Whether `raw_path` (the whole request path, before the base path is cut) names the
    /// JSON-RPC endpoint the agent card advertises: the path of the card's `url`, or the root
    /// of the router's mount (`/` without a base path, the base path itself with one), which is
    /// where that URL leads when something in front of the router (axum's `nest_service`, a
    /// proxy) cuts a prefix the router never sees.
    fn is_rpc_endpoint(&self, raw_path: &str) -> bool {
        let path = strip_query(raw_path);
        if path == self.mounted.rpc_path {
            return true;
        }
        match self.base.as_deref() {
            None => path == "/",
            Some(base) => matches!(path.strip_prefix(base), Some("" | "/")),
        }
    }

    /// Whether the operator plane (`exports.files`) is mounted.
    #[cfg(feature = "mcp")]
    pub(crate) fn serves_files(&self) -> bool {
        self.mounted.files.is_some()
    }

    /// Whether this router answers `raw_path`, its base path considered: what
    /// [`claims`](Self::claims) says of the path relative to the base, `false` outside it.
    pub fn answers(&self, raw_path: &str) -> bool {
        Router::claims(self.local_path(raw_path))
    }

    /// This router in front of `fallback`: requests for the paths it
    /// [`answers`](Self::answers) (everything under `/resources` and the agent card, below its
    /// base path) go to the router, every other request to `fallback`, body and all. See
    /// [`WithFallback`].
    pub fn with_fallback<F>(&self, fallback: F) -> WithFallback<F> {
        WithFallback {
            router: self.clone(),
            fallback,
        }
    }

    /// The session's counts so far: requests answered by this router (and its clones), handles
    /// minted by the tools sharing its tracer.
    pub fn stats(&self) -> SessionStats {
        SessionStats {
            requests_answered: self.answered.load(Ordering::Relaxed),
            handles_minted: self.mounted.tracer.handles_minted(),
        }
    }

    /// Whether this router answers `raw_path` (everything under `/resources` and the card);
    /// a runtime mounting it beside its own routes sends only these here.
    pub fn claims(raw_path: &str) -> bool {
        !matches!(Route::of(raw_path), Route::Foreign)
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

    /// The plane call `method` on `raw_path` (relative to the base path) makes, or its outcome
    /// when it needs none. Routing is on the raw path (D-4.2); on a plane route the method is
    /// checked first, then the plane (both in [`admit`]); a read's path is decoded here, once,
    /// and its plane gets the decoded [`RelPath`]. A `POST` to the card's JSON-RPC endpoint
    /// (`rpc_endpoint`) that no route of the router's claims gets the JSON-RPC error of a
    /// capsule that answers no agent call.
    fn call_for(
        &self,
        method: &Method,
        raw_path: &str,
        rpc_endpoint: bool,
        query: Option<&str>,
        headers: Headers,
    ) -> Call {
        let files = || {
            admit(
                method,
                &self.mounted.files,
                (Code::NoResourcePlane, "exports.files is not declared"),
            )
        };
        match Route::of(raw_path) {
            Route::Foreign if rpc_endpoint && method == Method::POST => {
                Call::Answered(Outcome::NoAgent)
            }
            Route::Foreign => Call::Answered(Outcome::Foreign),
            Route::AgentCard => Call::Answered(Outcome::AgentCard {
                method_allowed: method == Method::GET,
            }),
            Route::Listing => {
                let asked = files().and_then(|files| Ok((files, ListingQuery::parse(query)?)));
                match asked {
                    Ok((files, query)) => Call::List(
                        files.clone(),
                        ListAsk {
                            query,
                            if_none_match: headers.if_none_match,
                            last_event_id: headers.last_event_id,
                        },
                    ),
                    Err(refusal) => Call::Answered(Outcome::Listing {
                        result: Err(refusal),
                        if_none_match: IfNoneMatch::absent(),
                        extra: ListExtra::of(&ListingQuery::default()),
                    }),
                }
            }
            Route::Read(raw) => {
                let (recorded, path) = decode_once(raw);
                match files().and_then(|files| Ok((files, path?))) {
                    Ok((files, path)) => Call::Read {
                        files: files.clone(),
                        path,
                        recorded,
                        if_none_match: headers.if_none_match,
                        rest: None,
                    },
                    Err(refusal) => Call::Answered(Outcome::Read {
                        path: recorded,
                        result: Err(refusal),
                    }),
                }
            }
            Route::OtherResource => {
                let refusal = if method == Method::GET {
                    Refusal::new(Code::NotFound, "no such route under /resources")
                } else {
                    Refusal::new(
                        Code::MethodNotAllowed,
                        format!("{method} is not allowed under /resources"),
                    )
                };
                Call::Answered(Outcome::Read {
                    path: crate::redact::revealing_tokens(strip_query(raw_path)),
                    result: Err(refusal),
                })
            }
            route @ (Route::PeerIndex | Route::Redeem(_)) => {
                let token = match route {
                    Route::Redeem(token) => Some(token),
                    _ => None,
                };
                let facts = RedeemFacts {
                    handle_id: token.map(crate::hex::handle_id),
                    audience_asserted: headers.audience.first().map(|a| {
                        String::from_utf8_lossy(&crate::planes::normalise_audience(a)).into_owned()
                    }),
                };
                let peer = admit(
                    method,
                    &self.mounted.peer,
                    (Code::NoPeerPlane, "exports.peer_files is not declared"),
                )
                .and_then(|peer| {
                    let token = token.ok_or_else(|| {
                        Refusal::new(Code::NotFound, "the peer plane cannot be enumerated")
                    })?;
                    Ok((peer, token))
                });
                match peer {
                    Ok((peer, token)) => Call::Redeem {
                        peer: peer.clone(),
                        asked: RedeemAsked {
                            token: token.to_owned(),
                            audience: headers.audience,
                            proof: headers.proof,
                        },
                        facts,
                        rest: None,
                    },
                    Err(refusal) => Call::Answered(Outcome::Redeem {
                        facts,
                        outcome: RedeemOutcome::refused(refusal),
                    }),
                }
            }
        }
    }

    /// Answers `call` where it runs best: the one place the router decides. On this async
    /// worker when [`answer_inline`](Self::answer_inline) can (an outcome known without a
    /// plane; a read or a plain redeem the crate's own plane answers at once, see
    /// [`ReadsInline`], [`RedeemsInline`] and [`INLINE_READ_LIMIT`]); a runtime's own plane,
    /// async, awaited on this worker too ([`answer_async`](Self::answer_async)), with no lane;
    /// every other call of the crate's planes on the blocking pool, once the in-flight budget
    /// lends the bytes of a read the crate's plane opened inline ([`ReadRest::prepay`]), and
    /// then once a lane of the call's kind is free: both waited for here, on the async side,
    /// where waiting holds no thread (D-4.6.1, [`blocking::Lanes`]). A larger file the crate's
    /// plane opened inline is read there from that open ([`ReadRest::finish`]), so a request
    /// resolves its file once. Either way the outcome is rendered, and its trace line written,
    /// where it was computed.
    ///
    /// Dropping this future (the listener found the client gone) before the work answered
    /// raises the work's [`Cancel`]: work not started never starts, work running stops within
    /// a step (a runtime's plane's future is dropped), and the request's one trace line records
    /// `client_gone` (D-4.6.1).
    async fn run(
        &self,
        call: Call,
        generation: u64,
        method: Method,
        raw_path: String,
    ) -> Response<PlaneBody> {
        let call = match call {
            Call::List(files, ask) if ask.query.watch => {
                let response = self.open_watch(files, ask, generation).await;
                return self.finish(response, &method, &raw_path);
            }
            Call::List(files, ask)
                if ask.query.wait.is_some() && !ask.if_none_match.is_absent() =>
            {
                let response = self.long_poll(files, ask).await;
                return self.finish(response, &method, &raw_path);
            }
            call => call,
        };
        let mut call = match self.answer_inline(call, generation) {
            Inline::Answered(response) => return self.finish(response, &method, &raw_path),
            Inline::Deferred(call) => call,
        };
        let cancel = Cancel::default();
        let claim = Claim::shared(cancel.clone());
        let vigil = Vigil {
            router: self,
            pending: Pending::of(&call),
            generation,
            claim: Some(claim.clone()),
        };
        let raise = cancel.on_drop();
        if call.awaits() {
            // A runtime's own plane: awaited here, where waiting on its I/O holds no thread.
            let response = self.answer_async(call, generation, &claim).await;
            raise.disarm();
            vigil.settle();
            return self.finish(response, &method, &raw_path);
        }
        let kind = match &call {
            Call::Read { rest: Some(_), .. } => blocking::Kind::Read,
            Call::List(..) => blocking::Kind::List,
            _ => blocking::Kind::Call,
        };
        // Bytes before the lane (see `Lanes`): a read waiting for bytes holds no lane.
        if let Call::Read {
            rest: Some(rest), ..
        } = &mut call
        {
            rest.prepay().await;
        }
        let lane = self.mounted.lanes.take(kind).await;
        let router = self.clone();
        let answer = blocking::run(move || {
            let _lane = lane;
            let response = router.answer_blocking(call, generation, &claim);
            router.finish(response, &method, &raw_path)
        })
        .await;
        raise.disarm();
        vigil.settle();
        answer.unwrap_or_else(|_| response::refusal(Code::IoError, None, None))
    }

    /// `call` answered on this async worker, or handed back for the blocking pool, with nothing
    /// read and nothing traced: a listing always, a read or redeem unless its plane answers it
    /// inline. A read or redeem the plane started goes back with the file it opened, for the
    /// blocking pool to read from there.
    fn answer_inline(&self, call: Call, generation: u64) -> Inline {
        match call {
            Call::Answered(outcome) => {
                Inline::Answered(self.render(outcome, generation, &Claim::sole()))
            }
            Call::List(..) => Inline::Deferred(call),
            Call::Read {
                files,
                path,
                recorded,
                if_none_match,
                rest,
            } => {
                let attempt = match &files.inline {
                    Some(inline) => inline.read_inline(&path, &if_none_match, INLINE_READ_LIMIT),
                    None => Attempt::Deferred,
                };
                let rest = match attempt {
                    Attempt::Answered(result) => {
                        let outcome = read_outcome(&files, recorded, result, &if_none_match);
                        return Inline::Answered(self.render(outcome, generation, &Claim::sole()));
                    }
                    Attempt::Deferred => rest,
                    Attempt::Resume(rest) => Some(rest),
                };
                Inline::Deferred(Call::Read {
                    files,
                    path,
                    recorded,
                    if_none_match,
                    rest,
                })
            }
            Call::Redeem {
                peer,
                asked,
                facts,
                rest,
            } => {
                let attempt = match &peer.inline {
                    Some(inline) => asked
                        .with_request(|request| inline.redeem_inline(request, INLINE_READ_LIMIT)),
                    None => Attempt::Deferred,
                };
                let rest = match attempt {
                    Attempt::Answered(outcome) => {
                        return Inline::Answered(self.render(
                            Outcome::Redeem { facts, outcome },
                            generation,
                            &Claim::sole(),
                        ));
                    }
                    Attempt::Deferred => rest,
                    Attempt::Resume(rest) => Some(rest),
                };
                Inline::Deferred(Call::Redeem {
                    peer,
                    asked,
                    facts,
                    rest,
                })
            }
        }
    }

    /// `call` answered on this thread, blocking: on the blocking pool, or on the caller's
    /// thread for [`respond`](Self::respond), where a runtime's async plane is waited for
    /// ([`blocking::wait`]). A listing or a resumed read stops once the claim's client is gone.
    /// A read or redeem an inline attempt started is finished from the file it opened.
    fn answer_blocking(&self, call: Call, generation: u64, claim: &Claim) -> Response<PlaneBody> {
        let outcome = match call {
            Call::Answered(outcome) => return self.render(outcome, generation, claim),
            Call::List(files, ask) => {
                if ask.query.watch {
                    let refusal = Refusal::new(
                        Code::InvalidRequest,
                        "a watch stream needs the async router",
                    );
                    return self.render(
                        Outcome::Listing {
                            result: Err(refusal),
                            if_none_match: ask.if_none_match,
                            extra: ListExtra::of(&ask.query),
                        },
                        generation,
                        claim,
                    );
                }
                let listed = self.list_now(&files, generation, &claim.cancel);
                return self.render_listing(&files, listed, ask, generation, claim);
            }
            Call::Read {
                files,
                path,
                recorded,
                if_none_match,
                rest,
            } => {
                // Only the crate's own plane, which reads inline, hands over a read it started.
                let result = match (rest, &files.inline) {
                    (Some(rest), _) => rest.finish(&claim.cancel),
                    (None, Some(inline)) => inline.read_blocking(&path, &if_none_match),
                    (_, None) => blocking::wait(files.plane.read(&path, &if_none_match)),
                };
                let outcome = read_outcome(&files, recorded, result, &if_none_match);
                return self.render(outcome, generation, claim);
            }
            Call::Redeem {
                peer,
                asked,
                facts,
                rest,
            } => {
                let outcome = match (rest, &peer.inline) {
                    (Some(rest), _) => rest.finish(),
                    (None, Some(inline)) => {
                        asked.with_request(|request| inline.redeem_blocking(request))
                    }
                    (_, None) => {
                        asked.with_request(|request| blocking::wait(peer.plane.redeem(request)))
                    }
                };
                Outcome::Redeem { facts, outcome }
            }
        };
        self.render(outcome, generation, claim)
    }

    /// `call`, a runtime's own plane's ([`Call::awaits`]), answered on this async worker: the
    /// plane's future awaited, its outcome rendered here. A listing gets the claim's
    /// [`Cancel`], raised when this future is dropped, as the blocking calls do.
    async fn answer_async(
        &self,
        call: Call,
        generation: u64,
        claim: &Claim,
    ) -> Response<PlaneBody> {
        let outcome = match call {
            Call::Answered(outcome) => return self.render(outcome, generation, claim),
            Call::List(files, ask) => {
                let listed = match files.plane.list(&claim.cancel).await {
                    Ok(listing) => Ok(self.listed(&files, listing, generation)),
                    Err(refusal) => Err(refusal),
                };
                return self.render_listing(&files, listed, ask, generation, claim);
            }
            Call::Read {
                files,
                path,
                recorded,
                if_none_match,
                ..
            } => {
                let result = files.plane.read(&path, &if_none_match).await;
                let outcome = read_outcome(&files, recorded, result, &if_none_match);
                return self.render(outcome, generation, claim);
            }
            Call::Redeem {
                peer, asked, facts, ..
            } => {
                let audience: Vec<&[u8]> = asked.audience.iter().map(Vec::as_slice).collect();
                let proof: Vec<&[u8]> = asked.proof.iter().map(Vec::as_slice).collect();
                let request = RedeemRequest {
                    token: &asked.token,
                    audience: &audience,
                    proof: &proof,
                };
                let outcome = peer.plane.redeem(request).await;
                Outcome::Redeem { facts, outcome }
            }
        };
        self.render(outcome, generation, claim)
    }

    /// Renders `outcome` into its response and the request's one trace line (D-6.2), written
    /// before the response is returned; a failed write turns any answer into `500 io_error`
    /// (D-6.4). Every answer of the router's comes through here.
    ///
    /// Under a shared `claim`, the line is written only if nobody wrote it first, and as
    /// `client_gone` once the client left (D-4.6.1).
    fn render(&self, outcome: Outcome<'_>, generation: u64, claim: &Claim) -> Response<PlaneBody> {
        let outcome = if claim.client_gone() {
            outcome.given_up()
        } else {
            outcome
        };
        if !claim.take() {
            // The line was written as the client left; this answer is never sent.
            return response::refusal(Code::ClientGone, Some(generation), None);
        }
        let containment_achieved = self.containment();
        let (line, body) = match outcome {
            Outcome::Foreign => return response::refusal(Code::NotFound, None, None),
            Outcome::AgentCard {
                method_allowed: true,
            } => return response::json(self.mounted.agent_card.clone()),
            Outcome::AgentCard {
                method_allowed: false,
            } => return response::card_method_not_allowed(),
            Outcome::NoAgent => return response::json_rpc_no_agent(),
            Outcome::Listing {
                result,
                if_none_match,
                extra,
            } => {
                let counts = result.as_ref().ok().map(|(_, answer)| match answer {
                    ListAnswer::Full(listed) => {
                        let listing = listed.body.listing();
                        (listing.len() as u64, listing.total_bytes())
                    }
                    ListAnswer::Unchanged {
                        entry_count,
                        total_bytes,
                        ..
                    } => (*entry_count, *total_bytes),
                });
                let (body, outcome, reason) =
                    Body::of(result.map(|(scope, answer)| match answer {
                        ListAnswer::Full(listed) => {
                            let hex = crate::wire::etag::hex_of(&listed.etag).unwrap_or_default();
                            if if_none_match.matches(hex) {
                                Body::ListingNotModified(scope, listed.etag)
                            } else {
                                Body::Listing(scope, listed)
                            }
                        }
                        ListAnswer::Unchanged { etag, .. } => Body::ListingNotModified(scope, etag),
                    }));
                let line = extra.line(ResourceList {
                    root: self.files_root(),
                    entry_count: counts.map(|c| c.0),
                    total_bytes: counts.map(|c| c.1),
                    generation,
                    containment_achieved,
                    outcome,
                    reason,
                });
                (line, body)
            }
            Outcome::Watch {
                scope,
                current,
                body,
            } => {
                let line = Line::ListWaited(ResourceListWaited {
                    event: ResourceList {
                        root: self.files_root(),
                        entry_count: Some(current.entry_count),
                        total_bytes: Some(current.total_bytes),
                        generation,
                        containment_achieved,
                        outcome: "ok",
                        reason: None,
                    },
                    waited_ms: None,
                    watch: true,
                });
                (line, Body::Watch(scope, body))
            }
            Outcome::Read { path, result } => {
                let (body, outcome, reason) = Body::of(result.map(|(scope, read)| match read {
                    ReadOutcome::File(file) => Body::File(file, Some(scope)),
                    ReadOutcome::Stream(file) => Body::Stream(file, scope),
                    ReadOutcome::NotModified { sha256, mtime_ms } => Body::NotModified {
                        sha256,
                        mtime_ms,
                        scope,
                    },
                }));
                let line = Line::Read(ResourceRead {
                    path: Some(path),
                    outcome,
                    bytes: body.bytes(),
                    sha256: body.sha256(),
                    generation,
                    containment_achieved,
                    reason,
                });
                (line, body)
            }
            Outcome::Redeem { facts, outcome } => {
                let (body, line_outcome, reason) =
                    Body::of(outcome.result.map(|file| Body::File(file, None)));
                let line = Line::Redeem(WithAudienceProof {
                    event: PeerHandleRedeem {
                        handle_id: facts.handle_id,
                        path: outcome.path,
                        generation,
                        audience_asserted: facts.audience_asserted,
                        bytes: body.bytes(),
                        sha256: body.sha256(),
                        outcome: line_outcome,
                        reason,
                    },
                    audience_proof: outcome.audience_proof,
                });
                (line, body)
            }
        };
        let handle_id = line.handle_id();
        if let Err(e) = line.emit(&self.mounted.tracer) {
            tracing::error!("trace write failed, refusing the request: {e}");
            return response::refusal(Code::IoError, Some(generation), handle_id);
        }
        body.into_response(generation, containment_achieved, handle_id)
    }

    /// Counts an answer given and logs it, with the path as a trace line records it, tokens
    /// redacted: a log holds no token (D-15.1).
    fn finish(
        &self,
        response: Response<PlaneBody>,
        method: &Method,
        raw_path: &str,
    ) -> Response<PlaneBody> {
        self.answered.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            method = %method,
            path = %crate::redact::redact_tokens(&crate::redact::revealing_tokens(raw_path)),
            status = response.status().as_u16(),
            "answered"
        );
        response
    }

    fn containment(&self) -> &'static str {
        self.mounted.containment.as_str()
    }

    /// The operator plane's root as declared, for a `resource_list` line.
    fn files_root(&self) -> Option<String> {
        let files = self.mounted.files.as_ref();
        files.map(|files| files.plane.scope().root.declared().to_owned())
    }

    /// A listing's outcome rendered: its `200`, or its `304` when `ask`'s `If-None-Match`
    /// holds its etag.
    fn render_listing(
        &self,
        files: &FilesMount,
        listed: Result<Listed, Refusal>,
        ask: ListAsk,
        generation: u64,
        claim: &Claim,
    ) -> Response<PlaneBody> {
        let scope = files.plane.scope();
        self.render(
            Outcome::Listing {
                result: listed.map(|listed| (scope, ListAnswer::Full(listed))),
                if_none_match: ask.if_none_match,
                extra: ListExtra::of(&ask.query),
            },
            generation,
            claim,
        )
    }

    /// Lists the operator plane now (blocking: the crate's plane by its blocking call, a
    /// runtime's by waiting for its future, [`blocking::wait`]) and builds the body at
    /// `generation`, with its etag (D-17.1).
    ///
    /// # Errors
    /// The plane's refusal.
    fn list_now(
        &self,
        files: &FilesMount,
        generation: u64,
        cancel: &Cancel,
    ) -> Result<Listed, Refusal> {
        let listing = match &files.inline {
            Some(inline) => inline.list_blocking(cancel)?,
            None => blocking::wait(files.plane.list(cancel))?,
        };
        Ok(self.listed(files, listing, generation))
    }

    /// `listing` as its body at `generation`, with its etag (D-17.1).
    fn listed(
        &self,
        files: &FilesMount,
        listing: crate::planes::Listing,
        generation: u64,
    ) -> Listed {
        let scope = files.plane.scope();
        let head = ListingHead {
            root: scope.root.declared(),
            max_bytes: scope.max_bytes,
            generation,
            containment_achieved: self.containment(),
        };
        let body = ListingBody::new(listing, &head);
        let etag = crate::wire::etag::of_digest(&body.sha256());
        Listed { body, etag }
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

/// The two checks every plane route makes before its plane is asked, in this order (D-4.2):
/// the method is `GET` (else `method_not_allowed`), and the plane is declared (else the
/// `undeclared` code and reason).
fn admit<'m, P: ?Sized, I: ?Sized>(
    method: &Method,
    mount: &'m Option<Mount<P, I>>,
    undeclared: (Code, &'static str),
) -> Result<&'m Mount<P, I>, Refusal> {
    if method != Method::GET {
        return Err(Refusal::new(
            Code::MethodNotAllowed,
            format!("method {method}"),
        ));
    }
    mount
        .as_ref()
        .ok_or_else(|| Refusal::new(undeclared.0, undeclared.1))
}

/// Decodes the `<relpath>` of `GET /resources/files/<relpath>` (query already cut) once, in
/// the order of D-2.2 and D-2.3: the path the trace line records (decoded when it decodes, else
/// as sent) and the [`RelPath`] the plane gets, or the `outside_root` refusal. When a path that
/// does not decode reveals a handle token once its valid escapes are decoded, that decoding is
/// recorded instead, so the sink's redaction sees the token (D-6.5).
fn decode_once(raw: &str) -> (String, Result<RelPath, Refusal>) {
    match percent_decode_strict(raw) {
        Ok(decoded) => {
            let path = RelPath::parse_canonical(&decoded);
            (decoded, path)
        }
        Err(refusal) => (crate::redact::revealing_tokens(raw), Err(refusal)),
    }
}

/// A read's outcome for [`Router::render`]: the plane may ignore the condition, so a file whose
/// etag matches becomes the `304` here, whichever plane read it (D-13.1).
fn read_outcome<'p>(
    files: &'p FilesMount,
    recorded: String,
    result: Result<ReadOutcome, Refusal>,
    if_none_match: &IfNoneMatch,
) -> Outcome<'p> {
    Outcome::Read {
        path: recorded,
        result: result.map(|read| (files.plane.scope(), read.under(if_none_match))),
    }
}

/// The one plane call a request makes, owning all it needs so that it can move to the blocking
/// pool; or the outcome itself, when the router answers without a plane (a route of no plane, a
/// refused method, an undeclared plane, a path that does not decode).
enum Call {
    /// Answered without a plane.
    Answered(Outcome<'static>),
    /// [`ResourcePlane::list`], and what the listing request asks beyond it.
    List(FilesMount, ListAsk),
    /// [`ResourcePlane::read`] of `path`; the trace line records `recorded`.
    Read {
        files: FilesMount,
        path: RelPath,
        recorded: String,
        if_none_match: IfNoneMatch,
        /// The rest of the read an inline attempt started, with its file opened.
        rest: Option<ReadRest>,
    },
    /// [`PeerPlane::redeem`].
    Redeem {
        peer: PeerMount,
        asked: RedeemAsked,
        facts: RedeemFacts,
        /// The rest of the redeem an inline attempt checked, with its file opened.
        rest: Option<RedeemRest>,
    },
}

impl Call {
    /// Whether this is a call to a runtime's own plane (mounted without an inline face), which
    /// the router awaits on its async worker.
    fn awaits(&self) -> bool {
        match self {
            Call::Answered(_) => false,
            Call::List(files, _) | Call::Read { files, .. } => files.inline.is_none(),
            Call::Redeem { peer, .. } => peer.inline.is_none(),
        }
    }
}

/// What a listing request asks beyond the listing (D-17).
struct ListAsk {
    query: ListingQuery,
    if_none_match: IfNoneMatch,
    last_event_id: Option<Vec<u8>>,
}

/// A listing's answer: the listing, or (a long-poll whose time ran out) only what its `304`
/// needs.
enum ListAnswer {
    /// The listing: `200`, or `304` when `If-None-Match` holds its etag.
    Full(Listed),
    /// Known unchanged: `304`.
    Unchanged {
        etag: String,
        entry_count: u64,
        total_bytes: u64,
    },
}

/// A listing with its body built and its etag computed.
struct Listed {
    body: ListingBody,
    /// `sha256:<hex>` of the body.
    etag: String,
}

/// What a listing's trace line adds for a long-poll or a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ListExtra {
    /// `waited_ms`, for a long-poll.
    waited_ms: Option<u64>,
    /// A stream.
    watch: bool,
}

impl ListExtra {
    /// A listing answered at once: `waited_ms: 0` when it asked to wait.
    fn of(query: &ListingQuery) -> ListExtra {
        ListExtra {
            waited_ms: query.wait.map(|_| 0),
            watch: query.watch,
        }
    }

    /// The line for `event`: the plain `resource_list`, or with `waited_ms` and `watch`.
    fn line(self, event: ResourceList) -> Line {
        if self.waited_ms.is_none() && !self.watch {
            Line::List(event)
        } else {
            Line::ListWaited(ResourceListWaited {
                event,
                waited_ms: self.waited_ms,
                watch: self.watch,
            })
        }
    }
}

/// What [`Router::answer_inline`] did with a call.
enum Inline {
    /// Answered on the async worker.
    Answered(Response<PlaneBody>),
    /// Left for the blocking pool, nothing read, nothing traced: untouched, or with the file an
    /// inline attempt opened.
    Deferred(Call),
}

/// A redeem's request, owned.
struct RedeemAsked {
    token: String,
    audience: Vec<Vec<u8>>,
    proof: Vec<Vec<u8>>,
}

impl RedeemAsked {
    /// `f` applied to this redeem as a [`RedeemRequest`].
    fn with_request<R>(&self, f: impl FnOnce(RedeemRequest<'_>) -> R) -> R {
        let audience: Vec<&[u8]> = self.audience.iter().map(Vec::as_slice).collect();
        let proof: Vec<&[u8]> = self.proof.iter().map(Vec::as_slice).collect();
        f(RedeemRequest {
            token: &self.token,
            audience: &audience,
            proof: &proof,
        })
    }
}

/// What a request on a peer route says itself, for its `peer_handle_redeem` line whatever the
/// plane answers.
#[derive(Clone)]
struct RedeemFacts {
    /// The handle id of the token sent; `None` when no token was sent.
    handle_id: Option<String>,
    /// The first `x-murmur-audience`, normalised; `None` when absent.
    audience_asserted: Option<String>,
}

/// What the router answers one request with, whichever plane (if any) answered: rendered by
/// [`Router::render`] into the response and the request's trace line. `'p` is the plane whose
/// scope the response echoes.
enum Outcome<'p> {
    /// No route of the router's: `404`, no trace line.
    Foreign,
    /// The agent card for `GET`, else `405` with `allow: GET`; no trace line.
    AgentCard { method_allowed: bool },
    /// A `POST` to the card's JSON-RPC endpoint: the JSON-RPC error `-32601` (D-4.7.1); no
    /// trace line.
    NoAgent,
    /// The listing route: `resource_list`; a `304` when `if_none_match` holds its etag.
    Listing {
        result: Result<(&'p ExportScope, ListAnswer), Refusal>,
        if_none_match: IfNoneMatch,
        extra: ListExtra,
    },
    /// A watch stream opened on the listing route: `resource_list` with `watch: true`.
    Watch {
        scope: &'p ExportScope,
        current: Current,
        body: WatchBody,
    },
    /// The read route and any other route under `/resources`: `resource_read`, recording
    /// `path`.
    Read {
        path: String,
        result: Result<(&'p ExportScope, ReadOutcome), Refusal>,
    },
    /// The peer routes: `peer_handle_redeem`.
    Redeem {
        facts: RedeemFacts,
        outcome: RedeemOutcome,
    },
}

impl Outcome<'_> {
    /// The outcome of a request whose client left before its answer was ready: the same
    /// route's refusal `client_gone`, keeping what the request said of itself (a redeem's path
    /// once its MAC verified).
    fn given_up(self) -> Self {
        match self {
            Outcome::Listing {
                if_none_match,
                extra,
                ..
            } => Outcome::Listing {
                result: Err(client_gone()),
                if_none_match,
                extra,
            },
            Outcome::Read { path, .. } => Outcome::Read {
                path,
                result: Err(client_gone()),
            },
            Outcome::Redeem { facts, outcome } => Outcome::Redeem {
                facts,
                outcome: RedeemOutcome {
                    result: Err(client_gone()),
                    ..outcome
                },
            },
            other @ (Outcome::Foreign
            | Outcome::AgentCard { .. }
            | Outcome::NoAgent
            | Outcome::Watch { .. }) => other,
        }
    }
}

/// The refusal recorded for a request whose client left before its answer was ready.
fn client_gone() -> Refusal {
    Refusal::new(
        Code::ClientGone,
        "the client left before its answer was ready; its work was stopped or never started",
    )
}

/// What a deferred request's trace line needs when its client leaves before the work has
/// answered: its route and what it said of itself.
enum Pending {
    List(ListExtra),
    Read(String),
    Redeem(RedeemFacts),
    /// Answered without a plane: never deferred.
    Nothing,
}

impl Pending {
    fn of(call: &Call) -> Pending {
        match call {
            Call::List(_, ask) => Pending::List(ListExtra::of(&ask.query)),
            Call::Read { recorded, .. } => Pending::Read(recorded.clone()),
            Call::Redeem { facts, .. } => Pending::Redeem(facts.clone()),
            Call::Answered(_) => Pending::Nothing,
        }
    }

    /// The `client_gone` outcome of the request.
    fn given_up(self) -> Option<Outcome<'static>> {
        Some(match self {
            Pending::List(extra) => Outcome::Listing {
                result: Err(client_gone()),
                if_none_match: IfNoneMatch::absent(),
                extra,
            },
            Pending::Read(path) => Outcome::Read {
                path,
                result: Err(client_gone()),
            },
            Pending::Redeem(facts) => Outcome::Redeem {
                facts,
                outcome: RedeemOutcome::refused(client_gone()),
            },
            Pending::Nothing => return None,
        })
    }
}

/// Who writes the one trace line of a request whose work runs on the blocking pool: the work,
/// when it answers, or the request's future, when it is dropped first (the client left). The
/// first to [`take`](Self::take) the claim writes it.
#[derive(Clone)]
struct Claim {
    taken: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Raised when the client left.
    cancel: Cancel,
}

impl Claim {
    /// The claim of a request whose caller always waits for the answer: never contested.
    fn sole() -> Self {
        Claim {
            taken: None,
            cancel: Cancel::never(),
        }
    }

    /// A claim contested by the request's future, which raises `cancel` when dropped.
    fn shared(cancel: Cancel) -> Self {
        Claim {
            taken: Some(Arc::default()),
            cancel,
        }
    }

    /// Whether the caller is the first to take the claim, and so writes the line.
    fn take(&self) -> bool {
        self.taken
            .as_ref()
            .is_none_or(|taken| !taken.swap(true, Ordering::AcqRel))
    }

    /// Whether the request's client left.
    fn client_gone(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

/// Writes a deferred request's `client_gone` line when the request's future is dropped before
/// its work answered, unless the work wrote its line first.
struct Vigil<'r> {
    router: &'r Router,
    pending: Pending,
    generation: u64,
    /// `None` once the work answered.
    claim: Option<Claim>,
}

impl Vigil<'_> {
    /// The work answered: nothing to write.
    fn settle(mut self) {
        self.claim = None;
    }
}

impl Drop for Vigil<'_> {
    fn drop(&mut self) {
        let Some(claim) = self.claim.take() else {
            return;
        };
        if !claim.take() {
            return;
        }
        let pending = std::mem::replace(&mut self.pending, Pending::Nothing);
        if let Some(outcome) = pending.given_up() {
            self.router.render(outcome, self.generation, &Claim::sole());
        }
    }
}

/// A response's content, whichever route answered.
enum Body<'p> {
    /// `200`: a listing of the plane whose scope it is.
    Listing(&'p ExportScope, Listed),
    /// `304`: the listing's etag matched.
    ListingNotModified(&'p ExportScope, String),
    /// `200`: a watch stream.
    Watch(&'p ExportScope, WatchBody),
    /// `200`: a file, read from the operator plane whose scope it is, or redeemed (`None`).
    File(ServedFile, Option<&'p ExportScope>),
    /// `200`: a file the operator plane whose scope it is streams, vouching for its hash.
    Stream(StreamedFile, &'p ExportScope),
    /// `304`.
    NotModified {
        sha256: String,
        mtime_ms: i64,
        scope: &'p ExportScope,
    },
    /// A refusal, whose wire form comes from its code alone (D-7.3).
    Refused(Code),
}

impl<'p> Body<'p> {
    /// The body of `result`, the trace line's `outcome` for it and the refusal's `reason`.
    fn of(result: Result<Body<'p>, Refusal>) -> (Body<'p>, &'static str, Option<String>) {
        match result {
            Ok(body @ (Body::NotModified { .. } | Body::ListingNotModified(..))) => {
                (body, "not_modified", None)
            }
            Ok(body) => (body, "ok", None),
            Err(refusal) => (
                Body::Refused(refusal.code),
                refusal.code.as_str(),
                Some(refusal.reason),
            ),
        }
    }

    /// A read or redeem line's `bytes`: the bytes served, 0 for a `304`, null otherwise.
    fn bytes(&self) -> Option<u64> {
        match self {
            Body::File(file, _) => Some(file.bytes.len() as u64),
            Body::Stream(file, _) => Some(file.size_bytes()),
            Body::NotModified { .. } | Body::Refused(Code::ClientGone) => Some(0),
            _ => None,
        }
    }

    /// A read or redeem line's `sha256`: the file's, or null.
    fn sha256(&self) -> Option<String> {
        match self {
            Body::File(file, _) => Some(file.sha256.clone()),
            Body::Stream(file, _) => Some(file.sha256().to_owned()),
            Body::NotModified { sha256, .. } => Some(sha256.clone()),
            _ => None,
        }
    }

    /// The response: a refusal's from its code, the generation and the handle id sent; any
    /// other with the plane headers (D-4.4, D-4.5), `x-murmur-export-root` from the operator
    /// plane's scope and `x-murmur-handle-id` on a redeem.
    fn into_response(
        self,
        generation: u64,
        containment_achieved: &'static str,
        handle_id: Option<&str>,
    ) -> Response<PlaneBody> {
        let (mut response, scope) = match self {
            Body::Refused(code) => return response::refusal(code, Some(generation), handle_id),
            Body::Listing(scope, listed) => (
                response::listing_with_etag(listed.body, &listed.etag),
                Some(scope),
            ),
            Body::ListingNotModified(scope, etag) => {
                (response::listing_not_modified(&etag), Some(scope))
            }
            Body::Watch(scope, body) => {
                (response::event_stream(PlaneBody::watch(body)), Some(scope))
            }
            Body::File(file, scope) => (
                response::file(PlaneBody::new(file.bytes), &file.sha256, file.mtime_ms),
                scope,
            ),
            Body::Stream(file, scope) => {
                let (sha256, mtime_ms) = (file.sha256().to_owned(), file.mtime_ms());
                let body = PlaneBody::streamed(file.into_body());
                (response::file(body, &sha256, mtime_ms), Some(scope))
            }
            Body::NotModified {
                sha256,
                mtime_ms,
                scope,
            } => (response::not_modified(&sha256, mtime_ms), Some(scope)),
        };
        let headers = response.headers_mut();
        headers.insert(GENERATION, HeaderValue::from(generation));
        headers.insert(CONTAINMENT, HeaderValue::from_static(containment_achieved));
        if let Some(scope) = scope {
            headers.insert(EXPORT_ROOT, header_text(scope.root.declared()));
        }
        if let Some(id) = handle_id {
            headers.insert(HANDLE_ID, header_text(id));
        }
        response
    }
}

/// The one trace line a request under `/resources` leaves (D-6.2).
enum Line {
    List(ResourceList),
    ListWaited(ResourceListWaited),
    Read(ResourceRead),
    Redeem(WithAudienceProof<PeerHandleRedeem>),
}

impl Line {
    /// Writes the line.
    ///
    /// # Errors
    /// The sink's error; the caller fails closed (D-6.4).
    fn emit(&self, tracer: &Tracer) -> io::Result<()> {
        match self {
            Line::List(event) => tracer.emit(event),
            Line::ListWaited(event) => tracer.emit(event),
            Line::Read(event) => tracer.emit(event),
            Line::Redeem(event) => tracer.emit(event),
        }
    }

    /// The handle id a redeem's refusal echoes.
    fn handle_id(&self) -> Option<&str> {
        match self {
            Line::Redeem(event) => event.event.handle_id.as_deref(),
            Line::List(_) | Line::ListWaited(_) | Line::Read(_) => None,
        }
    }
}

/// A byte a base path may hold in a segment: an RFC 3986 `pchar` other than `%` (unreserved and
/// sub-delims, `:` and `@`).
fn is_plain_path_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
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

/// A [`Router`] in front of a runtime's own service ([`Router::with_fallback`]): a request for a
/// path the router [`answers`](Router::answers) goes to the router, any other to the fallback,
/// unchanged. The decision is on the raw path, as routing is (D-4.2).
///
/// A tower service for `http::Request<B>` when the fallback is one (and is `Clone + Send +
/// 'static`, with a `Send` future): its response body is
/// [`Either`]`<`[`PlaneBody`]`, FB>` (`Left` from the planes, `Right` from the fallback), its error the
/// fallback's. It is always ready: the fallback is cloned for each request it gets and made
/// ready then, so a request for the planes never waits on the fallback's readiness.
///
/// ```
/// use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
/// use http_body_util::Either;
/// use std::sync::Arc;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # let manifest = Manifest::from_yaml(
/// #     "name: reporter\nexports: { files: { root: out/, mode: read-only } }",
/// # ).unwrap().manifest;
/// # let fs = Arc::new(MemoryFilesystem::new());
/// # fs.add_file("out/report.md", "hello", 1_700_000_000_000);
/// # let trace = Arc::new(RecordingTraceSink::new());
/// # let capsule = Capsule::launch(
/// #     &manifest,
/// #     CapsuleConfig::new("http://127.0.0.1:41234").unwrap(),
/// #     Backends { fs, clock: Arc::new(ManualClock::new(0)), keys: None, trace },
/// # ).unwrap();
/// // The runtime's own routes: anything the planes do not claim.
/// let own = tower::service_fn(|request: http::Request<String>| async move {
///     Ok::<_, std::convert::Infallible>(http::Response::new(format!("runtime: {}", request.uri())))
/// });
/// let app = capsule.router().with_fallback(own);
///
/// let planes = app.clone().oneshot(http::Request::get("/resources/files/report.md")
///     .body(String::new()).unwrap()).await.unwrap();
/// assert_eq!(planes.status(), 200);
/// assert!(matches!(planes.body(), Either::Left(_)));
///
/// let own = app.oneshot(http::Request::get("/healthz").body(String::new()).unwrap())
///     .await.unwrap();
/// assert!(matches!(own.into_body(), Either::Right(text) if text == "runtime: /healthz"));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WithFallback<F> {
    router: Router,
    fallback: F,
}

impl<F> WithFallback<F> {
    /// The router requests for the planes go to.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The service every other request goes to.
    pub fn fallback(&self) -> &F {
        &self.fallback
    }
}

/// The future of [`WithFallback`]'s `call`.
pub(crate) type WithFallbackFuture<FB, E> =
    Pin<Box<dyn Future<Output = Result<Response<Either<PlaneBody, FB>>, E>> + Send + 'static>>;

impl<B, F, FB> Service<Request<B>> for WithFallback<F>
where
    B: Send + 'static,
    F: Service<Request<B>, Response = Response<FB>> + Clone + Send + 'static,
    F::Future: Send + 'static,
    F::Error: 'static,
    FB: 'static,
{
    type Response = Response<Either<PlaneBody, FB>>;
    type Error = F::Error;
    type Future = WithFallbackFuture<FB, F::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), F::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if self.router.answers(request.uri().path()) {
            let planes = Service::call(&mut self.router, request);
            return Box::pin(async move {
                let Ok(response) = planes.await;
                Ok(response.map(Either::Left))
            });
        }
        let mut fallback = self.fallback.clone();
        Box::pin(async move {
            std::future::poll_fn(|cx| fallback.poll_ready(cx)).await?;
            let response = fallback.call(request).await?;
            Ok(response.map(Either::Right))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::decode_once;
    use crate::refusal::Code;

    #[test]
    fn a_read_path_is_decoded_once_for_the_plane_and_the_trace() {
        let (recorded, path) = decode_once("a%20b/c");
        assert_eq!(recorded, "a b/c");
        assert_eq!(path.unwrap().as_str(), "a b/c");
        // Decodes, but is refused lexically: recorded decoded.
        let (recorded, path) = decode_once("a/%2e%2e/b");
        assert_eq!(recorded, "a/../b");
        assert_eq!(path.unwrap_err().code, Code::OutsideRoot);
        // Does not decode: recorded as sent.
        let (recorded, path) = decode_once("%C3");
        assert_eq!(recorded, "%C3");
        assert_eq!(path.unwrap_err().code, Code::OutsideRoot);
        // Does not decode, but its valid escapes reveal a token: recorded with them decoded,
        // so the sink's redaction sees it (D-6.5).
        let (recorded, path) = decode_once("x/mh1%2Ea.b%zz");
        assert_eq!(recorded, "x/mh1.a.b%zz");
        assert_eq!(path.unwrap_err().code, Code::OutsideRoot);
    }
}
