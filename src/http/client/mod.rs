//! The outbound client for peers: one GET over a fresh connection, http or https (verified TLS),
//! bounded in time and size, following no redirect (D-8, D-10.2), and the two calls a capsule
//! makes of a peer on it, typed: its agent card ([`card`]) and a redeem ([`redeem`]).

mod card;
mod redeem;

pub(crate) use card::CardError;
pub(crate) use redeem::{Credentials, RedeemError, Redeemed};

use crate::backends::dial::{self, DialError, Http1};
use crate::backends::net::{PeerTransport, TcpTransport};
use crate::policy::Address;
use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use std::sync::Arc;
use std::time::Duration;

/// Limits for one outbound request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Time to establish TCP (and TLS).
    pub connect: Duration,
    /// Time for the whole exchange, connect included.
    pub total: Duration,
    /// The most body bytes a 200 answer may bring.
    pub max_body: u64,
}

/// The time limits of the two outbound requests a capsule makes: `share-file`'s fetch of the
/// peer's agent card, and `fetch-peer-file`'s redeem. A peer that answers too late is
/// `peer_unreachable`, as one that does not answer at all (D-8, D-10.2).
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, MemoryTransport, RecordingTraceSink};
/// use resource_plane::http::PeerTimeouts;
/// use resource_plane::{Capsule, Manifest};
/// use std::{sync::Arc, time::Duration};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let transport = MemoryTransport::new();
/// let mut silent_peer = transport.listen("peer.test", 80);
/// tokio::spawn(async move {
///     let _connection = silent_peer.accept().await; // accepted, never answered
///     std::future::pending::<()>().await
/// });
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/report.md", "hello", 0);
/// let manifest = Manifest::from_yaml(
///     "name: r\n\
///      exports: { peer_files: { root: out/ } }\n\
///      capabilities: { network: { allow: [peer.test] } }",
/// ).unwrap().manifest;
/// let capsule = Capsule::builder(&manifest)
///     .filesystem(fs)
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .peer_transport(Arc::new(transport))
///     .peer_timeouts(PeerTimeouts {
///         card_total: Duration::from_millis(50),
///         ..PeerTimeouts::default()
///     })
///     .launch()
///     .unwrap();
/// let input = serde_json::json!({"path": "report.md", "peer": "peer.test"});
/// let refused = capsule.tools().call("share-file", input).await.unwrap_err();
/// assert_eq!(refused.code_str(), "peer_unreachable");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerTimeouts {
    /// Time to establish TCP and TLS (default 5 s).
    pub connect: Duration,
    /// Time for a whole agent-card fetch (default 5 s).
    pub card_total: Duration,
    /// Time for a whole redeem (default 60 s).
    pub fetch_total: Duration,
}

impl Default for PeerTimeouts {
    fn default() -> Self {
        PeerTimeouts {
            connect: Duration::from_secs(5),
            card_total: Duration::from_secs(5),
            fetch_total: Duration::from_secs(60),
        }
    }
}

/// A completed exchange.
#[derive(Debug)]
pub(crate) struct PeerResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientError {
    /// Could not connect, TLS failed, timed out, or the peer spoke something other than HTTP.
    Unreachable(String),
    /// A 200 answer's body exceeded `max_body` (a refusal's body never does: one over
    /// 64 KiB comes back empty).
    TooLarge,
}

/// Makes outbound requests to peers, over a [`PeerTransport`] ([`TcpTransport`] unless told
/// otherwise).
#[derive(Debug, Clone)]
pub(crate) struct PeerClient {
    tls: Arc<rustls::ClientConfig>,
    transport: Arc<dyn PeerTransport>,
}

impl PeerClient {
    /// A client verifying https peers against `tls`, connecting over TCP.
    pub(crate) fn new(tls: Arc<rustls::ClientConfig>) -> Self {
        PeerClient {
            tls,
            transport: Arc::new(TcpTransport),
        }
    }

    /// The same client reaching peers through `transport` instead of TCP: the request, the TLS
    /// for an https peer, and every limit stay as they are.
    pub(crate) fn with_transport(mut self, transport: Arc<dyn PeerTransport>) -> Self {
        self.transport = transport;
        self
    }

    /// `GET <target><path>` with `headers`, within `limits`.
    ///
    /// # Errors
    /// [`ClientError::Unreachable`] or [`ClientError::TooLarge`].
    pub(crate) async fn get(
        &self,
        target: &Address,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        limits: Limits,
    ) -> Result<PeerResponse, ClientError> {
        tokio::time::timeout(limits.total, self.exchange(target, path, headers, limits))
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Unreachable(
                    "the peer did not finish in time".into(),
                ))
            })
    }

    async fn exchange(
        &self,
        target: &Address,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        limits: Limits,
    ) -> Result<PeerResponse, ClientError> {
        let connected = dial::connect(self.transport.as_ref(), target, limits.connect).await?;
        let request = Request::get(path)
            .header(http::header::HOST, target.host_port())
            .header(http::header::CONNECTION, "close");
        let request = headers
            .iter()
            .fold(request, |r, (name, value)| r.header(name, value))
            .body(Empty::<Bytes>::new())
            .map_err(|e| ClientError::Unreachable(format!("request: {e}")))?;
        let connection = connected.handshake(&self.tls, limits.connect).await?;
        send(connection, request, limits.max_body).await
    }
}

impl From<DialError> for ClientError {
    fn from(e: DialError) -> Self {
        ClientError::Unreachable(match e {
            DialError::ConnectTimedOut => "connect timed out".into(),
            DialError::TlsTimedOut => "TLS handshake timed out".into(),
            DialError::Failed(what) => what,
        })
    }
}

/// The most of a refusal's body read, whatever the success cap: far more than any JSON error
/// body, which is all a refusal's body is read for.
const REFUSAL_BODY_MAX: u64 = 64 * 1024;

/// `body` whole, or `None` when it (or its declared length) is over `cap`.
///
/// # Errors
/// [`ClientError::Unreachable`] when the body breaks off.
async fn read_capped(
    body: &mut hyper::body::Incoming,
    declared_length: Option<u64>,
    cap: u64,
) -> Result<Option<Bytes>, ClientError> {
    if declared_length.is_some_and(|length| length > cap) {
        return Ok(None);
    }
    let mut collected = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ClientError::Unreachable(format!("body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if collected.len() as u64 + data.len() as u64 > cap {
                return Ok(None);
            }
            collected.extend_from_slice(&data);
        }
    }
    Ok(Some(collected.freeze()))
}

/// Sends `request` over `connection` and reads the answer, its body under `max_body` for a
/// success; the connection closes when this returns.
async fn send(
    connection: Http1,
    request: Request<Empty<Bytes>>,
    max_body: u64,
) -> Result<PeerResponse, ClientError> {
    let Http1 { mut sender, driver } = connection;
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| ClientError::Unreachable(format!("request: {e}")))?;
        let (parts, mut body) = response.into_parts();
        // `max_body` caps what a success may bring; a refusal's body (its error code) is read
        // under its own cap, so that a small `max_body` never hides the peer's code.
        let success = parts.status == StatusCode::OK;
        let cap = if success { max_body } else { REFUSAL_BODY_MAX };
        let declared_length = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let body = match read_capped(&mut body, declared_length, cap).await? {
            Some(body) => body,
            None if success => return Err(ClientError::TooLarge),
            // A refusal too long to read: its status alone speaks (`http_<status>`, D-10.3).
            None => Bytes::new(),
        };
        Ok(PeerResponse {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
    .await;
    drop(driver);
    result
}
