//! A file a plane sends as it comes from its store ([`ReadOutcome::Stream`]).
//!
//! [`ReadOutcome::Stream`]: super::ReadOutcome::Stream

use bytes::Bytes;
use futures_core::Stream;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A boxed stream of a file's bytes.
type ByteStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// A file's bytes as an async stream, with the sha256, size and modification time its plane
/// vouches for: the answer of a plane that does not hold a file whole (an object store's `GET`,
/// a database blob) yet knows its hash (a checksum its store keeps, a hash recorded at write).
///
/// The router cannot check the hash before the headers leave, so the plane vouches for it: the
/// `etag` and the trace line's `sha256` are `sha256`, `content-length` and the trace line's
/// `bytes` are `size_bytes`, and an `If-None-Match` that names the etag is answered `304`
/// without polling the stream. The body stops at `size_bytes`: bytes the stream yields past it
/// are not sent, and a stream that fails or ends short ends the body early, so an HTTP/1.1
/// server closes the connection (the client sees fewer bytes than `content-length`, never a
/// complete-looking wrong file). The plane's own `max_bytes` check comes first: a plane refuses
/// a file over its limit with `too_large` rather than streaming it.
///
/// ```
/// use bytes::Bytes;
/// use resource_plane::planes::{IfNoneMatch, ReadOutcome, StreamedFile};
///
/// let chunks = [Ok(Bytes::from_static(b"hel")), Ok(Bytes::from_static(b"lo"))];
/// let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
/// let file = StreamedFile::new(futures::stream::iter(chunks), hello, 5, 1_700_000_000_000);
/// assert_eq!((file.sha256(), file.size_bytes()), (hello, 5));
///
/// // A client holding the etag gets the 304; the stream is never polled.
/// let condition = IfNoneMatch::parse(&[format!("\"sha256:{hello}\"").as_bytes()]);
/// assert!(matches!(
///     ReadOutcome::Stream(file).under(&condition),
///     ReadOutcome::NotModified { mtime_ms: 1_700_000_000_000, .. }
/// ));
/// ```
pub struct StreamedFile {
    body: ByteStream,
    sha256: String,
    size_bytes: u64,
    mtime_ms: i64,
}

impl StreamedFile {
    /// A file of `size_bytes` bytes whose lowercase hex sha256 is `sha256`, modified at
    /// `mtime_ms` (Unix milliseconds), its bytes coming from `body`.
    pub fn new(
        body: impl Stream<Item = io::Result<Bytes>> + Send + 'static,
        sha256: impl Into<String>,
        size_bytes: u64,
        mtime_ms: i64,
    ) -> Self {
        StreamedFile {
            body: Box::pin(body),
            sha256: sha256.into(),
            size_bytes,
            mtime_ms,
        }
    }

    /// The lowercase hex sha256 the plane vouches for: the etag.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The size the plane vouches for: `content-length`.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// `x-murmur-mtime-ms`.
    pub fn mtime_ms(&self) -> i64 {
        self.mtime_ms
    }

    /// The body as the router sends it: at most `size_bytes` bytes.
    pub(crate) fn into_body(self) -> StreamedBody {
        StreamedBody {
            body: Some(self.body),
            remaining: self.size_bytes,
        }
    }
}

impl fmt::Debug for StreamedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamedFile")
            .field("sha256", &self.sha256)
            .field("size_bytes", &self.size_bytes)
            .field("mtime_ms", &self.mtime_ms)
            .finish_non_exhaustive()
    }
}

/// A [`StreamedFile`]'s bytes as a response body sends them: cut at the vouched size, ended
/// early when the stream fails.
pub(crate) struct StreamedBody {
    /// `None` once the body has ended.
    body: Option<ByteStream>,
    /// Bytes still to send.
    remaining: u64,
}

impl StreamedBody {
    /// The next chunk; `None` at the end, at the vouched size, or when the stream failed.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            let Some(body) = self.body.as_mut() else {
                return Poll::Ready(None);
            };
            if self.remaining == 0 {
                self.body = None;
                return Poll::Ready(None);
            }
            match body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) if chunk.is_empty() => continue,
                Poll::Ready(Some(Ok(mut chunk))) => {
                    if chunk.len() as u64 > self.remaining {
                        tracing::warn!(
                            "a streamed file yielded more bytes than its plane vouched for; \
                             the body stops at the vouched size"
                        );
                        chunk.truncate(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                    }
                    self.remaining -= chunk.len() as u64;
                    return Poll::Ready(Some(chunk));
                }
                Poll::Ready(Some(Err(e))) => {
                    tracing::warn!("a streamed file failed after its headers were sent: {e}");
                    self.body = None;
                    return Poll::Ready(None);
                }
                Poll::Ready(None) => {
                    if self.remaining > 0 {
                        tracing::warn!(
                            "a streamed file ended {} bytes short of the size its plane vouched for",
                            self.remaining
                        );
                    }
                    self.body = None;
                    return Poll::Ready(None);
                }
            }
        }
    }

    /// Whether the body has ended.
    pub(crate) fn is_end(&self) -> bool {
        self.body.is_none() || self.remaining == 0
    }

    /// Bytes still to send.
    pub(crate) fn remaining(&self) -> u64 {
        if self.body.is_none() {
            0
        } else {
            self.remaining
        }
    }
}

impl fmt::Debug for StreamedBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamedBody")
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}
