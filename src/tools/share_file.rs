//! `share-file` (D-9): input → path resolution (no network) → `network.allow` → the peer's card
//! → mint. An escaping path costs no connection; every attempt past input validation leaves one
//! `peer_handle_mint` line.
//!
//! A card that publishes an identity key (D-14.2) binds the handle to
//! `<audience>#ed25519:<key>`, so only a fresh signature by that key redeems it; a malformed
//! key extension fails the mint `peer_unreachable`, and `require_peer_proof` refuses a keyless
//! card with `peer_not_authenticated`. The result's `audience`, and the trace line's, stay the
//! plain audience; the line's `audience_proof` says which binding was minted.

use super::{ABANDONED, Tool, ToolError, ToolFuture, required_string};
use crate::backends::trace::{OwedLine, Tracer};
use crate::events::{PeerHandleMint, WithAudienceProof};
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
    require_peer_proof: bool,
}

struct Attempt {
    path: String,
    /// The path as resolved (the payload's `p`), once it is: a minted handle's line records
    /// it, as every redeem of the handle does (D-6.2); a refused mint's records `path`.
    resolved: Option<String>,
    audience: Option<String>,
    /// `"ed25519"` or `"none"` once the card's key extension has been read.
    audience_proof: Option<&'static str>,
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
            require_peer_proof: false,
        }
    }

    /// The same tool minting only for peers whose card publishes an identity key when
    /// `required` (`exports.peer_files.require_peer_proof`, D-14.2); others are refused with
    /// `peer_not_authenticated`.
    pub fn requiring_peer_proof(mut self, required: bool) -> Self {
        self.require_peer_proof = required;
        self
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
            WithAudienceProof {
                event: PeerHandleMint {
                    handle_id: None,
                    path: Some(crate::redact::revealing_tokens(&path)),
                    audience: None,
                    expires_at_ms: None,
                    outcome: Code::IoError.as_str(),
                    reason: Some(ABANDONED.into()),
                },
                audience_proof: None,
            },
        );
        let mut attempt = Attempt {
            path,
            resolved: None,
            audience: None,
            audience_proof: None,
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
        let event = WithAudienceProof {
            event,
            audience_proof: attempt.audience_proof,
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
        let card = serde_json::from_slice::<Value>(&card.body).unwrap_or(Value::Null);
        let audience = crate::audience::from_card(&card).ok_or_else(|| {
            Refusal::new(
                Code::PeerUnreachable,
                "agent card lacks a usable name and url",
            )
        })?;
        attempt.audience = Some(audience.clone());
        // D-14.2: a keyed card binds the key; a malformed key extension is never read as none.
        let key = crate::audience::peer_proof_key(&card)
            .map_err(|malformed| Refusal::new(Code::PeerUnreachable, malformed.0))?;
        attempt.audience_proof = Some(if key.is_some() { "ed25519" } else { "none" });
        let mac_audience = match key {
            Some(key) => crate::audience::keyed(&audience, &key),
            None if self.require_peer_proof => {
                return Err(Refusal::new(
                    Code::PeerNotAuthenticated,
                    "the agent card publishes no identity key, and \
                     exports.peer_files.require_peer_proof is set",
                ));
            }
            None => audience,
        };
        self.plane.mint(&target, &mac_audience, ttl_secs)
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
