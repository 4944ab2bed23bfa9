//! The network: listening sockets for per-core runtimes, and the peer transport, the one way
//! the peer client reaches another capsule.
//!
//! Listening: one bound socket, duplicated once per shard, so every shard accepts from the same
//! queue. (Not `SO_REUSEPORT`: any process of the same user could join a reuse-port group and be
//! handed the operator's connections.)
//!
//! The peer transport ([`PeerTransport`]) opens the byte stream the client speaks HTTP (or TLS,
//! then HTTP) over: [`TcpTransport`] connects over TCP; [`MemoryTransport`], the test double,
//! connects to in-process listeners over in-memory pipes; and a runtime with its own network
//! (a proxy, a vsock) puts its own in their place through
//! [`CapsuleBuilder::peer_transport`](crate::CapsuleBuilder::peer_transport).

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::io;
#[cfg(feature = "cli")]
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::sync::mpsc;

/// Binds `addr` once and returns `count` non-blocking handles to the same listening socket.
///
/// # Errors
/// The OS error of the bind or of a duplication.
#[cfg(feature = "cli")]
pub(crate) fn bind_shards(addr: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
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
///
/// ```
/// use resource_plane::backends::PeerStream;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// // An in-memory pipe, as a proxy or a vsock connection would be: any tokio stream will do.
/// let (client, mut far_end) = tokio::io::duplex(1024);
/// let mut stream: Box<dyn PeerStream> = Box::new(client);
/// stream.write_all(b"GET /.well-known/agent.json HTTP/1.1\r\n").await?;
/// let mut first = [0u8; 4];
/// far_end.read_exact(&mut first).await?;
/// assert_eq!(&first, b"GET ");
/// # Ok(())
/// # }
/// ```
pub trait PeerStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> PeerStream for T {}

/// A connect in progress: resolves to the connected stream or the error that prevented it.
/// A transport whose answer is known at once returns a ready future.
///
/// ```
/// use resource_plane::backends::Connecting;
/// use std::io;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let refused: Connecting<'static> =
///     Box::pin(std::future::ready(Err(io::ErrorKind::ConnectionRefused.into())));
/// assert_eq!(refused.await.err().unwrap().kind(), io::ErrorKind::ConnectionRefused);
/// # }
/// ```
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

/// TCP through the OS, the name resolved by the system: the default transport. Nagle's delay
/// is turned off on each connection (one request, one answer).
///
/// ```
/// use resource_plane::backends::{PeerTransport, TcpTransport};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let port = listener.local_addr()?.port();
/// let accept = tokio::spawn(async move { listener.accept().await.map(|(_, from)| from) });
/// let _stream = TcpTransport.connect("127.0.0.1", port).await?;
/// assert!(accept.await.unwrap()?.ip().is_loopback());
/// # Ok(())
/// # }
/// ```
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

/// Bytes each direction of a [`MemoryTransport`] pipe buffers before a writer waits.
const PIPE_BYTES: usize = 64 * 1024;

/// Where each listening address's connections go.
type Listeners = HashMap<(String, u16), mpsc::UnboundedSender<DuplexStream>>;

/// In-process peers over in-memory pipes (`tokio::io::duplex`): the test double. A test listens
/// at a `host:port` of its choosing, serves what arrives there (a capsule's router, say), and
/// hands the transport to the capsules that should reach it. No socket is opened and no name is
/// resolved; a connect to an address nobody listens at is refused (`ConnectionRefused`), as a
/// closed port is.
///
/// ```
/// use resource_plane::backends::{MemoryTransport, PeerTransport};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let transport = MemoryTransport::new();
/// let mut listener = transport.listen("peer.test", 80);
/// tokio::spawn(async move {
///     let mut server = listener.accept().await.unwrap();
///     server.write_all(b"hello").await.unwrap();
/// });
/// let mut client = transport.connect("PEER.test", 80).await.unwrap();
/// let mut greeting = String::new();
/// client.read_to_string(&mut greeting).await.unwrap();
/// assert_eq!(greeting, "hello");
///
/// let refused = transport.connect("peer.test", 81).await.err().unwrap();
/// assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryTransport {
    listeners: Arc<Mutex<Listeners>>,
}

impl MemoryTransport {
    /// A transport with no listener yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Listens at `host:port` (the host compared without regard to ASCII case, as DNS does):
    /// every later connect there arrives on the returned listener, replacing any listener the
    /// address had. Dropping the listener closes the address again.
    pub fn listen(&self, host: &str, port: u16) -> MemoryListener {
        let (sender, connections) = mpsc::unbounded_channel();
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((host.to_ascii_lowercase(), port), sender);
        MemoryListener { connections }
    }
}

impl PeerTransport for MemoryTransport {
    fn connect<'a>(&'a self, host: &'a str, port: u16) -> Connecting<'a> {
        let key = (host.to_ascii_lowercase(), port);
        let (client, server) = tokio::io::duplex(PIPE_BYTES);
        let mut listeners = self
            .listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let accepted = match listeners.get(&key) {
            Some(listener) => match listener.send(server) {
                Ok(()) => Ok(Box::new(client) as Box<dyn PeerStream>),
                Err(_) => {
                    // The listener was dropped: the address is closed from now on.
                    listeners.remove(&key);
                    Err(io::ErrorKind::ConnectionRefused.into())
                }
            },
            None => Err(io::ErrorKind::ConnectionRefused.into()),
        };
        Box::pin(std::future::ready(accepted))
    }
}

/// The server side of one [`MemoryTransport`] address: each connect there arrives as the
/// server end of an in-memory pipe.
///
/// ```
/// use resource_plane::backends::{MemoryTransport, PeerTransport};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let transport = MemoryTransport::new();
/// let mut listener = transport.listen("peer.test", 80);
/// let _client = transport.connect("peer.test", 80).await.unwrap();
/// assert!(listener.accept().await.is_some());
/// drop(transport);
/// assert!(listener.accept().await.is_none(), "no transport is left to connect");
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryListener {
    connections: mpsc::UnboundedReceiver<DuplexStream>,
}

impl MemoryListener {
    /// The next connection's server end; `None` once the transport (every clone of it) is gone.
    pub async fn accept(&mut self) -> Option<DuplexStream> {
        self.connections.recv().await
    }
}
