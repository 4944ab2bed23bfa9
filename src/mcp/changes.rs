//! Where the MCP face learns that the export changed: a source of [`ChangeNotice`]s, one per
//! change of the listing, fed by the export's watcher (D-17). Each MCP session holds one
//! receiver while it lives.

use std::fmt::Debug;

/// What one change of the export's listing means to MCP clients: the paths whose content
/// (sha256) or presence changed, and whether any path was added or removed.
///
/// ```
/// use resource_plane::mcp::ChangeNotice;
///
/// let notice = ChangeNotice::new(vec!["report.md".into()], true);
/// assert_eq!(notice.changed, ["report.md"]);
/// assert!(notice.list_changed);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeNotice {
    /// Paths relative to the export root whose sha256 or presence changed: each subscribed
    /// one gets `notifications/resources/updated`.
    pub changed: Vec<String>,
    /// Whether a path was added or removed: every session gets
    /// `notifications/resources/list_changed`.
    pub list_changed: bool,
}

impl ChangeNotice {
    /// A notice of `changed` paths; `list_changed` when one was added or removed.
    pub fn new(changed: Vec<String>, list_changed: bool) -> Self {
        ChangeNotice {
            changed,
            list_changed,
        }
    }
}

/// A source of the export's changes for MCP subscriptions: each call to
/// [`subscribe`](Self::subscribe) is one session's feed, from that moment on. An
/// implementation shares one watcher among all its receivers (D-17.4), and ends a receiver
/// (drops its sender) when it can watch no more.
///
/// ```
/// use resource_plane::mcp::{ChangeNotice, ExportChanges};
/// use std::sync::Mutex;
///
/// /// Hands out receivers and keeps their senders, so a test can send notices.
/// #[derive(Debug, Default)]
/// struct Scripted(Mutex<Vec<tokio::sync::mpsc::Sender<ChangeNotice>>>);
///
/// impl ExportChanges for Scripted {
///     fn subscribe(&self) -> Option<tokio::sync::mpsc::Receiver<ChangeNotice>> {
///         let (sender, receiver) = tokio::sync::mpsc::channel(16);
///         self.0.lock().unwrap().push(sender);
///         Some(receiver)
///     }
/// }
///
/// let source = Scripted::default();
/// let mut feed = source.subscribe().unwrap();
/// source.0.lock().unwrap()[0].try_send(ChangeNotice::new(vec!["a.txt".into()], false)).unwrap();
/// assert_eq!(feed.try_recv().unwrap().changed, ["a.txt"]);
/// ```
pub trait ExportChanges: Debug + Send + Sync {
    /// A receiver of the notices from now on; `None` when the export cannot be watched.
    fn subscribe(&self) -> Option<tokio::sync::mpsc::Receiver<ChangeNotice>>;
}

/// The router's own export watcher (D-17.4) as a source of notices: each subscriber follows
/// one [`ChangeStream`](crate::planes::watch::ChangeStream) of the shared watcher, each change
/// batch becoming one notice (its paths; `list_changed` when one was added or removed). A
/// `reset` (the subscriber fell behind the watcher's history) says only that the list
/// changed: which files did is not known then.
#[derive(Debug)]
pub(crate) struct WatcherChanges {
    pub(crate) router: crate::http::Router,
}

/// Notices a subscriber may have waiting before its feed waits for it.
const QUEUED_NOTICES: usize = 64;

impl ExportChanges for WatcherChanges {
    fn subscribe(&self) -> Option<tokio::sync::mpsc::Receiver<ChangeNotice>> {
        use crate::planes::watch::{ChangeKind, WatchEvent};
        use futures_core::Stream;
        let mut stream = self.router.watch(None)?;
        let (sender, receiver) = tokio::sync::mpsc::channel(QUEUED_NOTICES);
        tokio::spawn(async move {
            loop {
                let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx));
                let event = tokio::select! {
                    event = next => event,
                    () = sender.closed() => break,
                };
                let notice = match event {
                    None => break,
                    Some(WatchEvent::Listing { .. }) => continue,
                    Some(WatchEvent::Reset { .. }) => ChangeNotice::new(Vec::new(), true),
                    Some(WatchEvent::Change(batch)) => {
                        if batch.changes.is_empty() {
                            continue;
                        }
                        let list_changed = batch
                            .changes
                            .iter()
                            .any(|change| change.change != ChangeKind::Modified);
                        let changed = batch.changes.iter().map(|c| c.path.clone()).collect();
                        ChangeNotice::new(changed, list_changed)
                    }
                };
                if sender.send(notice).await.is_err() {
                    break;
                }
            }
        });
        Some(receiver)
    }
}
