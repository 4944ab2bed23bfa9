//! Response building: the exact header sets of the spec and D-4.4/D-4.5, in one place.

use super::body::PlaneBody;
use crate::refusal::Code;
use crate::wire::header::{EVENT_STREAM, GENERATION, HANDLE_ID, MTIME_MS};
use crate::wire::{error_code, etag};
use http::header::{ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_TYPE, ETAG, HeaderValue};
use http::{Response, StatusCode};

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const OCTETS: HeaderValue = HeaderValue::from_static("application/octet-stream");
const CLOSE: HeaderValue = HeaderValue::from_static("close");

/// A header value from arbitrary text: verbatim when legal, else with each control byte and
/// each `%` percent-encoded, so the value decodes back to the text (a declared root is trusted
/// config, but never allowed to break the response). Other bytes, UTF-8 included, pass as they
/// are.
pub(crate) fn header_text(text: &str) -> HeaderValue {
    HeaderValue::from_bytes(text.as_bytes()).unwrap_or_else(|_| {
        let mut escaped = Vec::with_capacity(text.len() * 3);
        for byte in text.bytes() {
            if byte.is_ascii_control() || byte == b'%' {
                escaped.extend_from_slice(format!("%{byte:02X}").as_bytes());
            } else {
                escaped.push(byte);
            }
        }
        HeaderValue::from_bytes(&escaped).unwrap_or(HeaderValue::from_static(""))
    })
}

/// Headers a response carries at most: the seven of a read, with room for hyper's own so the
/// table never grows while they go in.
const HEADER_ROOM: usize = 12;

fn base(status: u16, content_type: HeaderValue, body: PlaneBody) -> Response<PlaneBody> {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    *response.headers_mut() = http::HeaderMap::with_capacity(HEADER_ROOM);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, content_type);
    headers.insert(CONNECTION, CLOSE);
    response
}

/// `{"error":…,"message":…}` with the code's status, `x-murmur-generation` when the route is a
/// plane route, `allow: GET` on 405 and `x-murmur-handle-id` when a token was present.
pub(crate) fn refusal(
    code: Code,
    generation: Option<u64>,
    handle_id: Option<&str>,
) -> Response<PlaneBody> {
    let body = error_code::body(code.as_str(), code.message());
    let mut response = base(code.status(), JSON, body.into());
    let headers = response.headers_mut();
    if let Some(generation) = generation {
        headers.insert(GENERATION, HeaderValue::from(generation));
    }
    if code == Code::MethodNotAllowed {
        headers.insert(ALLOW, HeaderValue::from_static("GET"));
    }
    if let Some(id) = handle_id {
        headers.insert(HANDLE_ID, header_text(id));
    }
    response
}

/// The body of every `POST` to the agent card's JSON-RPC URL where no agent answers there
/// (D-4.7.1): a JSON-RPC 2.0 error response, `-32601` (method not found). Its `id` is `null`:
/// the router never reads a request body, so it cannot echo the request's id.
pub(crate) const JSON_RPC_NO_AGENT: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"this capsule serves files only"}}"#;

/// The answer to a `POST` to the card's JSON-RPC URL: [`JSON_RPC_NO_AGENT`], `200`,
/// `application/json`. JSON-RPC over HTTP, as A2A's JSON-RPC binding and its SDKs use it,
/// carries an error in a `200` response's body: a client reads the error object instead of
/// failing on the HTTP status before reading it.
pub(crate) fn json_rpc_no_agent() -> Response<PlaneBody> {
    base(200, JSON, JSON_RPC_NO_AGENT.as_bytes().to_vec().into())
}

/// The agent card's own `405` (any method but `GET`): `method_not_allowed`, `allow: GET` and
/// a message about the card, not about `/resources`.
pub(crate) fn card_method_not_allowed() -> Response<PlaneBody> {
    let body = error_code::body(
        Code::MethodNotAllowed.as_str(),
        "only GET is allowed on the agent card",
    );
    let mut response = base(405, JSON, body.into());
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static("GET"));
    response
}

