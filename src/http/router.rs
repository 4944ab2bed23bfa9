//! The router: HTTP as a function (design habit 5). Routing is on the raw path, the method is
//! checked first, and every request under `/resources` leaves exactly one trace line before its
//! response leaves, or fails closed with `500 io_error` (D-4, D-6.3, D-6.4).
//!
//! The router is a [`tower_service::Service`] for a request of any body type, so a runtime can
//! nest it in its own app (axum's `nest_service`), mount it under a base path of its own
//! ([`Router::with_base_path`]), or put it beside its own routes ([`Router::with_fallback`]).

use super::body::PlaneBody;
use super::response::{self, AUDIENCE, CONTAINMENT, EXPORT_ROOT, GENERATION, HANDLE_ID, PROOF};
use crate::events::{PeerHandleRedeem, ResourceList, ResourceRead, WithAudienceProof};
use crate::generation::Generation;
use crate::path::{percent_decode_strict, strip_query};
use crate::planes::{
    Cancel, IfNoneMatch, ListingBody, ListingHead, PeerPlane, ReadMode, ReadOutcome, ResourcePlane,
};
use crate::refusal::{Code, Refusal};
use crate::scope::Containment;
use crate::trace::{TraceEvent, Tracer};
use http::header::{HeaderValue, IF_NONE_MATCH};
use http::{Method, Request, Response};
use http_body_util::Either;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tower_service::Service;

/// The largest file a read or redeem serves on the async worker that received it; larger files,
/// and every listing, move to the blocking pool. Small reads are cheaper inline than the two
/// context switches of a hand-off.
pub(crate) const INLINE_READ_LIMIT: u64 = 256 * 1024;

/// The request headers the planes read, as sent, each value in order.
struct Asked<'a> {
    /// `x-murmur-audience`.
    audience: &'a [&'a [u8]],
    /// `x-murmur-proof`.
    proof: &'a [&'a [u8]],
    /// `If-None-Match`, parsed (D-13).
    if_none_match: &'a IfNoneMatch,
}

