//! How the crate's own planes answer on an async worker, for the router's fast path: a small
//! read costs less there than the two context switches of a hand-off to the blocking pool, and
//! a large one stops before it would wait, handing the blocking pool its continuation
//! ([`ReadRest`], [`RedeemRest`]): the rest of the call, with the file already opened and
//! checked, for the router to finish without knowing how a read works.
//!
//! Crate-private on purpose: the capsule builder records these faces beside the planes it
//! builds itself ([`OperatorPlane`](super::OperatorPlane),
//! [`HmacPeerPlane`](super::HmacPeerPlane)); a runtime's own plane is always awaited, so its
//! implementor never thinks about where it runs.

use super::{
    Cancel, IfNoneMatch, Listing, ReadOutcome, ReadRest, RedeemOutcome, RedeemRequest, RedeemRest,
};
use crate::path::RelPath;
use crate::refusal::Refusal;
use std::fmt::Debug;

/// What a call of the crate's own planes did on an async worker ([`ReadsInline`],
/// [`RedeemsInline`]).
#[derive(Debug)]
pub(crate) enum Attempt<T, R> {
    /// Answered there: the same outcome the blocking call gives.
    Answered(T),
    /// Nothing done that counts (no check made that the blocking call would not make again, no
    /// proof nonce spent, nothing read, nothing written): the blocking call is to be made whole.
    Deferred,
    /// Started there and stopped before it would wait (a file larger than the inline limit,
    /// bytes the in-flight budget cannot lend at once): the blocking pool finishes `R`, the
    /// rest of the call from the file as opened and checked, so no step is made twice.
    Resume(R),
}

/// The operator plane the crate builds, answering reads on an async worker.
pub(crate) trait ReadsInline: Debug + Send + Sync {
    /// [`ResourcePlane::list`](super::ResourcePlane::list), blocking: on the blocking pool, or
    /// the caller's thread for [`Router::respond`](crate::http::Router::respond).
    fn list_blocking(&self, cancel: &Cancel) -> Result<Listing, Refusal>;

    /// [`ResourcePlane::read`](super::ResourcePlane::read), blocking, whole on the caller's
    /// thread.
    fn read_blocking(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
    ) -> Result<ReadOutcome, Refusal>;

    /// [`ResourcePlane::read`](super::ResourcePlane::read) on an async worker, reading at most
    /// `limit` bytes there: the outcome, or the rest of the read for the blocking pool.
    fn read_inline(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
        limit: u64,
    ) -> Attempt<Result<ReadOutcome, Refusal>, ReadRest>;
}

/// The peer plane the crate builds, answering plain redeems on an async worker.
pub(crate) trait RedeemsInline: Debug + Send + Sync {
    /// [`PeerPlane::redeem`](super::PeerPlane::redeem), blocking, whole on the caller's thread.
    fn redeem_blocking(&self, request: RedeemRequest<'_>) -> RedeemOutcome;

    /// [`PeerPlane::redeem`](super::PeerPlane::redeem) on an async worker, reading at most
    /// `limit` bytes there: the outcome, [`Attempt::Deferred`] for a redeem the worker should
    /// not check at all, or the checked redeem with its file opened, for the blocking pool.
    fn redeem_inline(
        &self,
        request: RedeemRequest<'_>,
        limit: u64,
    ) -> Attempt<RedeemOutcome, RedeemRest>;
}
