//! Blocking work off the async runtime: every hand-off to tokio's blocking pool in the crate
//! and its binary goes through here, so the policy lives in one place.
//!
//! Which work runs where is decided by its caller once: the router answers a small read of the
//! crate's own plane on the async worker and sends everything else here
//! ([`Router`](crate::http::Router)); the tools resolve and land files here; the binary runs its
//! listener and its file work here.

use tokio::task::JoinError;

/// Runs `work` on tokio's blocking pool and waits for its answer.
///
/// Dropping the returned future does not stop `work`: it runs to its end, and its answer is
/// dropped. Work that should stop early then watches a [`Cancel`](crate::planes::Cancel) its
/// caller raises on drop, as the router's does.
///
/// # Errors
/// The [`JoinError`] of `work` when it panicked (or the runtime shut down before it ran).
///
/// # Panics
/// Outside a tokio runtime.
pub(crate) async fn run<T, F>(work: F) -> Result<T, JoinError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work).await
}

/// [`run`], handing `work` a [`Cancel`](crate::planes::Cancel) that is raised when the
/// returned future is dropped before `work` answered (nobody waits for it any more), so `work`
/// can stop early; once it has answered, dropping raises nothing.
///
/// # Errors
/// As [`run`].
///
/// # Panics
/// Outside a tokio runtime.
pub(crate) async fn run_cancellable<T, F>(work: F) -> Result<T, JoinError>
where
    F: FnOnce(&crate::planes::Cancel) -> T + Send + 'static,
    T: Send + 'static,
{
    let cancel = crate::planes::Cancel::default();
    let cancel_on_drop = cancel.on_drop();
    let answer = tokio::task::spawn_blocking(move || work(&cancel)).await;
    cancel_on_drop.disarm();
    answer
}

/// The router's lanes to the blocking pool: how many calls of each kind run there at once. A
/// request waits for its lane on the async side, where waiting holds no thread, and gives it
/// back when its work has ended, not when its future is dropped: the threads busy with
/// requests never exceed the lanes, however many requests queue (D-4.6.1).
///
/// Three kinds, so that no call holding a lane waits for what a call queued for a lane of the
/// same kind holds: a read of the crate's plane has its bytes of the in-flight budget before
/// it takes a [`Kind::Read`] lane; a listing ([`Kind::List`]) and any other call
/// ([`Kind::Call`]: a redeem, a runtime's own plane) take their lane first and may then wait
/// for bytes, which only reads queued for the other kind of lane and bodies being sent hold.
#[derive(Debug, Clone)]
pub(crate) struct Lanes {
    reads: std::sync::Arc<tokio::sync::Semaphore>,
    lists: std::sync::Arc<tokio::sync::Semaphore>,
    calls: std::sync::Arc<tokio::sync::Semaphore>,
    /// How many lanes there are in all: the binary sizes its runtimes' blocking pools by it.
    #[cfg(feature = "cli")]
    count: usize,
}

/// Which lanes a call takes (see [`Lanes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A read whose bytes are borrowed already: one lane per core (a read fills one buffer
    /// per core at a time in any case).
    Read,
    /// A listing: two lanes (listings walk one at a time, and hash on shared threads).
    List,
    /// Anything else: one lane per core.
    Call,
}

/// A lane taken ([`Lanes::take`]), given back on drop.
pub(crate) type Lane = tokio::sync::OwnedSemaphorePermit;

/// Listings that may hold a lane at once.
const LIST_LANES: usize = 2;

impl Lanes {
    /// The lanes for `cores` cores (0 is read as 1).
    pub(crate) fn for_cores(cores: usize) -> Self {
        let cores = cores.max(1);
        let semaphore = |count| std::sync::Arc::new(tokio::sync::Semaphore::new(count));
        Lanes {
            reads: semaphore(cores),
            lists: semaphore(LIST_LANES),
            calls: semaphore(cores),
            #[cfg(feature = "cli")]
            count: 2 * cores + LIST_LANES,
        }
    }

    /// A lane of `kind`, first come first served, waiting on the async side while all are
    /// taken.
    pub(crate) async fn take(&self, kind: Kind) -> Lane {
        let lanes = match kind {
            Kind::Read => &self.reads,
            Kind::List => &self.lists,
            Kind::Call => &self.calls,
        };
        lanes
            .clone()
            .acquire_owned()
            .await
            .expect("the lanes are never closed")
    }

    /// How many lanes there are, of every kind.
    #[cfg(feature = "cli")]
    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_panic_is_an_error_not_a_crash() {
        let answer = run(|| -> u8 { panic!("work failed") }).await;
        assert!(answer.unwrap_err().is_panic());
        assert_eq!(run(|| 7).await.unwrap(), 7);
    }
}
