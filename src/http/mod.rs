//! HTTP: the router (a function from request to response, and a tower service), response
//! building, the listener (its hardening in front of the router or any other tower service),
//! and the outbound client for peers.

pub mod body;
pub mod client;
pub mod date;
pub mod listener;
pub mod response;
pub mod router;
pub mod stall_guard;
pub mod version_gate;

pub use body::PlaneBody;
pub use listener::{ListenerConfig, serve, serve_with};
pub use router::{InvalidBasePath, Route, Router, RouterFuture, WithFallback};
