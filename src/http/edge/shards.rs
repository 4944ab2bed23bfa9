//! The binary's listener: several handles to one listening socket, each served on its own
//! thread by its own single-threaded runtime.

use super::config::ListenerConfig;
use super::connection::HttpService;
use super::listener::serve_with;

/// Blocking threads a shard may start beyond one per lane of its router.
const BLOCKING_MARGIN: usize = 2;

/// One handle to the binary's listening socket, TCP or Unix domain, not yet registered with a
/// runtime.
#[derive(Debug)]
pub(crate) enum ShardSocket {
    /// A TCP listening socket.
    Tcp(std::net::TcpListener),
    /// A Unix domain listening socket.
    Unix(std::os::unix::net::UnixListener),
}

/// Serves `router` on several handles to one listening socket (see
/// [`bind_shards`](crate::backends::net::bind_shards)), each on its own thread with its own
/// single-threaded runtime: a connection lives and dies on one core, with no work stealing and
/// no cross-thread wake-ups. Returns when every shard has stopped accepting and drained.
///
/// # Errors
/// When a shard's runtime cannot be built.
pub(crate) fn serve_sharded(
    listeners: Vec<ShardSocket>,
    service: impl HttpService,
    lanes: usize,
    config: ListenerConfig,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let per_shard = ListenerConfig {
        max_connections: (config.max_connections / listeners.len().max(1)).max(1),
        ..config
    };
    // Set by a shard whose listener failed, so that the others stop too.
    let failed = tokio::sync::watch::Sender::new(false);
    let shards: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(index, listener)| {
            let service = service.clone();
            let per_shard = per_shard.clone();
            let shutdown = shutdown.clone();
            let (one_failed, another_failed) = (failed.clone(), failed.subscribe());
            std::thread::Builder::new()
                .name(format!("shard-{index}"))
                .spawn(move || {
                    serve_shard(
                        listener,
                        service,
                        lanes,
                        per_shard,
                        shutdown,
                        one_failed,
                        another_failed,
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    // Every shard is joined before answering: one that failed must not leave the others
    // serving unwatched. The first failure is the answer; a panic is a failure too.
    let mut outcome = Ok(());
    for shard in shards {
        let result = shard
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("a listener shard panicked")));
        if let (Ok(()), Err(e)) = (&outcome, result) {
            outcome = Err(e);
        }
    }
    outcome
}

/// One shard: `listener` served on this thread by a single-threaded runtime of its own until
/// `shutdown` says stop or `another_failed` says a shard's listener failed; `one_failed`
/// raises that flag when this shard's own listener fails.
///
/// # Errors
/// When the runtime cannot be built, or the listener fails ([`serve_with`]).
fn serve_shard(
    listener: ShardSocket,
    service: impl HttpService,
    lanes: usize,
    config: ListenerConfig,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    one_failed: tokio::sync::watch::Sender<bool>,
    mut another_failed: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    // A blocking thread per lane of the router (requests wait for a lane on the async side,
    // holding no thread), and a margin for a thread still finishing as the next call starts.
    // Threads start on demand.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(lanes + BLOCKING_MARGIN)
        .build()?;
    let drain_deadline = config.drain_deadline;
    let served = runtime.block_on(async move {
        let stop = async move {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => {}
                _ = another_failed.wait_for(|failed| *failed) => {}
            }
        };
        match listener {
            ShardSocket::Tcp(listener) => {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                serve_with(listener, service, config, stop).await
            }
            ShardSocket::Unix(listener) => {
                let listener = tokio::net::UnixListener::from_std(listener)?;
                serve_with(listener, service, config, stop).await
            }
        }
    });
    if served.is_err() {
        // The others stop and drain too: the process is going down.
        one_failed.send_replace(true);
    }
    // Dropping a runtime waits for its blocking threads without limit; a read still parked
    // then must not keep a stopped shard, and the process, alive.
    runtime.shutdown_timeout(drain_deadline);
    served
}
