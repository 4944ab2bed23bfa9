//! The peer plane: HMAC-signed, audience-bound, expiring handles (D-7).

use super::handle::{self, MAC_CONTEXT, MAC_SEPARATOR, Payload};
use super::reader::{self, ExportScope, ReadMode};
use super::{Minted, PeerPlane, Redeem};
use crate::backends::{Clock, Filesystem, KeyStore};
use crate::budget::ByteBudget;
use crate::path::{RelPath, decode_request_path, strip_query};
use crate::refusal::{Code, Refusal};
use std::sync::Arc;

/// `exports.peer_files` with handles signed by a [`KeyStore`].
#[derive(Debug, Clone)]
pub struct HmacPeerPlane {
    fs: Arc<dyn Filesystem>,
    clock: Arc<dyn Clock>,
    keys: Arc<dyn KeyStore>,
    scope: ExportScope,
    session_id: String,
    budget: ByteBudget,
}

impl HmacPeerPlane {
    /// A plane serving `scope`, minting as `session_id`.
    pub fn new(
        fs: Arc<dyn Filesystem>,
        clock: Arc<dyn Clock>,
        keys: Arc<dyn KeyStore>,
        scope: ExportScope,
        session_id: String,
        budget: ByteBudget,
    ) -> Self {
        HmacPeerPlane {
            fs,
            clock,
            keys,
            scope,
            session_id,
            budget,
        }
    }
}

/// The MAC input of the spec: context ‖ 0x1f ‖ payload b64 ‖ 0x1f ‖ audience.
fn mac_parts<'a>(payload_b64: &'a str, audience: &'a [u8]) -> [&'a [u8]; 5] {
    [
        MAC_CONTEXT,
        MAC_SEPARATOR,
        payload_b64.as_bytes(),
        MAC_SEPARATOR,
        audience,
    ]
}

/// Trims and ASCII-lowercases an asserted audience (D-7.2, D-8).
pub(crate) fn normalise_audience(raw: &[u8]) -> Vec<u8> {
    raw.trim_ascii().to_ascii_lowercase()
}

impl PeerPlane for HmacPeerPlane {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    fn resolve_for_mint(&self, path: &str) -> Result<RelPath, Refusal> {
        // D-9.2 resolves by D-2.1 to D-2.6: the first raw `?` cuts the path, as in a URL.
        let target = decode_request_path(strip_query(path))?;
        self.refuse_unredeemable(&target)?;
        let canonical = reader::canonical_file(self.fs.as_ref(), &self.scope, &target)?;
        // Through symlinks, the canonical path may be longer than the one named.
        self.refuse_unredeemable(&canonical)?;
        Ok(canonical)
    }

    fn mint(&self, path: &RelPath, audience: &str, ttl_secs: u64) -> Result<Minted, Refusal> {
        let ttl_ms = i64::try_from(ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let payload = self.payload(
            path,
            self.clock.now_ms().saturating_add(ttl_ms),
            crate::backends::random::hex::<NONCE_BYTES>(),
        );
        let payload_b64 = handle::encode_payload(&payload);
        let mac = self
            .keys
            .sign(&mac_parts(&payload_b64, audience.as_bytes()))
            .ok_or_else(|| Refusal::new(Code::IoError, "the session has ended; the key is gone"))?;
        let token = handle::assemble(&payload_b64, &mac);
        Ok(Minted {
            handle_id: crate::hex::handle_id(&token),
            token,
            expires_at_ms: payload.exp,
        })
    }

    fn redeem(&self, raw_token: &str, audience_headers: &[&[u8]]) -> Redeem {
        self.redeem_in(raw_token, audience_headers, ReadMode::Blocking)
            .expect("a blocking redeem always answers")
    }

    fn redeem_inline(
        &self,
        raw_token: &str,
        audience_headers: &[&[u8]],
        limit: u64,
    ) -> Option<Redeem> {
        self.redeem_in(raw_token, audience_headers, ReadMode::Inline { limit })
    }

    fn end_session(&self) {
        self.keys.destroy();
    }
}

/// The random bytes of a handle's nonce `n`, written as lowercase hex (D-7.1).
const NONCE_BYTES: usize = 16;

impl HmacPeerPlane {
    /// The payload of a handle to `path` (D-7.1).
    fn payload(&self, path: &RelPath, exp: i64, n: String) -> Payload {
        Payload {
            v: 1,
            iss: self.session_id.clone(),
            p: path.as_str().to_owned(),
            exp,
            n,
        }
    }

