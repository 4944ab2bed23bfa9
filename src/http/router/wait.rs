//! The listing route's answers that wait (D-17.2, D-17.3): a long-poll held until the listing
//! changes or its time runs out, and a watch stream opened on the export's watcher. Both wait
//! on the async side, holding a subscription to the watcher and no listing, and both leave
//! exactly one `resource_list` line: when the answer is decided, or `client_gone` when the
//! client leaves first (D-6.3, D-4.6.1).

use super::call::ListAsk;
use super::listing::{ListAnswer, ListExtra, Listed};
use super::mount::{FilesMount, Router};
use super::outcome::Outcome;
use crate::blocking;
use crate::events::ResourceListWaited;
use crate::http::body::PlaneBody;
use crate::http::response;
use crate::http::watch_stream::WatchBody;
use crate::planes::watch::hub::Woken;
use crate::planes::watch::{Follower, client_etag};
use crate::refusal::{Code, Refusal};
use http::Response;
use tokio::time::Instant;

/// Writes the request's one trace line, `client_gone`, if the request is dropped (its client
/// left) before its answer was decided.
struct GoneGuard {
    router: Router,
    started: Instant,
    generation: u64,
    watch: bool,
    armed: bool,
}

impl GoneGuard {
    fn new(router: &Router, generation: u64, watch: bool) -> Self {
        GoneGuard {
            router: router.clone(),
            started: Instant::now(),
            generation,
            watch,
            armed: true,
        }
    }

    fn waited_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The answer is decided: the line is the answer's to write.
    fn disarm(&mut self) -> ListExtra {
        self.armed = false;
        ListExtra {
            waited_ms: (!self.watch).then(|| self.waited_ms()),
            watch: self.watch,
        }
    }
}

impl Drop for GoneGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let event = ResourceListWaited {
            event: self.router.list_event(
                None,
                self.generation,
                "client_gone",
                Some("the client went away while the request waited".into()),
            ),
            waited_ms: (!self.watch).then(|| self.waited_ms()),
            watch: self.watch,
        };
        if let Err(e) = self.router.mounted.tracer.emit(&event) {
            tracing::error!("trace write failed for a request whose client left: {e}");
        }
    }
}

impl Router {
    /// Lists `files` now: the crate's plane on the blocking pool, in a listing lane (waited for
    /// on the async side, [`blocking::Lanes`]), a runtime's own plane awaited here; dropping
    /// the future stops the listing.
    pub(super) async fn list_in_lane(
        &self,
        files: &FilesMount,
        generation: u64,
    ) -> Result<Listed, Refusal> {
        if files.inline.is_none() {
            let cancel = crate::planes::Cancel::default();
            let _raise = cancel.on_drop();
            let listing = files.plane.list(&cancel).await?;
            return Ok(self.listed(files, listing, generation));
        }
        let lane = self.mounted.lanes.take(blocking::Kind::List).await;
        let (router, files) = (self.clone(), files.clone());
        blocking::run_cancellable(move |cancel| {
            let _lane = lane;
            router.list_now(&files, generation, cancel)
        })
        .await
        .unwrap_or_else(|_| Err(Refusal::new(Code::IoError, "the listing panicked")))
    }

    /// A long-poll (D-17.2). Held on the export's watcher, whose one listing every waiter
    /// shares: while the watcher's listing is the one `If-None-Match` names, the request waits
    /// (on the async side, holding no listing and no thread) until the watcher's listing
    /// changes or the wait runs out or the server shuts down (then the `304`, from the etag,
    /// without listing). Once the watcher's listing differs, or when there is no watcher, the
    /// request lists for itself: a `200` when its listing differs too; when it matches (the
    /// watcher had not caught up yet), the watcher is asked to list again and the request is
    /// held on.
    pub(super) async fn long_poll(&self, files: FilesMount, ask: ListAsk) -> Response<PlaneBody> {
        let wait = ask.query.wait.unwrap_or_default();
        let deadline = Instant::now() + wait;
        let mut gone = GoneGuard::new(self, self.mounted.generation.current(), false);
        let mut subscription = self.mounted.watch.as_ref().map(|hub| hub.subscribe());
        loop {
            if let Some(sub) = subscription.as_mut()
                && let Some(held) = hold(sub, &ask.if_none_match, deadline).await
            {
                let generation = self.mounted.generation.current();
                gone.generation = generation;
                return self.answer_listing(&files, Ok(held), &mut gone, generation);
            }
            let generation = self.mounted.generation.current();
            gone.generation = generation;
            let listed = self.list_in_lane(&files, generation).await;
            let answer = match listed {
                Ok(listed) if ask.if_none_match.matches(hex_of(&listed.etag)) => {
                    ListAnswer::unchanged(&listed)
                }
                other => {
                    return self.answer_listing(
                        &files,
                        other.map(ListAnswer::Full),
                        &mut gone,
                        generation,
                    );
                }
            };
            let Some(sub) = subscription.as_mut().filter(|_| Instant::now() < deadline) else {
                return self.answer_listing(&files, Ok(answer), &mut gone, generation);
            };
            sub.request_relist();
            match tokio::time::timeout_at(deadline, sub.changed()).await {
                Ok(Woken::News) => {}
                Ok(Woken::Shutdown) | Err(_) => {
                    return self.answer_listing(&files, Ok(answer), &mut gone, generation);
                }
            }
        }
    }

