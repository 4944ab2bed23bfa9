//! What a runtime may set of the listener: its limits, its timeouts and its clock.

use super::stall_guard::DEFAULT_SEND_TIMEOUT;
use crate::backends::{Clock, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// Listener limits, and the clock every answer is dated by. Each field has a default; a
/// runtime sets those it cares about and takes the rest from [`ListenerConfig::default`].
///
/// ```
/// use resource_plane::backends::ManualClock;
/// use resource_plane::http::{ListenerConfig, serve_with};
/// use std::sync::Arc;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let config = ListenerConfig {
///     max_connections: 64,
///     clock: Arc::new(ManualClock::new(784_111_777_000)),
///     ..ListenerConfig::default()
/// };
/// let app = tower::service_fn(|_: http::Request<hyper::body::Incoming>| async {
///     let empty = http_body_util::Empty::<bytes::Bytes>::new();
///     Ok::<_, std::convert::Infallible>(http::Response::new(empty))
/// });
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let address = listener.local_addr()?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(serve_with(listener, app, config, async { stopped.await.ok(); }));
///
/// let mut client = tokio::net::TcpStream::connect(address).await?;
/// client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await?;
/// let mut answer = String::new();
/// client.read_to_string(&mut answer).await?;
/// let answer = answer.to_ascii_lowercase();
/// assert!(answer.contains("date: sun, 06 nov 1994 08:49:37 gmt"), "{answer}");
/// stop.send(()).unwrap();
/// server.await.unwrap()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Connections served at once; more wait to be accepted. Default 2,048.
    pub max_connections: usize,
    /// A request head not complete within this is dropped. Default 10 s.
    pub header_read_timeout: Duration,
    /// The largest request head accepted (hyper answers 431 beyond it; minimum 8 KiB).
    /// Default 16 KiB.
    pub max_head_bytes: usize,
    /// How long in-flight responses may take to finish after shutdown begins. Default 5 s.
    pub drain_deadline: Duration,
    /// How long a response may make no progress (the client takes nothing) before its
    /// connection is dropped and its body's budget bytes come back (see `stall_guard`).
    /// Default 60 s.
    pub send_timeout: Duration,
    /// What the `date` header of every answer says: the service's answers and the 505 the
    /// listener writes itself (default [`SystemClock`]). A service that sets its own `date`
    /// keeps it. The 400 and 431 hyper writes for a head it cannot parse, before any service
    /// sees it, carry hyper's own reading of the system clock.
    pub clock: Arc<dyn Clock>,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            max_connections: 2048,
            header_read_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
            drain_deadline: Duration::from_secs(5),
            send_timeout: DEFAULT_SEND_TIMEOUT,
            clock: Arc::new(SystemClock),
        }
    }
}
