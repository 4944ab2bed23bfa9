//! The two read-only planes a runtime mounts under `/resources/`, behind traits so a runtime
//! (or a test) can substitute its own.
//!
//! The planes answer in domain terms ([`ServedFile`], [`Refusal`]); the HTTP router turns those
//! into responses and trace lines, so every plane implementation gets the same wire behaviour.

mod cancel;
mod condition;
internal_module!(handle);
pub(crate) mod hash_cache;
mod listing;
mod peer;
internal_module!(proof);
pub(crate) mod reader;
pub(crate) mod replay;
mod resource;

pub use crate::scope::ExportScope;
pub use cancel::{Cancel, CancelOnDrop};
pub use condition::IfNoneMatch;
pub(crate) use listing::ListingHead;
pub use listing::{Listing, ListingBody, ListingEntry};
pub use peer::HmacPeerPlane;
pub(crate) use peer::normalise_audience;
pub use reader::{ReadMode, ServedFile};
pub use replay::DEFAULT_REPLAY_CAPACITY;
pub use resource::OperatorPlane;

/// The in-flight byte budget the crate's planes hold read bodies against (one per capsule).
pub use crate::budget::ByteBudget;
/// A decoded, lexically contained path relative to an export root.
pub use crate::path::RelPath;

use crate::refusal::Refusal;
use std::fmt::Debug;

/// The operator plane (`exports.files`): list and read by path.
pub trait ResourcePlane: Debug + Send + Sync {
    /// The root, limit and containment class this plane serves.
    fn scope(&self) -> &ExportScope;

    /// `GET /resources/files` (D-3). Blocking. The work stops soon after `cancel` is raised
    /// (the client left).
    ///
    /// # Errors
    /// `outside_root` when the root escapes the workdir, `io_error` when it cannot be read or
    /// the listing was cancelled.
    fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal>;

    /// `GET /resources/files/<raw_path>`, with `raw_path` still percent-encoded and its query
    /// already cut (D-2). Blocking.
    ///
    /// # Errors
    /// `outside_root` (lexical or resolved), `not_found`, `symlink_refused`,
    /// `not_a_regular_file`, `too_large`, `io_error`.
    fn read(&self, raw_path: &str) -> Result<ServedFile, Refusal>;

    /// [`read`](Self::read) on an async worker: the same answer, or `None` (having read no byte
    /// and written nothing) when the file is larger than `limit` or the in-flight budget is not
    /// free at once, so the caller moves the read to a blocking thread. The default always
    /// defers.
    fn read_inline(&self, raw_path: &str, limit: u64) -> Option<Result<ServedFile, Refusal>> {
        let _ = (raw_path, limit);
        None
    }

    /// [`read`](Self::read) under an `If-None-Match` condition (D-13): every refusal exactly as
    /// for a read, then [`ReadOutcome::NotModified`] when the file's etag matches. Blocking. The
    /// default reads the file and compares; a plane that knows a file's hash without reading
    /// it (the crate's own, from its listing cache) answers a 304 at the cost of an `fstat`.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    fn read_if(&self, raw_path: &str, if_none_match: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        self.read(raw_path)
            .map(|file| ReadOutcome::compare(file, if_none_match))
    }

    /// [`read_if`](Self::read_if) on an async worker, or `None` to move it to a blocking thread
    /// (see [`read_inline`](Self::read_inline)). The default compares what `read_inline`
    /// answers.
    fn read_inline_if(
        &self,
        raw_path: &str,
        if_none_match: &IfNoneMatch,
        limit: u64,
    ) -> Option<Result<ReadOutcome, Refusal>> {
        self.read_inline(raw_path, limit)
            .map(|read| read.map(|file| ReadOutcome::compare(file, if_none_match)))
    }
}

/// What a conditional read answers.
#[derive(Debug)]
pub enum ReadOutcome {
    /// The file (`200`).
    File(ServedFile),
    /// The condition matched (`304`): the file's hash and modification time.
    NotModified {
        /// Lowercase hex sha256 of the file: the etag and the trace's `sha256`.
        sha256: String,
        /// `x-murmur-mtime-ms`.
        mtime_ms: i64,
    },
}

impl ReadOutcome {
    /// `file`, or [`NotModified`](Self::NotModified) when `if_none_match` matches its etag.
    ///
    /// ```
    /// use resource_plane::planes::{IfNoneMatch, ReadOutcome, ServedFile};
    ///
    /// let file = ServedFile { bytes: "x".into(), sha256: "ab".repeat(32), mtime_ms: 7 };
    /// let condition = IfNoneMatch::parse(&[b"*"]);
    /// assert!(matches!(
    ///     ReadOutcome::compare(file, &condition),
    ///     ReadOutcome::NotModified { mtime_ms: 7, .. }
    /// ));
    /// ```
    pub fn compare(file: ServedFile, if_none_match: &IfNoneMatch) -> Self {
        if if_none_match.matches(&file.sha256) {
            ReadOutcome::NotModified {
                sha256: file.sha256,
                mtime_ms: file.mtime_ms,
            }
        } else {
            ReadOutcome::File(file)
        }
    }
}

