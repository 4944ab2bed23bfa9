//! Who writes the one trace line of a request whose work was deferred, when its client may
//! leave before the work answers (D-4.6.1): the work, when it answers, or the request's future,
//! when it is dropped first; and what that `client_gone` line records.

use super::call::Call;
use super::listing::ListExtra;
use super::mount::Router;
use super::outcome::{Outcome, RedeemFacts, client_gone};
use crate::http::body::PlaneBody;
use crate::http::response;
use crate::planes::{Cancel, IfNoneMatch, RedeemOutcome};
use crate::refusal::Code;
use http::Response;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a deferred request's trace line needs when its client leaves before the work has
/// answered: its route and what it said of itself.
pub(super) enum Pending {
    List(ListExtra),
    Read(String),
    Redeem(RedeemFacts),
    /// Answered without a plane: never deferred.
    Nothing,
}

impl Pending {
    pub(super) fn of(call: &Call) -> Pending {
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
pub(super) struct Claim {
    taken: Option<Arc<AtomicBool>>,
    /// Raised when the client left.
    pub(super) cancel: Cancel,
}

impl Claim {
    /// The claim of a request whose caller always waits for the answer: never contested.
    pub(super) fn sole() -> Self {
        Claim {
            taken: None,
            cancel: Cancel::never(),
        }
    }

    /// A claim contested by the request's future, which raises `cancel` when dropped.
    pub(super) fn shared(cancel: Cancel) -> Self {
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

impl Router {
    /// [`render`](Self::render) under `claim`: the line is written only if nobody wrote it
    /// first, and as `client_gone` once the client left (D-4.6.1). Under a sole claim it is
    /// `render` itself.
    pub(super) fn render_claimed(
        &self,
        outcome: Outcome<'_>,
        generation: u64,
        claim: &Claim,
    ) -> Response<PlaneBody> {
        let outcome = if claim.client_gone() {
            outcome.given_up()
        } else {
            outcome
        };
        if !claim.take() {
            // The line was written as the client left; this answer is never sent.
            return response::refusal(Code::ClientGone, Some(generation), None);
        }
        self.render(outcome, generation)
    }
}

/// Writes a deferred request's `client_gone` line when the request's future is dropped before
/// its work answered, unless the work wrote its line first.
pub(super) struct Vigil<'r> {
    pub(super) router: &'r Router,
    pub(super) pending: Pending,
    pub(super) generation: u64,
    /// `None` once the work answered.
    pub(super) claim: Option<Claim>,
}

impl Vigil<'_> {
    /// The work answered: nothing to write.
    pub(super) fn settle(mut self) {
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
            self.router.render(outcome, self.generation);
        }
    }
}