    /// Refuses a path whose handle could exceed the 4 KiB a redeem accepts (D-7.2): such a
    /// handle could never be redeemed, so it is not minted.
    ///
    /// # Errors
    /// `invalid_input`.
    fn refuse_unredeemable(&self, path: &RelPath) -> Result<(), Refusal> {
        if self.longest_token_for(path) > handle::MAX_TOKEN_LEN {
            return Err(Refusal::new(
                Code::InvalidInput,
                format!(
                    "the path is too long to share: its handle would exceed {} bytes",
                    handle::MAX_TOKEN_LEN
                ),
            ));
        }
        Ok(())
    }

    /// The length of the longest token a mint for `path` can produce: the latest expiry there
    /// is, a nonce and a MAC of their real lengths.
    fn longest_token_for(&self, path: &RelPath) -> usize {
        let payload = self.payload(path, i64::MAX, "0".repeat(2 * NONCE_BYTES));
        handle::assemble(&handle::encode_payload(&payload), &[0; 32]).len()
    }

    /// The redeem of D-7.2; `None` only when an inline read defers.
    fn redeem_in(
        &self,
        raw_token: &str,
        audience_headers: &[&[u8]],
        mode: ReadMode,
    ) -> Option<Redeem> {
        let handle_id = (!raw_token.is_empty()).then(|| crate::hex::handle_id(raw_token));
        let audience = match audience_headers {
            [one] => Some(normalise_audience(one)),
            _ => None,
        };
        let audience_asserted = audience_headers
            .first()
            .map(|a| String::from_utf8_lossy(&normalise_audience(a)).into_owned());
        let refuse = |code, reason: &str, path: Option<String>| Redeem {
            handle_id: handle_id.clone(),
            path,
            audience_asserted: audience_asserted.clone(),
            result: Err(Refusal::new(code, reason)),
        };

        // 1. Shape.
        let Some(token) = handle::parse(raw_token) else {
            return Some(refuse(
                Code::MalformedHandle,
                "the token is not a well-formed mh1 v1 handle",
                None,
            ));
        };
        // 2. Audience: exactly one header, non-empty after trimming.
        let audience = match audience {
            Some(a) if !a.is_empty() => a,
            _ => {
                let why = if audience_headers.len() > 1 {
                    "x-murmur-audience sent more than once"
                } else {
                    "x-murmur-audience absent or empty"
                };
                return Some(refuse(Code::MissingAudience, why, None));
            }
        };
        // 3. MAC, constant time; a foreign `iss` folds into the same refusal. Both checks run
        //    whatever the other says, so timing does not tell them apart either.
        let mac_ok = self
            .keys
            .verify(&mac_parts(token.payload_b64, &audience), &token.mac);
        let iss_ok = token.payload.iss == self.session_id;
        if !(mac_ok & iss_ok) {
            return Some(refuse(
                Code::HandleNotValid,
                "MAC verification failed",
                None,
            ));
        }
        let path = Some(token.payload.p.clone());
        // 4. Expiry.
        if token.payload.exp <= self.clock.now_ms() {
            return Some(refuse(
                Code::HandleExpired,
                "the handle's exp is in the past",
                path,
            ));
        }
        // 5. Path, through the operator plane's reader.
        let result = match RelPath::parse_canonical(&token.payload.p) {
            Ok(target) => reader::read_file(
                self.fs.as_ref(),
                &self.scope,
                &target,
                Some(&self.budget),
                mode,
            )
            .transpose()?,
            Err(refusal) => Err(refusal),
        };
        Some(Redeem {
            handle_id,
            path,
            audience_asserted,
            result,
        })
    }
}
