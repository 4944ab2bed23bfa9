//! A request into the one plane call it makes, owning all it needs so that it can move to the
//! blocking pool; or into its outcome, when the router answers without a plane (a route of no
//! plane, a refused method, an undeclared plane, a path that does not decode). Routing is on
//! the raw path (D-4.2); on a plane route the method is checked first, then the plane.

use super::listing::ListExtra;
use super::mount::{FilesMount, Mount, PeerMount, Router};
use super::outcome::{Outcome, RedeemFacts};
use crate::http::listing_query::ListingQuery;
use crate::path::{RelPath, percent_decode_strict, strip_query};
use crate::planes::inline::{ReadRest, RedeemRest};
use crate::planes::{IfNoneMatch, RedeemOutcome, RedeemRequest};
use crate::refusal::{Code, Refusal};
use crate::wire::Route;
use crate::wire::header::{AUDIENCE, LAST_EVENT_ID, PROOF};
use http::header::{HeaderValue, IF_NONE_MATCH};
use http::{Method, Request};

/// What the router reads of a request, copied out of it, so that the answer needs nothing of
/// the request itself (its body type above all).
pub(super) struct Asking {
    pub(super) method: Method,
    /// The raw path relative to the plane (the base path cut off; empty when outside it).
    pub(super) path: String,
    /// Whether the path is the card's JSON-RPC endpoint ([`Router::is_rpc_endpoint`]).
    pub(super) rpc_endpoint: bool,
    /// The raw query, without its `?`.
    pub(super) query: Option<String>,
    pub(super) headers: Headers,
}

/// The request headers the planes read, as sent, each value in order.
pub(super) struct Headers {
    /// `x-murmur-audience`.
    pub(super) audience: Vec<Vec<u8>>,
    /// `x-murmur-proof`.
    pub(super) proof: Vec<Vec<u8>>,
    /// `If-None-Match`, parsed (D-13).
    pub(super) if_none_match: IfNoneMatch,
    /// The first `Last-Event-ID`, as sent (D-17.3).
    pub(super) last_event_id: Option<Vec<u8>>,
}

