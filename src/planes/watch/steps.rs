//! An async state machine polled as a stream: each step takes the state and gives it back with
//! the next item, or with none to end. The library's change stream and the HTTP watch body are
//! both one; this is the polling they share.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, ready};

/// One step under way: it owns the state until it ends.
pub(crate) type Step<S, T> = Pin<Box<dyn Future<Output = (S, Option<T>)> + Send>>;

/// The items of the steps `step` takes from a state, one step at a time.
pub(crate) struct Steps<S, T> {
    /// The state while no step runs; `None` while one does, and after the end.
    state: Option<S>,
    /// The step under way. Behind a mutex only so the stream is `Sync`; it is only ever reached
    /// through `&mut self`.
    running: Mutex<Option<Step<S, T>>>,
    step: fn(S) -> Step<S, T>,
}

impl<S, T> Steps<S, T> {
    /// The steps of `step` from `state`.
    pub(crate) fn new(state: S, step: fn(S) -> Step<S, T>) -> Self {
        Steps {
            state: Some(state),
            running: Mutex::new(None),
            step,
        }
    }

    /// The next item, starting the next step when none runs; `None` once a step gave none, and
    /// from then on.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        let step = match running {
            Some(step) => step,
            None => {
                let Some(state) = self.state.take() else {
                    return Poll::Ready(None);
                };
                running.insert((self.step)(state))
            }
        };
        let (state, item) = ready!(step.as_mut().poll(cx));
        *running = None;
        if item.is_some() {
            self.state = Some(state);
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    /// Counts down from the state, one item a step, and ends at zero.
    fn count_down(n: u32) -> Step<u32, u32> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            (n.saturating_sub(1), (n > 0).then_some(n))
        })
    }

    #[tokio::test]
    async fn every_step_gives_one_item_until_one_gives_none() {
        let mut steps = Steps::new(3, count_down);
        let mut items = Vec::new();
        while let Some(item) = poll_fn(|cx| steps.poll_next(cx)).await {
            items.push(item);
        }
        assert_eq!(items, [3, 2, 1]);
        assert_eq!(
            poll_fn(|cx| steps.poll_next(cx)).await,
            None,
            "ended for good"
        );
    }
}
