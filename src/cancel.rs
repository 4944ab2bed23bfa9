//! Telling blocking work that nobody waits for its answer any more.

use crate::refusal::{Code, Refusal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag a caller raises when it no longer wants an answer (its client disconnected): a
/// listing checks it between files and between a file's chunks, and stops. Clones share the
/// flag.
///
/// ```
/// use resource_plane::planes::Cancel;
///
/// let cancel = Cancel::default();
/// let guard = cancel.on_drop();
/// assert!(!cancel.is_cancelled());
/// drop(guard); // the request's future went away
/// assert!(cancel.is_cancelled());
/// ```
#[derive(Debug, Clone)]
pub struct Cancel(Option<Arc<AtomicBool>>);

impl Default for Cancel {
    /// A flag not raised yet.
    fn default() -> Self {
        Cancel(Some(Arc::default()))
    }
}

impl Cancel {
    /// A flag nobody can raise, for work whose caller always waits (it allocates nothing).
    pub const fn never() -> Self {
        Cancel(None)
    }

    /// Raises the flag.
    pub fn cancel(&self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the flag is raised.
    pub fn is_cancelled(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// `Ok` until the flag is raised, then the `io_error` refusal of work whose client left:
    /// how the crate's reads and listings stop between their steps.
    ///
    /// # Errors
    /// `io_error` once the flag is raised.
    pub(crate) fn check(&self) -> Result<(), Refusal> {
        if self.is_cancelled() {
            return Err(Refusal::new(
                Code::IoError,
                "cancelled: the client disconnected",
            ));
        }
        Ok(())
    }

    /// A guard that raises the flag when it is dropped, unless [`disarm`](CancelOnDrop::disarm)ed:
    /// held by the future that awaits the work, so dropping the future cancels the work.
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }
}

/// Raises its [`Cancel`] when dropped (see [`Cancel::on_drop`]).
#[derive(Debug)]
pub struct CancelOnDrop(Option<Cancel>);

impl CancelOnDrop {
    /// The work was answered: dropping the guard now raises nothing.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.cancel();
        }
    }
}
