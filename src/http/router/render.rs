//! An outcome rendered into its response and the request's one trace line (D-6.2), the line
//! written before the response is returned; a failed write turns any answer into
//! `500 io_error` (D-6.4). Every answer of the router's comes through here.

#[cfg(feature = "mcp")]
use super::lend::{Lent, LentFile};
use super::listing::{ListAnswer, ListExtra, Listed};
use super::mount::Router;
use super::outcome::{Outcome, RedeemFacts};
use crate::events::{
    PeerHandleRedeem, ResourceList, ResourceListWaited, ResourceRead, WithAudienceProof,
};
use crate::http::body::PlaneBody;
use crate::http::response::{self, header_text};
use crate::http::watch_stream::WatchBody;
use crate::planes::watch::hub::Current;
use crate::planes::{
    ExportScope, IfNoneMatch, ReadOutcome, RedeemOutcome, ServedFile, StreamedFile,
};
use crate::refusal::{Code, Refusal};
use crate::trace::Tracer;
use crate::wire::header::{CONTAINMENT, EXPORT_ROOT, GENERATION, HANDLE_ID};
use http::Response;
use http::header::HeaderValue;
use std::io;

impl Router {
    /// Renders `outcome` into its response and the request's one trace line (D-6.2), written
    /// before the response is returned; a failed write turns any answer into `500 io_error`
    /// (D-6.4). Every answer of the router's comes through here; an answer whose client may
    /// leave first comes through [`render_claimed`](Self::render_claimed).
    pub(super) fn render(&self, outcome: Outcome<'_>, generation: u64) -> Response<PlaneBody> {
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
            } => self.listing_reply(result, &if_none_match, extra, generation),
            Outcome::Watch {
                scope,
                current,
                body,
            } => self.watch_reply(scope, &current, body, generation),
            Outcome::Read { path, result } => self.read_reply(path, result, generation),
            Outcome::Redeem { facts, outcome } => redeem_reply(facts, outcome, generation),
        };
        let handle_id = line.handle_id();
        if let Err(e) = line.emit(&self.mounted.tracer) {
            tracing::error!("trace write failed, refusing the request: {e}");
            return response::refusal(Code::IoError, Some(generation), handle_id);
        }
        body.into_response(generation, self.containment(), handle_id)
    }

    /// A read's outcome rendered for the MCP face without an HTTP response: its
    /// `resource_read` line written as [`render`](Self::render) writes it, then the file or the
    /// refusal's code (`io_error` when the line cannot be written, D-6.4). Any other outcome
    /// (a streamed file or a `304`, which an unconditional read of the crate's own plane never
    /// gives) is rendered as for HTTP.
    #[cfg(feature = "mcp")]
    pub(super) fn render_lent(&self, outcome: Outcome<'_>, generation: u64) -> Lent {
        let (path, result, lent) = match outcome {
            Outcome::Read {
                path,
                result: Ok((scope, ReadOutcome::File(file))),
            } => {
                let lent = Ok(LentFile {
                    bytes: file.bytes.clone(),
                    sha256: file.sha256.clone(),
                });
                (path, Ok((scope, ReadOutcome::File(file))), lent)
            }
            Outcome::Read {
                path,
                result: Err(refusal),
            } => {
                let code = refusal.code;
                (path, Err(refusal), Err(code))
            }
            other => return Lent::Rendered(self.render(other, generation)),
        };
        let (line, _) = self.read_reply(path, result, generation);
        if let Err(e) = line.emit(&self.mounted.tracer) {
            tracing::error!("trace write failed, refusing the request: {e}");
            return Lent::Read(Err(Code::IoError));
        }
        Lent::Read(lent)
    }

    /// The listing route's line and body: `resource_list` (with `waited_ms` or `watch` as
    /// `extra` says), and the listing, or its `304` when `if_none_match` holds its etag or a
    /// long-poll found it unchanged.
    fn listing_reply<'p>(
        &self,
        result: Result<(&'p ExportScope, ListAnswer), Refusal>,
        if_none_match: &IfNoneMatch,
        extra: ListExtra,
        generation: u64,
    ) -> (Line, Body<'p>) {
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
        let (body, outcome, reason) = Body::of(result.map(|(scope, answer)| match answer {
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
        let line = extra.line(self.list_event(counts, generation, outcome, reason));
        (line, body)
    }

    /// A watch stream's line and body: `resource_list` with `watch: true` and the counts of
    /// the listing it opened on, and the stream.
    fn watch_reply<'p>(
        &self,
        scope: &'p ExportScope,
        current: &Current,
        body: WatchBody,
        generation: u64,
    ) -> (Line, Body<'p>) {
        let line = Line::ListWaited(ResourceListWaited {
            event: self.list_event(
                Some((current.entry_count, current.total_bytes)),
                generation,
                "ok",
                None,
            ),
            waited_ms: None,
            watch: true,
        });
        (line, Body::Watch(scope, body))
    }

    /// A read's line and body: `resource_read` recording `path`, and the file, streamed or
    /// whole, or its `304`.
    fn read_reply<'p>(
        &self,
        path: String,
        result: Result<(&'p ExportScope, ReadOutcome), Refusal>,
        generation: u64,
    ) -> (Line, Body<'p>) {
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
            containment_achieved: self.containment(),
            reason,
        });
        (line, body)
    }
}

/// A redeem's line and body: `peer_handle_redeem` with what the request said of itself and the
/// audience proof's verdict, and the file redeemed.
fn redeem_reply<'p>(
    facts: RedeemFacts,
    outcome: RedeemOutcome,
    generation: u64,
) -> (Line, Body<'p>) {
    let (body, line_outcome, reason) = Body::of(outcome.result.map(|file| Body::File(file, None)));
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

impl ListExtra {
    /// The line for `event`: the plain `resource_list`, or with `waited_ms` and `watch`.
    pub(super) fn line(self, event: ResourceList) -> Line {
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
pub(super) enum Line {
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
    pub(super) fn emit(&self, tracer: &Tracer) -> io::Result<()> {
        match self {
            Line::List(event) => tracer.emit(event),
            Line::ListWaited(event) => tracer.emit(event),
            Line::Read(event) => tracer.emit(event),
            Line::Redeem(event) => tracer.emit(event),
        }
    }

    /// The handle id a redeem's refusal echoes.
    pub(super) fn handle_id(&self) -> Option<&str> {
        match self {
            Line::Redeem(event) => event.event.handle_id.as_deref(),
            Line::List(_) | Line::ListWaited(_) | Line::Read(_) => None,
        }
    }
}
