//! One watcher per export root, shared by every waiter (D-17.4): the current listing, the
//! history of changes, and the task that re-lists when something changed.
//!
//! The task runs while anyone is subscribed: the first [`Subscription`] starts it, and it stops
//! (forgetting its listing and history) once nobody has been subscribed for the linger time.
//! It waits on the root's [`ChangeNotifier`] (or a 2 s timer without one), the generation
//! counter and explicit requests, coalesces notices (re-list 100 ms after the last, at most
//! 1 s after the first), and re-lists through the plane (the crate's on the blocking pool, so
//! the D-3.6 hash cache spares every unchanged file; a runtime's own plane awaited). A subscriber holds an `Arc` of the hub and a
//! position in its history: no thread, no listing of its own.

use super::WatchSettings;
use super::change::{ChangeBatch, diff};
use super::history::{History, Record, Resume};
use crate::backends::{ChangeNotifier, Filesystem, Notice};
use crate::generation::Generation;
use crate::planes::inline::ReadsInline;
use crate::planes::listing::ListingHead;
use crate::planes::{Cancel, Listing, ListingBody, ResourcePlane};
use crate::refusal::{Code, Refusal};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// What a watcher lists and how: the plane, what the listing body says besides its entries,
/// and where change notices come from.
pub(crate) struct Source {
    pub(crate) plane: Arc<dyn ResourcePlane>,
    /// The same plane's blocking calls, when the crate built it; `None` for a runtime's own
    /// plane, whose async listing is awaited.
    pub(crate) inline: Option<Arc<dyn ReadsInline>>,
    pub(crate) generation: Generation,
    pub(crate) containment: &'static str,
    /// The filesystem whose notices cover the plane's root; `None` for a runtime's own plane.
    pub(crate) notices: Option<Arc<dyn Filesystem>>,
    pub(crate) settings: WatchSettings,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("root", &self.plane.scope().root.declared())
            .field("notices", &self.notices.is_some())
            .field("settings", &self.settings)
            .finish()
    }
}

/// A listing as the watcher holds it, with its etag.
#[derive(Debug)]
pub(crate) struct Snapshot {
    listing: Listing,
    /// `sha256:<hex>` of the listing's body.
    pub(crate) etag: String,
    pub(crate) generation: u64,
}

/// The facts of the current listing a subscriber reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Current {
    pub(crate) etag: String,
    pub(crate) entry_count: u64,
    pub(crate) total_bytes: u64,
    pub(crate) generation: u64,
    /// The sequence number of the last batch (0: none since the watcher started).
    pub(crate) last: u64,
}

impl Source {
    /// The head of this plane's listing body at `generation` (D-3.5's key order).
    fn head(&self, generation: u64) -> ListingHead<'_> {
        let scope = self.plane.scope();
        ListingHead {
            root: scope.root.declared(),
            max_bytes: scope.max_bytes,
            generation,
            containment_achieved: self.containment,
        }
    }

    /// `listing`, listed at `generation`, compared with `old`: the new snapshot, and the batch
    /// from `old` to it when their etags differ.
    fn snapshot(
        &self,
        listing: Listing,
        generation: u64,
        old: Option<&Snapshot>,
    ) -> Result<(Snapshot, Option<ChangeBatch>), Refusal> {
        let (etag, mut listing) = etag_of(listing, &self.head(generation));
        listing.release_budget();
        let batch = old.filter(|old| old.etag != etag).map(|old| ChangeBatch {
            from: old.etag.clone(),
            etag: etag.clone(),
            generation,
            changes: diff(&old.listing, &listing),
        });
        Ok((
            Snapshot {
                listing,
                etag,
                generation,
            },
            batch,
        ))
    }
}

/// The etag of `listing`'s body under `head` (`sha256:<hex>`, unquoted), and the listing back.
pub(crate) fn etag_of(listing: Listing, head: &ListingHead<'_>) -> (String, Listing) {
    let body = ListingBody::new(listing, head);
    let etag = crate::wire::etag::of_digest(&body.sha256());
    (etag, body.into_listing())
}

