//! The first request line's HTTP version, checked on the bytes hyper reads (D-4.1, D-4.5).
//!
//! hyper closes on the HTTP/2 preface without a word and answers `HTTP/1.2` with 400; the spec
//! wants 505 for any version other than 1.0 or 1.1. [`VersionGate`] watches the first bytes of
//! a connection as they pass to hyper, at no cost of its own (no `MSG_PEEK` system call, no
//! extra buffer): when the first line names another `HTTP/` version, hyper is handed none of
//! that read, the gate writes the 505 itself and then reports end of stream, so hyper closes
//! without answering. Anything else (a line hyper will refuse on its own terms, a line longer
//! than the look-ahead) passes through untouched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much of the first line is watched: a request line is far shorter, and a longer first
/// line is hyper's to refuse (414 or 400).
const LOOKAHEAD: usize = 256;

/// The answer to a request line naming an HTTP version other than 1.0 or 1.1.
fn version_not_supported() -> Vec<u8> {
    format!(
        "HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-length: 0\r\nconnection: close\r\ndate: {}\r\n\r\n",
        crate::backends::clock::http_date_now()
    )
    .into_bytes()
}

/// What the first line says about the connection.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// No line end yet.
    Undecided,
    /// HTTP/1.0, HTTP/1.1, or not a version at all (hyper's to judge).
    Serve,
    /// Another `HTTP/` version: 505.
    Refuse,
}

fn verdict(seen: &[u8]) -> Verdict {
    let Some(end) = seen.windows(2).position(|w| w == b"\r\n") else {
        return Verdict::Undecided;
    };
    let version = seen[..end]
        .rsplit(|b| *b == b' ')
        .next()
        .unwrap_or_default();
    if version.starts_with(b"HTTP/") && version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        Verdict::Refuse
    } else {
        Verdict::Serve
    }
}

#[derive(Debug)]
enum Gate {
    /// The first line is not complete yet.
    Watching,
    /// The first line was acceptable (or too long to judge): bytes pass through.
    Open,
    /// Writing the 505; `written` bytes of `reply` are out.
    Refusing { reply: Vec<u8>, written: usize },
    /// The 505 is out (or the peer went away): reads see end of stream.
    Closed,
}

/// A connection whose first request line is checked for its HTTP version as it is read.
#[derive(Debug)]
pub struct VersionGate<S> {
    inner: S,
    gate: Gate,
    /// The first bytes read, while the gate is watching.
    seen: [u8; LOOKAHEAD],
    seen_len: usize,
}

