//! The edge: where HTTP meets a socket. It takes connections from any [`Accept`] source and
//! puts hardening in front of any tower service ([`serve_with`]): the version gate, the head
//! limit and timeout, the stall guard, the connection cap, the client-gone watch, the `date`
//! header, and a drain on shutdown (D-4.1, D-4.5, D-4.6). It knows no router: the router is
//! one [`HttpService`] among others.

pub(crate) mod accept;
mod date;
mod departure;
pub(crate) mod listener;
mod stall_guard;
internal_module!(version_gate);

pub use accept::Accept;
pub use listener::{HttpService, ListenerConfig, serve, serve_with};
