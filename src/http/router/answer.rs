//! A request's one plane call answered where it runs best, the one place the router decides
//! it: on the async worker that received it when it can, or on the blocking pool; a runtime's
//! own plane is awaited on the async worker. Wherever it ran, its outcome is rendered, and its
//! trace line written, there.

use super::call::{Call, ListAsk};
use super::claim::{Claim, Pending, Vigil};
use super::listing::{ListAnswer, ListExtra, Listed};
use super::mount::{FilesMount, Router};
use super::outcome::Outcome;
use crate::blocking;
use crate::http::body::PlaneBody;
use crate::http::response;
use crate::planes::inline::Attempt;
use crate::planes::{Cancel, IfNoneMatch, ReadOutcome, RedeemRequest};
use crate::refusal::{Code, Refusal};
use http::{Method, Response};
use std::sync::atomic::Ordering;

/// The largest file a read or redeem of the crate's own planes serves on the async worker that
/// received it; larger files, every listing and every proof-checked redeem of the crate's
/// planes move to the blocking pool. Small reads are cheaper inline than the two context
/// switches of a hand-off. (A runtime's own plane is async, and awaited on the worker.)
pub const INLINE_READ_LIMIT: u64 = 256 * 1024;

impl Router {
    /// Answers `call` where it runs best: the one place the router decides. On this async
    /// worker when [`answer_inline`](Self::answer_inline) can (an outcome known without a
    /// plane; a read or a plain redeem the crate's own plane answers at once, see
    /// [`ReadsInline`](crate::planes::inline::ReadsInline), [`RedeemsInline`](crate::planes::inline::RedeemsInline) and [`INLINE_READ_LIMIT`]); a runtime's own plane,
    /// async, awaited on this worker too ([`answer_async`](Self::answer_async)), with no lane;
    /// every other call of the crate's planes on the blocking pool, once the in-flight budget
    /// lends the bytes of a read the crate's plane opened inline ([`ReadRest::prepay`](crate::planes::inline::ReadRest::prepay)), and
    /// then once a lane of the call's kind is free: both waited for here, on the async side,
    /// where waiting holds no thread (D-4.6.1, [`blocking::Lanes`]). A larger file the crate's
    /// plane opened inline is read there from that open ([`ReadRest::finish`](crate::planes::inline::ReadRest::finish)), so a request
    /// resolves its file once. Either way the outcome is rendered, and its trace line written,
    /// where it was computed.
    ///
    /// Dropping this future (the listener found the client gone) before the work answered
    /// raises the work's [`Cancel`]: work not started never starts, work running stops within
    /// a step (a runtime's plane's future is dropped), and the request's one trace line records
    /// `client_gone` (D-4.6.1).
    pub(super) async fn run(
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
            AtOnce::Answered(response) => return self.finish(response, &method, &raw_path),
            AtOnce::Deferred(call) => call,
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
    fn answer_inline(&self, call: Call, generation: u64) -> AtOnce<Response<PlaneBody>> {
        let call = match self.settle_at_once(call, |outcome| self.render(outcome, generation)) {
            AtOnce::Answered(response) => return AtOnce::Answered(response),
            AtOnce::Deferred(call) => call,
        };
        match call {
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
                        return AtOnce::Answered(
                            self.render(Outcome::Redeem { facts, outcome }, generation),
                        );
                    }
                    Attempt::Deferred => rest,
                    Attempt::Resume(rest) => Some(rest),
                };
                AtOnce::Deferred(Call::Redeem {
                    peer,
                    asked,
                    facts,
                    rest,
                })
            }
            call => AtOnce::Deferred(call),
        }
    }

    /// `call`'s outcome, handed to `settle` while the plane it borrows is in hand, when it is
    /// known on this thread without a lane: a call answered without a plane, or a read the
    /// crate's own plane answers inline. Anything else is deferred, nothing read and nothing
    /// traced (a read with the file its inline attempt opened, for the blocking pool to read
    /// from there).
    pub(super) fn settle_at_once<R>(
        &self,
        call: Call,
        settle: impl FnOnce(Outcome<'_>) -> R,
    ) -> AtOnce<R> {
        match call {
            Call::Answered(outcome) => AtOnce::Answered(settle(outcome)),
            Call::Read {
                files,
                path,
                recorded,
                if_none_match,
                rest: None,
            } => {
                let attempt = match &files.inline {
                    Some(inline) => inline.read_inline(&path, &if_none_match, INLINE_READ_LIMIT),
                    None => Attempt::Deferred,
                };
                let rest = match attempt {
                    Attempt::Answered(result) => {
                        return AtOnce::Answered(settle(read_outcome(
                            &files,
                            recorded,
                            result,
                            &if_none_match,
                        )));
                    }
                    Attempt::Deferred => None,
                    Attempt::Resume(rest) => Some(rest),
                };
                AtOnce::Deferred(Call::Read {
                    files,
                    path,
                    recorded,
                    if_none_match,
                    rest,
                })
            }
            call => AtOnce::Deferred(call),
        }
    }

    /// `call` answered on this thread, blocking: on the blocking pool, or on the caller's
    /// thread for [`respond`](Self::respond), where a runtime's async plane is waited for
    /// ([`blocking::wait`]). A listing or a resumed read stops once the claim's client is gone.
    /// A read or redeem an inline attempt started is finished from the file it opened.
    pub(super) fn answer_blocking(
        &self,
        call: Call,
        generation: u64,
        claim: &Claim,
    ) -> Response<PlaneBody> {
        let outcome = match call {
            Call::Answered(outcome) => return self.render_claimed(outcome, generation, claim),
            Call::List(files, ask) => {
                if ask.query.watch {
                    let refusal = Refusal::new(
                        Code::InvalidRequest,
                        "a watch stream needs the async router",
                    );
                    return self.render_claimed(
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
                return self.render_claimed(outcome, generation, claim);
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
        self.render_claimed(outcome, generation, claim)
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
            Call::Answered(outcome) => return self.render_claimed(outcome, generation, claim),
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
                return self.render_claimed(outcome, generation, claim);
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
        self.render_claimed(outcome, generation, claim)
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
        self.render_claimed(
            Outcome::Listing {
                result: listed.map(|listed| (scope, ListAnswer::Full(listed))),
                if_none_match: ask.if_none_match,
                extra: ListExtra::of(&ask.query),
            },
            generation,
            claim,
        )
    }

    /// Counts an answer given and logs it, with the path as a trace line records it, tokens
    /// redacted: a log holds no token (D-15.1).
    pub(super) fn finish(
        &self,
        response: Response<PlaneBody>,
        method: &Method,
        raw_path: &str,
    ) -> Response<PlaneBody> {
        self.count_answered(method, raw_path, response.status().as_u16());
        response
    }

    /// Counts one answered request for [`stats`](Self::stats), and logs it at debug level
    /// with its path's tokens redacted.
    pub(super) fn count_answered(&self, method: &Method, raw_path: &str, status: u16) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            method = %method,
            path = %crate::redact::redact_tokens(&crate::redact::revealing_tokens(raw_path)),
            status,
            "answered"
        );
    }
}

/// What [`Router::answer_inline`] and [`Router::settle_at_once`] did with a call.
// Matched once where it is made, never stored: boxing the call would cost an allocation per
// request for nothing.
#[expect(clippy::large_enum_variant)]
pub(super) enum AtOnce<R> {
    /// Answered on this thread.
    Answered(R),
    /// Not answered here, nothing read, nothing traced: for the blocking pool (untouched, or
    /// with the file an inline attempt opened), or a runtime's own plane to await.
    Deferred(Call),
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
