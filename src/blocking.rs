//! Blocking work off the async runtime: every hand-off to tokio's blocking pool in the crate
//! and its binary goes through here, so the policy lives in one place.
//!
//! Which work runs where is decided by its caller once: the router answers a small read of the
//! crate's own plane on the async worker and sends everything else here
//! ([`Router`](crate::http::Router)); the tools resolve and land files here; the binary runs its
//! listener and its file work here.

use crate::planes::Cancel;
use tokio::task::JoinError;

/// Runs `work` on tokio's blocking pool and waits for its answer.
///
/// Dropping the returned future does not stop `work`: it runs to its end, and its answer is
/// dropped. Use [`run_cancellable`] for work that should stop early then.
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

/// [`run`], handing `work` a [`Cancel`] that is raised when the returned future is dropped
/// before `work` answered (the client went away), so `work` can stop early; once it has
/// answered, dropping raises nothing.
///
/// # Errors
/// As [`run`].
///
/// # Panics
/// Outside a tokio runtime.
pub(crate) async fn run_cancellable<T, F>(work: F) -> Result<T, JoinError>
where
    F: FnOnce(&Cancel) -> T + Send + 'static,
    T: Send + 'static,
{
    let cancel = Cancel::default();
    let cancel_on_drop = cancel.on_drop();
    let answer = tokio::task::spawn_blocking(move || work(&cancel)).await;
    cancel_on_drop.disarm();
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn a_panic_is_an_error_not_a_crash() {
        let answer = run(|| -> u8 { panic!("work failed") }).await;
        assert!(answer.unwrap_err().is_panic());
        assert_eq!(run(|| 7).await.unwrap(), 7);
    }

    /// Dropping the future mid-work raises the flag the work sees; an answered call leaves it
    /// down.
    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_future_cancels_the_work() {
        let (started_tx, started_rx) = mpsc::channel();
        let (seen_tx, seen_rx) = mpsc::channel();
        let pending = run_cancellable(move |cancel| {
            started_tx.send(()).unwrap();
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(1));
            }
            seen_tx.send(()).unwrap();
        });
        // Start the work, then drop the future while it runs.
        let mut pending = Box::pin(pending);
        assert!(futures_poll_once(pending.as_mut()).await.is_none());
        started_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the work started");
        drop(pending);
        seen_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the work saw the cancellation");

        let (flag_tx, flag_rx) = mpsc::channel();
        run_cancellable(move |cancel| flag_tx.send(cancel.clone()).unwrap())
            .await
            .unwrap();
        assert!(
            !flag_rx.recv().unwrap().is_cancelled(),
            "answered: not cancelled"
        );
    }

    /// Polls `future` once: its output if it is ready at once.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut future: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
