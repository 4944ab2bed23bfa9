//! A subscriber's place in its watcher's history: where it starts (the current listing, the
//! listing it resumes from, or a reset) and what it has still to deliver. Shared by the HTTP
//! stream and the library's [`ChangeStream`](super::ChangeStream).

use super::WatchEvent;
use super::history::{Record, Resume};
use super::hub::{Current, Subscription, Woken};
use crate::refusal::Refusal;

/// A subscription with its place in the history.
#[derive(Debug)]
pub(crate) struct Follower {
    pub(crate) sub: Subscription,
    /// Every batch up to this sequence number is delivered (or was before the start).
    after: u64,
}

/// What a follower has to deliver now.
#[derive(Debug)]
pub(crate) enum Due {
    /// Batches, in order (none: nothing new).
    Records(Vec<Record>),
    /// More than the caller's lag limit is waiting, or the history no longer reaches back to
    /// the follower's place.
    Behind,
}

impl Follower {
    /// Waits for the watcher's first listing, then places the follower: after the current
    /// listing with a `listing` event when `resume` is `None`; after the listing whose etag is
    /// `resume` when the history reaches it (waiting up to the catch-up time for the watcher
    /// to re-list, when the client knows a listing newer than the watcher's); else after the
    /// current listing with a `reset` event. `None` at shutdown; the refusal of a first
    /// listing that failed.
    pub(crate) async fn open(
        mut sub: Subscription,
        resume: Option<&str>,
    ) -> Option<Result<(Follower, Current, Option<WatchEvent>), Refusal>> {
        let current = match sub.ready().await? {
            Ok(current) => current,
            Err(refusal) => return Some(Err(refusal)),
        };
        let Some(etag) = resume else {
            let opening = WatchEvent::Listing {
                etag: current.etag.clone(),
                entry_count: current.entry_count,
            };
            let after = current.last;
            return Some(Ok((Follower { sub, after }, current, Some(opening))));
        };
        let mut resumed = sub.resume(etag);
        if resumed == Resume::Unknown {
            sub.request_relist();
            let deadline = tokio::time::Instant::now() + sub.catch_up();
            while resumed == Resume::Unknown {
                match tokio::time::timeout_at(deadline, sub.changed()).await {
                    Ok(Woken::News) => resumed = sub.resume(etag),
                    Ok(Woken::Shutdown) => return None,
                    Err(_) => break,
                }
            }
        }
        let current = match sub.current()? {
            Ok(current) => current,
            Err(refusal) => return Some(Err(refusal)),
        };
        Some(Ok(match resumed {
            Resume::After(after) => (Follower { sub, after }, current, None),
            Resume::Unknown => {
                let reset = WatchEvent::Reset {
                    etag: current.etag.clone(),
                };
                let after = current.last;
                (Follower { sub, after }, current, Some(reset))
            }
        }))
    }

    /// The batches due now, up to about `budget` bytes of events, moving the follower past
    /// them; [`Due::Behind`] (the follower stays put) when more than `max_lag` bytes of events
    /// queue behind the batch due next (which is never cut for its own size), or the history
    /// no longer reaches the follower.
    pub(crate) fn due(&mut self, budget: usize, max_lag: u64) -> Due {
        match self.sub.after(self.after, budget) {
            Some((records, behind))
                if behind - records.first().map_or(0, |r| r.sse.len() as u64) > max_lag =>
            {
                Due::Behind
            }
            Some((records, _)) => {
                if let Some(last) = records.last() {
                    self.after = last.seq;
                }
                Due::Records(records)
            }
            None => Due::Behind,
        }
    }

    /// Moves the follower to the current listing (after a reset): its etag.
    pub(crate) fn skip_to_current(&mut self) -> Option<String> {
        let current = self.sub.current()?.ok()?;
        self.after = current.last;
        Some(current.etag)
    }
}
