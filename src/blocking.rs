//! Blocking work off the async runtime: every hand-off to tokio's blocking pool in the crate
//! and its binary goes through here, so the policy lives in one place.
//!
//! Which work runs where is decided by its caller once: the router answers a small read of the
//! crate's own plane on the async worker and sends everything else here
//! ([`Router`](crate::http::Router)); the tools resolve and land files here; the binary runs its
//! listener and its file work here. The crate's planes, awaited directly (a runtime's decorator
//! around one), move their file work here too ([`off_worker`]); the synchronous faces wait for a
//! runtime's async plane on their own thread ([`wait`]).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use tokio::task::JoinError;

/// Runs `work` on tokio's blocking pool and waits for its answer.
///
/// Dropping the returned future does not stop `work`: it runs to its end, and its answer is
/// dropped. Work that should stop early then watches a [`Cancel`](crate::cancel::Cancel) its
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

/// [`run`], handing `work` a [`Cancel`](crate::cancel::Cancel) that is raised when the
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
    F: FnOnce(&crate::cancel::Cancel) -> T + Send + 'static,
    T: Send + 'static,
{
    let cancel = crate::cancel::Cancel::default();
    let cancel_on_drop = cancel.on_drop();
    let answer = tokio::task::spawn_blocking(move || work(&cancel)).await;
    cancel_on_drop.disarm();
    answer
}

/// `work` on tokio's blocking pool when the caller runs in a tokio runtime's context, else on
/// the caller's thread: how the crate's own planes answer a caller that awaits them directly,
/// so blocking file work never holds an async worker and the planes still answer under any
/// executor (a runtime's plane waited for by [`wait`] outside tokio).
///
/// # Errors
/// An `io_error` refusal when `work` panicked or the runtime shut down before it ran.
pub(crate) async fn off_worker<T, F>(work: F) -> Result<T, crate::refusal::Refusal>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime.spawn_blocking(work).await.map_err(|e| {
            crate::refusal::Refusal::new(
                crate::refusal::Code::IoError,
                format!("the plane's blocking task failed: {e}"),
            )
        }),
        Err(_) => Ok(work()),
    }
}

/// Waits for `future` on the caller's thread, which must not be an async worker (it blocks
/// that thread until the future is done): how [`Router::respond`](crate::http::Router::respond)
/// and the export watcher call a runtime's async plane from synchronous code.
///
/// The future is polled here and the thread parked between polls, woken by the future's waker:
/// a minimal executor of the crate's own, so the synchronous faces need no runtime. When the
/// caller is in a tokio runtime's context (a thread of its blocking pool, a thread that entered
/// it), that context stays entered while polling, so a plane using tokio's timers, sockets or
/// blocking pool registers with that runtime, whose own threads drive them (a multi-threaded
/// runtime; a current-thread runtime drives its I/O only inside its own `block_on`).
pub(crate) fn wait<F: Future>(future: F) -> F::Output {
    let runtime = tokio::runtime::Handle::try_current().ok();
    let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // A wake before this park makes it return at once; a spurious return polls again.
        std::thread::park();
    }
}

/// The waker of [`wait`]: unparks the waiting thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
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

    #[test]
    fn wait_drives_a_future_woken_from_another_thread() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(7u8).unwrap();
        });
        assert_eq!(wait(rx).unwrap(), 7);
        sender.join().unwrap();
    }

    #[test]
    fn off_worker_runs_on_the_callers_thread_outside_a_runtime() {
        let caller = std::thread::current().id();
        let ran_on = wait(off_worker(|| std::thread::current().id())).unwrap();
        assert_eq!(ran_on, caller);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn off_worker_runs_on_the_blocking_pool_inside_a_runtime() {
        let worker = std::thread::current().id();
        let ran_on = off_worker(|| std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, worker);
        let panicked = off_worker(|| -> u8 { panic!("work failed") }).await;
        assert_eq!(panicked.unwrap_err().code, crate::refusal::Code::IoError);
    }
}
