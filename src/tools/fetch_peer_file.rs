//! `fetch-peer-file` (D-10): token shape → `peer_fetch.allow` (before any connection) → redeem
//! over HTTP(S) asserting our own audience → etag check → land under `peer-in/` by temp file,
//! fsync and rename. The bytes arrive as a file and never as text.
//!
//! A fetcher with an identity key (D-14.1) sends beside its audience one `x-murmur-proof`
//! signed for this handle, now, with a fresh nonce (D-14.3), on every redeem: a minter that
//! does not know proofs ignores the header.

use super::{ABANDONED, Tool, ToolError, ToolFuture, required_string};
use crate::backends::trace::{OwedLine, Tracer};
use crate::backends::{Clock, Filesystem, IdentityKey};
use crate::events::PeerFileFetch;
use crate::http::client::{ClientError, Limits, PeerClient, PeerTimeouts};
use crate::http::response::{AUDIENCE, GENERATION, PROOF};
use crate::planes::handle;
use crate::policy::{Address, AllowList};
use crate::refusal::Code;
use http::header::HeaderValue;
use serde_json::{Value, json};
use std::sync::Arc;

/// The directory fetched files land in, under the workdir.
pub const LANDING_DIR: &str = "peer-in";
/// The longest sanitised basename kept.
const MAX_BASENAME: usize = 120;

/// Redeems a peer's handle and stores the bytes as a file.
#[derive(Debug, Clone)]
pub struct FetchPeerFile {
    allow: AllowList,
    client: PeerClient,
    fs: Arc<dyn Filesystem>,
    tracer: Tracer,
    own_audience: String,
    max_bytes: u64,
    timeouts: PeerTimeouts,
    identity: Option<(Arc<dyn IdentityKey>, Arc<dyn Clock>)>,
}

/// A refusal of this tool: a code string (maybe the peer's own) and trace detail.
struct Failure {
    code: String,
    message: String,
    reason: String,
}

impl Failure {
    fn of(code: Code, reason: impl Into<String>) -> Self {
        Failure {
            code: code.as_str().into(),
            message: code.message().into(),
            reason: reason.into(),
        }
    }
}

struct Landed {
    /// The file's name in the landing directory.
    name: String,
    stored_path: String,
    bytes: u64,
    sha256: String,
    generation: Option<u64>,
}

impl FetchPeerFile {
    /// The tool, asserting `own_audience`, accepting at most `max_bytes`.
    pub fn new(
        allow: AllowList,
        client: PeerClient,
        fs: Arc<dyn Filesystem>,
        tracer: Tracer,
        own_audience: String,
        max_bytes: u64,
        timeouts: PeerTimeouts,
    ) -> Self {
        FetchPeerFile {
            allow,
            client,
            fs,
            tracer,
            own_audience,
            max_bytes,
            timeouts,
            identity: None,
        }
    }

    /// The same tool proving its redeems with `identity`, the key its card publishes, each
    /// proof stamped with `clock`'s time (D-14.3).
    pub fn with_identity(mut self, identity: Arc<dyn IdentityKey>, clock: Arc<dyn Clock>) -> Self {
        self.identity = Some((identity, clock));
        self
    }

    /// The `x-murmur-proof` value for a redeem of `handle_id` now, when this fetcher has a key.
    ///
    /// # Errors
    /// `io_error` once the session has ended and the key is gone.
    fn proof_header(&self, handle_id: &str) -> Result<Option<HeaderValue>, Failure> {
        let Some((identity, clock)) = &self.identity else {
            return Ok(None);
        };
        let value = crate::planes::proof::header_value(
            identity.as_ref(),
            handle_id,
            clock.now_ms(),
            &crate::backends::random::bytes::<{ crate::planes::proof::NONCE_BYTES }>(),
        )
        .ok_or_else(|| {
            Failure::of(
                Code::IoError,
                "the session has ended; the identity key is gone",
            )
        })?;
        HeaderValue::from_str(&value)
            .map(Some)
            .map_err(|_| Failure::of(Code::IoError, "the proof is not a header value"))
    }

