//! The peer plane: HMAC-signed, audience-bound, expiring handles (D-7), redeemable only with a
//! fresh signature by the peer's identity key, addressed to this minter's own origin, when
//! minted for a keyed peer (D-14, D-14.3.1).

use super::handle::{self, MAC_CONTEXT, MAC_SEPARATOR, Payload};
use super::inline::{Attempt, FinishRedeem, RedeemRest, RedeemsInline};
use super::proof::{self, Malformed, Origin, Proof};
use super::reader::{self, OneRead, Opened, ReadAnswer, ServedFile, Start, Step};
use super::replay::{NotAdmitted, REPLAY_WINDOW_MS, ReplayMemory};
use super::{Minted, PeerPlane, RedeemOutcome, RedeemRequest};
use crate::audience::{KEY_TAG, looks_keyed};
use crate::backends::{Clock, Filesystem, KeyStore, OsRandom, Random};
use crate::blocking;
use crate::budget::ByteBudget;
use crate::path::{RelPath, decode_request_path, strip_query};
use crate::refusal::{Code, Refusal};
use crate::scope::ExportScope;
use std::fmt;
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
    replay: Arc<ReplayMemory>,
    /// Where each handle's nonce comes from.
    random: Arc<dyn Random>,
    /// The origin of this capsule's advertised URL: the only `o` a redeem proof may name.
    origin: Origin,
}

impl HmacPeerPlane {
    /// A plane serving `scope`, minting as `session_id`, reached by its peers at `origin` (the
    /// origin of the capsule's advertised URL, [`Origin::of_url`]): a redeem proof must name
    /// it (D-14.3.1).
    pub fn new(
        fs: Arc<dyn Filesystem>,
        clock: Arc<dyn Clock>,
        keys: Arc<dyn KeyStore>,
        scope: ExportScope,
        session_id: String,
        budget: ByteBudget,
        origin: Origin,
    ) -> Self {
        HmacPeerPlane {
            fs,
            clock,
            keys,
            scope,
            session_id,
            budget,
            replay: Arc::new(ReplayMemory::default()),
            random: Arc::new(OsRandom),
            origin,
        }
    }

    /// The same plane drawing each handle's nonce from `random` instead of the OS source.
    pub fn with_random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }

    /// The same plane remembering at most `capacity` accepted proofs at once (default
    /// [`DEFAULT_REPLAY_CAPACITY`](super::DEFAULT_REPLAY_CAPACITY)), at most an eighth of them
    /// (at least one) signed by any one key (D-14.4.1); at either cap a new proof is refused,
    /// never admitted by forgetting an older one.
    pub fn with_replay_capacity(mut self, capacity: usize) -> Self {
        self.replay = Arc::new(ReplayMemory::new(capacity));
        self
    }

    /// Accepted proofs remembered now.
    pub fn remembered_proofs(&self) -> usize {
        self.replay.len()
    }

    /// The origin a redeem proof must name.
    pub fn origin(&self) -> &Origin {
        &self.origin
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

impl HmacPeerPlane {
    /// [`PeerPlane::redeem`] on the caller's thread, blocking while it reads: for a caller
    /// already off the async runtime (a bench, a blocking task of its own). Its refusals are
    /// [`PeerPlane::redeem`]'s.
    pub fn redeem_blocking(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
        match self.redeem_in(request, Start::Blocking) {
            Attempt::Answered(outcome) => outcome,
            Attempt::Deferred | Attempt::Resume(_) => {
                unreachable!("a blocking redeem always answers")
            }
        }
    }
}

#[async_trait::async_trait]
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
            self.random.hex::<NONCE_BYTES>(),
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

    /// Awaited directly (a runtime's decorator around the crate's plane, mounted as its own),
    /// the redeem runs whole on tokio's blocking pool when the caller is in a tokio runtime,
    /// else on the caller's thread. The router never awaits it: it
    /// calls the crate's plane inline or on the blocking pool itself.
    async fn redeem(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
        let plane = self.clone();
        let token = request.token.to_owned();
        let owned =
            |values: &[&[u8]]| -> Vec<Vec<u8>> { values.iter().map(|v| v.to_vec()).collect() };
        let (audience, proof) = (owned(request.audience), owned(request.proof));
        blocking::off_worker(move || {
            let audience: Vec<&[u8]> = audience.iter().map(Vec::as_slice).collect();
            let proof: Vec<&[u8]> = proof.iter().map(Vec::as_slice).collect();
            plane.redeem_blocking(RedeemRequest {
                token: &token,
                audience: &audience,
                proof: &proof,
            })
        })
        .await
        .unwrap_or_else(RedeemOutcome::refused)
    }

    fn end_session(&self) {
        self.keys.destroy();
    }
}

