//! The pull's side of HTTP: the capsule's URL, the request targets built from it, and one GET
//! per connection over http or verified https, following no redirect, with every wait bounded.
//!
//! The crate's peer client ([`crate::http::client::PeerClient`]) collects a whole
//! body in memory; a mirror streams files up to the export's `max_bytes` to disk, so this
//! client hands the body out chunk by chunk instead. It connects the same way
//! ([`crate::backends::dial`]) and speaks the same: HTTP/1.1, `connection: close`, a fresh
//! connection per request.

use crate::backends::TcpTransport;
use crate::backends::dial::{self, DialError, Driver, Http1};
use crate::policy::Address;
use bytes::Bytes;
use http::header::HeaderMap;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::listing::EntryPath;

/// The capsule as the operator named it: `http(s)://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    address: Address,
    /// A path the capsule's planes are mounted under, without a trailing `/`; usually empty.
    prefix: String,
}

impl Origin {
    /// Parses the `URL` argument. A path is kept as a prefix (a runtime may mount the planes
    /// under one) and used verbatim, so it must already be percent-encoded.
    ///
    /// # Errors
    /// What is accepted, when `url` is not an http or https URL with a host, or has userinfo,
    /// a query, a fragment, whitespace or a backslash.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        const ACCEPTED: &str = "expected http://host[:port][/path] or https://host[:port][/path] (no userinfo, query or fragment)";
        let scheme_len = ["http://", "https://"]
            .iter()
            .find(|p| {
                url.get(..p.len())
                    .is_some_and(|h| h.eq_ignore_ascii_case(p))
            })
            .ok_or(ACCEPTED)?
            .len();
        let rest = &url[scheme_len..];
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if path
            .bytes()
            .any(|b| !b.is_ascii_graphic() || matches!(b, b'?' | b'#' | b'\\'))
        {
            return Err(ACCEPTED.into());
        }
        let address = Address::parse(&format!("{}{authority}", &url[..scheme_len]))
            .map_err(|_| ACCEPTED.to_owned())?;
        Ok(Origin {
            address,
            prefix: path.trim_end_matches('/').to_owned(),
        })
    }

    /// The listing's request target.
    pub(crate) fn listing_target(&self) -> String {
        format!("{}{}", self.prefix, crate::wire::route::LISTING)
    }

    /// The watch stream's request target (D-17.3).
    pub(crate) fn watch_target(&self) -> String {
        format!("{}?watch=1", self.listing_target())
    }

    /// A file's request target: each component percent-encoded on its own, so the server
    /// decodes exactly the listed path (D-2.2).
    pub(crate) fn file_target(&self, path: &EntryPath) -> String {
        let mut encoded = String::new();
        for (i, component) in path.components().enumerate() {
            if i > 0 {
                encoded.push('/');
            }
            encode_component(&mut encoded, component);
        }
        format!("{}{}", self.prefix, crate::wire::route::read(&encoded))
    }

    /// `scheme://host:port/prefix`, for messages.
    pub(crate) fn display(&self) -> String {
        format!("{}{}", self.address.base_url(), self.prefix)
    }
}

/// Appends `component` with every byte but RFC 3986's unreserved ones (`A-Z a-z 0-9 - . _ ~`)
/// percent-encoded: `/`, `%`, `?`, `#`, `+`, spaces and UTF-8 all travel as escapes.
fn encode_component(out: &mut String, component: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in component.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

/// The most of a refusal's body read for its code.
const REFUSAL_BODY_MAX: u64 = 64 * 1024;

/// Why an exchange failed before an answer could be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteError {
    /// Could not connect, TLS failed, or the server broke off or spoke something else.
    Unreachable(String),
    /// Nothing moved within the timeout (connect, the answer's head, or the next body bytes).
    TimedOut(&'static str),
}

impl From<DialError> for RemoteError {
    fn from(e: DialError) -> Self {
        match e {
            DialError::ConnectTimedOut => RemoteError::TimedOut("connect"),
            DialError::TlsTimedOut => RemoteError::TimedOut("the TLS handshake"),
            DialError::Failed(what) => RemoteError::Unreachable(what),
        }
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Unreachable(what) => f.write_str(what),
            RemoteError::TimedOut(what) => write!(f, "{what} timed out"),
        }
    }
}

/// Makes the pull's requests to one capsule.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    origin: Origin,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
}

/// An answer whose head has arrived; its body is read on demand.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The status.
    pub(crate) status: StatusCode,
    /// The headers.
    pub(crate) headers: HeaderMap,
    body: hyper::body::Incoming,
    timeout: Duration,
    /// Closes the connection when the answer is dropped, read or not.
    _driver: Driver,
}

