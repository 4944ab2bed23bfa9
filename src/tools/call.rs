//! How one call runs: its options (a deadline), and how a call that never finished is recorded.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The trace `reason` of a call whose future was dropped before it finished while its session
/// went on (a runtime gave up on it): the line records `io_error` with this reason.
pub(crate) const CANCELLED: &str = "cancelled: the call's future was dropped before it finished";

/// The trace `reason` of a call whose future was dropped after its session ended (the console
/// abandons a call that outlasts the drain deadline; see
/// [`ToolInventory::mark_session_ended`](super::ToolInventory::mark_session_ended)).
pub(crate) const ABANDONED: &str = "abandoned: the session ended before the call finished";

/// The message of a call that outlasted its deadline (its code is `io_error`).
pub(crate) const DEADLINE_MESSAGE: &str = "the call did not finish within its deadline";

/// Options of one tool call.
///
/// A deadline bounds the call from its first poll: past it the call ends with `io_error`, the
/// message `the call did not finish within its deadline`, and its one trace line with a reason
/// starting `deadline:`. What a call had already done stays done and recorded: a handle minted
/// is returned; a fetched body whose landing had begun is landed (the deadline bounds the wait
/// on the peer, not the local write).
///
/// ```
/// use resource_plane::tools::CallOptions;
/// use std::time::Duration;
///
/// let options = CallOptions::new().with_deadline(Duration::from_secs(2));
/// assert_eq!(options.deadline(), Some(Duration::from_secs(2)));
/// assert_eq!(CallOptions::default().deadline(), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    deadline: Option<Duration>,
    session: Option<SessionEnd>,
}

impl CallOptions {
    /// No deadline, outside any session: a call dropped unfinished is recorded as cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same options with a deadline.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The same options inside `session`, unless they already are inside one.
    pub(crate) fn in_session(mut self, session: &SessionEnd) -> Self {
        if self.session.is_none() {
            self.session = Some(session.clone());
        }
        self
    }

    /// The reason a call's owed trace line gives when its future is dropped unfinished, read
    /// at the moment it drops.
    pub(crate) fn unfinished_reason(&self) -> &'static str {
        if self.session.as_ref().is_some_and(SessionEnd::ended) {
            ABANDONED
        } else {
            CANCELLED
        }
    }
}

/// Whether a session has ended, shared by the inventory and every call it started (or, for the
/// capsule's own end, by the capsule and its tools).
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionEnd(Arc<AtomicBool>);

impl SessionEnd {
    pub(crate) fn mark(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(crate) fn ended(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A call's deadline passed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expired(Duration);

impl Expired {
    /// The trace `reason`.
    pub(crate) fn reason(self) -> String {
        format!(
            "deadline: the call did not finish within {} ms",
            self.0.as_millis()
        )
    }
}

/// Runs `work` to its end, or until `deadline` has passed since this was first polled (the
/// work is then dropped).
///
/// # Errors
/// [`Expired`] when the deadline passed first.
pub(crate) async fn within<F: Future>(
    deadline: Option<Duration>,
    work: F,
) -> Result<F::Output, Expired> {
    match deadline {
        None => Ok(work.await),
        Some(limit) => tokio::time::timeout(limit, work)
            .await
            .map_err(|_| Expired(limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unfinished_reason_follows_the_session_at_the_moment_it_is_read() {
        let session = SessionEnd::default();
        let options = CallOptions::new().in_session(&session);
        assert_eq!(CallOptions::new().unfinished_reason(), CANCELLED);
        assert_eq!(options.unfinished_reason(), CANCELLED);
        session.mark();
        assert_eq!(options.unfinished_reason(), ABANDONED);
        // Options already inside a session keep it.
        let other = SessionEnd::default();
        assert_eq!(
            options.clone().in_session(&other).unfinished_reason(),
            ABANDONED
        );
        assert_eq!(
            CallOptions::new().in_session(&other).unfinished_reason(),
            CANCELLED
        );
    }

    #[tokio::test(start_paused = true)]
    async fn within_ends_work_that_outlasts_the_deadline() {
        let done = within(Some(Duration::from_millis(50)), async { 7 }).await;
        assert_eq!(done.ok(), Some(7));
        let slow = within(
            Some(Duration::from_millis(50)),
            tokio::time::sleep(Duration::from_secs(60)),
        )
        .await;
        let expired = slow.expect_err("the deadline passes first");
        assert_eq!(
            expired.reason(),
            "deadline: the call did not finish within 50 ms"
        );
        assert!(within(None, async { 1 }).await.is_ok());
    }
}