/// Where a raw request path leads (D-4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/resources/files`.
    Listing,
    /// `/resources/files/<raw relpath>`.
    Read(&'a str),
    /// `/resources/peer` or `/resources/peer/`.
    PeerIndex,
    /// `/resources/peer/<raw token>`.
    Redeem(&'a str),
    /// Anything else under `/resources`.
    OtherResource,
    /// `/.well-known/agent-card.json`.
    AgentCard,
    /// Not this crate's: a runtime mounting the router may answer it itself.
    Foreign,
}

impl<'a> Route<'a> {
    /// Classifies a raw request path (its query is cut first, D-2.1).
    pub fn of(raw_path: &'a str) -> Route<'a> {
        let path = strip_query(raw_path);
        if path == "/.well-known/agent-card.json" {
            return Route::AgentCard;
        }
        let Some(rest) = path.strip_prefix("/resources") else {
            return Route::Foreign;
        };
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Route::Foreign;
        }
        if rest == "/files" {
            Route::Listing
        } else if let Some(relpath) = rest.strip_prefix("/files/") {
            Route::Read(relpath)
        } else if rest == "/peer" || rest == "/peer/" {
            Route::PeerIndex
        } else if let Some(token) = rest.strip_prefix("/peer/") {
            Route::Redeem(token)
        } else {
            Route::OtherResource
        }
    }
}

/// The planes, the trace and the counter a router answers from.
#[derive(Debug)]
pub(crate) struct Mounted {
    pub(crate) files: Option<Arc<dyn ResourcePlane>>,
    pub(crate) peer: Option<Arc<dyn PeerPlane>>,
    pub(crate) tracer: Tracer,
    pub(crate) generation: Generation,
    pub(crate) containment: Containment,
    pub(crate) agent_card: Vec<u8>,
}

/// Answers requests for the capsule's `/resources/` planes and its agent card. Cheap to clone
/// (every clone shares the planes, the trace and the counts), `Send`, `Sync` and `'static`.
///
/// Three ways to mount it:
///
/// * as a [`tower_service::Service`] for `http::Request<B>` of any body type `B` (the body is
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

/// The future of the router's [`Service::call`]: it holds no part of the request (the headers
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
    audience: Vec<Vec<u8>>,
    proof: Vec<Vec<u8>>,
    if_none_match: IfNoneMatch,
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
            audience: values(AUDIENCE),
            proof: values(PROOF),
            if_none_match,
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
    fn local_path<'a>(&self, raw_path: &'a str) -> &'a str {
        let Some(base) = self.base.as_deref() else {
            return raw_path;
        };
        match raw_path.strip_prefix(base) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => "",
        }
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

    /// Answers one request. File I/O and the trace write run on the blocking pool; the request
    /// body is never read. The base path, if any, is cut off first
    /// ([`with_base_path`](Self::with_base_path)).
    pub async fn handle<B>(&self, request: Request<B>) -> Response<PlaneBody> {
        let asking = Asking::of(self, &request);
        drop(request);
        self.answer(asking).await
    }

    /// Answers what was asked: inline when that needs no file I/O beyond a small read, else
    /// on the blocking pool.
    async fn answer(&self, asking: Asking) -> Response<PlaneBody> {
        let Asking {
            method,
            path,
            audience,
            proof,
            if_none_match,
        } = asking;
        {
            let audience: Vec<&[u8]> = audience.iter().map(Vec::as_slice).collect();
            let proof: Vec<&[u8]> = proof.iter().map(Vec::as_slice).collect();
            let asked = Asked {
                audience: &audience,
                proof: &proof,
                if_none_match: &if_none_match,
            };
            let inline = ReadMode::Inline {
                limit: INLINE_READ_LIMIT,
            };
            let never = Cancel::never();
            if let Some(response) = self.respond_in(&method, &path, &asked, inline, &never) {
                return response;
            }
        }
        let router = self.clone();
        // Dropping this future (the connection is gone) tells the blocking work to stop.
        let cancel = Cancel::default();
        let cancel_on_drop = cancel.on_drop();
        let response = tokio::task::spawn_blocking(move || {
            let audience: Vec<&[u8]> = audience.iter().map(Vec::as_slice).collect();
            let proof: Vec<&[u8]> = proof.iter().map(Vec::as_slice).collect();
            let asked = Asked {
                audience: &audience,
                proof: &proof,
                if_none_match: &if_none_match,
            };
            router
                .respond_in(&method, &path, &asked, ReadMode::Blocking, &cancel)
                .expect("a blocking answer is always given")
        })
        .await
        .unwrap_or_else(|_| response::refusal(Code::IoError, None, None));
        cancel_on_drop.disarm();
        response
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
    /// only a redeem reads them.
    pub fn respond_with_proof(
        &self,
        method: &Method,
        raw_path: &str,
        audience: &[&[u8]],
        proof: &[&[u8]],
    ) -> Response<PlaneBody> {
        let asked = Asked {
            audience,
            proof,
            if_none_match: &IfNoneMatch::absent(),
        };
        self.respond_in(
            method,
            self.local_path(raw_path),
            &asked,
            ReadMode::Blocking,
            &Cancel::never(),
        )
        .expect("a blocking answer is always given")
    }

    /// Answers one request for `raw_path` (relative to the base path) in `mode`; `None`
    /// (nothing traced, nothing read) when an inline answer would have to read a large file,
    /// list the root or check a redeem proof. A listing stops when `cancel` is raised.
    fn respond_in(
        &self,
        method: &Method,
        raw_path: &str,
        asked: &Asked<'_>,
        mode: ReadMode,
        cancel: &Cancel,
    ) -> Option<Response<PlaneBody>> {
        let (audience, proof) = (asked.audience, asked.proof);
        let generation = self.mounted.generation.current();
        let response = match Route::of(raw_path) {
            Route::Foreign => response::refusal(Code::NotFound, None, None),
            Route::AgentCard => {
                if method == Method::GET {
                    response::json(self.mounted.agent_card.clone())
                } else {
                    response::refusal(Code::MethodNotAllowed, None, None)
                }
            }
            Route::Listing if mode != ReadMode::Blocking && method == Method::GET => return None,
            Route::Listing => self.listing(method, generation, cancel),
            Route::Read(raw) => self.read(method, raw, asked.if_none_match, generation, mode)?,
            Route::OtherResource => {
                let path = Some(recorded_path(strip_query(raw_path), false));
                let refusal = if method == Method::GET {
                    Refusal::new(Code::NotFound, "no such route under /resources")
                } else {
                    Refusal::new(
                        Code::MethodNotAllowed,
                        format!("{method} is not allowed under /resources"),
                    )
                };
                self.traced_read_refusal(path, refusal, generation)
            }
            Route::PeerIndex => self.redeem(method, None, audience, proof, generation, mode)?,
            Route::Redeem(token) => {
                self.redeem(method, Some(token), audience, proof, generation, mode)?
            }
        };
        self.answered.fetch_add(1, Ordering::Relaxed);
        // The path as a trace line records it, tokens redacted: a log holds no token (D-15.1).
        tracing::debug!(
            method = %method,
            path = %crate::redact::redact_tokens(&crate::redact::revealing_tokens(raw_path)),
            status = response.status().as_u16(),
            "answered"
        );
        Some(response)
    }

    /// Writes `event`, then returns `ok`; a failed write turns any answer into 500 (D-6.4).
    fn traced<E: TraceEvent>(
        &self,
        event: &E,
        ok: Response<PlaneBody>,
        generation: u64,
        handle_id: Option<&str>,
    ) -> Response<PlaneBody> {
        match self.mounted.tracer.emit(event) {
            Ok(()) => ok,
            Err(e) => {
                tracing::error!("trace write failed, refusing the request: {e}");
                response::refusal(Code::IoError, Some(generation), handle_id)
            }
        }
    }

    fn containment(&self) -> &'static str {
        self.mounted.containment.as_str()
    }

    fn listing(&self, method: &Method, generation: u64, cancel: &Cancel) -> Response<PlaneBody> {
        let root = self
            .mounted
            .files
            .as_ref()
            .map(|p| p.scope().root.declared().to_owned());
        let result = if method != Method::GET {
            Err(Refusal::new(
                Code::MethodNotAllowed,
                format!("method {method}"),
            ))
        } else {
            match &self.mounted.files {
                None => Err(Refusal::new(
                    Code::NoResourcePlane,
                    "exports.files is not declared",
                )),
                Some(plane) => plane.list(cancel).map(|entries| (plane.clone(), entries)),
            }
        };
        match result {
            Ok((plane, listing)) => {
                let scope = plane.scope();
                let (entry_count, total_bytes) = (listing.len() as u64, listing.total_bytes());
                let head = ListingHead {
                    root: scope.root.declared(),
                    max_bytes: scope.max_bytes,
                    generation,
                    containment_achieved: self.containment(),
                };
                let mut ok = response::listing(ListingBody::new(listing, &head));
                self.plane_headers(&mut ok, generation, Some(scope.root.declared()));
                let event = ResourceList {
                    root,
                    entry_count: Some(entry_count),
                    total_bytes: Some(total_bytes),
                    generation,
                    containment_achieved: self.containment(),
                    outcome: "ok",
                    reason: None,
                };
                self.traced(&event, ok, generation, None)
            }
            Err(refusal) => {
                let event = ResourceList {
                    root,
                    entry_count: None,
                    total_bytes: None,
                    generation,
                    containment_achieved: self.containment(),
                    outcome: refusal.code.as_str(),
                    reason: Some(refusal.reason),
                };
                self.traced(
                    &event,
                    response::refusal(refusal.code, Some(generation), None),
                    generation,
                    None,
                )
            }
        }
    }

    fn read(
        &self,
        method: &Method,
        raw: &str,
        if_none_match: &IfNoneMatch,
        generation: u64,
        mode: ReadMode,
    ) -> Option<Response<PlaneBody>> {
        let raw = strip_query(raw);
        let decoded = recorded_path(raw, true);
        let result = if method != Method::GET {
            Err(Refusal::new(
                Code::MethodNotAllowed,
                format!("method {method}"),
            ))
        } else {
            match &self.mounted.files {
                None => Err(Refusal::new(
                    Code::NoResourcePlane,
                    "exports.files is not declared",
                )),
                Some(plane) => {
                    let served = match mode {
                        ReadMode::Blocking => plane.read_if(raw, if_none_match),
                        ReadMode::Inline { limit } => {
                            plane.read_inline_if(raw, if_none_match, limit)?
                        }
                    };
                    served.map(|outcome| (plane.clone(), outcome))
                }
            }
        };
        match result {
            Ok((plane, ReadOutcome::NotModified { sha256, mtime_ms })) => {
                let event = ResourceRead {
                    path: Some(decoded),
                    outcome: "not_modified",
                    bytes: Some(0),
                    sha256: Some(sha256.clone()),
                    generation,
                    containment_achieved: self.containment(),
                    reason: None,
                };
                let mut not_modified = response::not_modified(&sha256, mtime_ms);
                let root = plane.scope().root.declared();
                self.plane_headers(&mut not_modified, generation, Some(root));
                Some(self.traced(&event, not_modified, generation, None))
            }
            Ok((plane, ReadOutcome::File(file))) => {
                let event = ResourceRead {
                    path: Some(decoded),
                    outcome: "ok",
                    bytes: Some(file.bytes.len() as u64),
                    sha256: Some(file.sha256.clone()),
                    generation,
                    containment_achieved: self.containment(),
                    reason: None,
                };
                let mut ok =
                    response::file(PlaneBody::new(file.bytes), &file.sha256, file.mtime_ms);
                self.plane_headers(&mut ok, generation, Some(plane.scope().root.declared()));
                Some(self.traced(&event, ok, generation, None))
            }
            Err(refusal) => Some(self.traced_read_refusal(Some(decoded), refusal, generation)),
        }
    }

    fn traced_read_refusal(
        &self,
        path: Option<String>,
        refusal: Refusal,
        generation: u64,
    ) -> Response<PlaneBody> {
        let event = ResourceRead {
            path,
            outcome: refusal.code.as_str(),
            bytes: None,
            sha256: None,
            generation,
            containment_achieved: self.containment(),
            reason: Some(refusal.reason),
        };
        self.traced(
            &event,
            response::refusal(refusal.code, Some(generation), None),
            generation,
            None,
        )
    }

    fn redeem(
        &self,
        method: &Method,
        token: Option<&str>,
        audience: &[&[u8]],
        proof: &[&[u8]],
        generation: u64,
        mode: ReadMode,
    ) -> Option<Response<PlaneBody>> {
        let token = token.map(strip_query);
        let early = if method != Method::GET {
            Some(Refusal::new(
                Code::MethodNotAllowed,
                format!("method {method}"),
            ))
        } else if self.mounted.peer.is_none() {
            Some(Refusal::new(
                Code::NoPeerPlane,
                "exports.peer_files is not declared",
            ))
        } else if token.is_none() {
            Some(Refusal::new(
                Code::NotFound,
                "the peer plane cannot be enumerated",
            ))
        } else {
            None
        };
        let redeem = match (early, &self.mounted.peer, token) {
            (None, Some(plane), Some(token)) => match mode {
                ReadMode::Blocking => plane.redeem_with_proof(token, audience, proof),
                ReadMode::Inline { limit } => {
                    plane.redeem_with_proof_inline(token, audience, proof, limit)?
                }
            },
            (early, _, token) => crate::planes::Redeem {
                handle_id: token.map(crate::hex::handle_id),
                path: None,
                audience_asserted: audience.first().map(|a| {
                    String::from_utf8_lossy(&crate::planes::normalise_audience(a)).into_owned()
                }),
                audience_proof: None,
                result: Err(early.unwrap_or_else(|| Refusal::new(Code::NotFound, "no token"))),
            },
        };
        let handle_id = redeem.handle_id.clone();
        let audience_proof = redeem.audience_proof;
        let (event, response) = match redeem.result {
            Ok(file) => {
                let event = PeerHandleRedeem {
                    handle_id: redeem.handle_id,
                    path: redeem.path,
                    generation,
                    audience_asserted: redeem.audience_asserted,
                    bytes: Some(file.bytes.len() as u64),
                    sha256: Some(file.sha256.clone()),
                    outcome: "ok",
                    reason: None,
                };
                let mut ok =
                    response::file(PlaneBody::new(file.bytes), &file.sha256, file.mtime_ms);
                self.plane_headers(&mut ok, generation, None);
                if let Some(id) = &handle_id {
                    ok.headers_mut()
                        .insert(HANDLE_ID, response::header_text(id));
                }
                (event, ok)
            }
            Err(refusal) => {
                let response =
                    response::refusal(refusal.code, Some(generation), handle_id.as_deref());
                let event = PeerHandleRedeem {
                    handle_id: redeem.handle_id,
                    path: redeem.path,
                    generation,
                    audience_asserted: redeem.audience_asserted,
                    bytes: None,
                    sha256: None,
                    outcome: refusal.code.as_str(),
                    reason: Some(refusal.reason),
                };
                (event, response)
            }
        };
        let event = WithAudienceProof {
            event,
            audience_proof,
        };
        Some(self.traced(&event, response, generation, handle_id.as_deref()))
    }

    fn plane_headers(
        &self,
        response: &mut Response<PlaneBody>,
        generation: u64,
        export_root: Option<&str>,
    ) {
        let headers = response.headers_mut();
        headers.insert(GENERATION, HeaderValue::from(generation));
        headers.insert(CONTAINMENT, HeaderValue::from_static(self.containment()));
        if let Some(root) = export_root {
            headers.insert(EXPORT_ROOT, response::header_text(root));
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

/// The `path` a trace line records for a request: decoded when `decode` and it decodes, else as
/// sent. Either way, when a best-effort decoding reveals a handle token, that decoding is
/// recorded instead, so the sink's redaction sees the token (D-6.5).
fn recorded_path(raw: &str, decode: bool) -> String {
    if decode && let Ok(decoded) = percent_decode_strict(raw) {
        return decoded;
    }
    crate::redact::revealing_tokens(raw)
}

#[cfg(test)]
mod tests {
    use super::{Route, recorded_path};

    #[test]
    fn recorded_paths() {
        assert_eq!(recorded_path("a%20b", true), "a b");
        assert_eq!(recorded_path("%C3", true), "%C3");
        assert_eq!(
            recorded_path("/resources/files%2Fx", false),
            "/resources/files%2Fx"
        );
        assert_eq!(recorded_path("x/mh1%2Ea.b%zz", true), "x/mh1.a.b%zz");
        assert_eq!(
            recorded_path("/resources/mh1%2Ea.b", false),
            "/resources/mh1.a.b"
        );
        assert_eq!(
            recorded_path("/resources/MH1%2Ea.b", false),
            "/resources/MH1.a.b",
            "the prefix in another case is decoded for redaction too"
        );
    }

    #[test]
    fn routes_on_the_raw_path() {
        assert_eq!(Route::of("/resources/files"), Route::Listing);
        assert_eq!(Route::of("/resources/files?x=1"), Route::Listing);
        assert_eq!(Route::of("/resources/files/"), Route::Read(""));
        assert_eq!(Route::of("/resources/files/a%2Fb"), Route::Read("a%2Fb"));
        assert_eq!(Route::of("/resources/files%2Fa"), Route::OtherResource);
        assert_eq!(Route::of("/resources/peer"), Route::PeerIndex);
        assert_eq!(Route::of("/resources/peer/"), Route::PeerIndex);
        assert_eq!(
            Route::of("/resources/peer/mh1.a.b"),
            Route::Redeem("mh1.a.b")
        );
        assert_eq!(Route::of("/resources"), Route::OtherResource);
        assert_eq!(Route::of("/resources/"), Route::OtherResource);
        assert_eq!(Route::of("/resources/filesx"), Route::OtherResource);
        assert_eq!(Route::of("/resourcesx"), Route::Foreign);
        assert_eq!(Route::of("/"), Route::Foreign);
        assert_eq!(Route::of("/.well-known/agent-card.json"), Route::AgentCard);
    }
}
