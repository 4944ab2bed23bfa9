//! `share-file` (D-9): input → path resolution (no network) → `network.allow` → the peer's card
//! → mint. An escaping path costs no connection; every attempt past input validation leaves one
//! `peer_handle_mint` line.

use super::{ABANDONED, Tool, ToolError, ToolFuture, required_string};
use crate::backends::trace::{OwedLine, Tracer};
use crate::events::PeerHandleMint;
use crate::http::client::{ClientError, Limits, PeerClient, PeerTimeouts};
use crate::planes::PeerPlane;
use crate::policy::{Address, AllowList};
use crate::refusal::{Code, Refusal};
use crate::units::parse_ttl_secs;
use serde_json::{Value, json};
use std::sync::Arc;

/// The most card bytes read (D-8).
const CARD_MAX_BYTES: u64 = 64 * 1024;

/// Mints a handle for one file and one named peer.
#[derive(Debug, Clone)]
pub struct ShareFile {
    plane: Arc<dyn PeerPlane>,
    network: Option<AllowList>,
    client: PeerClient,
    tracer: Tracer,
    max_ttl_secs: u64,
    timeouts: PeerTimeouts,
}

struct Attempt {
    path: String,
    /// The path as resolved (the payload's `p`), once it is: a minted handle's line records
    /// it, as every redeem of the handle does (D-6.2); a refused mint's records `path`.
    resolved: Option<String>,
    audience: Option<String>,
}

impl ShareFile {
    /// The tool over `plane`, fetching cards with `client` as `network` allows.
    pub fn new(
        plane: Arc<dyn PeerPlane>,
        network: Option<AllowList>,
        client: PeerClient,
        tracer: Tracer,
        max_ttl_secs: u64,
        timeouts: PeerTimeouts,
    ) -> Self {
        ShareFile {
            plane,
            network,
            client,
            tracer,
            max_ttl_secs,
            timeouts,
        }
    }

    async fn run(&self, input: Value) -> Result<Value, ToolError> {
        if !input.is_object() {
            return Err(ToolError::of(Code::InvalidInput));
        }
        let path = required_string(&input, "path")?;
        let peer_text = required_string(&input, "peer")?;
        let peer = Address::parse_peer(&peer_text).map_err(|accepted| ToolError {
            code: Code::InvalidInput.as_str().into(),
            message: format!("`peer` must be {accepted}"),
        })?;
        let ttl_secs = match input.get("ttl") {
            None | Some(Value::Null) => self.max_ttl_secs,
            Some(ttl) => parse_ttl_secs(ttl, self.max_ttl_secs)
                .ok_or_else(|| ToolError::of(Code::InvalidTtl))?,
        };
        let owed = OwedLine::new(
            &self.tracer,
            PeerHandleMint {
                handle_id: None,
                path: Some(crate::redact::revealing_tokens(&path)),
                audience: None,
                expires_at_ms: None,
                outcome: Code::IoError.as_str(),
                reason: Some(ABANDONED.into()),
            },
        );
        let mut attempt = Attempt {
            path,
            resolved: None,
            audience: None,
        };
        let outcome = self.mint(&mut attempt, &peer, ttl_secs).await;
        owed.settle();
        let event = match &outcome {
            Ok(minted) => PeerHandleMint {
                handle_id: Some(minted.handle_id.clone()),
                path: attempt.resolved.clone(),
                audience: attempt.audience.clone(),
                expires_at_ms: Some(minted.expires_at_ms),
                outcome: "ok",
                reason: None,
            },
            Err(refusal) => PeerHandleMint {
                handle_id: None,
                path: Some(crate::redact::revealing_tokens(&attempt.path)),
                audience: attempt.audience.clone(),
                expires_at_ms: None,
                outcome: refusal.code.as_str(),
                reason: Some(refusal.reason.clone()),
            },
        };
        if let Err(e) = self.tracer.emit(&event) {
            tracing::error!("trace write failed, refusing share-file: {e}");
            return Err(ToolError::of(Code::IoError));
        }
        let minted = outcome.map_err(|r| ToolError::of(r.code))?;
        Ok(json!({
            "handle": minted.token,
            "handle_id": minted.handle_id,
            "expires_at_ms": minted.expires_at_ms,
            "audience": attempt.audience,
        }))
    }

    async fn mint(
        &self,
        attempt: &mut Attempt,
        peer: &Address,
        ttl_secs: u64,
    ) -> Result<crate::planes::Minted, Refusal> {
        let plane = self.plane.clone();
        let path = attempt.path.clone();
        let target = tokio::task::spawn_blocking(move || plane.resolve_for_mint(&path))
            .await
            .map_err(|e| Refusal::new(Code::IoError, format!("resolver task failed: {e}")))??;
        attempt.resolved = Some(target.as_str().to_owned());
        if !self
            .network
            .as_ref()
            .is_some_and(|allow| allow.admits(peer))
        {
            return Err(Refusal::new(
                Code::PeerUnreachable,
                format!("{peer} is not in capabilities.network.allow"),
            ));
        }
        let card = self
            .client
            .get(
                peer,
                "/.well-known/agent-card.json",
                &[],
                Limits {
                    connect: self.timeouts.connect,
                    total: self.timeouts.card_total,
                    max_body: CARD_MAX_BYTES,
                },
            )
            .await
            .map_err(|e| match e {
                ClientError::Unreachable(why) => Refusal::new(Code::PeerUnreachable, why),
                ClientError::TooLarge => {
                    Refusal::new(Code::PeerUnreachable, "agent card over 64 KiB")
                }
            })?;
        if card.status != http::StatusCode::OK {
            return Err(Refusal::new(
                Code::PeerUnreachable,
                format!("agent card answered HTTP {}", card.status.as_u16()),
            ));
        }
        let audience = serde_json::from_slice::<Value>(&card.body)
            .ok()
            .as_ref()
            .and_then(crate::audience::from_card)
            .ok_or_else(|| {
                Refusal::new(
                    Code::PeerUnreachable,
                    "agent card lacks a usable name and url",
                )
            })?;
        attempt.audience = Some(audience.clone());
        self.plane.mint(&target, &audience, ttl_secs)
    }
}

impl Tool for ShareFile {
    fn name(&self) -> &'static str {
        "share-file"
    }

    fn call(&self, input: Value) -> ToolFuture<'_> {
        Box::pin(self.run(input))
    }
}
