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
//! Two more judgements ride on the same look at the line:
//!
//! * each raw `#` in the request target is handed to hyper escaped as `%23`: a request target
//!   has no fragment (RFC 9112 §3.2), and hyper's URI parser would silently cut it off, serving
//!   `report.md` for `report.md#x`. Escaped, `#` is an ordinary name byte, as a backslash is
//!   (D-2.2): a path is refused, never normalised into something servable, and the request is
//!   routed and traced like any other (D-6.3);
//! * a partial line that already holds a byte no request line may hold (a control byte, a CR
//!   not followed by LF, or a method that is not a token: a TLS `ClientHello`, say) goes to
//!   hyper at once, which answers 400, instead of waiting for a line end that may never come.
//!
//! Each byte is judged once, however the line is split across reads (a line scanner keeps its state between reads).

use crate::backends::{Clock, SystemClock};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The look-ahead when none is given: the listener's default head limit (D-4.6).
pub const DEFAULT_LOOKAHEAD: usize = 16 * 1024;

/// The answer to a request line naming an HTTP version other than 1.0 or 1.1: no body, and the
/// connection closes. Dated `now_ms`.
fn version_not_supported(now_ms: i64) -> Vec<u8> {
    format!(
        "HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-length: 0\r\nconnection: close\r\ndate: {}\r\n\r\n",
        super::date::http_date(now_ms)
    )
    .into_bytes()
}

/// What the first line says about the connection.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// No line end yet, and nothing wrong so far.
    Undecided,
    /// HTTP/1.0 or HTTP/1.1, or hyper's to judge (no version, or a byte hyper refuses itself).
    Serve,
    /// Served, once each raw `#` in the request target is escaped as `%23`.
    Escape,
    /// Another `HTTP/` version: the gate answers 505.
    Refuse,
}

/// Judges the first request line incrementally: each byte the connection sends is looked at
/// once, however the line is split across reads (a client dribbling a 16 KiB line a byte at a
/// time costs linear, not quadratic, work).
#[derive(Debug, Default)]
struct LineScan {
    /// Where the request line starts, once a byte other than the empty lines before it came.
    start: Option<usize>,
    /// Where the method ends (its space), once seen.
    method_end: Option<usize>,
    /// Bytes already looked at.
    scanned: usize,
}

impl LineScan {
    /// Looks at the bytes of `held` (everything the connection sent so far) past those seen.
    fn feed(&mut self, held: &[u8]) -> Verdict {
        while self.scanned < held.len() {
            let at = self.scanned;
            let byte = held[at];
            let Some(start) = self.start else {
                // Empty lines before the request line are skipped, as hyper's parser skips them.
                if byte != b'\r' && byte != b'\n' {
                    self.start = Some(at);
                    continue;
                }
                self.scanned += 1;
                continue;
            };
            match byte {
                b'\n' => return judge(&held[start..at]),
                // A CR may only end the line: wait for the byte after it.
                b'\r' if at + 1 == held.len() => return Verdict::Undecided,
                b'\r' if held[at + 1] != b'\n' => return Verdict::Serve,
                b' ' if self.method_end.is_none() => self.method_end = Some(at),
                b'\r' => {}
                _ if self.method_end.is_none() && !is_token(byte) => return Verdict::Serve,
                _ if byte.is_ascii_control() || byte == 0x7f => return Verdict::Serve,
                _ => {}
            }
            self.scanned += 1;
        }
        Verdict::Undecided
    }
}

/// A method byte (RFC 9110 §5.6.2 `tchar`): hyper answers 400 the moment it parses another.
fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// The verdict on a whole first line (without its line end).
fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let version = line.rsplit(|b| *b == b' ').next().unwrap_or_default();
    if names_another_http_version(version) {
        Verdict::Refuse
    } else if target_of(line).contains(&b'#') {
        Verdict::Escape
    } else {
        Verdict::Serve
    }
}

/// Whether `version` is a well-formed HTTP version (`HTTP/` digit, optionally `.` digit, as
/// `HTTP/2` and `HTTP/3` are written) other than 1.0 and 1.1: that is 505. Anything else after
/// `HTTP/` (`HTTP/1.01`, `HTTP/#1.1`, `HTTP/`) is no version at all, and hyper's 400 fits it.
fn names_another_http_version(version: &[u8]) -> bool {
    let well_formed = match version.strip_prefix(b"HTTP/") {
        Some([major]) => major.is_ascii_digit(),
        Some([major, b'.', minor]) => major.is_ascii_digit() && minor.is_ascii_digit(),
        _ => false,
    };
    well_formed && version != b"HTTP/1.1" && version != b"HTTP/1.0"
}

