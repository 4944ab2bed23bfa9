//! Noticing that a client left while its request is being worked on (D-3.3.1, D-4.6.1).
//!
//! hyper serves each connection with half-close allowed (a client may shut its sending side
//! once its request is out and still get the answer), so it does not read the socket while the
//! service works: a client that leaves altogether would be noticed only when the answer's
//! write fails, after all the work. [`watch`] splits a connection's byte stream into the end
//! hyper reads and writes ([`Watched`]) and a [`Departure`] the listener polls beside the
//! service's future, only while that future is pending (the request head is then read whole):
//!
//! * a read error (a reset) means the client is gone;
//! * bytes after the request are read and dropped (every answer closes the connection, so
//!   they could never be a request);
//! * the end of the stream is either a half-close or a close, and TCP alone cannot tell which.
//!   To an HTTP/1.1 request the departure then writes an interim `HTTP/1.1 100 Continue`
//!   response, which every HTTP/1.1 client must accept and skip before the final one
//!   (RFC 9110 §15.2), a few times 250 ms apart: a client that closed its socket answers the
//!   first with a reset, and the next write fails. An HTTP/1.0 client may not be sent an
//!   interim response, so its end of stream is taken as a half-close: it is noticed as gone
//!   only by a reset, or when the answer's write fails.
//!
//! An interim response is never cut by the final one: a probe begun is finished by the next
//! write hyper makes, before hyper's bytes.

use http::Version;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The interim response written to learn whether a client that ended its stream still reads.
const PROBE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How long after the end of the stream the first probe is written, and between probes: an
/// answer ready within it is sent with no probe before it.
const PROBE_GAP: Duration = Duration::from_millis(250);

/// Probes written before a client that ended its stream is taken to be reading still: enough
/// for the reset of the first to come back over a slow path.
const PROBES: usize = 4;

/// The stream, shared by its two ends, and how much of a probe is still to be written.
#[derive(Debug)]
struct Shared<IO> {
    io: IO,
    /// Bytes of [`PROBE`] not written yet, from its end.
    probe_left: usize,
}

/// The end of a connection hyper reads and writes (see the module docs).
#[derive(Debug)]
pub(crate) struct Watched<IO>(Arc<Mutex<Shared<IO>>>);

/// The end of a connection that tells when its client left (see the module docs).
#[derive(Debug)]
pub(crate) struct Departure<IO>(Arc<Mutex<Shared<IO>>>);

impl<IO> Clone for Departure<IO> {
    fn clone(&self) -> Self {
        Departure(self.0.clone())
    }
}

/// Splits `io` into the end hyper serves and the end that watches for the client leaving.
pub(crate) fn watch<IO>(io: IO) -> (Watched<IO>, Departure<IO>) {
    let shared = Arc::new(Mutex::new(Shared { io, probe_left: 0 }));
    (Watched(shared.clone()), Departure(shared))
}

