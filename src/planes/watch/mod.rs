//! Watching an export (D-17): one watcher per export root notices change, re-lists through the
//! listing's hash cache, and tells every subscriber what changed from one listing etag to the
//! next.
//!
//! Over HTTP the router offers it as `GET /resources/files?wait=N` (long-poll) and
//! `?watch=1` (Server-Sent Events). In the library, [`ChangeStream`] is the same watcher as an
//! async [`Stream`] of [`WatchEvent`]s, for a runtime that tells its own clients (an MCP
//! session's subscriptions, say) when files change.

mod change;
mod event;
mod follow;
mod history;
pub(crate) mod hub;
mod steps;

pub use change::{ApplyError, Change, ChangeBatch, ChangeKind, FileState};
pub use event::WatchEvent;
pub(crate) use event::{KEEP_ALIVE, client_etag};
pub(crate) use follow::{Due, Follower};
pub(crate) use hub::{Hub, Source};
pub(crate) use steps::Steps;

use futures_core::Stream;
use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

/// How a watcher notices change. The defaults are D-17.4's; a capsule changes only whether
/// kernel notification is used ([`CapsuleBuilder::watch_notifications`]), so tests and
/// filesystems without inotify exercise the 2 s fallback.
///
/// [`CapsuleBuilder::watch_notifications`]: crate::CapsuleBuilder::watch_notifications
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchSettings {
    /// Whether to ask the filesystem for change notices at all.
    pub(crate) notify: bool,
    /// The re-list interval without notices.
    pub(crate) fallback_interval: Duration,
    /// A re-list follows the last notice by this much...
    pub(crate) quiet: Duration,
    /// ...and the first by at most this much.
    pub(crate) max_delay: Duration,
    /// How long the watcher runs on after its last subscriber left, so a client that
    /// reconnects at once resumes from the history instead of a reset.
    pub(crate) linger: Duration,
}

impl Default for WatchSettings {
    fn default() -> Self {
        WatchSettings {
            notify: true,
            fallback_interval: Duration::from_secs(2),
            quiet: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            linger: Duration::from_secs(10),
        }
    }
}

/// The bytes of events a library stream hands over at once.
const STREAM_BUDGET: usize = 1024 * 1024;

/// The changes of one export as an async [`Stream`] of [`WatchEvent`]s: a `listing` (or, when
/// resuming, nothing or a `reset`) first, then a `change` for every new listing etag, in order.
/// Applying the batches to the listing the stream started from gives every later listing
/// exactly ([`ChangeBatch::apply_to`]). A subscriber that falls behind the watcher's history
/// gets a `reset` and goes on from the current listing. The stream ends when the server
/// shuts down ([`Router::shut_down_watches`]), or when the export cannot be listed at all.
///
/// The watcher starts with the first stream, long-poll or HTTP watch of the export and stops
/// after the last; a stream holds no thread and no listing of its own.
///
/// ```
/// use resource_plane::backends::{OsFilesystem, RecordingTraceSink};
/// use resource_plane::planes::watch::{ChangeKind, WatchEvent};
/// use resource_plane::{Capsule, Manifest};
/// use std::future::poll_fn;
/// use std::pin::Pin;
/// use std::sync::Arc;
/// use futures_core::Stream;
///
/// # #[tokio::main]
/// # async fn main() -> std::io::Result<()> {
/// let workdir = tempfile::tempdir()?;
/// std::fs::create_dir(workdir.path().join("out"))?;
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out/, mode: read-only } }")
///     .unwrap()
///     .manifest;
/// let capsule = Capsule::builder(&manifest)
///     .filesystem(Arc::new(OsFilesystem::open(workdir.path())?))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let mut changes = capsule.watch(None).expect("exports.files is declared");
///
/// let first = poll_fn(|cx| Pin::new(&mut changes).poll_next(cx)).await;
/// let Some(WatchEvent::Listing { entry_count: 0, .. }) = first else { panic!() };
/// std::fs::write(workdir.path().join("out/report.md"), "hello")?;
/// let next = poll_fn(|cx| Pin::new(&mut changes).poll_next(cx)).await;
/// let Some(WatchEvent::Change(batch)) = next else { panic!() };
/// assert_eq!(batch.changes[0].path, "report.md");
/// assert_eq!(batch.changes[0].change, ChangeKind::Added);
/// # Ok(())
/// # }
/// ```
///
/// [`Router::shut_down_watches`]: crate::http::Router::shut_down_watches
pub struct ChangeStream {
    steps: Steps<Box<StreamState>, Vec<WatchEvent>>,
    /// Events a step gave that are not yet handed out.
    ready: VecDeque<WatchEvent>,
}

#[derive(Debug)]
struct StreamState {
    hub: Arc<Hub>,
    resume: Option<String>,
    follower: Option<Follower>,
}

impl fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeStream")
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl ChangeStream {
    /// A stream of `hub`'s changes from `resume` (an etag), or from the current listing.
    pub(crate) fn new(hub: Arc<Hub>, resume: Option<String>) -> Self {
        let state = Box::new(StreamState {
            hub,
            resume,
            follower: None,
        });
        ChangeStream {
            steps: Steps::new(state, |state| Box::pin(state.step())),
            ready: VecDeque::new(),
        }
    }
}

impl StreamState {
    /// The next events, waiting for them; `None`: the stream ends.
    async fn step(mut self: Box<Self>) -> (Box<Self>, Option<Vec<WatchEvent>>) {
        let Some(follower) = &mut self.follower else {
            let sub = self.hub.subscribe();
            let opened = Follower::open(sub, self.resume.as_deref()).await;
            return match opened {
                Some(Ok((follower, _, opening))) => {
                    self.follower = Some(follower);
                    (self, Some(opening.into_iter().collect()))
                }
                Some(Err(refusal)) => {
                    tracing::warn!("a change stream ends: the export cannot be listed ({refusal})");
                    (self, None)
                }
                None => (self, None),
            };
        };
        loop {
            match follower.due(STREAM_BUDGET, u64::MAX) {
                Due::Records(records) if !records.is_empty() => {
                    let events = records
                        .into_iter()
                        .map(|r| WatchEvent::Change(r.batch))
                        .collect();
                    return (self, Some(events));
                }
                Due::Records(_) => {}
                Due::Behind => {
                    let Some(etag) = follower.skip_to_current() else {
                        return (self, None);
                    };
                    return (self, Some(vec![WatchEvent::Reset { etag }]));
                }
            }
            if follower.sub.changed().await == hub::Woken::Shutdown {
                return (self, None);
            }
        }
    }
}

impl Stream for ChangeStream {
    type Item = WatchEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Poll::Ready(Some(event));
            }
            match ready!(self.steps.poll_next(cx)) {
                Some(events) => self.ready.extend(events),
                None => return Poll::Ready(None),
            }
        }
    }
}
