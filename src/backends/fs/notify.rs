//! Change notices for an export root: the kernel's word that something beneath it may have
//! changed, so a watcher re-lists on change instead of on a timer (D-17.4).
//!
//! A notice says only *that* something changed, never what: the watcher re-lists through the
//! listing's hash cache (D-3.6) and compares, so correctness never rests on the notices being
//! complete, only the latency does. A source that can no longer vouch for its notices (a
//! queue overflow, a watch limit, the root moved away) says so once with [`Notice::Degraded`],
//! and the watcher falls back to re-listing every 2 s.

use std::fmt::Debug;
use std::task::{Context, Poll};

/// What a [`ChangeNotifier`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// Something beneath the root may have changed since the last notice.
    Changed,
    /// The notices can no longer be trusted to cover every change (why, for the warning log
    /// line); the caller stops asking and re-lists on a timer instead.
    Degraded(String),
}

/// A source of change notices for one export root, polled by the root's watcher on an async
/// worker. It must never block: a notifier waits by registering `cx`'s waker (the crate's own,
/// inotify, waits on its descriptor in tokio's reactor), so a watcher holds no thread.
///
/// A [`Filesystem`](super::Filesystem) offers one through
/// [`notifier`](super::Filesystem::notifier); without one the watcher re-lists every 2 s.
///
/// ```
/// use resource_plane::backends::{ChangeNotifier, Notice};
/// use std::task::{Context, Poll};
///
/// /// A notifier whose source went away at once: the watcher falls back to re-listing.
/// #[derive(Debug)]
/// struct Gone;
///
/// impl ChangeNotifier for Gone {
///     fn poll_notice(&mut self, _cx: &mut Context<'_>) -> Poll<Notice> {
///         Poll::Ready(Notice::Degraded("no source".into()))
///     }
/// }
///
/// let mut gone = Gone;
/// let mut cx = Context::from_waker(std::task::Waker::noop());
/// assert_eq!(gone.poll_notice(&mut cx), Poll::Ready(Notice::Degraded("no source".into())));
/// ```
pub trait ChangeNotifier: Send + Debug {
    /// The next notice, or `Pending` with `cx`'s waker registered for when one comes.
    fn poll_notice(&mut self, cx: &mut Context<'_>) -> Poll<Notice>;
}