#[derive(Debug, Default)]
struct State {
    subscribers: usize,
    running: bool,
    /// `None` until the watcher's first listing is done.
    current: Option<Result<Arc<Snapshot>, Refusal>>,
    /// The sequence number of the last batch.
    last: u64,
    history: History,
}

/// The watcher of one export root.
#[derive(Debug)]
pub(crate) struct Hub {
    source: Source,
    state: Mutex<State>,
    /// Bumped whenever the current listing or the history changes.
    news: watch::Sender<u64>,
    /// `true` once the server shuts down: every stream ends, every long-poll answers.
    shutdown: watch::Sender<bool>,
    /// A subscriber asks for a re-list now (a client resumes from an etag not known yet).
    relist: Notify,
    /// The last subscriber left.
    idle: Notify,
}

impl Hub {
    pub(crate) fn new(source: Source) -> Arc<Hub> {
        Arc::new(Hub {
            source,
            state: Mutex::new(State::default()),
            news: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
            relist: Notify::new(),
            idle: Notify::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes, starting the watcher when it is not running. Must be called inside a
    /// tokio runtime.
    pub(crate) fn subscribe(self: &Arc<Self>) -> Subscription {
        let news = self.news.subscribe();
        let shutdown = self.shutdown.subscribe();
        let mut state = self.state();
        state.subscribers += 1;
        if !state.running && !*self.shutdown.borrow() {
            state.running = true;
            tokio::spawn(self.clone().run());
        }
        drop(state);
        Subscription {
            hub: self.clone(),
            news,
            shutdown,
        }
    }

    /// The etag of the current listing, without subscribing: `None` while the watcher is not
    /// running, before its first listing, or when that listing failed.
    #[cfg(feature = "mcp")]
    pub(crate) fn current_etag(&self) -> Option<String> {
        let state = self.state();
        if !state.running {
            return None;
        }
        match &state.current {
            Some(Ok(snapshot)) => Some(snapshot.etag.clone()),
            _ => None,
        }
    }

    /// Ends every stream and long-poll, and stops the watcher.
    pub(crate) fn shut_down(&self) {
        self.shutdown.send_replace(true);
    }

    /// The watcher's task: the first listing, then a re-list at every trigger, until it has
    /// been idle for the linger time or the server shuts down.
    async fn run(self: Arc<Self>) {
        let settings = self.source.settings.clone();
        let mut generation = self.source.generation.subscribe();
        let mut shutdown = self.shutdown.subscribe();
        let mut notifier = self.open_notifier().await;
        self.relist().await;
        let mut idle_since: Option<Instant> = None;
        loop {
            if self.state().subscribers > 0 {
                idle_since = None;
            } else if idle_since.is_none() {
                idle_since = Some(Instant::now());
            }
            let linger_ends = idle_since.map(|at| at + settings.linger);
            let noticed = tokio::select! {
                notice = poll_notice(&mut notifier), if notifier.is_some() => {
                    self.take_notice(notice, &mut notifier)
                }
                () = tokio::time::sleep(settings.fallback_interval), if notifier.is_none() => false,
                changed = generation.changed() => {
                    if changed.is_err() {
                        // The counter is never dropped while a router holds the hub.
                        tokio::time::sleep(settings.fallback_interval).await;
                    }
                    false
                }
                () = self.relist.notified() => false,
                () = self.idle.notified() => continue,
                () = sleep_until(linger_ends), if linger_ends.is_some() => {
                    if self.stop_if_idle() {
                        return;
                    }
                    continue;
                }
                () = stopped(&mut shutdown) => {
                    self.stop();
                    return;
                }
            };
            if noticed {
                self.coalesce(&mut notifier).await;
            }
            self.relist().await;
        }
    }

    /// The root's notifier, opened on the blocking pool, or `None` (with a warning) when
    /// notices are off or unavailable: the watcher then re-lists every 2 s.
    async fn open_notifier(&self) -> Option<Box<dyn ChangeNotifier>> {
        let root = self.source.plane.scope().root.clone();
        let Some(fs) = self
            .source
            .notices
            .clone()
            .filter(|_| self.source.settings.notify)
        else {
            tracing::warn!(
                root = root.declared(),
                "change notification is off for this export; re-listing every {:?}",
                self.source.settings.fallback_interval
            );
            return None;
        };
        let opened = crate::blocking::run(move || fs.notifier(&root)).await;
        match opened {
            Ok(Ok(notifier)) => Some(notifier),
            Ok(Err(e)) => {
                tracing::warn!(
                    "change notification is unavailable ({}); re-listing every {:?}",
                    e.detail,
                    self.source.settings.fallback_interval
                );
                None
            }
            Err(_) => None,
        }
    }

    /// Takes one notice: whether something changed. A degraded notifier is dropped, with the
    /// warning, and the watcher re-lists on its timer from now on.
    fn take_notice(&self, notice: Notice, notifier: &mut Option<Box<dyn ChangeNotifier>>) -> bool {
        match notice {
            Notice::Changed => true,
            Notice::Degraded(why) => {
                tracing::warn!(
                    root = self.source.plane.scope().root.declared(),
                    "change notification degraded ({why}); re-listing every {:?}",
                    self.source.settings.fallback_interval
                );
                *notifier = None;
                true
            }
        }
    }

    /// Waits until notices have been quiet for the quiet time, or the longest delay since the
    /// first has passed.
    async fn coalesce(&self, notifier: &mut Option<Box<dyn ChangeNotifier>>) {
        let settings = &self.source.settings;
        let latest = Instant::now() + settings.max_delay;
        let mut quiet_ends = Instant::now() + settings.quiet;
        while notifier.is_some() {
            tokio::select! {
                notice = poll_notice(notifier) => {
                    self.take_notice(notice, notifier);
                    quiet_ends = Instant::now() + settings.quiet;
                }
                () = tokio::time::sleep_until(quiet_ends.min(latest)) => return,
            }
        }
    }

    /// Lists now and records what changed: the first listing becomes the current one; a later
    /// one whose etag differs becomes a batch in the history. A failed re-list leaves the
    /// current listing as it was (the next trigger tries again); a failed first listing is
    /// what subscribers are answered.
    async fn relist(self: &Arc<Self>) {
        let old = match &self.state().current {
            Some(Ok(snapshot)) => Some(snapshot.clone()),
            _ => None,
        };
        let listed = match self.source.inline.clone() {
            Some(inline) => {
                let hub = self.clone();
                crate::blocking::run_cancellable(move |cancel| {
                    let generation = hub.source.generation.current();
                    let listing = inline.list_blocking(cancel)?;
                    hub.source.snapshot(listing, generation, old.as_deref())
                })
                .await
                .unwrap_or_else(|_| {
                    Err(Refusal::new(
                        Code::IoError,
                        "the watcher's listing panicked",
                    ))
                })
            }
            None => {
                let cancel = Cancel::default();
                let _raise = cancel.on_drop();
                let generation = self.source.generation.current();
                match self.source.plane.list(&cancel).await {
                    Ok(listing) => self.source.snapshot(listing, generation, old.as_deref()),
                    Err(refusal) => Err(refusal),
                }
            }
        };
        let mut state = self.state();
        match listed {
            Ok((snapshot, batch)) => {
                let first = !matches!(state.current, Some(Ok(_)));
                state.current = Some(Ok(Arc::new(snapshot)));
                if let Some(batch) = batch {
                    state.last += 1;
                    let seq = state.last;
                    state.history.push(seq, Arc::new(batch), Instant::now());
                } else if !first {
                    return;
                }
            }
            Err(refusal) => {
                if state.current.is_some() {
                    tracing::warn!("the watcher's re-list failed: {}", refusal.reason);
                    return;
                }
                state.current = Some(Err(refusal));
            }
        }
        drop(state);
        self.news.send_modify(|version| *version += 1);
    }

    /// Stops the watcher when nobody is subscribed; whether it stopped.
    fn stop_if_idle(&self) -> bool {
        let mut state = self.state();
        if state.subscribers > 0 {
            return false;
        }
        state.running = false;
        state.current = None;
        state.history.clear();
        true
    }

    fn stop(&self) {
        let mut state = self.state();
        state.running = false;
        state.current = None;
        state.history.clear();
    }
}

/// The next notice of `notifier` (which the caller checked is there).
async fn poll_notice(notifier: &mut Option<Box<dyn ChangeNotifier>>) -> Notice {
    std::future::poll_fn(|cx| match notifier {
        Some(notifier) => notifier.poll_notice(cx),
        None => std::task::Poll::Pending,
    })
    .await
}

/// Resolves once `shutdown` says `true` (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One subscriber of a [`Hub`]: a stream, a long-poll or a library [`ChangeStream`]. Holds the
/// hub and two channel receivers; its place in the history is its owner's.
///
/// [`ChangeStream`]: super::ChangeStream
#[derive(Debug)]
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    news: watch::Receiver<u64>,
    shutdown: watch::Receiver<bool>,
}

/// What waiting for news ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The current listing or the history changed (or may have).
    News,
    /// The server shuts down.
    Shutdown,
}

impl Subscription {
    /// The current listing once the watcher's first listing is done, or its refusal;
    /// `None` at shutdown.
    pub(crate) async fn ready(&mut self) -> Option<Result<Current, Refusal>> {
        loop {
            if let Some(current) = self.current() {
                return Some(current);
            }
            if self.changed().await == Woken::Shutdown {
                return None;
            }
        }
    }

