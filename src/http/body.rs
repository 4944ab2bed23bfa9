//! The response body: one buffer, sent whole. A file's buffer carries its own share of the
//! in-flight budget (D-4.6), released when hyper drops the last reference after writing it.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A complete body of known length.
#[derive(Debug, Default)]
pub struct PlaneBody {
    data: Option<Bytes>,
    len: u64,
}

impl PlaneBody {
    /// A body of `data`.
    pub fn new(data: Bytes) -> Self {
        let len = data.len() as u64;
        PlaneBody {
            data: (!data.is_empty()).then_some(data),
            len,
        }
    }

    /// The body's bytes without consuming it (tests and in-process callers).
    pub fn bytes(&self) -> Bytes {
        self.data.clone().unwrap_or_default()
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
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |_| self.len))
    }
}