/// The request target: the line's second space-separated field.
fn target_of(line: &[u8]) -> &[u8] {
    line.split(|b| *b == b' ').nth(1).unwrap_or_default()
}

/// `held` with each `#` of the first line's request target written `%23`: a request target has
/// no fragment (RFC 9112 §3.2), and hyper's URI parser would cut it off, serving `report.md`
/// for `report.md#x`. Escaped, `#` is an ordinary name byte, as a backslash is (D-2.2): the
/// router looks up the name as sent and traces the request (D-6.3).
fn escape_fragments(held: &[u8]) -> Vec<u8> {
    let start = held
        .iter()
        .position(|b| *b != b'\r' && *b != b'\n')
        .unwrap_or(held.len());
    let line_end = held[start..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(held.len(), |end| start + end);
    let line = &held[start..line_end];
    let target_start = line
        .iter()
        .position(|b| *b == b' ')
        .map_or(line.len(), |p| p + 1);
    let target_end = target_start + target_of(line).len();
    let (before, rest) = held.split_at(start + target_start);
    let (target, after) = rest.split_at(target_end - target_start);
    let mut escaped = Vec::with_capacity(held.len() + 2 * target.len());
    escaped.extend_from_slice(before);
    for byte in target {
        match byte {
            b'#' => escaped.extend_from_slice(b"%23"),
            other => escaped.push(*other),
        }
    }
    escaped.extend_from_slice(after);
    escaped
}

/// The verdict on everything held so far, from scratch (the unit tests' view).
#[cfg(test)]
fn verdict(seen: &[u8]) -> Verdict {
    LineScan::default().feed(seen)
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
    /// The first line's judgement so far.
    scan: LineScan,
    /// `seen` holds bytes from [`prime`](Self::prime) that the scan has not judged yet.
    primed: bool,
    /// Dates the 505.
    clock: Arc<dyn Clock>,
}

impl<S> VersionGate<S> {
    /// Watches `inner`'s first line, holding back up to [`DEFAULT_LOOKAHEAD`] bytes of it; a
    /// 505 is dated by the [`SystemClock`] unless [`with_clock`](Self::with_clock) says
    /// otherwise.
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
            scan: LineScan::default(),
            primed: false,
            clock: Arc::new(SystemClock),
        }
    }

    /// The same gate dating its 505 by `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How many header lines the held bytes' request head has, when they hold all of it: the
    /// lines between the request line and the empty line that ends the head, with the line ends
    /// hyper's parser accepts (`\r\n` or `\n`) and the empty lines it skips before the request
    /// line. `None` while the head is not complete. A count, not a parse: each line counts as
    /// one header whatever it holds, so the count is never below what a parser finds.
    pub fn complete_head_lines(&self) -> Option<usize> {
        head_lines(&self.seen)
    }
}

impl<S: AsyncRead + Unpin> VersionGate<S> {
    /// Reads once from the connection before the reader's first read, holding what arrives (up
    /// to the look-ahead), so that the caller can look at the request head before choosing how
    /// to serve it ([`complete_head_lines`](Self::complete_head_lines)). Reads afterwards go on
    /// as if the bytes had just arrived: priming changes what the reader is handed in no way.
    /// Call it at most once, before the first read.
    ///
    /// # Errors
    /// The connection's read error.
    pub async fn prime(&mut self) -> io::Result<()> {
        debug_assert!(matches!(self.gate, Gate::Watching) && self.seen.is_empty());
        self.seen.reserve(self.lookahead.min(PRIME_BYTES));
        let mut take = (&mut self.inner).take(self.lookahead as u64);
        take.read_buf(&mut self.seen).await?;
        self.primed = true;
        Ok(())
    }
}

/// The most a [`VersionGate::prime`] reads: one read, enough for any head a client usually
/// sends.
const PRIME_BYTES: usize = 8 * 1024;

