//! The body of a watch stream (D-17.3): Server-Sent Events from one watcher's history,
//! produced as hyper asks for them, with keep-alive comments, a one-hour cap, an end at
//! shutdown, and a cut for a client that lets too much queue up.
//!
//! "Queued" is what the history holds past the stream's place: events produced for the
//! stream but not yet taken by the connection. A client that reads slowly makes hyper ask for
//! the next events late, and finds over 1 MiB waiting behind the batch due next: the stream
//! ends, and the client resumes with `Last-Event-ID`. A batch larger than 1 MiB on its own is
//! sent whole. Bytes already in the kernel's socket buffers are not counted; a client that
//! reads nothing at all is dropped by the listener's send timeout.

use crate::planes::watch::{Due, Follower, KEEP_ALIVE, Steps};
use bytes::{Bytes, BytesMut};
use std::fmt;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Instant;

/// How much may queue for a stream beyond the batch due next before it is cut.
pub(crate) const MAX_QUEUED: u64 = 1024 * 1024;
/// A comment goes out after this long with nothing sent.
pub(crate) const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);
/// A stream ends this long after it opened; the client reconnects and resumes.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// The bytes of events one frame carries at most (one batch may take it past).
const FRAME: usize = 64 * 1024;

/// The stream's events, produced on demand.
pub(crate) struct WatchBody {
    steps: Steps<Box<StreamState>, Bytes>,
    ended: bool,
}

struct StreamState {
    follower: Follower,
    /// The opening event (`listing` or `reset`), not yet sent.
    opening: Option<Bytes>,
    ends_at: Instant,
}

impl fmt::Debug for WatchBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchBody")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl WatchBody {
    /// A stream following `follower`, `opening` first.
    pub(crate) fn new(follower: Follower, opening: Option<Vec<u8>>) -> Self {
        let state = Box::new(StreamState {
            follower,
            opening: opening.map(Bytes::from),
            ends_at: Instant::now() + MAX_AGE,
        });
        WatchBody {
            steps: Steps::new(state, |state| Box::pin(state.next())),
            ended: false,
        }
    }

    /// The next bytes of the stream, or `None` once it ended.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let bytes = ready!(self.steps.poll_next(cx));
        self.ended = bytes.is_none();
        Poll::Ready(bytes)
    }

    /// Whether the stream has ended.
    pub(crate) fn is_end(&self) -> bool {
        self.ended
    }
}

impl StreamState {
    /// The next bytes to send, waiting for them: events, or a keep-alive after 15 s of none;
    /// `None` at shutdown, after an hour, or when the client let too much queue up.
    async fn next(mut self: Box<Self>) -> (Box<Self>, Option<Bytes>) {
        if let Some(opening) = self.opening.take() {
            return (self, Some(opening));
        }
        loop {
            if self.follower.sub.is_shut_down() || Instant::now() >= self.ends_at {
                return (self, None);
            }
            match self.follower.due(FRAME, MAX_QUEUED) {
                Due::Records(records) if !records.is_empty() => {
                    let mut frame = BytesMut::new();
                    for record in records {
                        frame.extend_from_slice(&record.sse);
                    }
                    return (self, Some(frame.freeze()));
                }
                Due::Records(_) => {}
                Due::Behind => {
                    tracing::debug!("a watch stream's client let over 1 MiB queue up: cut");
                    return (self, None);
                }
            }
            let ends_at = self.ends_at;
            tokio::select! {
                woken = self.follower.sub.changed() => {
                    if woken == crate::planes::watch::hub::Woken::Shutdown {
                        return (self, None);
                    }
                }
                () = tokio::time::sleep(KEEP_ALIVE_EVERY) => return (self, Some(KEEP_ALIVE)),
                () = tokio::time::sleep_until(ends_at) => return (self, None),
            }
        }
    }
}