fn lock<IO>(shared: &Mutex<Shared<IO>>) -> MutexGuard<'_, Shared<IO>> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl<IO: AsyncWrite + Unpin> Shared<IO> {
    /// Writes what is left of a probe begun; ready once none is left.
    fn poll_probe(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.probe_left > 0 {
            let from = PROBE.len() - self.probe_left;
            let written = ready!(Pin::new(&mut self.io).poll_write(cx, &PROBE[from..]))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.probe_left -= written;
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(&self.0).io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut shared = lock(&self.0);
        ready!(shared.poll_probe(cx))?;
        Pin::new(&mut shared.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut shared = lock(&self.0);
        ready!(shared.poll_probe(cx))?;
        Pin::new(&mut shared.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        lock(&self.0).io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.0);
        ready!(shared.poll_probe(cx))?;
        Pin::new(&mut shared.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.0);
        ready!(shared.poll_probe(cx))?;
        Pin::new(&mut shared.io).poll_shutdown(cx)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Departure<IO> {
    /// Resolves when the client of a request of `version`, whose head has been read whole, is
    /// known to have left; pending for as long as it may still be waiting for the answer. Poll
    /// it only while the request's answer is not ready: it reads the connection.
    pub(crate) async fn gone(&self, version: Version) {
        if !self.read_to_end().await {
            return;
        }
        if version != Version::HTTP_11 {
            return std::future::pending().await;
        }
        for _ in 0..PROBES {
            tokio::time::sleep(PROBE_GAP).await;
            if self.probe().await.is_err() {
                return;
            }
        }
        std::future::pending().await
    }

    /// Reads and drops what the client sends until its stream ends (`true`) or fails (`false`).
    async fn read_to_end(&self) -> bool {
        let mut scratch = [0u8; 512];
        loop {
            let read = std::future::poll_fn(|cx| {
                let mut buf = ReadBuf::new(&mut scratch);
                let mut shared = lock(&self.0);
                ready!(Pin::new(&mut shared.io).poll_read(cx, &mut buf))?;
                Poll::Ready(Ok::<_, io::Error>(buf.filled().len()))
            })
            .await;
            match read {
                Ok(0) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }

    /// Writes one interim response.
    ///
    /// # Errors
    /// The write's: the client closed its socket, and its reset came back.
    async fn probe(&self) -> io::Result<()> {
        lock(&self.0).probe_left = PROBE.len();
        std::future::poll_fn(|cx| {
            let mut shared = lock(&self.0);
            ready!(shared.poll_probe(cx))?;
            Pin::new(&mut shared.io).poll_flush(cx)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // the tests need real TCP: resets and half-closes
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    /// How long `gone` takes to resolve, if it does within `within`.
    async fn resolves_within(
        departure: &Departure<TcpStream>,
        version: Version,
        within: Duration,
    ) -> bool {
        tokio::time::timeout(within, departure.gone(version))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_reset_is_a_departure() {
        let (client, server) = pair().await;
        let (_watched, departure) = watch(server);
        #[allow(deprecated)] // a zero linger resets at once; it never blocks the thread
        client.set_linger(Some(Duration::ZERO)).unwrap();
        drop(client);
        assert!(resolves_within(&departure, Version::HTTP_10, Duration::from_secs(2)).await);
    }

    #[tokio::test]
    async fn a_closed_http11_client_is_found_gone_by_the_probes() {
        let (client, server) = pair().await;
        let (_watched, departure) = watch(server);
        drop(client);
        assert!(resolves_within(&departure, Version::HTTP_11, Duration::from_secs(2)).await);
    }

    /// A client that only shut its sending side gets interim responses, is never taken to be
    /// gone, and its final answer follows them whole.
    #[tokio::test]
    async fn a_half_closed_client_stays_and_reads_probes_then_the_answer() {
        let (mut client, server) = pair().await;
        let (mut watched, departure) = watch(server);
        client.shutdown().await.unwrap();
        assert!(!resolves_within(&departure, Version::HTTP_11, Duration::from_secs(2)).await);
        watched.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        watched.shutdown().await.unwrap();
        let mut seen = Vec::new();
        client.read_to_end(&mut seen).await.unwrap();
        let seen = String::from_utf8(seen).unwrap();
        let finals = seen.trim_start_matches("HTTP/1.1 100 Continue\r\n\r\n");
        assert!(seen.len() > finals.len(), "at least one probe: {seen:?}");
        assert_eq!(finals, "HTTP/1.1 200 OK\r\n\r\n");
    }

    /// An HTTP/1.0 client is never sent an interim response: its end of stream is a
    /// half-close.
    #[tokio::test]
    async fn an_http10_client_that_ended_its_stream_gets_no_probe() {
        let (mut client, server) = pair().await;
        let (mut watched, departure) = watch(server);
        client.shutdown().await.unwrap();
        assert!(!resolves_within(&departure, Version::HTTP_10, Duration::from_millis(800)).await);
        watched.write_all(b"HTTP/1.0 200 OK\r\n\r\n").await.unwrap();
        watched.shutdown().await.unwrap();
        let mut seen = Vec::new();
        client.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, b"HTTP/1.0 200 OK\r\n\r\n");
    }

    /// Bytes after the request are dropped, and the client is still there.
    #[tokio::test]
    async fn bytes_after_the_request_are_dropped_not_a_departure() {
        let (mut client, server) = pair().await;
        let (_watched, departure) = watch(server);
        client.write_all(b"more bytes").await.unwrap();
        assert!(!resolves_within(&departure, Version::HTTP_11, Duration::from_millis(500)).await);
    }

    /// A probe cut off by the answer's arrival is finished before the answer's bytes.
    #[tokio::test]
    async fn a_probe_begun_is_finished_before_the_answer() {
        let (mut client, server) = pair().await;
        let (mut watched, departure) = watch(server);
        lock(&departure.0).probe_left = 5; // the last five bytes of a probe are left to write
        watched.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        watched.shutdown().await.unwrap();
        let mut seen = Vec::new();
        client.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, b"e\r\n\r\nHTTP/1.1 200 OK\r\n\r\n");
    }
}