    async fn run(&self, input: Value) -> Result<Value, ToolError> {
        if !input.is_object() {
            return Err(ToolError::of(Code::InvalidInput));
        }
        let peer_text = required_string(&input, "peer")?;
        let token = required_string(&input, "handle")?;
        let handle_id = crate::hex::handle_id(&token);
        let owed = OwedLine::new(
            &self.tracer,
            PeerFileFetch {
                peer: Some(peer_text.clone()),
                handle_id: Some(handle_id.clone()),
                stored_path: None,
                bytes: None,
                sha256: None,
                outcome: Code::IoError.as_str().into(),
                reason: Some(ABANDONED.into()),
            },
        );
        let outcome = self.fetch(&peer_text, &token, &handle_id).await;
        owed.settle();
        let event = match &outcome {
            Ok(landed) => PeerFileFetch {
                peer: Some(peer_text.clone()),
                handle_id: Some(handle_id.clone()),
                stored_path: Some(landed.stored_path.clone()),
                bytes: Some(landed.bytes),
                sha256: Some(landed.sha256.clone()),
                outcome: "ok".into(),
                reason: None,
            },
            Err(failure) => PeerFileFetch {
                peer: Some(peer_text.clone()),
                handle_id: Some(handle_id.clone()),
                stored_path: None,
                bytes: None,
                sha256: None,
                outcome: failure.code.clone(),
                reason: Some(failure.reason.clone()),
            },
        };
        if let Err(e) = self.tracer.emit(&event) {
            tracing::error!("trace write failed, refusing fetch-peer-file: {e}");
            // Fail closed (D-6.4): bytes the trace cannot record do not stay in the workdir.
            if let Ok(landed) = outcome {
                let fs = self.fs.clone();
                let removed =
                    tokio::task::spawn_blocking(move || fs.unland(LANDING_DIR, &landed.name)).await;
                if !matches!(removed, Ok(Ok(()))) {
                    tracing::error!("the fetched file stays, untraced: it could not be removed");
                }
            }
            return Err(ToolError::of(Code::IoError));
        }
        match outcome {
            Ok(landed) => Ok(json!({
                "path": landed.stored_path,
                "bytes": landed.bytes,
                "sha256": landed.sha256,
                "generation": landed.generation,
                "peer": peer_text,
            })),
            Err(failure) => Err(ToolError {
                code: failure.code,
                message: failure.message,
            }),
        }
    }

