#![allow(dead_code)] // each test file uses a subset

//! Accessors on a `Response<PlaneBody>` answered in process, and its shape: everything a client
//! can observe of it, to compare two refusals byte for byte.

use http::Response;
use resource_plane::http::PlaneBody;
use serde_json::Value;
use std::collections::BTreeSet;

/// The value of header `name`; a value that is not text fails the test.
pub fn header<'a>(resp: &'a Response<PlaneBody>, name: &str) -> Option<&'a str> {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().expect("ascii header"))
}

/// The header names sent.
pub fn header_names(resp: &Response<PlaneBody>) -> BTreeSet<String> {
    resp.headers()
        .keys()
        .map(|k| k.as_str().to_owned())
        .collect()
}

/// The body as text (lossy).
pub fn body_text(resp: &Response<PlaneBody>) -> String {
    String::from_utf8_lossy(&resp.body().bytes()).into_owned()
}

/// The body as JSON; a body that is not JSON fails the test.
pub fn body_json(resp: &Response<PlaneBody>) -> Value {
    serde_json::from_slice(&resp.body().bytes())
        .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", body_text(resp)))
}

/// The `error` of a JSON refusal body, or `<no error field>`.
pub fn error_code(resp: &Response<PlaneBody>) -> String {
    let body: Value = serde_json::from_slice(&resp.body().bytes()).unwrap_or(Value::Null);
    body["error"]
        .as_str()
        .unwrap_or("<no error field>")
        .to_owned()
}

/// Everything a client can observe of a response but `date` and the value of
/// `x-murmur-handle-id` (which names the token sent): status, headers sorted, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub status: u16,
    /// (name, value), sorted; `x-murmur-handle-id` kept with an empty value, so its presence
    /// still counts.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// The [`Shape`] of `resp`.
pub fn shape(resp: &Response<PlaneBody>) -> Shape {
    let mut headers: Vec<(String, Vec<u8>)> = resp
        .headers()
        .iter()
        .filter(|(name, _)| name.as_str() != "date")
        .map(|(name, value)| {
            let value = if name == "x-murmur-handle-id" {
                Vec::new()
            } else {
                value.as_bytes().to_vec()
            };
            (name.as_str().to_owned(), value)
        })
        .collect();
    headers.sort();
    Shape {
        status: resp.status().as_u16(),
        headers,
        body: resp.body().bytes().to_vec(),
    }
}