/// A JSON document (`200`): the listing and the agent card.
pub(crate) fn json(body: Vec<u8>) -> Response<PlaneBody> {
    base(200, JSON, body.into())
}

/// A listing (`200`), streamed from its entries.
pub(crate) fn listing(body: crate::planes::ListingBody) -> Response<PlaneBody> {
    base(200, JSON, PlaneBody::listing(body))
}

/// A listing (`200`) with its etag (D-17.1), streamed from its entries.
pub(crate) fn listing_with_etag(
    body: crate::planes::ListingBody,
    etag: &str,
) -> Response<PlaneBody> {
    let mut response = listing(body);
    response.headers_mut().insert(ETAG, quoted(etag));
    response
}

/// `304 Not Modified` for a listing whose etag matched (D-17.1): the headers of the `200` it
/// replaces (the plane headers are the router's to add) without `content-type` and
/// `content-length`.
pub(crate) fn listing_not_modified(etag: &str) -> Response<PlaneBody> {
    let mut response = Response::new(PlaneBody::default());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    *response.headers_mut() = http::HeaderMap::with_capacity(HEADER_ROOM);
    let headers = response.headers_mut();
    headers.insert(ETAG, quoted(etag));
    headers.insert(CONNECTION, CLOSE);
    response
}

/// A watch stream (`200`, `text/event-stream`, `cache-control: no-store`, D-17.3).
pub(crate) fn event_stream(body: PlaneBody) -> Response<PlaneBody> {
    let mut response = base(200, HeaderValue::from_static(EVENT_STREAM), body);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `"<tag>"`: an opaque tag (`sha256:<hex>`) as the `etag` header carries it.
fn quoted(tag: &str) -> HeaderValue {
    header_text(&etag::quote(tag))
}

/// `304 Not Modified` for a file whose etag matched (D-13.1): the validator headers of the
/// `200` it replaces, no body, and neither `content-type` nor `content-length`.
pub(crate) fn not_modified(sha256: &str, mtime_ms: i64) -> Response<PlaneBody> {
    let mut response = Response::new(PlaneBody::default());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    *response.headers_mut() = http::HeaderMap::with_capacity(HEADER_ROOM);
    let headers = response.headers_mut();
    headers.insert(ETAG, etag_of(sha256));
    headers.insert(MTIME_MS, HeaderValue::from(mtime_ms));
    headers.insert(CONNECTION, CLOSE);
    response
}

/// A file's bytes (`200`) with the validator headers of the spec.
pub(crate) fn file(body: PlaneBody, sha256: &str, mtime_ms: i64) -> Response<PlaneBody> {
    let mut response = base(200, OCTETS, body);
    let headers = response.headers_mut();
    headers.insert(ETAG, etag_of(sha256));
    headers.insert(MTIME_MS, HeaderValue::from(mtime_ms));
    response
}

/// The `etag` header of a body whose sha256 is `sha256` (lowercase hex).
fn etag_of(sha256: &str) -> HeaderValue {
    etag::header(sha256).unwrap_or_else(|| header_text(&etag::quoted(sha256)))
}

#[cfg(test)]
mod tests {
    use super::{etag_of, header_text};

    #[test]
    fn a_file_etag_quotes_the_prefixed_hash() {
        let hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(
            etag_of(hash).as_bytes(),
            format!("\"sha256:{hash}\"").as_bytes()
        );
    }

    /// Verbatim when the text is a legal header value; else each control byte and each `%` is
    /// escaped and every other byte, UTF-8 included, kept, so the value decodes back to the
    /// text: `%` is escaped too, and UTF-8 beside a control byte stays whole.
    #[test]
    fn header_text_is_verbatim_or_decodes_back() {
        for (text, header) in [
            ("out/", "out/"),
            ("100%/é", "100%/é"),
            ("a\u{7f}b", "a%7Fb"),
            ("a%7Fb\n", "a%257Fb%0A"),
            ("é\r\nx-evil: 1", "é%0D%0Ax-evil: 1"),
        ] {
            assert_eq!(header_text(text).as_bytes(), header.as_bytes(), "{text:?}");
        }
    }
}