/// A plain redeem of a file of at most `limit` bytes whose bytes the budget lends at once
/// answers on the async worker; a larger one is checked there and stops before reading a byte,
/// going on on the blocking pool from the file as opened. A redeem that carries a proof always
/// defers, before any check: verifying the signature is tens of microseconds of CPU an async
/// worker should not spend, and the proof's nonce is spent by the first check that accepts it,
/// so the redeem must not be started inline and then run again.
impl RedeemsInline for HmacPeerPlane {
    fn redeem_blocking(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
        HmacPeerPlane::redeem_blocking(self, request)
    }

    fn redeem_inline(
        &self,
        request: RedeemRequest<'_>,
        limit: u64,
    ) -> Attempt<RedeemOutcome, RedeemRest> {
        if !request.proof.is_empty() {
            return Attempt::Deferred;
        }
        self.redeem_in(request, Start::Inline { limit })
    }
}

/// A plain redeem checked on an async worker whose file is to be read on the blocking pool:
/// what its outcome will say besides the file, and the file as opened.
#[derive(Debug)]
struct PendingRedeem {
    plane: HmacPeerPlane,
    /// The outcome's `path`: the payload's `p`.
    path: Option<String>,
    /// The outcome's `audience_proof`.
    audience_proof: Option<&'static str>,
    /// `p` as a path beneath the root, for a read that starts over (the file grew).
    target: RelPath,
    opened: Opened,
}

/// The read from the descriptor the inline attempt opened. The handle's checks (D-7.2, steps
/// 1 to 4) are not made again: like a redeem made whole on one thread, it checks once and then
/// reads, so a handle that expires, or a session that ends, between the checks and the read
/// does not stop this redeem (the next one is refused).
impl FinishRedeem for PendingRedeem {
    fn finish(self: Box<Self>) -> RedeemOutcome {
        let PendingRedeem {
            plane,
            path,
            audience_proof,
            target,
            opened,
        } = *self;
        let start = Start::Resumed {
            opened,
            prepaid: None,
        };
        RedeemOutcome {
            path,
            audience_proof,
            result: plane.read(&target, start).map(Step::answered),
        }
    }
}

/// Why a redeem proof was refused after the MAC over its key verified (or, for a malformed
/// header that names no key, before it): the trace's `reason` (D-14.5). Every one of them
/// answers the same `403 handle_not_valid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProofRefused {
    /// The header does not parse: what is wrong.
    Malformed(&'static str),
    /// `o` names an origin other than this minter's: a proof sent to another peer, relayed.
    OtherOrigin,
    /// The signature does not verify with the key the header names.
    Signature,
    /// `t` is more than 60 s from the minter's clock `now`.
    NotFresh { t: i64, now: i64 },
    /// The nonce was accepted for this handle within the window.
    Replayed,
    /// The key that signed the proof holds its share of the replay memory (D-14.4.1).
    KeyShareFull,
    /// The replay memory holds its capacity.
    MemoryFull,
}

