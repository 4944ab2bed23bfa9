//! One outbound HTTP/1.1 connection: a fresh byte stream from a [`PeerTransport`], TLS verified
//! against a client configuration when the address is https, then HTTP/1's handshake, every
//! wait bounded. No redirect is ever followed: a connection speaks to the address it was opened
//! to. What is sent over it, and how much of an answer is read, is the caller's.
//!
//! It is two steps, [`connect`] then [`Connected::handshake`], so that a caller can build its
//! request in between: a peer that cannot be reached is reported as such even when the request
//! could not have been built.

use super::net::{PeerStream, PeerTransport};
use crate::policy::{Address, Scheme};
use bytes::Bytes;
use http_body_util::Empty;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;

/// Why no connection was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DialError {
    /// The connect did not finish within its time.
    ConnectTimedOut,
    /// The TLS handshake did not finish within its time.
    TlsTimedOut,
    /// Anything else, as `<step>: <error>`, the step `connect`, `server name`, `TLS` or
    /// `handshake`.
    Failed(String),
}

/// A byte stream to an address, nothing spoken over it yet.
pub(crate) struct Connected {
    stream: Box<dyn PeerStream>,
    /// The host without an IPv6 literal's brackets: TLS's server name.
    host: String,
    scheme: Scheme,
}

/// Connects to `address` through `transport`, waiting at most `timeout`.
///
/// # Errors
/// [`DialError::ConnectTimedOut`], or [`DialError::Failed`] with the transport's error.
pub(crate) async fn connect(
    transport: &dyn PeerTransport,
    address: &Address,
    timeout: Duration,
) -> Result<Connected, DialError> {
    let host = address
        .host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let stream = tokio::time::timeout(timeout, transport.connect(&host, address.effective_port()))
        .await
        .map_err(|_| DialError::ConnectTimedOut)?
        .map_err(|e| DialError::Failed(format!("connect: {e}")))?;
    Ok(Connected {
        stream,
        host,
        scheme: address.effective_scheme(),
    })
}

impl Connected {
    /// Opens HTTP/1 over the stream, after a TLS handshake verified against `tls` (waiting at
    /// most `timeout`) when the address is https.
    ///
    /// # Errors
    /// [`DialError::TlsTimedOut`], or [`DialError::Failed`] for a host that cannot be a
    /// server name, a failed TLS handshake or a failed HTTP/1 handshake.
    pub(crate) async fn handshake(
        self,
        tls: &Arc<rustls::ClientConfig>,
        timeout: Duration,
    ) -> Result<Http1, DialError> {
        match self.scheme {
            Scheme::Http => http1(TokioIo::new(self.stream)).await,
            Scheme::Https => {
                let name = rustls_pki_types::ServerName::try_from(self.host)
                    .map_err(|e| DialError::Failed(format!("server name: {e}")))?;
                let stream = tokio::time::timeout(
                    timeout,
                    tokio_rustls::TlsConnector::from(tls.clone()).connect(name, self.stream),
                )
                .await
                .map_err(|_| DialError::TlsTimedOut)?
                .map_err(|e| DialError::Failed(format!("TLS: {e}")))?;
                http1(TokioIo::new(stream)).await
            }
        }
    }
}

/// An open HTTP/1 connection: requests go out through `sender`, and the connection lives until
/// `driver` is dropped.
pub(crate) struct Http1 {
    pub(crate) sender: SendRequest<Empty<Bytes>>,
    pub(crate) driver: Driver,
}

/// The task that drives a connection: dropping it closes the connection, whether its answer
/// was read or not.
#[derive(Debug)]
pub(crate) struct Driver(tokio::task::JoinHandle<()>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// HTTP/1's handshake over `io`, its connection driven by a task of its own.
async fn http1<IO>(io: IO) -> Result<Http1, DialError>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| DialError::Failed(format!("handshake: {e}")))?;
    let driver = Driver(tokio::spawn(async move {
        let _ = connection.await;
    }));
    Ok(Http1 { sender, driver })
}
