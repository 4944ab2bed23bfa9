//! The generation counter (D-5): tasks that reached a terminal state in this runtime process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
#[derive(Debug, Clone, Default)]
pub struct Generation(Arc<AtomicU64>);

impl Generation {
    /// A counter at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current value; a request reads it once, at its start.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// One task reached a terminal state; returns the new value.
    pub fn task_completed(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}