impl fmt::Display for ProofRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ProofRefused::Malformed(why) => write!(f, "proof malformed: {why}"),
            ProofRefused::OtherOrigin => f.write_str("proof addressed to another origin"),
            ProofRefused::Signature => f.write_str("proof signature does not verify"),
            ProofRefused::NotFresh { t, now } => write!(
                f,
                "proof not fresh: t is {} ms {} the minter's clock (at most {} allowed)",
                now.abs_diff(t),
                if t < now { "behind" } else { "ahead of" },
                proof::FRESHNESS_MS
            ),
            ProofRefused::Replayed => write!(
                f,
                "proof replayed: its nonce was accepted for this handle within {} s",
                REPLAY_WINDOW_MS / 1000
            ),
            ProofRefused::KeyShareFull => f.write_str("proof replay memory full for this key"),
            ProofRefused::MemoryFull => {
                f.write_str("proof not remembered: the replay memory is full")
            }
        }
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

    /// The proof checks of D-14.4 and D-14.3.1, once the MAC over the key the proof names has
    /// verified: the header parses, it names this minter's origin, its signature verifies with
    /// that key, it is fresh, and its nonce was not accepted for this handle within the window
    /// and its key holds less than its share of the replay memory (then it is remembered). The
    /// clock is read only after the signature has verified; the reading is returned for the
    /// expiry check.
    ///
    /// # Errors
    /// The [`ProofRefused`] naming the check that failed, for the trace's reason.
    fn check_proof(
        &self,
        proof: Result<Proof<'_>, Malformed<'_>>,
        handle_id: &str,
    ) -> Result<i64, ProofRefused> {
        let proof = proof.map_err(|malformed| ProofRefused::Malformed(malformed.why))?;
        if proof.origin != self.origin.as_str() {
            return Err(ProofRefused::OtherOrigin);
        }
        if !proof::verify_signature(&proof, handle_id) {
            return Err(ProofRefused::Signature);
        }
        let now = self.clock.now_ms();
        if !proof::is_fresh(proof.t, now) {
            return Err(ProofRefused::NotFresh { t: proof.t, now });
        }
        match self.replay.admit(&proof.key, handle_id, &proof.n, now) {
            Ok(()) => Ok(now),
            Err(NotAdmitted::Replayed) => Err(ProofRefused::Replayed),
            Err(NotAdmitted::KeyShareFull) => Err(ProofRefused::KeyShareFull),
            Err(NotAdmitted::Full) => Err(ProofRefused::MemoryFull),
        }
    }

    /// The redeem of D-7.2 with D-14.4's proof checks, answered; [`Attempt::Resume`] only
    /// from [`Start::Inline`], when every check has passed and the file's read should move to
    /// the blocking pool.
    fn redeem_in(
        &self,
        request: RedeemRequest<'_>,
        start: Start,
    ) -> Attempt<RedeemOutcome, RedeemRest> {
        let Checked {
            path,
            audience_proof,
            p,
        } = match self.check(request) {
            Ok(checked) => checked,
            Err(refused) => return Attempt::Answered(refused),
        };
        // 5. Path, through the operator plane's reader.
        let read = RelPath::parse_canonical(&p).and_then(|target| {
            let step = self.read(&target, start)?;
            Ok((target, step))
        });
        let result = match read {
            Ok((_, Step::Done(served))) => Ok(served),
            Ok((target, Step::Resume(opened))) => {
                return Attempt::Resume(RedeemRest::new(PendingRedeem {
                    plane: self.clone(),
                    path,
                    audience_proof,
                    target,
                    opened,
                }));
            }
            Err(refusal) => Err(refusal),
        };
        Attempt::Answered(RedeemOutcome {
            path,
            audience_proof,
            result,
        })
    }

    /// The steps of D-7.2 before the read, in order, with D-14.4's proof checks after the MAC:
    /// the handle's shape, the audience asserted, the MAC, the proof, the expiry. The clock is
    /// read once, after the proof's signature has verified.
    ///
    /// # Errors
    /// The outcome of the first check that failed: `malformed_handle`, `missing_audience`,
    /// `handle_not_valid`, `handle_expired`.
    fn check(&self, request: RedeemRequest<'_>) -> Result<Checked, RedeemOutcome> {
        // 1. Shape.
        let Some(token) = handle::parse(request.token) else {
            let why = "the token is not a well-formed mh1 v1 handle";
            return Err(refused(Code::MalformedHandle, why.into(), None, None));
        };
        // 2. Audience: exactly one header, non-empty after trimming.
        let audience = asserted_audience(request.audience)
            .map_err(|why| refused(Code::MissingAudience, why.into(), None, None))?;
        // 3. MAC, constant time, over the asserted audience, keyed with the proof's key when a
        //    proof is sent (D-14.4); a foreign `iss` folds into the same refusal.
        let proof = proof_header(request.proof);
        let key_text = proof_key(proof.as_ref()).map_err(|why| {
            let reason = ProofRefused::Malformed(why).to_string();
            refused(Code::HandleNotValid, reason, None, None)
        })?;
        if !self.mac_verifies(&token, &audience, key_text) {
            let why = "MAC verification failed";
            return Err(refused(Code::HandleNotValid, why.into(), None, None));
        }
        let path = Some(token.payload.p.clone());
        // 3b. The proof, when one was sent: every failure is the same `handle_not_valid` as a
        //     failed MAC, and the trace names the check. The proof signs the handle id and the
        //     origin it was sent to.
        let now = match proof {
            None => self.clock.now_ms(),
            Some(proof) => match self.check_proof(proof, &crate::hex::handle_id(request.token)) {
                Ok(now) => now,
                Err(why) => {
                    let reason = why.to_string();
                    return Err(refused(Code::HandleNotValid, reason, path, Some("ed25519")));
                }
            },
        };
        let audience_proof = Some(if request.proof.is_empty() {
            "none"
        } else {
            "ed25519"
        });
        // 4. Expiry.
        if token.payload.exp <= now {
            let why = "the handle's exp is in the past";
            return Err(refused(
                Code::HandleExpired,
                why.into(),
                path,
                audience_proof,
            ));
        }
        Ok(Checked {
            path,
            audience_proof,
            p: token.payload.p,
        })
    }

    /// Whether the handle's MAC verifies over the asserted `audience`, with the proof's key
    /// `key_text` when a proof is sent, and the handle was minted by this session. The checks
    /// run whatever the others say, so timing does not tell them apart either. Without a proof,
    /// a keyed MAC audience asserted as a plain one never verifies.
    fn mac_verifies(
        &self,
        token: &handle::ParsedToken<'_>,
        audience: &[u8],
        key_text: Option<&str>,
    ) -> bool {
        let (tag, key): (&[u8], &[u8]) = match key_text {
            Some(key) => (KEY_TAG.as_bytes(), key.as_bytes()),
            None => (b"", b""),
        };
        let mac_ok = self.keys.verify(
            &[
                MAC_CONTEXT,
                MAC_SEPARATOR,
                token.payload_b64.as_bytes(),
                MAC_SEPARATOR,
                audience,
                tag,
                key,
            ],
            &token.mac,
        );
        let iss_ok = token.payload.iss == self.session_id;
        let plain_ok = key_text.is_some() || !looks_keyed(audience);
        mac_ok & iss_ok & plain_ok
    }

    /// Reads `target` for a redeem, from `start`, through the operator plane's reader.
    ///
    /// # Errors
    /// `not_found`, `outside_root`, `symlink_refused`, `not_a_regular_file`, `too_large`,
    /// `io_error`.
    fn read(&self, target: &RelPath, start: Start) -> Result<Step<ServedFile>, Refusal> {
        let read = OneRead::new(self.fs.as_ref(), &self.scope, target, Some(&self.budget));
        Ok(read.run(start)?.map(ReadAnswer::served))
    }
}