impl<S> VersionGate<S> {
    /// Watches `inner`'s first line.
    pub fn new(inner: S) -> Self {
        VersionGate {
            inner,
            gate: Gate::Watching,
            seen: [0; LOOKAHEAD],
            seen_len: 0,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for VersionGate<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.gate {
                Gate::Open => return Pin::new(&mut this.inner).poll_read(cx, buf),
                Gate::Closed => return Poll::Ready(Ok(())),
                Gate::Refusing { reply, written } => {
                    while *written < reply.len() {
                        match ready!(Pin::new(&mut this.inner).poll_write(cx, &reply[*written..])) {
                            Ok(0) => break,
                            Ok(n) => *written += n,
                            Err(e) => {
                                this.gate = Gate::Closed;
                                return Poll::Ready(Err(e));
                            }
                        }
                    }
                    this.gate = Gate::Closed;
                }
                Gate::Watching => {
                    let before = buf.filled().len();
                    ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
                    let fresh = &buf.filled()[before..];
                    let len = this.seen_len;
                    let take = fresh.len().min(LOOKAHEAD - len);
                    this.seen[len..len + take].copy_from_slice(&fresh[..take]);
                    this.seen_len += take;
                    match verdict(&this.seen[..this.seen_len]) {
                        Verdict::Undecided if this.seen_len < LOOKAHEAD && !fresh.is_empty() => {}
                        Verdict::Undecided | Verdict::Serve => this.gate = Gate::Open,
                        Verdict::Refuse => {
                            // hyper sees none of this read, so it never parses the request.
                            buf.set_filled(before);
                            this.gate = Gate::Refusing {
                                reply: version_not_supported(),
                                written: 0,
                            };
                            continue;
                        }
                    }
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for VersionGate<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Feeds `chunks` one read at a time through a gate; returns what the reader saw and what
    /// the gate wrote back.
    async fn through_gate(chunks: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let (mut client, server) = tokio::io::duplex(4096);
        let chunks: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        let feeder = tokio::spawn(async move {
            for chunk in chunks {
                client.write_all(&chunk).await.expect("write");
                client.flush().await.expect("flush");
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            client.shutdown().await.expect("shutdown");
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.expect("read");
            answer
        });
        let mut gate = VersionGate::new(server);
        let mut seen = Vec::new();
        gate.read_to_end(&mut seen).await.expect("gate read");
        gate.shutdown().await.expect("gate shutdown");
        drop(gate);
        (seen, feeder.await.expect("feeder"))
    }

    #[test]
    fn verdicts_follow_the_request_line_version() {
        assert_eq!(verdict(b"GET / HTTP/1.1\r\n"), Verdict::Serve);
        assert_eq!(verdict(b"GET / HTTP/1.0\r\nHost: x"), Verdict::Serve);
        assert_eq!(verdict(b"GET / HTTP/1.2\r\n"), Verdict::Refuse);
        assert_eq!(
            verdict(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            Verdict::Refuse
        );
        assert_eq!(verdict(b"GET / HTTP/0.9\r\n"), Verdict::Refuse);
        assert_eq!(
            verdict(b"GET / http/1.1\r\n"),
            Verdict::Serve,
            "hyper's to judge"
        );
        assert_eq!(
            verdict(b"GET /\r\n"),
            Verdict::Serve,
            "no version: hyper's to judge"
        );
        assert_eq!(verdict(b"GET / HTTP/2.0"), Verdict::Undecided);
        assert_eq!(verdict(b""), Verdict::Undecided);
    }

    #[tokio::test]
    async fn accepted_versions_pass_through_byte_for_byte() {
        let request: &[u8] = b"GET /resources/files HTTP/1.1\r\nHost: x\r\n\r\n";
        let (seen, answer) = through_gate(&[request]).await;
        assert_eq!(seen, request);
        assert!(answer.is_empty(), "the gate itself writes nothing");
        // The same request split inside the request line, and byte by byte.
        let (seen, _) = through_gate(&[&request[..9], &request[9..]]).await;
        assert_eq!(seen, request);
        let bytes: Vec<&[u8]> = request.chunks(1).collect();
        let (seen, _) = through_gate(&bytes).await;
        assert_eq!(seen, request);
    }

    #[tokio::test]
    async fn other_versions_get_505_and_the_reader_sees_no_request() {
        for request in [
            &b"GET / HTTP/1.2\r\nHost: x\r\n\r\n"[..],
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"GET / HTTP/3\r\n\r\n",
        ] {
            let (seen, answer) = through_gate(&[request]).await;
            assert!(seen.is_empty(), "hyper must not see {request:?}");
            let answer = String::from_utf8(answer).expect("ascii");
            assert!(
                answer.starts_with("HTTP/1.1 505 HTTP Version Not Supported\r\n"),
                "{answer}"
            );
            assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
            assert!(answer.ends_with("\r\n\r\n"), "{answer}");
        }
    }

    #[tokio::test]
    async fn a_long_first_line_passes_to_hyper_unjudged() {
        let mut request = b"GET /".to_vec();
        request.extend(std::iter::repeat_n(b'a', 600));
        request.extend_from_slice(b" HTTP/2.0\r\n\r\n");
        let (seen, answer) = through_gate(&[&request]).await;
        assert_eq!(
            seen, request,
            "past the look-ahead the gate stays out of the way"
        );
        assert!(answer.is_empty());
    }

    #[tokio::test]
    async fn an_immediate_close_is_end_of_stream() {
        let (seen, answer) = through_gate(&[]).await;
        assert!(seen.is_empty());
        assert!(answer.is_empty());
    }
}