impl Asking {
    pub(super) fn of<B>(router: &Router, request: &Request<B>) -> Asking {
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

/// The one plane call a request makes, owning all it needs so that it can move to the blocking
/// pool; or the outcome itself, when the router answers without a plane (a route of no plane, a
/// refused method, an undeclared plane, a path that does not decode).
pub(super) enum Call {
    /// Answered without a plane.
    Answered(Outcome<'static>),
    /// [`ResourcePlane::list`](crate::planes::ResourcePlane::list), and what the listing request asks beyond it.
    List(FilesMount, ListAsk),
    /// [`ResourcePlane::read`](crate::planes::ResourcePlane::read) of `path`; the trace line records `recorded`.
    Read {
        files: FilesMount,
        path: RelPath,
        recorded: String,
        if_none_match: IfNoneMatch,
        /// The rest of the read an inline attempt started, with its file opened.
        rest: Option<ReadRest>,
    },
    /// [`PeerPlane::redeem`](crate::planes::PeerPlane::redeem).
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
    pub(super) fn awaits(&self) -> bool {
        match self {
            Call::Answered(_) => false,
            Call::List(files, _) | Call::Read { files, .. } => files.inline.is_none(),
            Call::Redeem { peer, .. } => peer.inline.is_none(),
        }
    }
}

/// What a listing request asks beyond the listing (D-17).
pub(super) struct ListAsk {
    pub(super) query: ListingQuery,
    pub(super) if_none_match: IfNoneMatch,
    pub(super) last_event_id: Option<Vec<u8>>,
}

/// A redeem's request, owned.
pub(super) struct RedeemAsked {
    pub(super) token: String,
    pub(super) audience: Vec<Vec<u8>>,
    pub(super) proof: Vec<Vec<u8>>,
}

impl RedeemAsked {
    /// `f` applied to this redeem as a [`RedeemRequest`].
    pub(super) fn with_request<R>(&self, f: impl FnOnce(RedeemRequest<'_>) -> R) -> R {
        let audience: Vec<&[u8]> = self.audience.iter().map(Vec::as_slice).collect();
        let proof: Vec<&[u8]> = self.proof.iter().map(Vec::as_slice).collect();
        f(RedeemRequest {
            token: &self.token,
            audience: &audience,
            proof: &proof,
        })
    }
}

impl Router {
    /// The plane call `method` on `raw_path` (relative to the base path) makes, or its outcome
    /// when it needs none. Routing is on the raw path (D-4.2); on a plane route the method is
    /// checked first, then the plane (both in [`admit`]); a read's path is decoded here, once,
    /// and its plane gets the decoded [`RelPath`]. A `POST` to the card's JSON-RPC endpoint
    /// (`rpc_endpoint`) that no route of the router's claims gets the JSON-RPC error of a
    /// capsule that answers no agent call.
    pub(super) fn call_for(
        &self,
        method: &Method,
        raw_path: &str,
        rpc_endpoint: bool,
        query: Option<&str>,
        headers: Headers,
    ) -> Call {
        match Route::of(raw_path) {
            Route::Foreign if rpc_endpoint && method == Method::POST => {
                Call::Answered(Outcome::NoAgent)
            }
            Route::Foreign => Call::Answered(Outcome::Foreign),
            Route::AgentCard => Call::Answered(Outcome::AgentCard {
                method_allowed: method == Method::GET,
            }),
            Route::Listing => self.list_call(method, query, headers),
            Route::Read(raw) => self.read_call(method, raw, headers),
            Route::OtherResource => other_resource(method, raw_path),
            Route::PeerIndex => self.redeem_call(method, None, headers),
            Route::Redeem(token) => self.redeem_call(method, Some(token), headers),
        }
    }

    /// The operator plane, once [`admit`] lets `method` through to it.
    fn files_for(&self, method: &Method) -> Result<&FilesMount, Refusal> {
        admit(
            method,
            &self.mounted.files,
            (Code::NoResourcePlane, "exports.files is not declared"),
        )
    }

    /// `/resources/files`: the listing, with what the request asks beyond it (D-17); refused
    /// as a listing for the method, the plane or the query, in that order.
    fn list_call(&self, method: &Method, query: Option<&str>, headers: Headers) -> Call {
        let asked = self
            .files_for(method)
            .and_then(|files| Ok((files, ListingQuery::parse(query)?)));
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

    /// `/resources/files/<raw>`: a read of `raw` decoded once ([`decode_once`]); refused as a
    /// read recording that path, for the method, the plane or the path, in that order.
    fn read_call(&self, method: &Method, raw: &str, headers: Headers) -> Call {
        let (recorded, path) = decode_once(raw);
        match self.files_for(method).and_then(|files| Ok((files, path?))) {
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

    /// A peer route: a redeem of `token`, or, without one (`/resources/peer` itself), the
    /// refusal that the peer plane cannot be enumerated. Refused for the method, the plane or
    /// the missing token, in that order; the line records what the request said of itself
    /// whatever the answer.
    fn redeem_call(&self, method: &Method, token: Option<&str>, headers: Headers) -> Call {
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

/// Any other path under `/resources`: `not_found` for a `GET`, else `method_not_allowed`;
/// traced as a read of the path as sent, its tokens revealed for the sink's redaction (D-6.5).
fn other_resource(method: &Method, raw_path: &str) -> Call {
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
pub(super) fn decode_once(raw: &str) -> (String, Result<RelPath, Refusal>) {
    match percent_decode_strict(raw) {
        Ok(decoded) => {
            let path = RelPath::parse_canonical(&decoded);
            (decoded, path)
        }
        Err(refusal) => (crate::redact::revealing_tokens(raw), Err(refusal)),
    }
}
