//! HTTP, in three parts that know nothing of each other, and the one place two of them meet:
//!
//! * the router (`router`, with the `response` shapes, the `body` of every answer, the
//!   listing's `listing_query` and its `watch_stream`): a function from request to response,
//!   and a tower service, that knows no socket;
//! * the edge (`edge`): connections from any [`Accept`] source, hardened in front of any tower
//!   service ([`serve_with`]), knowing no router;
//! * the peer client (`client`): the outbound side, a capsule's tools fetching from peers;
//! * [`serve`], here: the router behind the edge.

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
pub use edge::{Accept, HttpService, ListenerConfig, serve_with};
pub use router::{
    INLINE_READ_LIMIT, InvalidBasePath, Router, RouterFuture, SessionStats, WithFallback,
};

use std::future::Future;

/// Serves `router` on connections from `listener` (a [`TcpListener`](tokio::net::TcpListener), a
/// [`UnixListener`](tokio::net::UnixListener), any [`Accept`]) until `shutdown` resolves, then
/// stops accepting and drains: [`serve_with`] for the router alone.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::http::{ListenerConfig, serve};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: ., mode: read-only } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let shutdown = std::future::ready(()); // a real runtime waits for its signal here
/// serve(listener, capsule.router(), ListenerConfig::default(), shutdown).await?;
/// capsule.end_session(); // once the listener has drained
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`serve_with`].
pub async fn serve(
    listener: impl Accept,
    router: Router,
    config: ListenerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Watch streams end, and held long-polls answer, when shutdown begins: the drain would
    // otherwise wait on them until its deadline.
    let watches = router.clone();
    let shutdown = async move {
        shutdown.await;
        watches.shut_down_watches();
    };
    serve_with(listener, router, config, shutdown).await
}
