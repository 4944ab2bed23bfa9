//! The edge: where HTTP meets a socket. It takes connections from any [`Accept`] source and
//! puts hardening in front of any tower service ([`serve_with`]): the version gate, the head
//! limit and timeout, the stall guard, the connection cap, the client-gone watch, the `date`
//! header, and a drain on shutdown (D-4.1, D-4.5, D-4.6). It knows no router: the router is
//! one [`HttpService`] among others.

mod accept;
mod config;
mod connection;
mod date;
mod departure;
mod listener;
#[cfg(feature = "cli")]
mod shards;
mod stall_guard;
internal_module!(version_gate);

pub use accept::Accept;
pub use config::ListenerConfig;
pub use connection::HttpService;
pub use listener::serve_with;
#[cfg(feature = "cli")]
pub(crate) use shards::{ShardSocket, serve_sharded};
