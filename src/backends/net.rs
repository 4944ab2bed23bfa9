//! Listening sockets: one per shard, all on the same address with `SO_REUSEPORT`, so the
//! kernel spreads connections over per-core runtimes with no cross-thread hand-off.

use rustix::net::{AddressFamily, SocketFlags, SocketType, bind, listen, socket_with, sockopt};
use std::io;
use std::net::{SocketAddr, TcpListener};

/// Binds `count` listening sockets to `addr` with `SO_REUSEPORT`. When `addr` has port 0, the
/// first socket's port is used for the rest.
///
/// # Errors
/// The OS error of any socket, option, bind or listen.
pub fn bind_shards(addr: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    let mut bound = addr;
    let mut listeners = Vec::with_capacity(count.max(1));
    for _ in 0..count.max(1) {
        let family = if bound.is_ipv4() {
            AddressFamily::INET
        } else {
            AddressFamily::INET6
        };
        let fd = socket_with(
            family,
            SocketType::STREAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        sockopt::set_socket_reuseaddr(&fd, true)?;
        sockopt::set_socket_reuseport(&fd, true)?;
        bind(&fd, &bound)?;
        listen(&fd, 1024)?;
        let listener = TcpListener::from(fd);
        bound = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}
