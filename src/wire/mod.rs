//! The HTTP contract a capsule speaks, as data: the routes its planes answer on
//! ([`route`]), the headers the project defines ([`header`]), the etag's form ([`etag`]) and
//! the grammar of a refusal's error code ([`error_code`]).
//!
//! Every side of the wire reads them from here: the router and its responses, the tools'
//! outbound requests to peers, `pull`, and the demo. Nothing here does I/O; each item is a
//! constant or a pure function, so a change to the contract is a change to this module.

pub(crate) mod error_code;
pub(crate) mod etag;
pub(crate) mod header;
pub(crate) mod route;

pub use route::Route;
