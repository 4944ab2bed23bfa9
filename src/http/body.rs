//! The response body: one buffer sent whole, a listing streamed chunk by chunk, or a file a
//! plane streams from its store with the size it vouched for. A file's
//! buffer and a listing's entries carry their share of the in-flight budget (D-4.6), released
//! when hyper drops the body after writing it (or when the connection is cut).

use crate::planes::ListingBody;
use crate::planes::streamed::StreamedBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The body of every response the [`Router`](crate::http::Router) gives: a file's bytes, a
/// refusal's JSON, a listing streamed chunk by chunk, or a file a plane streams
/// ([`StreamedFile`](crate::planes::StreamedFile)). Its length is always known up front
/// (`content-length`, never chunked), a watch stream's aside. It is an
/// [`http_body::Body`](https://docs.rs/http-body/1/http_body/trait.Body.html), so hyper, tower and axum
/// send it as it is; an in-process caller reads it with the `Body` trait (`collect`, as below),
/// or, for any body but a streamed one, whole at once with [`bytes`](Self::bytes).
///
/// ```
/// use http_body::Body;
/// use http_body_util::BodyExt;
/// use resource_plane::http::PlaneBody;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let body = PlaneBody::new(bytes::Bytes::from_static(b"hello"));
/// assert_eq!(body.size_hint().exact(), Some(5));
/// assert_eq!(&body.bytes()[..], b"hello");
/// let sent = body.collect().await.unwrap().to_bytes(); // as a server sends it
/// assert_eq!(&sent[..], b"hello");
/// # }
/// ```
#[derive(Debug, Default)]
pub struct PlaneBody {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Whole {
        data: Option<Bytes>,
        len: u64,
    },
    Listing(Box<ListingBody>),
    /// A plane's streamed file, at most the size it vouched for.
    Stream(Box<StreamedBody>),
    /// A watch stream's events, as long as the stream lasts.
    Watch(Box<super::watch_stream::WatchBody>),
}

impl Default for Kind {
    fn default() -> Self {
        Kind::Whole { data: None, len: 0 }
    }
}

impl PlaneBody {
    /// A body of `data`.
    pub fn new(data: Bytes) -> Self {
        let len = data.len() as u64;
        PlaneBody {
            kind: Kind::Whole {
                data: (!data.is_empty()).then_some(data),
                len,
            },
        }
    }

    /// A listing's body, streamed.
    pub fn listing(body: ListingBody) -> Self {
        PlaneBody {
            kind: Kind::Listing(Box::new(body)),
        }
    }

    /// The body's bytes without consuming it (tests and in-process callers): a listing is
    /// rendered whole; a stream (a plane's streamed file, a watch) gives nothing here, and is
    /// read as it comes with the `Body` trait.
    pub fn bytes(&self) -> Bytes {
        match &self.kind {
            Kind::Whole { data, .. } => data.clone().unwrap_or_default(),
            Kind::Listing(listing) => Bytes::from(listing.render()),
            // A stream is read as it comes, with the `Body` trait.
            Kind::Stream(_) | Kind::Watch(_) => Bytes::new(),
        }
    }
}

impl PlaneBody {
    /// Whether this is a file a plane streams (its bytes not yet read).
    #[cfg(feature = "mcp")]
    pub(crate) fn is_streamed(&self) -> bool {
        matches!(self.kind, Kind::Stream(_))
    }

    /// A plane's streamed file.
    pub(crate) fn streamed(body: StreamedBody) -> Self {
        PlaneBody {
            kind: Kind::Stream(Box::new(body)),
        }
    }

    /// A watch stream's body (D-17.3).
    pub(crate) fn watch(body: super::watch_stream::WatchBody) -> Self {
        PlaneBody {
            kind: Kind::Watch(Box::new(body)),
        }
    }
}

impl From<Vec<u8>> for PlaneBody {
    fn from(v: Vec<u8>) -> Self {
        PlaneBody::new(Bytes::from(v))
    }
}

impl Body for PlaneBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.kind {
            Kind::Watch(stream) => stream
                .poll_next(cx)
                .map(|next| next.map(|d| Ok(Frame::data(d)))),
            Kind::Stream(stream) => stream
                .poll_next(cx)
                .map(|next| next.map(|d| Ok(Frame::data(d)))),
            Kind::Whole { data, .. } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Kind::Listing(listing) => Poll::Ready(listing.next_chunk().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Whole { data, .. } => data.is_none(),
            Kind::Listing(listing) => listing.is_end(),
            Kind::Stream(stream) => stream.is_end(),
            Kind::Watch(stream) => stream.is_end(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Whole { data, len } => SizeHint::with_exact(data.as_ref().map_or(0, |_| *len)),
            Kind::Listing(listing) => SizeHint::with_exact(listing.remaining()),
            Kind::Stream(stream) => SizeHint::with_exact(stream.remaining()),
            Kind::Watch(_) => SizeHint::default(),
        }
    }
}