    /// The current listing, if the first listing is done.
    pub(crate) fn current(&self) -> Option<Result<Current, Refusal>> {
        let state = self.hub.state();
        state.current.as_ref().map(|current| {
            current
                .as_ref()
                .map_err(Clone::clone)
                .map(|snapshot| Current {
                    etag: snapshot.etag.clone(),
                    entry_count: snapshot.listing.len() as u64,
                    total_bytes: snapshot.listing.total_bytes(),
                    generation: snapshot.generation,
                    last: state.last,
                })
        })
    }

    /// Where a client whose listing has etag `etag` stands.
    pub(crate) fn resume(&self, etag: &str) -> Resume {
        let state = self.hub.state();
        match &state.current {
            Some(Ok(snapshot)) => state.history.resume(etag, &snapshot.etag, state.last),
            _ => Resume::Unknown,
        }
    }

    /// The batches after batch `after` (about `budget` bytes of events), and the bytes of all
    /// of them; `None` when the history no longer reaches back to `after`.
    pub(crate) fn after(&self, after: u64, budget: usize) -> Option<(Vec<Record>, u64)> {
        self.hub.state().history.after(after, budget)
    }

    /// Waits until the hub has news or the server shuts down.
    pub(crate) async fn changed(&mut self) -> Woken {
        if *self.shutdown.borrow() {
            return Woken::Shutdown;
        }
        tokio::select! {
            changed = self.news.changed() => match changed {
                Ok(()) => Woken::News,
                Err(_) => Woken::Shutdown,
            },
            () = stopped(&mut self.shutdown) => Woken::Shutdown,
        }
    }

    /// Whether the server shuts down.
    pub(crate) fn is_shut_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Asks the watcher to re-list now.
    pub(crate) fn request_relist(&self) {
        self.hub.relist.notify_one();
    }

    /// The longest a resuming client waits for the watcher to catch up with its etag.
    pub(crate) fn catch_up(&self) -> Duration {
        self.hub.source.settings.max_delay * 2
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.hub.state();
        state.subscribers -= 1;
        let last = state.subscribers == 0;
        drop(state);
        if last {
            self.hub.idle.notify_one();
        }
    }
}
