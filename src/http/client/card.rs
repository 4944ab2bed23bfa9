//! `GET <peer>/.well-known/agent-card.json` (D-8): the card `share-file` reads the peer's
//! audience, and its identity key, from.

use super::{ClientError, Limits, PeerClient, PeerTimeouts};
use crate::policy::PeerUrl;
use serde_json::Value;

/// The most card bytes read (D-8).
pub(crate) const CARD_MAX_BYTES: u64 = 64 * 1024;

/// Why a peer's card could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CardError {
    /// Could not connect, TLS failed, timed out, or the peer spoke something other than HTTP.
    Unreachable(String),
    /// The card is over [`CARD_MAX_BYTES`].
    TooLarge,
    /// The peer answered with this status instead of `200`.
    Status(u16),
}

impl PeerClient {
    /// The agent card of the capsule at `peer` (under its path, D-20.2), as JSON; `null` when
    /// the body is not JSON (the caller judges what it needs of the card), within the connect
    /// and card times of `timeouts`.
    ///
    /// # Errors
    /// [`CardError`]: unreachable, over 64 KiB, or not `200`.
    pub(crate) async fn card(
        &self,
        peer: &PeerUrl,
        timeouts: PeerTimeouts,
    ) -> Result<Value, CardError> {
        let limits = Limits {
            connect: timeouts.connect,
            total: timeouts.card_total,
            max_body: CARD_MAX_BYTES,
        };
        let answer = self
            .get(
                &peer.address,
                &peer.under(crate::wire::route::AGENT_CARD),
                &[],
                limits,
            )
            .await
            .map_err(|e| match e {
                ClientError::Unreachable(why) => CardError::Unreachable(why),
                ClientError::TooLarge => CardError::TooLarge,
            })?;
        if answer.status != http::StatusCode::OK {
            return Err(CardError::Status(answer.status.as_u16()));
        }
        Ok(serde_json::from_slice::<Value>(&answer.body).unwrap_or(Value::Null))
    }
}
