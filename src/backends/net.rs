//! Listening sockets for per-core runtimes: one bound socket, duplicated once per shard, so
//! every shard accepts from the same queue. (Not `SO_REUSEPORT`: any process of the same user
//! could join a reuse-port group and be handed the operator's connections.) And the peer
//! transport's one way out: a TCP connection to a peer.

use std::io;
use std::net::{SocketAddr, TcpListener};

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

/// A TCP connection to `host:port` (the name resolved by the system): the only way the peer
/// client reaches the network.
///
/// # Errors
/// The OS error of the resolution or the connect.
pub async fn connect(host: &str, port: u16) -> io::Result<tokio::net::TcpStream> {
    tokio::net::TcpStream::connect((host, port)).await
}
