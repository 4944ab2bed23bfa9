//! Where the listener's connections come from: anything that hands out connected byte streams,
//! and how the listener takes them, retrying the errors that pass.

use std::future::Future;
use std::io;
use std::time::Duration;
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

/// A source of connections as the listener takes them: an error that passes ([`transient`]) is
/// logged and retried after a pause of [`ACCEPT_BACKOFF_MIN`], doubling up to
/// [`ACCEPT_BACKOFF_MAX`] while errors go on, and reset by the next connection.
pub(super) struct Accepting<A> {
    source: A,
    /// The pause after the next transient error.
    backoff: Duration,
}

impl<A: Accept> Accepting<A> {
    pub(super) fn new(source: A) -> Self {
        Accepting {
            source,
            backoff: ACCEPT_BACKOFF_MIN,
        }
    }

    /// The next connection. Dropping the future (the listener stops) gives up waiting for it,
    /// whether on the source or in a pause.
    ///
    /// # Errors
    /// An error of the source that is not transient: the listening socket itself is gone.
    pub(super) async fn next(&mut self) -> io::Result<A::Io> {
        loop {
            match self.source.accept().await {
                Ok(stream) => {
                    self.backoff = ACCEPT_BACKOFF_MIN;
                    return Ok(stream);
                }
                Err(e) if transient(&e) => {
                    let backoff = self.backoff;
                    tracing::warn!("accept failed, retrying in {backoff:?}: {e}");
                    tokio::time::sleep(backoff).await;
                    self.backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
                Err(e) => {
                    tracing::error!("accept failed, the listener stops: {e}");
                    return Err(e);
                }
            }
        }
    }
}

/// The first pause after a transient accept error.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);

/// The longest pause between accept attempts while they keep failing.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Whether an accept error passes: out of descriptors or memory (`EMFILE`, `ENFILE`,
/// `ENOBUFS`, `ENOMEM`: connections closing free them), or an error of the one connection being
/// accepted rather than of the listening socket (`ECONNABORTED`, `EINTR`, and the network
/// errors accept(2) says to treat like `EAGAIN`). Anything else (`EBADF`, `EINVAL`, ...) means
/// the listening socket itself is gone.
fn transient(error: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let Some(code) = error.raw_os_error() else {
        return matches!(
            error.kind(),
            std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::Interrupted
                | std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::TimedOut
        );
    };
    [
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOBUFS,
        Errno::NOMEM,
        Errno::CONNABORTED,
        Errno::CONNRESET,
        Errno::INTR,
        Errno::AGAIN,
        Errno::PROTO,
        Errno::PERM,
        Errno::NETDOWN,
        Errno::NETUNREACH,
        Errno::HOSTDOWN,
        Errno::HOSTUNREACH,
        Errno::NOPROTOOPT,
        Errno::OPNOTSUPP,
        Errno::TIMEDOUT,
    ]
    .iter()
    .any(|errno| errno.raw_os_error() == code)
}

#[cfg(test)]
mod tests {
    use super::transient;
    use rustix::io::Errno;

    fn os(errno: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(errno.raw_os_error())
    }

    #[test]
    fn running_out_of_descriptors_passes_and_a_broken_socket_does_not() {
        for passing in [
            Errno::MFILE,
            Errno::NFILE,
            Errno::CONNABORTED,
            Errno::NOBUFS,
        ] {
            assert!(transient(&os(passing)), "{passing:?}");
        }
        for fatal in [Errno::BADF, Errno::INVAL, Errno::NOTSOCK, Errno::FAULT] {
            assert!(!transient(&os(fatal)), "{fatal:?}");
        }
        assert!(transient(&std::io::ErrorKind::ConnectionAborted.into()));
        assert!(!transient(&std::io::Error::other("the socket is gone")));
    }
}
