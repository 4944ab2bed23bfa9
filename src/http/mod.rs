//! HTTP: the router (a function from request to response, and a tower service), response
//! building, the listener (its hardening in front of the router or any other tower service),
//! and the outbound client for peers.

pub(crate) mod body;
pub(crate) mod client;
pub(crate) mod edge;
pub(crate) mod listing_query;
pub(crate) mod response;
pub(crate) mod router;
pub(crate) mod watch_stream;

pub use crate::wire::Route;
pub use body::PlaneBody;
pub use client::PeerTimeouts;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use edge::version_gate;
pub use edge::{Accept, HttpService, ListenerConfig, serve, serve_with};
pub use router::{
    INLINE_READ_LIMIT, InvalidBasePath, Router, RouterFuture, SessionStats, WithFallback,
};
