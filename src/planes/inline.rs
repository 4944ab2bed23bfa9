//! How the crate's own planes answer on an async worker, for the router's fast path: a small
//! read costs less there than the two context switches of a hand-off to the blocking pool, and
//! a large one stops before it would wait, handing the blocking pool its continuation
//! ([`ReadRest`], [`RedeemRest`]): the rest of the call, with the file already opened and
//! checked, for the router to finish without knowing how a read works. Each plane says how its
//! calls finish ([`FinishRead`], [`FinishRedeem`]).
//!
//! Crate-private on purpose: the capsule builder records these faces beside the planes it
//! builds itself ([`OperatorPlane`](super::OperatorPlane),
//! [`HmacPeerPlane`](super::HmacPeerPlane)); a runtime's own plane is always awaited, so its
//! implementor never thinks about where it runs.

use super::{Cancel, IfNoneMatch, Listing, ReadOutcome, RedeemOutcome, RedeemRequest};
use crate::budget::{BudgetPermit, ByteBudget};
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

/// The rest of a read a plane started on an async worker and stopped before it would wait
/// ([`Attempt::Resume`]): the bytes it borrows first, borrowed on the async side
/// ([`prepay`](Self::prepay)), then the read itself on the blocking pool
/// ([`finish`](Self::finish)).
#[derive(Debug)]
pub(crate) struct ReadRest {
    rest: Box<dyn FinishRead>,
    prepaid: Option<BudgetPermit>,
}

/// How a plane finishes a read it started inline: what it holds of the read (the file as
/// opened and checked, the path, the condition), and the plane itself.
pub(crate) trait FinishRead: Debug + Send {
    /// The budget the rest of the read borrows from, and the bytes it borrows first.
    fn first_borrow(&self) -> (&ByteBudget, u64);

    /// The rest of the read, on a blocking thread, borrowing nothing more than `prepaid` unless
    /// the file grew, stopping once `cancel` is raised: the outcome
    /// [`ResourcePlane::read`](super::ResourcePlane::read) gives.
    ///
    /// # Errors
    /// As [`ResourcePlane::read`](super::ResourcePlane::read).
    fn finish(
        self: Box<Self>,
        prepaid: Option<BudgetPermit>,
        cancel: &Cancel,
    ) -> Result<ReadOutcome, Refusal>;
}

impl ReadRest {
    /// The rest of a read, as its plane finishes it.
    pub(crate) fn new(rest: impl FinishRead + 'static) -> Self {
        ReadRest {
            rest: Box::new(rest),
            prepaid: None,
        }
    }

    /// Borrows, on the async side, the bytes the rest of the read borrows first: waiting for
    /// them there holds no thread (D-4.6.1), and a request whose client leaves meanwhile never
    /// starts its read.
    pub(crate) async fn prepay(&mut self) {
        let (budget, bytes) = self.rest.first_borrow();
        self.prepaid = Some(budget.acquire(bytes).await);
    }

    /// The rest of the read, on a blocking thread, stopping once `cancel` is raised.
    ///
    /// # Errors
    /// As [`ResourcePlane::read`](super::ResourcePlane::read).
    pub(crate) fn finish(self, cancel: &Cancel) -> Result<ReadOutcome, Refusal> {
        self.rest.finish(self.prepaid, cancel)
    }
}

/// The rest of a redeem a plane checked on an async worker, its file opened, to be read on the
/// blocking pool ([`Attempt::Resume`]).
#[derive(Debug)]
pub(crate) struct RedeemRest(Box<dyn FinishRedeem>);

/// How a plane finishes a redeem it checked inline.
pub(crate) trait FinishRedeem: Debug + Send {
    /// The read of the checked redeem's file, on a blocking thread: the outcome
    /// [`PeerPlane::redeem`](super::PeerPlane::redeem) gives.
    fn finish(self: Box<Self>) -> RedeemOutcome;
}

impl RedeemRest {
    /// The rest of a redeem, as its plane finishes it.
    pub(crate) fn new(rest: impl FinishRedeem + 'static) -> Self {
        RedeemRest(Box::new(rest))
    }

    /// The rest of the redeem, on a blocking thread.
    pub(crate) fn finish(self) -> RedeemOutcome {
        self.0.finish()
    }
}
