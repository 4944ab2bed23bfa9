//! The endpoint's SSE answers, shaped for the listener: the first event read ahead of the head,
//! and keep-alive comments from one clock per service rather than a timer per stream.
//!
//! The SDK answers a `POST` with an event stream at once, before the handler has run, so the
//! listener would write the status line and headers alone and the answer's event in a second
//! write: two segments and two wake-ups of the client for every request. A `POST`'s stream
//! carries its answer (and any notice sent while it is made) and then ends, so waiting for the
//! first event before answering loses nothing: head, event and, when the stream ends right
//! after it, the closing chunk leave in one write ([`shaped`]).
//!
//! A stream that stays open (the `GET` notification stream, `subscriptions/listen`) needs a
//! comment now and then so that proxies and clients with read timeouts keep it. The SDK's own
//! keep-alive arms a timer for every stream, answers included, and arming a timer due sooner
//! than any other wakes the runtime's driver: a syscall and an extra turn per request. Here a
//! stream only waits on the service's [`Heartbeat`] while it has nothing to send, and a beat
//! sends every waiting stream one comment (`:`), so an idle stream hears one at least every
//! interval and no request arms a timer of its own (while its handler runs, its stream waits on
//! the shared clock, starting it if nobody else was waiting).

use super::http::McpBody;
use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::watch;

/// How often the keep-alive clock beats: a stream with nothing to send hears a comment at
/// least this often.
pub(crate) const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);

/// The SSE comment a beat sends: ignored by every event-stream parser.
const COMMENT: &[u8] = b":\n\n";

/// One clock for every event stream of a service.
///
/// The ticking task starts on the runtime of the first stream that waits, holds only a weak
/// reference (it ends with the service), stops at a beat no stream waits for, and starts again
/// on the runtime of the next stream that waits (also when the runtime it ran on has ended).
#[derive(Debug)]
pub(crate) struct Heartbeat {
    beats: watch::Sender<u64>,
    every: Duration,
    ticker: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Heartbeat {
    pub(crate) fn new(every: Duration) -> Arc<Self> {
        Arc::new(Heartbeat {
            beats: watch::Sender::new(0),
            every,
            ticker: Mutex::new(None),
        })
    }

    /// A future that completes at the next beat, starting the clock if it is not running.
    fn next_beat(self: &Arc<Self>) -> WaitForBeat {
        let mut beats = {
            // Subscribed under the clock's lock, so the clock cannot see "nobody waits" and
            // stop between this start and this subscription.
            let mut ticker = self.ticker.lock().unwrap_or_else(PoisonError::into_inner);
            self.keep_ticking(&mut ticker);
            self.beats.subscribe()
        };
        Box::pin(async move {
            // An error means the service is gone; the stream it fed is ending too.
            let _ = beats.changed().await;
        })
    }

    fn keep_ticking(self: &Arc<Self>, ticker: &mut Option<tokio::task::AbortHandle>) {
        if ticker.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let heart: Weak<Heartbeat> = Arc::downgrade(self);
        let every = self.every;
        let task = runtime.spawn(async move {
            let mut clock = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                clock.tick().await;
                let Some(heart) = heart.upgrade() else {
                    return;
                };
                let mut ticker = heart.ticker.lock().unwrap_or_else(PoisonError::into_inner);
                // Nobody waits: stop, so an idle endpoint wakes nothing; the next stream
                // that waits starts the clock again.
                if heart.beats.receiver_count() == 0 {
                    *ticker = None;
                    return;
                }
                heart
                    .beats
                    .send_modify(|count| *count = count.wrapping_add(1));
            }
        });
        *ticker = Some(task.abort_handle());
    }

    #[cfg(test)]
    fn is_ticking(&self) -> bool {
        self.ticker
            .lock()
            .map(|task| task.as_ref().is_some_and(|task| !task.is_finished()))
            .unwrap_or(false)
    }
}

type WaitForBeat = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// `response` shaped for the listener: an event stream gains keep-alive comments from `heart`
/// and, when `read_ahead` (a `POST`'s answer), has its first frame read before it is returned.
/// Other responses (a JSON answer, a refusal, `202`) are returned as they are.
pub(crate) async fn shaped(
    response: Response<McpBody>,
    heart: &Arc<Heartbeat>,
    read_ahead: bool,
) -> Response<McpBody> {
    let is_stream = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"));
    if !is_stream {
        return response;
    }
    let (head, body) = response.into_parts();
    let mut body = KeptAlive {
        inner: body,
        heart: heart.clone(),
        waiting: None,
    };
    if !read_ahead {
        return Response::from_parts(head, body.boxed());
    }
    let first = match body.frame().await {
        Some(Ok(frame)) => Some(frame),
        Some(Err(never)) => match never {},
        None => None,
    };
    Response::from_parts(head, FirstThenRest { first, rest: body }.boxed())
}

/// An event stream that sends a comment at each beat it spends waiting.
struct KeptAlive {
    inner: McpBody,
    heart: Arc<Heartbeat>,
    /// The next beat, while the stream has nothing to send. The mutex only makes the body
    /// `Sync`, as a boxed body must be; polling has `&mut` and never locks it.
    waiting: Option<Mutex<WaitForBeat>>,
}

