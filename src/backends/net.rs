//! The network: listening sockets for per-core runtimes, and the peer transport, the one way
//! the peer client reaches another capsule.
//!
//! Listening: one bound socket, duplicated once per shard, so every shard accepts from the same
//! queue. (Not `SO_REUSEPORT`: any process of the same user could join a reuse-port group and be
//! handed the operator's connections.)
//!
//! The peer transport ([`PeerTransport`]) opens the byte stream the client speaks HTTP (or TLS,
//! then HTTP) over: [`TcpTransport`] connects over TCP, and a test or a runtime with its own
//! network (an in-process peer, a proxy, a vsock) puts its own in its place through
//! [`CapsuleBuilder::peer_transport`](crate::CapsuleBuilder::peer_transport).

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncWrite};

/// Binds `addr` once and returns `count` non-blocking handles to the same listening socket.
///
/// # Errors
/// The OS error of the bind or of a duplication.
pub fn bind_shards(addr: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    let first = TcpListener::bind(addr)?;
    first.set_nonblocking(true)?;
    let mut listeners = Vec::with_capacity(count.max(1));
    for _ in 1..count.max(1) {
        listeners.push(first.try_clone()?);
    }
    listeners.insert(0, first);
    Ok(listeners)
}

/// A connected byte stream to a peer: anything tokio can read and write. Implemented for every
/// such type, so a transport returns its own stream boxed (`Box::new(tcp)`).
pub trait PeerStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> PeerStream for T {}

/// A connect in progress: resolves to the connected stream or the error that prevented it.
pub type Connecting<'a> =
    Pin<Box<dyn Future<Output = io::Result<Box<dyn PeerStream>>> + Send + 'a>>;

/// How the peer client reaches a peer: one fresh connection per request (D-8, D-10.2). The
/// client bounds the connect in time and speaks TLS over the stream itself for an https peer,
/// so a transport only connects.
///
/// ```
/// use resource_plane::backends::{Connecting, PeerTransport};
/// use std::io;
///
/// /// A transport for a capsule with no network at all.
/// #[derive(Debug)]
/// struct Offline;
///
/// impl PeerTransport for Offline {
///     fn connect<'a>(&'a self, _host: &'a str, _port: u16) -> Connecting<'a> {
///         Box::pin(async { Err(io::ErrorKind::NetworkUnreachable.into()) })
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert!(Offline.connect("peer.example", 80).await.is_err());
/// # }
/// ```
pub trait PeerTransport: Debug + Send + Sync {
    /// A connection to `host` (a name or an IP literal, without brackets) on `port`.
    ///
    /// # Errors
    /// Why no connection was made: for [`TcpTransport`], the OS error of the resolution or
    /// the connect (`ConnectionRefused` for a closed port).
    fn connect<'a>(&'a self, host: &'a str, port: u16) -> Connecting<'a>;
}

/// TCP through the OS, the name resolved by the system: the default transport.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpTransport;

impl PeerTransport for TcpTransport {
    fn connect<'a>(&'a self, host: &'a str, port: u16) -> Connecting<'a> {
        Box::pin(async move {
            let tcp = tokio::net::TcpStream::connect((host, port)).await?;
            // One request, one answer: nothing gains from Nagle's delay.
            let _ = tcp.set_nodelay(true);
            Ok(Box::new(tcp) as Box<dyn PeerStream>)
        })
    }
}
