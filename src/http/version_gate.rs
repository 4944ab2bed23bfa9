//! The first request line's HTTP version, checked on the bytes hyper reads (D-4.1, D-4.5).
//!
//! hyper closes on the HTTP/2 preface without a word and answers `HTTP/1.2` with 400 (its
//! parser rejects the version as soon as the digit arrives); the spec wants 505 for any version
//! other than 1.0 or 1.1. [`VersionGate`] holds a connection's first bytes back from hyper until
//! the first request line is complete, without a system call of its own (no `MSG_PEEK`): when
//! the line names another `HTTP/` version, hyper is handed nothing, the gate writes the 505
//! itself and reports end of stream, so hyper closes without answering; otherwise the held
//! bytes go to hyper unchanged and the gate steps aside. Line ends and leading empty lines are
//! read as hyper's parser reads them (`\n` or `\r\n`). A first line longer than the look-ahead
//! is hyper's to judge.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How much of the first line is held back: half the 16 KiB head limit. A longer first line is
/// hyper's to refuse as it sees fit.
const LOOKAHEAD: usize = 8 * 1024;

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
    // Empty lines before the request line are skipped, as hyper's parser skips them.
    let start = seen
        .iter()
        .position(|b| *b != b'\r' && *b != b'\n')
        .unwrap_or(seen.len());
    let seen = &seen[start..];
    let Some(end) = seen.iter().position(|b| *b == b'\n') else {
        return Verdict::Undecided;
    };
    let line = seen[..end].strip_suffix(b"\r").unwrap_or(&seen[..end]);
    let version = line.rsplit(|b| *b == b' ').next().unwrap_or_default();
    if version.starts_with(b"HTTP/") && version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        Verdict::Refuse
    } else {
        Verdict::Serve
    }
}

#[derive(Debug)]
enum Gate {
    /// The first line is not complete yet: its bytes are held back in `seen`.
    Watching,
    /// The first line was acceptable (or too long to judge): the held bytes go to the reader,
    /// `handed` of them so far.
    Handing { handed: usize },
    /// Bytes pass straight through.
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
    /// The bytes held back until the first line is judged; freed once handed over.
    seen: Vec<u8>,
}

impl<S> VersionGate<S> {
    /// Watches `inner`'s first line.
    pub fn new(inner: S) -> Self {
        VersionGate {
            inner,
            gate: Gate::Watching,
            seen: Vec::new(),
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
                Gate::Handing { handed } => {
                    let rest = &this.seen[*handed..];
                    let n = rest.len().min(buf.remaining());
                    buf.put_slice(&rest[..n]);
                    *handed += n;
                    if *handed == this.seen.len() {
                        this.seen = Vec::new();
                        this.gate = Gate::Open;
                    }
                    return Poll::Ready(Ok(()));
                }
                Gate::Watching => {
                    // Read straight into the reader's buffer: usually the whole first line
                    // arrives in one read, is judged where it lies, and is never copied.
                    let before = buf.filled().len();
                    ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
                    let fresh = &buf.filled()[before..];
                    let at_end = fresh.is_empty();
                    let judged = if this.seen.is_empty() {
                        verdict(fresh)
                    } else {
                        this.seen.extend_from_slice(fresh);
                        verdict(&this.seen)
                    };
                    let held = this.seen.len().max(fresh.len());
                    this.gate = match judged {
                        Verdict::Serve | Verdict::Undecided
                            if this.seen.is_empty() && (at_end || held >= LOOKAHEAD) =>
                        {
                            Gate::Open
                        }
                        Verdict::Serve if this.seen.is_empty() => Gate::Open,
                        Verdict::Undecided if held < LOOKAHEAD && !at_end => {
                            // Hold the partial line back from the reader until it ends.
                            if this.seen.is_empty() {
                                this.seen.extend_from_slice(fresh);
                            }
                            buf.set_filled(before);
                            continue;
                        }
                        Verdict::Serve | Verdict::Undecided => {
                            // Bytes were held: the reader gets them all, in order.
                            buf.set_filled(before);
                            Gate::Handing { handed: 0 }
                        }
                        Verdict::Refuse => {
                            buf.set_filled(before);
                            this.seen = Vec::new();
                            Gate::Refusing {
                                reply: version_not_supported(),
                                written: 0,
                            }
                        }
                    };
                    if matches!(this.gate, Gate::Open) {
                        return Poll::Ready(Ok(()));
                    }
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
    //! The verdict alone; the gate over real reads is tested in `proptests/version_gate.rs`,
    //! with generated requests and splits and with the examples worth naming.
    use super::*;

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
        // Line ends and leading empty lines as hyper's parser reads them.
        assert_eq!(verdict(b"GET / HTTP/1.2\nHost: x\n\n"), Verdict::Refuse);
        assert_eq!(verdict(b"\r\n\nGET / HTTP/1.2\r\n"), Verdict::Refuse);
        assert_eq!(verdict(b"\r\n"), Verdict::Undecided);
        assert_eq!(
            verdict(b"GET / HTTP/1.1\nX-A: b HTTP/2\r\n"),
            Verdict::Serve,
            "only the first line is judged"
        );
    }
}