impl Body for KeptAlive {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            self.waiting = None;
            return Poll::Ready(frame);
        }
        let heart = self.heart.clone();
        let waiting = self
            .waiting
            .get_or_insert_with(|| Mutex::new(heart.next_beat()));
        let beat = match waiting.get_mut() {
            Ok(next) => next.as_mut().poll(cx),
            Err(_) => Poll::Pending,
        };
        match beat {
            Poll::Ready(()) => {
                self.waiting = None;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(COMMENT)))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A body whose first frame was read ahead: that frame, then the rest.
struct FirstThenRest<B> {
    first: Option<Frame<Bytes>>,
    rest: B,
}

impl<B> Body for FirstThenRest<B>
where
    B: Body<Data = Bytes, Error = Infallible> + Unpin,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.first.take() {
            Some(frame) => Poll::Ready(Some(Ok(frame))),
            None => Pin::new(&mut self.rest).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let ahead = self
            .first
            .as_ref()
            .and_then(Frame::data_ref)
            .map_or(0, |data| data.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + ahead);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + ahead);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;

    fn with_type(body: McpBody, kind: &'static str) -> Response<McpBody> {
        let mut response = Response::new(body);
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(kind),
        );
        response
    }

    fn never_ends() -> McpBody {
        StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, Infallible>>()).boxed()
    }

    async fn next_data(body: &mut McpBody) -> Bytes {
        body.frame().await.unwrap().unwrap().into_data().unwrap()
    }

    #[tokio::test]
    async fn an_answer_keeps_every_frame_in_order_and_arms_no_clock() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        let frames = ["data: one\n\n", "data: two\n\n"]
            .map(|data| Ok::<_, Infallible>(Frame::data(Bytes::from_static(data.as_bytes()))));
        let body = StreamBody::new(futures::stream::iter(frames)).boxed();
        let response = shaped(with_type(body, "text/event-stream"), &heart, true).await;
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"data: one\n\ndata: two\n\n");
        assert!(
            !heart.is_ticking(),
            "an answer ready at once started the clock"
        );
    }

    #[tokio::test]
    async fn a_post_answer_is_returned_only_once_its_first_event_is_ready() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        let (events, receiver) = tokio::sync::mpsc::channel::<Bytes>(1);
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            let event = receiver.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(event)), receiver))
        });
        let body = StreamBody::new(stream).boxed();
        let shaping = tokio::spawn(async move {
            shaped(with_type(body, "text/event-stream"), &heart, true).await
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!shaping.is_finished(), "answered before its first event");
        events
            .send(Bytes::from_static(b"data: answer\n\n"))
            .await
            .unwrap();
        drop(events);
        let mut body = shaping.await.unwrap().into_body();
        // The event is already in hand: its size is known before it is read.
        assert_eq!(body.size_hint().lower(), 14);
        assert_eq!(next_data(&mut body).await, "data: answer\n\n");
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn an_empty_stream_stays_empty() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        let body = http_body_util::Empty::<Bytes>::new().boxed();
        let response = shaped(with_type(body, "text/event-stream"), &heart, true).await;
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert!(bytes.is_empty());
    }

    #[tokio::test]
    async fn a_json_answer_is_passed_through_unread() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        // A body that never yields: reading ahead would never return.
        let response = with_type(never_ends(), "application/json");
        let passed =
            tokio::time::timeout(Duration::from_secs(5), shaped(response, &heart, true)).await;
        assert!(passed.is_ok(), "a JSON answer's body was read ahead");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_stream_hears_a_comment_at_each_beat() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        let response = shaped(with_type(never_ends(), "text/event-stream"), &heart, false).await;
        let mut body = response.into_body();
        let started = tokio::time::Instant::now();
        assert_eq!(next_data(&mut body).await, ":\n\n");
        assert_eq!(next_data(&mut body).await, ":\n\n");
        let waited = started.elapsed();
        assert!(
            waited >= KEEP_ALIVE_EVERY * 2 && waited < KEEP_ALIVE_EVERY * 3,
            "two comments after {waited:?}"
        );
        assert!(heart.is_ticking());
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_answer_is_released_by_a_comment() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        let response = shaped(with_type(never_ends(), "text/event-stream"), &heart, true).await;
        let mut body = response.into_body();
        assert_eq!(body.size_hint().exact(), None);
        assert_eq!(next_data(&mut body).await, ":\n\n");
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_stops_when_no_stream_waits_and_starts_again_for_the_next() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        drop(heart.next_beat());
        assert!(heart.is_ticking());
        tokio::time::sleep(KEEP_ALIVE_EVERY * 2).await;
        assert!(!heart.is_ticking(), "the clock ticks with nobody waiting");
        let started = tokio::time::Instant::now();
        heart.next_beat().await;
        assert!(
            started.elapsed() <= KEEP_ALIVE_EVERY,
            "a new waiter heard no beat"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_stops_with_its_service() {
        let heart = Heartbeat::new(KEEP_ALIVE_EVERY);
        drop(heart.next_beat());
        let task = heart.ticker.lock().unwrap().clone().unwrap();
        // Someone still listens, so only the service's end can stop the clock.
        let _listener = heart.beats.subscribe();
        drop(heart);
        tokio::time::sleep(KEEP_ALIVE_EVERY * 2).await;
        assert!(task.is_finished(), "the clock outlived its service");
    }
}