/// A redeem that passed every check before the read: what its outcome says besides the file,
/// and the payload's `p`, the file to read.
struct Checked {
    path: Option<String>,
    audience_proof: Option<&'static str>,
    p: String,
}

/// A redeem refused `code` for `reason`, its outcome saying `path` and `audience_proof`.
fn refused(
    code: Code,
    reason: String,
    path: Option<String>,
    audience_proof: Option<&'static str>,
) -> RedeemOutcome {
    RedeemOutcome {
        path,
        audience_proof,
        result: Err(Refusal::new(code, reason)),
    }
}

/// The audience a redeem asserts (D-7.2 step 2): its one `x-murmur-audience` value,
/// normalised.
///
/// # Errors
/// Why there is none: the header was sent more than once, or absent or empty.
fn asserted_audience(values: &[&[u8]]) -> Result<Vec<u8>, &'static str> {
    match values {
        [one] => Some(normalise_audience(one)).filter(|audience| !audience.is_empty()),
        _ => None,
    }
    .ok_or(if values.len() > 1 {
        "x-murmur-audience sent more than once"
    } else {
        "x-murmur-audience absent or empty"
    })
}

/// The redeem proof a request's `x-murmur-proof` values carry (D-14.4): `None` without one;
/// more than one is malformed.
fn proof_header<'a>(values: &[&'a [u8]]) -> Option<Result<Proof<'a>, Malformed<'a>>> {
    match values {
        [] => None,
        [one] => Some(proof::parse(one)),
        _ => Some(Err(Malformed {
            key_text: None,
            why: "x-murmur-proof sent more than once",
        })),
    }
}

/// The identity key the MAC is checked over (D-14.4): the key `proof` names, even when the
/// rest of it is malformed (its checks fail after the MAC); `None` without a proof.
///
/// # Errors
/// Why the proof is malformed, when it names no key: it fails before the MAC is checked.
fn proof_key<'a>(
    proof: Option<&Result<Proof<'a>, Malformed<'a>>>,
) -> Result<Option<&'a str>, &'static str> {
    match proof {
        None => Ok(None),
        Some(Ok(p)) => Ok(Some(p.key_text)),
        Some(Err(malformed)) => malformed.key_text.map(Some).ok_or(malformed.why),
    }
}
