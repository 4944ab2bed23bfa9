//! HTTP: the router (a function from request to response, and a tower service), response
//! building, the listener (its hardening in front of the router or any other tower service),
//! and the outbound client for peers.

pub(crate) mod accept;
pub(crate) mod body;
pub(crate) mod client;
pub(crate) mod date;
pub(crate) mod departure;
pub(crate) mod listener;
pub(crate) mod listing_query;
pub(crate) mod response;
pub(crate) mod router;
pub(crate) mod stall_guard;
pub(crate) mod watch_stream;
internal_module!(version_gate);

pub use crate::wire::Route;
pub use accept::Accept;
pub use body::PlaneBody;
pub use client::PeerTimeouts;
pub use listener::{HttpService, ListenerConfig, serve, serve_with};
pub use router::{
    INLINE_READ_LIMIT, InvalidBasePath, Router, RouterFuture, SessionStats, WithFallback,
};