impl Answer {
    /// The declared `content-length`, when there is a well-formed one.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.headers
            .get(http::header::CONTENT_LENGTH)?
            .to_str()
            .ok()?
            .parse()
            .ok()
    }

    /// The next chunk of the body, `None` at its end.
    ///
    /// # Errors
    /// [`RemoteError::TimedOut`] when no bytes came within the timeout;
    /// [`RemoteError::Unreachable`] when the body broke off.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, RemoteError> {
        loop {
            let frame = tokio::time::timeout(self.timeout, self.body.frame())
                .await
                .map_err(|_| RemoteError::TimedOut("reading the body"))?;
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(RemoteError::Unreachable(format!("body: {e}"))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// Waits up to `timeout` for each of the body's chunks from now on.
    pub(crate) fn set_idle_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The whole body, or `None` as soon as it (or its declared length) passes `cap` bytes.
    ///
    /// # Errors
    /// As [`chunk`](Self::chunk).
    pub(crate) async fn read_capped(&mut self, cap: u64) -> Result<Option<Vec<u8>>, RemoteError> {
        if self.content_length().is_some_and(|length| length > cap) {
            return Ok(None);
        }
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            if body.len() as u64 + chunk.len() as u64 > cap {
                return Ok(None);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some(body))
    }

    /// The refusal code of an error answer (`{"error":"<code>",…}`), when its body is one and
    /// the code follows the wire's grammar; anything else a server sends is not repeated.
    pub(crate) async fn refusal_code(mut self) -> Option<String> {
        let body = self.read_capped(REFUSAL_BODY_MAX).await.ok()??;
        crate::wire::error_code::read(&body)
    }
}

impl Remote {
    /// A client for `origin`, verifying https against `tls`, giving up on any wait (connect
    /// and TLS, the answer's head, each body chunk) after `timeout`.
    pub(crate) fn new(origin: Origin, tls: Arc<rustls::ClientConfig>, timeout: Duration) -> Self {
        Remote {
            origin,
            tls,
            timeout,
        }
    }

    /// How long any one wait may last.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The capsule this client speaks to.
    pub(crate) fn origin(&self) -> &Origin {
        &self.origin
    }

    /// `GET <target>` with `headers` added, on a fresh connection; the answer's head is in,
    /// its body not yet read. A redirect is an answer like any other: never followed.
    ///
    /// # Errors
    /// [`RemoteError`] when no answer head arrived.
    pub(crate) async fn get(
        &self,
        target: &str,
        headers: &[(http::header::HeaderName, &str)],
    ) -> Result<Answer, RemoteError> {
        let address = &self.origin.address;
        let connected = dial::connect(&TcpTransport, address, self.timeout).await?;
        let mut request = Request::get(target);
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        let request = request
            .header(http::header::HOST, address.host_port())
            .header(http::header::CONNECTION, "close")
            .header(
                http::header::USER_AGENT,
                concat!("resource-plane-pull/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::<Bytes>::new())
            .map_err(|e| RemoteError::Unreachable(format!("request: {e}")))?;
        let Http1 { mut sender, driver } = connected.handshake(&self.tls, self.timeout).await?;
        let response = tokio::time::timeout(self.timeout, sender.send_request(request))
            .await
            .map_err(|_| RemoteError::TimedOut("waiting for the answer"))?
            .map_err(|e| RemoteError::Unreachable(format!("request: {e}")))?;
        let (parts, body) = response.into_parts();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            timeout: self.timeout,
            _driver: driver,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::pull::listing::check_path;

    #[test]
    fn urls_parse_into_an_origin_and_a_prefix() {
        for (url, display, listing) in [
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080",
                "/resources/files",
            ),
            (
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080",
                "/resources/files",
            ),
            (
                "HTTPS://Example.COM",
                "https://example.com:443",
                "/resources/files",
            ),
            (
                "http://[::1]:9/caps/reporter/",
                "http://[::1]:9/caps/reporter",
                "/caps/reporter/resources/files",
            ),
        ] {
            let origin = Origin::parse(url).expect(url);
            assert_eq!(origin.display(), display, "{url}");
            assert_eq!(origin.listing_target(), listing, "{url}");
        }
    }

    #[test]
    fn urls_that_are_not_plain_http_are_refused() {
        for url in [
            "",
            "127.0.0.1:8080",
            "ftp://host",
            "http://",
            "http:///x",
            "http://user@host",
            "http://host:0",
            "http://host:99999",
            "http://host/a?b",
            "http://host/a#b",
            "http://host?b",
            "http://host/a b",
            "http://host/a\\b",
            "http://ho st",
        ] {
            assert!(Origin::parse(url).is_err(), "{url:?}");
        }
    }

    #[test]
    fn file_targets_encode_each_component_alone() {
        let origin = Origin::parse("http://h:1/p").unwrap();
        for (path, target) in [
            ("a.txt", "/p/resources/files/a.txt"),
            ("sub/b-c_d~e.txt", "/p/resources/files/sub/b-c_d~e.txt"),
            (
                "sp ace/%?#+.txt",
                "/p/resources/files/sp%20ace/%25%3F%23%2B.txt",
            ),
            ("é", "/p/resources/files/%C3%A9"),
            ("..a/.b", "/p/resources/files/..a/.b"),
            ("new\nline", "/p/resources/files/new%0Aline"),
        ] {
            assert_eq!(origin.file_target(&check_path(path).unwrap()), target);
        }
    }

    #[test]
    fn encoded_targets_decode_back_to_the_listed_path() {
        let origin = Origin::parse("http://h:1").unwrap();
        for path in ["a b/c%d", "ü/€/𝄞", "x;y=z/@:!$&'()*,"] {
            let target = origin.file_target(&check_path(path).unwrap());
            let raw = target
                .strip_prefix(crate::wire::route::LISTING)
                .and_then(|rest| rest.strip_prefix('/'))
                .unwrap();
            let decoded = crate::path::decode_request_path(raw).unwrap();
            assert_eq!(decoded.as_str(), path);
        }
    }
}