    async fn fetch(
        &self,
        peer_text: &str,
        token: &str,
        handle_id: &str,
    ) -> Result<Landed, Failure> {
        if !handle::has_token_shape(token) {
            return Err(Failure::of(
                Code::MalformedHandle,
                "the handle is not an mh1 token",
            ));
        }
        let peer = Address::parse_peer(peer_text)
            .map_err(|_| Failure::of(Code::PeerNotAllowed, "the peer address does not parse"))?;
        if !self.allow.admits(&peer) {
            return Err(Failure::of(
                Code::PeerNotAllowed,
                format!("{peer} is not in capabilities.peer_fetch.allow"),
            ));
        }
        let audience = HeaderValue::from_str(&self.own_audience)
            .map_err(|_| Failure::of(Code::IoError, "own audience is not a header value"))?;
        let limits = Limits {
            connect: self.timeouts.connect,
            total: self.timeouts.fetch_total,
            max_body: self.max_bytes,
        };
        let mut headers = vec![(AUDIENCE, audience)];
        if let Some(proof) = self.proof_header(handle_id)? {
            headers.push((PROOF, proof));
        }
        let response = self
            .client
            .get(&peer, &format!("/resources/peer/{token}"), &headers, limits)
            .await
            .map_err(|e| match e {
                ClientError::Unreachable(why) => Failure::of(Code::PeerUnreachable, why),
                ClientError::TooLarge => Failure::of(
                    Code::TooLarge,
                    format!(
                        "the body exceeds the fetcher's limit of {} bytes",
                        self.max_bytes
                    ),
                ),
            })?;
        if response.status != http::StatusCode::OK {
            return Err(peer_refusal(response.status.as_u16(), &response.body));
        }
        let sha256 = crate::hex::sha256_hex(&response.body);
        let expected = format!("\"sha256:{sha256}\"");
        if response
            .headers
            .get(http::header::ETAG)
            .map(HeaderValue::as_bytes)
            != Some(expected.as_bytes())
        {
            return Err(Failure::of(
                Code::EtagMismatch,
                "the etag does not match the body's sha256",
            ));
        }
        let generation = response
            .headers
            .get(GENERATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let name = format!(
            "{handle_id}-{}",
            sanitised_basename(handle::unverified_path(token).as_deref())
        );
        let fs = self.fs.clone();
        let body = response.body.clone();
        let landing_name = name.clone();
        tokio::task::spawn_blocking(move || fs.land(LANDING_DIR, &landing_name, &body))
            .await
            .map_err(|e| Failure::of(Code::IoError, format!("landing task failed: {e}")))?
            .map_err(|e| {
                let refusal: crate::refusal::Refusal = e.into();
                Failure::of(refusal.code, refusal.reason)
            })?;
        Ok(Landed {
            stored_path: format!("{LANDING_DIR}/{name}"),
            name,
            bytes: response.body.len() as u64,
            sha256,
            generation,
        })
    }
}

/// The outcome for a non-200 answer: the peer's JSON `error` code when it looks like one
/// (`[a-z0-9_]`, at most 64 bytes, never `ok`, which is reserved for success), else
/// `http_<status>` (D-10.3).
fn peer_refusal(status: u16, body: &[u8]) -> Failure {
    let code = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
        .filter(|c| c != "ok")
        .filter(|c| {
            !c.is_empty()
                && c.len() <= 64
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit())
        });
    match code {
        Some(code) => Failure {
            message: format!("the peer refused the handle: {code}"),
            reason: format!("peer answered HTTP {status} with {code}"),
            code,
        },
        None => Failure {
            code: format!("http_{status}"),
            message: format!("the peer answered HTTP {status}"),
            reason: format!("peer answered HTTP {status} without an error code"),
        },
    }
}

/// The basename of `p` with every character outside `[A-Za-z0-9._-]` replaced by `_`, cut to
/// 120 characters; `file` when absent, empty, `.` or `..` (D-10.4).
pub fn sanitised_basename(p: Option<&str>) -> String {
    let base = p.and_then(|p| p.rsplit('/').next()).unwrap_or("");
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_BASENAME)
        .collect();
    match clean.as_str() {
        "" | "." | ".." => "file".into(),
        _ => clean,
    }
}

impl Tool for FetchPeerFile {
    fn name(&self) -> &'static str {
        "fetch-peer-file"
    }

    fn call(&self, input: Value) -> ToolFuture<'_> {
        Box::pin(self.run(input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basenames() {
        assert_eq!(sanitised_basename(Some("a/b/report.md")), "report.md");
        assert_eq!(sanitised_basename(Some("r é p.md")), "r___p.md");
        assert_eq!(sanitised_basename(Some("..")), "file");
        assert_eq!(sanitised_basename(Some(".")), "file");
        assert_eq!(sanitised_basename(Some("a/")), "file");
        assert_eq!(sanitised_basename(None), "file");
        assert_eq!(sanitised_basename(Some(&"x".repeat(300))).len(), 120);
        assert_eq!(sanitised_basename(Some("../../etc/passwd")), "passwd");
    }

    #[test]
    fn peer_codes() {
        assert_eq!(
            peer_refusal(403, br#"{"error":"handle_not_valid"}"#).code,
            "handle_not_valid"
        );
        assert_eq!(peer_refusal(502, b"<html>").code, "http_502");
        assert_eq!(
            peer_refusal(400, br#"{"error":"Evil Code!"}"#).code,
            "http_400"
        );
    }
}