/// A freshly minted handle. The token is the secret; everything else is safe to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    /// `mh1.<payload>.<mac>`: goes to the agent and nowhere else.
    pub token: String,
    /// The first 16 hex characters of sha256(token).
    pub handle_id: String,
    /// Absolute expiry, Unix milliseconds.
    pub expires_at_ms: i64,
}

/// What a redeem learned and answered, for the response and its `peer_handle_redeem` line.
#[derive(Debug)]
pub struct Redeem {
    /// The handle id of the token sent; `None` when no token was sent.
    pub handle_id: Option<String>,
    /// The payload's `p`, only once the MAC has verified (a forgery never names a path).
    pub path: Option<String>,
    /// The normalised `x-murmur-audience`, or `None` when absent.
    pub audience_asserted: Option<String>,
    /// Once the MAC has verified: `"ed25519"` when a proof header was sent (whether or not it
    /// then verified), else `"none"`; `None` before (D-14.5).
    pub audience_proof: Option<&'static str>,
    /// The file, or the refusal.
    pub result: Result<ServedFile, Refusal>,
}

/// The peer plane (`exports.peer_files`): mint handles for one audience, redeem them.
pub trait PeerPlane: Debug + Send + Sync {
    /// The root, limit and containment class this plane serves.
    fn scope(&self) -> &ExportScope;

    /// The `share-file` path step (D-9.2): cut `path` at its first `?`, decode it and resolve
    /// it under the root (D-2.1 to D-2.6), reading nothing and touching no network. Returns the
    /// handle's `p`, "canonicalised at mint time" (spec, §The handle): the path of the file
    /// itself, each symlink followed replaced by where it led, so a symlink moved after the
    /// mint cannot point the handle at another file. Blocking.
    ///
    /// # Errors
    /// `outside_root`, `not_found`, `symlink_refused`, `not_a_regular_file`, `invalid_input`
    /// (a path whose handle would exceed 4 KiB), `io_error`.
    fn resolve_for_mint(&self, path: &str) -> Result<RelPath, Refusal>;

    /// Mints a handle for `path` bound to `audience` (already normalised; for a peer whose card
    /// publishes an identity key, the MAC audience `<audience>#ed25519:<key>` of D-14.2),
    /// expiring after `ttl_secs` (already clamped to `max_ttl`).
    ///
    /// # Errors
    /// `io_error` once the session has ended and the key is gone.
    fn mint(&self, path: &RelPath, audience: &str, ttl_secs: u64) -> Result<Minted, Refusal>;

    /// `GET /resources/peer/<raw_token>` with the `x-murmur-audience` header values as sent,
    /// and no `x-murmur-proof`, in the order of D-7.2. Blocking.
    fn redeem(&self, raw_token: &str, audience_headers: &[&[u8]]) -> Redeem;

    /// [`redeem`](Self::redeem) with the `x-murmur-proof` header values as sent (D-14.4): with
    /// one, the MAC is checked over `<audience>#ed25519:<key from the header>` and the proof's
    /// signature, freshness and nonce after it; a refused proof is `handle_not_valid`. Blocking.
    ///
    /// The default ignores the proof headers and redeems as [`redeem`](Self::redeem) does: a
    /// plane that does not know proofs checks the plain audience (D-14.3).
    fn redeem_with_proof(
        &self,
        raw_token: &str,
        audience_headers: &[&[u8]],
        proof_headers: &[&[u8]],
    ) -> Redeem {
        let _ = proof_headers;
        self.redeem(raw_token, audience_headers)
    }

    /// [`redeem`](Self::redeem) on an async worker, or `None` to move it to a blocking thread
    /// (see [`ResourcePlane::read_inline`]). The default always defers.
    fn redeem_inline(
        &self,
        raw_token: &str,
        audience_headers: &[&[u8]],
        limit: u64,
    ) -> Option<Redeem> {
        let _ = (raw_token, audience_headers, limit);
        None
    }

    /// [`redeem_with_proof`](Self::redeem_with_proof) on an async worker, or `None` to move it
    /// to a blocking thread (see [`ResourcePlane::read_inline`]). The default ignores the proof
    /// headers, as [`redeem_with_proof`](Self::redeem_with_proof)'s does.
    fn redeem_with_proof_inline(
        &self,
        raw_token: &str,
        audience_headers: &[&[u8]],
        proof_headers: &[&[u8]],
        limit: u64,
    ) -> Option<Redeem> {
        let _ = proof_headers;
        self.redeem_inline(raw_token, audience_headers, limit)
    }

    /// Ends the session: zeroes the key, so no outstanding handle verifies again (D-12).
    fn end_session(&self);
}
