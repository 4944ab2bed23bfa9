//! `GET <peer>/resources/peer/<token>` (D-10): a redeem, its answer judged by the wire's rules:
//! a refusal's code read by the one grammar, a `200` kept only when its etag names its body.

use super::{ClientError, Limits, PeerClient, PeerTimeouts};
use crate::policy::PeerUrl;
use crate::wire::header::{AUDIENCE, GENERATION, PROOF};
use crate::wire::{error_code, etag, route};
use bytes::Bytes;
use http::header::{ETAG, HeaderValue};

/// What a redeemer presents (D-7.2, D-14.3): its audience, and a proof when it holds an
/// identity key.
#[derive(Debug, Clone)]
pub(crate) struct Credentials {
    /// The `x-murmur-audience` value.
    pub(crate) audience: HeaderValue,
    /// The `x-murmur-proof` value, when the redeemer proves its redeems.
    pub(crate) proof: Option<HeaderValue>,
}

/// A redeemed file: its bytes, checked against the answer's etag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redeemed {
    /// The bytes.
    pub(crate) body: Bytes,
    /// Their sha256, lowercase hex: what the etag said.
    pub(crate) sha256: String,
    /// The minter's `x-murmur-generation`, when it sent a number.
    pub(crate) generation: Option<u64>,
}

/// Why a redeem brought no file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RedeemError {
    /// Could not connect, TLS failed, timed out, or the peer spoke something other than HTTP.
    Unreachable(String),
    /// The body is over the redeemer's limit.
    TooLarge,
    /// The peer answered `status`; `code` is its body's error code when that follows the
    /// grammar ([`error_code::is_code`]), else `None` (D-10.3).
    Refused { status: u16, code: Option<String> },
    /// A `200` whose etag does not name its body: the body cannot be kept (D-10.3).
    EtagMismatch,
}

impl PeerClient {
    /// Redeems `token` at `peer` (under its path, D-20.2) presenting `credentials`, within the
    /// connect and fetch times of `timeouts`, accepting at most `max_bytes`.
    ///
    /// # Errors
    /// [`RedeemError`]: unreachable, too large, refused, or an etag that is not the body's.
    pub(crate) async fn redeem(
        &self,
        peer: &PeerUrl,
        token: &str,
        credentials: Credentials,
        timeouts: PeerTimeouts,
        max_bytes: u64,
    ) -> Result<Redeemed, RedeemError> {
        let limits = Limits {
            connect: timeouts.connect,
            total: timeouts.fetch_total,
            max_body: max_bytes,
        };
        let mut headers = vec![(AUDIENCE, credentials.audience)];
        if let Some(proof) = credentials.proof {
            headers.push((PROOF, proof));
        }
        let answer = self
            .get(
                &peer.address,
                &peer.under(&route::redeem(token)),
                &headers,
                limits,
            )
            .await
            .map_err(|e| match e {
                ClientError::Unreachable(why) => RedeemError::Unreachable(why),
                ClientError::TooLarge => RedeemError::TooLarge,
            })?;
        if answer.status != http::StatusCode::OK {
            return Err(RedeemError::Refused {
                status: answer.status.as_u16(),
                code: error_code::read(&answer.body),
            });
        }
        let sha256 = crate::hex::sha256_hex(&answer.body);
        let named = answer
            .headers
            .get(ETAG)
            .is_some_and(|sent| etag::names_body(sent.as_bytes(), &sha256));
        if !named {
            return Err(RedeemError::EtagMismatch);
        }
        let generation = answer
            .headers
            .get(GENERATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        Ok(Redeemed {
            body: answer.body,
            sha256,
            generation,
        })
    }
}
