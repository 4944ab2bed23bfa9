//! A send timeout: a connection whose response makes no progress for a while is dropped.
//!
//! Why: a read's body holds its bytes of the in-flight budget (D-4.6) until the client has taken
//! it. A client that asks for large files and then stops reading would hold those bytes for as
//! long as it keeps the connection open, and every other large read would wait behind it. Like
//! nginx's `send_timeout`, the timer runs only while a write is blocked: it starts when the
//! socket refuses bytes and is disarmed by any write that moves them, so a slow client that
//! keeps reading is not cut off (but see below), while one that stopped is dropped after
//! `timeout`, and its body, with its bytes, goes back to the budget.
//!
//! How soon a blocked write moves again is the kernel's call: a TCP socket turns writable only
//! once a good share of its send queue has drained (about 1.4 MB with an autotuned buffer on
//! Linux), so the timeout really bounds a gap with no such drain. At the default of
//! 60 s (nginx's `send_timeout`), a client steadily reading slower than about 23 KB/s a body
//! larger than the kernel's buffers can be cut off; `serve --send-timeout` raises it.
//! (`TCP_NOTSENT_LOWAT`, tried to make writes complete after smaller drains, made it worse:
//! a slow reader's window updates then came too seldom for any write to complete.)

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long a response may make no progress before its connection is dropped, by default.
pub(crate) const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection whose writes fail with `TimedOut` once one has been blocked for `timeout`.
#[derive(Debug)]
pub(crate) struct StallGuard<S> {
    inner: S,
    timeout: Duration,
    /// Armed while a write is blocked; fires `timeout` after the block began.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> StallGuard<S> {
    /// Guards `inner`'s writes with `timeout`.
    pub(crate) fn new(inner: S, timeout: Duration) -> Self {
        StallGuard {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Passes a write's outcome through: progress disarms the timer; a blocked write arms it
    /// (once) and fails with `TimedOut` when it fires.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if outcome.is_ready() {
            self.stalled = None;
            return outcome;
        }
        let timeout = self.timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took nothing for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallGuard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallGuard<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, outcome)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, outcome)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.watch(cx, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A peer that stops reading: the duplex buffer fills, the write blocks, and after the
    /// timeout it fails with `TimedOut` (the listener then drops the connection).
    #[tokio::test(start_paused = true)]
    async fn a_write_blocked_for_the_timeout_fails_with_timed_out() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut guard = StallGuard::new(server, Duration::from_secs(30));
        let started = Instant::now();
        let e = guard
            .write_all(&vec![7u8; 64 * 1024])
            .await
            .expect_err("a client that takes nothing");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        // What the client did take is intact.
        let mut taken = vec![0u8; 1024];
        client.read_exact(&mut taken).await.expect("the first KiB");
        assert!(taken.iter().all(|b| *b == 7));
    }

    /// A slow client that keeps taking bytes is never cut off, however long the whole body
    /// takes: every write that moves bytes disarms the timer.
    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_taking_bytes_is_never_cut_off() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut guard = StallGuard::new(server, Duration::from_secs(30));
        let body = vec![9u8; 64 * 1024];
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut chunk = vec![0u8; 1024];
            while got.len() < 64 * 1024 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                let n = client.read(&mut chunk).await.expect("read");
                got.extend_from_slice(&chunk[..n]);
            }
            got
        });
        let started = Instant::now();
        guard.write_all(&body).await.expect("never timed out");
        guard.flush().await.expect("flushed");
        assert!(
            started.elapsed() > Duration::from_secs(60 * 20),
            "it was slow"
        );
        assert_eq!(reader.await.expect("reader").len(), body.len());
    }
}
