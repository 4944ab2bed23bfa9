//! Where the listener's connections come from: anything that hands out connected byte streams.

use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

/// A source of connected byte streams for [`serve_with`](super::serve_with): a TCP or Unix
/// domain socket listener, a vsock listener, an in-memory one. Whatever the source, every
/// connection gets the same hardening (version gate, head limit and timeout, stall guard,
/// connection cap, drain, the client-gone watch).
///
/// Implemented for [`tokio::net::TcpListener`], [`tokio::net::UnixListener`], the listener of a
/// [`MemoryTransport`](crate::backends::MemoryTransport) host, and
/// [`tokio::sync::mpsc::Receiver`] of streams (an in-memory listener: each stream sent is one
/// connection, the far end of a [`tokio::io::duplex`] pipe, say).
///
/// An error from [`accept`](Self::accept) is judged as the listener judges an OS accept error:
/// a transient one (out of descriptors, a connection aborted before it was accepted) is retried
/// with a backoff; any other stops the listener, which drains and returns it.
///
/// ```
/// use resource_plane::http::{Accept, ListenerConfig, serve_with};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
///
/// /// A runtime's own source of connections (here, one already connected pipe).
/// struct OnePipe(Option<DuplexStream>);
///
/// impl Accept for OnePipe {
///     type Io = DuplexStream;
///     async fn accept(&mut self) -> std::io::Result<DuplexStream> {
///         match self.0.take() {
///             Some(pipe) => Ok(pipe),
///             None => std::future::pending().await, // no more connections, ever
///         }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let (mut client, server_end) = tokio::io::duplex(4096);
/// let app = tower::service_fn(|_: http::Request<hyper::body::Incoming>| async {
///     let body = http_body_util::Full::new(bytes::Bytes::from("over a pipe"));
///     Ok::<_, std::convert::Infallible>(http::Response::new(body))
/// });
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let shutdown = async { stopped.await.ok(); };
/// let server = tokio::spawn(serve_with(OnePipe(Some(server_end)), app, ListenerConfig::default(), shutdown));
///
/// client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await?;
/// let mut answer = String::new();
/// client.read_to_string(&mut answer).await?;
/// assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("over a pipe"), "{answer}");
/// stop.send(()).unwrap();
/// server.await.unwrap()?;
/// # Ok(())
/// # }
/// ```
pub trait Accept: Send {
    /// The byte stream of one connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection, once one arrives.
    ///
    /// # Errors
    /// Whatever the source fails with; see the trait's docs for how the listener judges it.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;

    async fn accept(&mut self) -> io::Result<Self::Io> {
        tokio::net::TcpListener::accept(self)
            .await
            .map(|(stream, _)| stream)
    }
}

impl Accept for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;

    async fn accept(&mut self) -> io::Result<Self::Io> {
        tokio::net::UnixListener::accept(self)
            .await
            .map(|(stream, _)| stream)
    }
}

/// An in-memory listener: each stream received is one connection. Once every sender is gone
/// no connection can come any more, and `accept` fails with `NotConnected`, which stops the
/// listener (it drains the connections it holds and returns the error).
impl<IO> Accept for tokio::sync::mpsc::Receiver<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = IO;

    async fn accept(&mut self) -> io::Result<IO> {
        self.recv().await.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                "every sender of the in-memory listener is gone",
            )
        })
    }
}

/// The listener of a [`MemoryTransport`](crate::backends::MemoryTransport) host: each
/// connection a capsule's tools open to that host. Once the transport (every clone of it) is
/// gone `accept` fails with `NotConnected`, which stops the listener.
impl Accept for crate::backends::MemoryListener {
    type Io = tokio::io::DuplexStream;

    async fn accept(&mut self) -> io::Result<Self::Io> {
        crate::backends::MemoryListener::accept(self)
            .await
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotConnected, "the memory transport is gone")
            })
    }
}
