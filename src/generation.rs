//! The generation counter (D-5): tasks that reached a terminal state in this runtime process.

use std::sync::Arc;
use tokio::sync::watch;

/// One counter per runtime process, shared by both planes, starting at 0: how many tasks
/// have reached a terminal state. Every response carries it as `x-murmur-generation`, so an
/// operator can tell whether a file was read before or after a task ended. Clones share the
/// count.
///
/// ```
/// use resource_plane::capsule::Generation;
///
/// let generation = Generation::new();
/// let held_by_a_plane = generation.clone();
/// assert_eq!(generation.task_completed(), 1);
/// assert_eq!(generation.task_completed(), 2);
/// assert_eq!(held_by_a_plane.current(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Generation(Arc<watch::Sender<u64>>);

impl Default for Generation {
    fn default() -> Self {
        Generation(Arc::new(watch::Sender::new(0)))
    }
}

impl Generation {
    /// A counter at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current value; a request reads it once, at its start.
    pub fn current(&self) -> u64 {
        *self.0.borrow()
    }

    /// One task reached a terminal state; returns the new value. Wakes the export's watcher:
    /// a generation step is a change a watch reports (D-17.3).
    pub fn task_completed(&self) -> u64 {
        let mut now = 0;
        self.0.send_modify(|count| {
            *count += 1;
            now = *count;
        });
        now
    }

    /// A receiver that wakes at every step after this call, for a watcher that waits for the
    /// generation to move without polling it.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}
