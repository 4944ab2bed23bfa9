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
//! (the head limit, so any line hyper would accept is judged here) is hyper's to refuse.
//!
//! Two more refusals ride on the same look at the line:
//!
//! * a raw `#` in the request target gets 400: a request target has no fragment (RFC 9112
//!   §3.2), and hyper's URI parser would silently cut it off, serving `report.md` for
//!   `report.md#x`; a path is refused, never normalised into something servable;
//! * a partial line that already holds a byte no request line may hold (a control byte, or a
//!   method that is not a token: a TLS `ClientHello`, say) goes to hyper at once, which answers
//!   400, instead of waiting for a line end that may never come.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The look-ahead when none is given: the listener's default head limit (D-4.6).
pub const DEFAULT_LOOKAHEAD: usize = 16 * 1024;

/// Why the gate answers a first line itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineRefusal {
    /// An `HTTP/` version other than 1.0 or 1.1: 505.
    Version,
    /// A raw `#` in the request target: 400.
    Fragment,
}

impl LineRefusal {
    /// The whole response: no body, and the connection closes.
    fn reply(self) -> Vec<u8> {
        let status = match self {
            LineRefusal::Version => "505 HTTP Version Not Supported",
            LineRefusal::Fragment => "400 Bad Request",
        };
        format!(
            "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\ndate: {}\r\n\r\n",
            crate::backends::clock::http_date_now()
        )
        .into_bytes()
    }
}

/// What the first line says about the connection.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// No line end yet, and nothing wrong so far.
    Undecided,
    /// HTTP/1.0 or HTTP/1.1, or hyper's to judge (no version, or a byte hyper refuses itself).
    Serve,
    /// The gate answers.
    Refuse(LineRefusal),
}

fn verdict(seen: &[u8]) -> Verdict {
    // Empty lines before the request line are skipped, as hyper's parser skips them.
    let start = seen
        .iter()
        .position(|b| *b != b'\r' && *b != b'\n')
        .unwrap_or(seen.len());
    let seen = &seen[start..];
    let Some(end) = seen.iter().position(|b| *b == b'\n') else {
        return if holds_a_byte_hyper_refuses(seen) {
            Verdict::Serve
        } else {
            Verdict::Undecided
        };
    };
    let line = seen[..end].strip_suffix(b"\r").unwrap_or(&seen[..end]);
    let version = line.rsplit(|b| *b == b' ').next().unwrap_or_default();
    let target = line.split(|b| *b == b' ').nth(1).unwrap_or_default();
    if version.starts_with(b"HTTP/") && version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        Verdict::Refuse(LineRefusal::Version)
    } else if target.contains(&b'#') {
        Verdict::Refuse(LineRefusal::Fragment)
    } else {
        Verdict::Serve
    }
}

/// Whether a first line still without its end already holds a byte no request line may: a
/// control byte (a `\r` may only end the line, so it is let by), or a method byte that is not
/// a token character (RFC 9110 §5.6.2). hyper answers 400 the moment it parses such a byte.
fn holds_a_byte_hyper_refuses(partial: &[u8]) -> bool {
    let method_end = partial
        .iter()
        .position(|b| *b == b' ')
        .unwrap_or(partial.len());
    let is_token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    !partial[..method_end].iter().all(is_token)
        || partial
            .iter()
            .any(|b| (b.is_ascii_control() && *b != b'\r') || *b == 0x7f)
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
    /// How much of the first line may be held back; a longer line is hyper's to refuse.
    lookahead: usize,
}

impl<S> VersionGate<S> {
    /// Watches `inner`'s first line, holding back up to [`DEFAULT_LOOKAHEAD`] bytes of it.
    pub fn new(inner: S) -> Self {
        Self::with_lookahead(inner, DEFAULT_LOOKAHEAD)
    }

    /// Watches `inner`'s first line, holding back up to `lookahead` bytes of it: the
    /// listener's head limit, so every line hyper would accept is judged here.
    pub fn with_lookahead(inner: S, lookahead: usize) -> Self {
        VersionGate {
            inner,
            gate: Gate::Watching,
            seen: Vec::new(),
            lookahead,
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
                    let lookahead = this.lookahead;
                    this.gate = match judged {
                        Verdict::Serve | Verdict::Undecided
                            if this.seen.is_empty() && (at_end || held >= lookahead) =>
                        {
                            Gate::Open
                        }
                        Verdict::Serve if this.seen.is_empty() => Gate::Open,
                        Verdict::Undecided if held < lookahead && !at_end => {
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
                        Verdict::Refuse(why) => {
                            buf.set_filled(before);
                            this.seen = Vec::new();
                            Gate::Refusing {
                                reply: why.reply(),
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

    const VERSION: Verdict = Verdict::Refuse(LineRefusal::Version);
    const FRAGMENT: Verdict = Verdict::Refuse(LineRefusal::Fragment);

    #[test]
    fn verdicts_follow_the_request_line_version() {
        assert_eq!(verdict(b"GET / HTTP/1.1\r\n"), Verdict::Serve);
        assert_eq!(verdict(b"GET / HTTP/1.0\r\nHost: x"), Verdict::Serve);
        assert_eq!(verdict(b"GET / HTTP/1.2\r\n"), VERSION);
        assert_eq!(verdict(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), VERSION);
        assert_eq!(verdict(b"GET / HTTP/0.9\r\n"), VERSION);
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
        assert_eq!(verdict(b"GET / HTTP/1.2\nHost: x\n\n"), VERSION);
        assert_eq!(verdict(b"\r\n\nGET / HTTP/1.2\r\n"), VERSION);
        assert_eq!(verdict(b"\r\n"), Verdict::Undecided);
        assert_eq!(
            verdict(b"GET / HTTP/1.1\nX-A: b HTTP/2\r\n"),
            Verdict::Serve,
            "only the first line is judged"
        );
    }

    #[test]
    fn a_raw_fragment_in_the_target_is_refused_with_400() {
        assert_eq!(
            verdict(b"GET /resources/files/a.md#x HTTP/1.1\r\n"),
            FRAGMENT
        );
        assert_eq!(verdict(b"GET /resources/files/# HTTP/1.0\n"), FRAGMENT);
        assert_eq!(verdict(b"GET /a?q=#x HTTP/1.1\r\n"), FRAGMENT);
        assert_eq!(
            verdict(b"GET /a%23b HTTP/1.1\r\n"),
            Verdict::Serve,
            "an encoded # is a name byte"
        );
        assert_eq!(
            verdict(b"GET /a#b HTTP/2\r\n"),
            VERSION,
            "the version is judged first"
        );
        assert_eq!(
            verdict(b"GET /a HTTP/1.1\r\nX-A: #b\r\n"),
            Verdict::Serve,
            "headers may hold #"
        );
    }

    #[test]
    fn a_partial_line_with_a_byte_hyper_refuses_goes_to_hyper_at_once() {
        for partial in [
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03AAAA"[..],
            b"GE\x00",
            b"GET /a\x01b",
            b"GET /a\tb",
            b"GET /a\x7f",
            b"G(T /",
            b"{\"op\":",
            b"\r\n\x16\x03",
        ] {
            assert_eq!(verdict(partial), Verdict::Serve, "{partial:?}");
        }
        for partial in [
            &b"GET /resources/fi"[..],
            b"GET",
            b"GET / HTTP/1.1\r",
            b"M-SEARCH *",
            b"",
        ] {
            assert_eq!(verdict(partial), Verdict::Undecided, "{partial:?}");
        }
    }
}