/// See [`VersionGate::complete_head_lines`].
fn head_lines(held: &[u8]) -> Option<usize> {
    let start = held.iter().position(|b| *b != b'\r' && *b != b'\n')?;
    let mut lines = 0;
    let mut at = start;
    loop {
        let end = at + held[at..].iter().position(|b| *b == b'\n')?;
        let next = &held[end + 1..];
        if next.starts_with(b"\n") || next.starts_with(b"\r\n") {
            return Some(lines);
        }
        lines += 1;
        at = end + 1;
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
                Gate::Refusing { .. } => ready!(this.poll_refuse(cx))?,
                Gate::Handing { .. } => {
                    this.hand_held(buf);
                    return Poll::Ready(Ok(()));
                }
                Gate::Watching => {
                    ready!(this.poll_watch(cx, buf))?;
                    if matches!(this.gate, Gate::Open) {
                        return Poll::Ready(Ok(()));
                    }
                }
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> VersionGate<S> {
    /// Reads the first line's next bytes, judges them, and moves the gate on (see [`Step`]).
    /// Reads straight into the reader's buffer: usually the whole first line arrives in one
    /// read, is judged where it lies, and is never copied. Bytes held by `prime` are judged
    /// first, as if they had just been read. `buf` keeps the bytes only when the gate opens on
    /// them with nothing held.
    ///
    /// # Errors
    /// The connection's read error.
    fn poll_watch(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let at_end = if std::mem::take(&mut self.primed) {
            self.seen.is_empty()
        } else {
            ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
            buf.filled().len() == before
        };
        let fresh = &buf.filled()[before..];
        let judged = if self.seen.is_empty() {
            self.scan.feed(fresh)
        } else {
            self.seen.extend_from_slice(fresh);
            self.scan.feed(&self.seen)
        };
        match self.step(judged, fresh, at_end) {
            Step::Open => self.gate = Gate::Open,
            Step::Hold => buf.set_filled(before),
            Step::To(gate) => {
                buf.set_filled(before);
                self.gate = gate;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// What the gate does once the held bytes and `fresh` (the bytes just read, at the end of
    /// the held ones when any are held) are `judged`; `at_end`: the connection sent no more.
    fn step(&mut self, judged: Verdict, fresh: &[u8], at_end: bool) -> Step {
        let held = self.seen.len().max(fresh.len());
        let none_held = self.seen.is_empty();
        match judged {
            Verdict::Serve | Verdict::Undecided
                if none_held && (at_end || held >= self.lookahead) =>
            {
                Step::Open
            }
            Verdict::Serve if none_held => Step::Open,
            Verdict::Undecided if held < self.lookahead && !at_end => {
                // Hold the partial line back from the reader until it ends.
                if none_held {
                    self.seen.extend_from_slice(fresh);
                }
                Step::Hold
            }
            // Bytes were held: the reader gets them all, in order.
            Verdict::Serve | Verdict::Undecided => Step::To(Gate::Handing { handed: 0 }),
            Verdict::Escape => {
                let held = if none_held {
                    fresh.to_vec()
                } else {
                    std::mem::take(&mut self.seen)
                };
                self.seen = escape_fragments(&held);
                Step::To(Gate::Handing { handed: 0 })
            }
            Verdict::Refuse => {
                self.seen = Vec::new();
                Step::To(Gate::Refusing {
                    reply: version_not_supported(self.clock.now_ms()),
                    written: 0,
                })
            }
        }
    }

    /// Writes what is left of the 505, then closes the gate (a peer that takes no more closes
    /// it too).
    ///
    /// # Errors
    /// The connection's write error; the gate is closed.
    fn poll_refuse(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Gate::Refusing { reply, written } = &mut self.gate {
            while *written < reply.len() {
                match ready!(Pin::new(&mut self.inner).poll_write(cx, &reply[*written..])) {
                    Ok(0) => break,
                    Ok(n) => *written += n,
                    Err(e) => {
                        self.gate = Gate::Closed;
                        return Poll::Ready(Err(e));
                    }
                }
            }
        }
        self.gate = Gate::Closed;
        Poll::Ready(Ok(()))
    }

    /// Hands the reader as many held bytes as `buf` takes; once all are out, the gate opens.
    fn hand_held(&mut self, buf: &mut ReadBuf<'_>) {
        let Gate::Handing { handed } = &mut self.gate else {
            return;
        };
        let rest = &self.seen[*handed..];
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        *handed += n;
        if *handed == self.seen.len() {
            self.seen = Vec::new();
            self.gate = Gate::Open;
        }
    }
}

/// What the gate does with bytes it has just judged.
enum Step {
    /// Opens: the reader keeps the bytes just read, and every later byte passes straight.
    Open,
    /// Holds the partial line back, and reads on.
    Hold,
    /// Takes the bytes back from the reader and moves to this state.
    To(Gate),
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

    const VERSION: Verdict = Verdict::Refuse;
    const FRAGMENT: Verdict = Verdict::Escape;

    #[test]
    fn verdicts_follow_the_request_line_version() {
        assert_eq!(verdict(b"GET / HTTP/1.1\r\n"), Verdict::Serve);
        assert_eq!(verdict(b"GET / HTTP/1.0\r\nHost: x"), Verdict::Serve);
        assert_eq!(verdict(b"GET / HTTP/1.2\r\n"), VERSION);
        assert_eq!(verdict(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), VERSION);
        assert_eq!(verdict(b"GET / HTTP/0.9\r\n"), VERSION);
        assert_eq!(verdict(b"GET / HTTP/3\r\n"), VERSION);
        // Not versions at all: hyper's 400.
        for line in [
            &b"GET / HTTP/1.01\r\n"[..],
            b"GET / HTTP/#1.1\r\n",
            b"GET / HTTP/1.1#\r\n",
            b"GET / HTTP/\r\n",
            b"GET / HTTP/x.y\r\n",
        ] {
            assert_eq!(verdict(line), Verdict::Serve, "{line:?}");
        }
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
    fn a_raw_fragment_in_the_target_is_escaped_into_a_name_byte() {
        assert_eq!(
            verdict(b"GET /resources/files/a.md#x HTTP/1.1\r\n"),
            FRAGMENT
        );
        assert_eq!(verdict(b"GET /resources/files/# HTTP/1.0\n"), FRAGMENT);
        assert_eq!(verdict(b"GET /a?q=#x HTTP/1.1\r\n"), FRAGMENT);
        assert_eq!(
            verdict(b"GET /a%23b HTTP/1.1\r\n"),
            Verdict::Serve,
            "an encoded # is already a name byte"
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
        // Only the target's # bytes change; empty lines before, headers after, stay as sent.
        assert_eq!(
            escape_fragments(b"\r\nGET /a#b#c?d#e HTTP/1.1\r\nX-A: #\r\n\r\n"),
            b"\r\nGET /a%23b%23c?d%23e HTTP/1.1\r\nX-A: #\r\n\r\n"
        );
        assert_eq!(
            escape_fragments(b"GET /# HTTP/1.0\n\n"),
            b"GET /%23 HTTP/1.0\n\n"
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
            b"GET /a\rX",
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
            b"GET /caf\xc3\xa9",
            b"",
            b"\r\n\r",
        ] {
            assert_eq!(verdict(partial), Verdict::Undecided, "{partial:?}");
        }
    }

    /// Fed a byte at a time, the scan reaches the verdict it reaches on the whole line, and
    /// looks at each byte once.
    #[test]
    fn the_scan_is_incremental_and_agrees_with_a_whole_look() {
        for line in [
            &b"\r\n\nGET /resources/files HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"GET / HTTP/1.2\r\n",
            b"GET /a#b HTTP/1.1\n",
            b"GET /a\rX HTTP/1.1\r\n",
            b"G(T / HTTP/1.1\r\n",
        ] {
            let whole = verdict(line);
            let mut scan = LineScan::default();
            let mut last = Verdict::Undecided;
            for end in 1..=line.len() {
                last = scan.feed(&line[..end]);
                if last != Verdict::Undecided {
                    break;
                }
                // Everything held is looked at, and only a request line's CR waiting for its LF
                // is kept for the next feed: no byte is ever scanned again from an earlier
                // offset.
                let pending_cr = scan.start.is_some() && line[end - 1] == b'\r';
                assert_eq!(
                    scan.scanned,
                    end - usize::from(pending_cr),
                    "{line:?} after {end} bytes"
                );
            }
            assert_eq!(last, whole, "{line:?}");
        }
    }
}
