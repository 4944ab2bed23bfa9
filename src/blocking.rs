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

/// How many calls a router runs on the blocking pool at once: two per core by default
/// (`CapsuleBuilder::cores`). A request waits for its lane on the async side, where waiting
/// holds no thread, and gives its lane back when its work has ended, not when its future is
/// dropped: the threads busy with requests never exceed the lanes, however many requests
/// queue (D-4.6.1).
#[derive(Debug, Clone)]
pub(crate) struct Lanes {
    free: std::sync::Arc<tokio::sync::Semaphore>,
    count: usize,
}

/// A lane taken ([`Lanes::take`]), given back on drop.
pub(crate) type Lane = tokio::sync::OwnedSemaphorePermit;

impl Lanes {
    /// `count` lanes (0 is read as 1).
    pub(crate) fn new(count: usize) -> Self {
        let count = count.max(1);
        Lanes {
            free: std::sync::Arc::new(tokio::sync::Semaphore::new(count)),
            count,
        }
    }

    /// A lane, first come first served, waiting on the async side while all are taken.
    pub(crate) async fn take(&self) -> Lane {
        self.free
            .clone()
            .acquire_owned()
            .await
            .expect("the lanes are never closed")
    }

    /// How many lanes there are.
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
