//! HTTP: the router (a function from request to response), response building, the listener a
//! standalone process runs, and the outbound client for peers.

pub mod body;
pub mod client;
pub mod listener;
pub mod response;
pub mod router;
pub mod stall_guard;
pub mod version_gate;

pub use body::PlaneBody;
pub use listener::{ListenerConfig, serve, serve_with};
pub use router::{InvalidBasePath, Route, Router, RouterFuture, WithFallback};