    /// Renders a long-poll's answer with its `waited_ms`.
    fn answer_listing(
        &self,
        files: &FilesMount,
        result: Result<ListAnswer, Refusal>,
        gone: &mut GoneGuard,
        generation: u64,
    ) -> Response<PlaneBody> {
        let extra = gone.disarm();
        let scope = files.plane.scope();
        self.render(
            Outcome::Listing {
                result: result.map(|answer| (scope, answer)),
                if_none_match: crate::planes::IfNoneMatch::absent(),
                extra,
            },
            generation,
        )
    }

    /// A watch stream (D-17.3), resuming from `Last-Event-ID`, else from the first etag of
    /// `If-None-Match`, else from the current listing.
    pub(super) async fn open_watch(
        &self,
        files: FilesMount,
        ask: ListAsk,
        generation: u64,
    ) -> Response<PlaneBody> {
        let Some(hub) = self.mounted.watch.clone() else {
            return response::refusal(Code::IoError, Some(generation), None);
        };
        let resume = match &ask.last_event_id {
            Some(sent) => {
                let sent = String::from_utf8_lossy(sent);
                Some(client_etag(&sent).unwrap_or_else(|| sent.into_owned()))
            }
            None => ask
                .if_none_match
                .tags()
                .iter()
                .find_map(|tag| client_etag(tag)),
        };
        let mut gone = GoneGuard::new(self, generation, true);
        let opened = Follower::open(hub.subscribe(), resume.as_deref()).await;
        let extra = gone.disarm();
        let scope = files.plane.scope();
        let listing_refused = |refusal| Outcome::Listing {
            result: Err(refusal),
            if_none_match: crate::planes::IfNoneMatch::absent(),
            extra,
        };
        let outcome = match opened {
            None => listing_refused(Refusal::new(Code::IoError, "the server is shutting down")),
            Some(Err(refusal)) => listing_refused(refusal),
            Some(Ok((follower, current, opening))) => Outcome::Watch {
                scope,
                current,
                body: WatchBody::new(follower, opening.map(|event| event.to_sse())),
            },
        };
        self.render(outcome, generation)
    }
}

/// The hex of an etag `sha256:<hex>`.
/// Holds a long-poll on its `subscription` while the watcher's listing is the one `if_none_match` names:
/// the `304`'s answer when `deadline` passes or the server shuts down first; `None` as soon as
/// the watcher's listing is another (or failed), for the request to list for itself.
async fn hold(
    subscription: &mut crate::planes::watch::hub::Subscription,
    if_none_match: &crate::planes::IfNoneMatch,
    deadline: Instant,
) -> Option<ListAnswer> {
    let mut current = match tokio::time::timeout_at(deadline, subscription.ready()).await {
        Ok(Some(Ok(current))) => current,
        _ => return None,
    };
    loop {
        if !if_none_match.matches(hex_of(&current.etag)) {
            return None;
        }
        let unchanged = ListAnswer::Unchanged {
            etag: current.etag.clone(),
            entry_count: current.entry_count,
            total_bytes: current.total_bytes,
        };
        match tokio::time::timeout_at(deadline, subscription.changed()).await {
            Ok(Woken::News) => {}
            Ok(Woken::Shutdown) | Err(_) => return Some(unchanged),
        }
        current = match subscription.current() {
            Some(Ok(current)) => current,
            _ => return None,
        };
    }
}

fn hex_of(etag: &str) -> &str {
    crate::wire::etag::hex_of(etag).unwrap_or_default()
}

impl ListAnswer {
    /// A listing's answer once it is known not to have changed: its etag and counts, its
    /// entries dropped (a held long-poll keeps no listing).
    fn unchanged(listed: &Listed) -> ListAnswer {
        let listing = listed.body.listing();
        ListAnswer::Unchanged {
            etag: listed.etag.clone(),
            entry_count: listing.len() as u64,
            total_bytes: listing.total_bytes(),
        }
    }
}
