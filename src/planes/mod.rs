//! The two read-only planes a runtime mounts under `/resources/`, behind traits so a runtime
//! (or a test) can substitute its own.
//!
//! Each plane call answers one typed outcome in domain terms ([`Listing`], [`ReadOutcome`],
//! [`RedeemOutcome`], [`Refusal`]); the HTTP router renders it into the response and the trace
//! line, so every plane implementation gets the same wire behaviour. The request calls (list,
//! read, redeem) are async, so a plane over an async store awaits its I/O; the router decides
//! where the crate's own planes run (inline or on the blocking pool) and awaits a runtime's
//! own plane on its async worker.

mod condition;
internal_module!(handle);
mod hash_cache;
pub(crate) mod inline;
pub(crate) mod listing;
mod peer;
internal_module!(proof);
mod reader;
pub(crate) mod replay;
mod resource;
pub(crate) mod streamed;
#[cfg(test)]
mod test_fs;
pub mod watch;

pub use crate::cancel::{Cancel, CancelOnDrop};
pub use crate::scope::ExportScope;
pub use condition::IfNoneMatch;
pub(crate) use listing::ListingHead;
pub use listing::{Listing, ListingBody, ListingEntry};
pub use peer::HmacPeerPlane;
pub(crate) use peer::normalise_audience;
pub use proof::Origin;
pub use reader::ServedFile;
pub use replay::DEFAULT_REPLAY_CAPACITY;
pub use resource::OperatorPlane;
pub use streamed::StreamedFile;

/// The in-flight byte budget the crate's planes hold read bodies against (one per capsule).
pub use crate::budget::ByteBudget;
/// A decoded, lexically contained path relative to an export root.
pub use crate::path::RelPath;

use crate::refusal::Refusal;
use std::fmt::{self, Debug};

/// The operator plane (`exports.files`): list and read by path.
///
/// Both calls are async (through [`async_trait`](https://docs.rs/async-trait), so the trait
/// stays dyn-compatible and a capsule holds the plane as `Arc<dyn ResourcePlane>`): the router
/// awaits a runtime's own plane on the async worker that received the request, so a plane over
/// an async store (an object store, a database) awaits its I/O and holds no thread meanwhile.
/// A plane whose work blocks (a large walk, a synchronous client) moves it off the worker
/// itself, e.g. with `tokio::task::spawn_blocking`. When the client leaves, the router drops
/// the call's future (and raises the listing's [`Cancel`]), writing the request's one trace
/// line as `client_gone`. The crate's own [`OperatorPlane`] is never awaited by the router: it
/// answers small reads inline and everything else on the blocking pool, decided in one place.
/// The router makes every check it
/// can before a plane is asked: the method (`405`), the route, and the path's strict decoding
/// and lexical refusals (D-2.1 to D-2.3: `outside_root` for `..`, `%2e%2e`, an empty component,
/// an invalid escape), so a plane gets a [`RelPath`] whose every component is a plain name.
///
/// A runtime's own plane, serving reports it holds in memory:
///
/// ```
/// use bytes::Bytes;
/// use resource_plane::planes::RelPath;
/// use resource_plane::planes::{
///     Cancel, ExportScope, IfNoneMatch, Listing, ListingEntry, ReadOutcome, ResourcePlane,
///     ServedFile,
/// };
/// use resource_plane::{Code, Refusal};
///
/// #[derive(Debug)]
/// struct OneReport {
///     scope: ExportScope,
///     sha256: String,
/// }
///
/// #[async_trait::async_trait]
/// impl ResourcePlane for OneReport {
///     fn scope(&self) -> &ExportScope {
///         &self.scope
///     }
///
///     async fn list(&self, _cancel: &Cancel) -> Result<Listing, Refusal> {
///         Ok(Listing::from_entries(vec![ListingEntry {
///             path: "report.md".into(),
///             size_bytes: 5,
///             mtime_ms: 0,
///             sha256: self.sha256.clone(),
///         }]))
///     }
///
///     // The condition may be ignored: the router answers 304 for a file whose etag matches.
///     async fn read(&self, path: &RelPath, _: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
///         if path.as_str() != "report.md" {
///             return Err(Refusal::new(Code::NotFound, "no such report"));
///         }
///         Ok(ReadOutcome::File(ServedFile {
///             bytes: Bytes::from_static(b"hello"),
///             sha256: self.sha256.clone(),
///             mtime_ms: 0,
///         }))
///     }
/// }
///
/// # use resource_plane::scope::{Containment, RootPath};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let plane = OneReport {
///     scope: ExportScope {
///         root: RootPath::parse("reports/").unwrap(),
///         max_bytes: 1 << 20,
///         containment: Containment::Sealed,
///     },
///     sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into(),
/// };
/// let path = RelPath::parse_canonical("report.md").unwrap();
/// assert!(matches!(
///     plane.read(&path, &IfNoneMatch::absent()).await,
///     Ok(ReadOutcome::File(file)) if &file.bytes[..] == b"hello"
/// ));
/// # }
/// ```
///
/// Mounted with [`CapsuleBuilder::resource_plane`](crate::CapsuleBuilder::resource_plane), it
/// answers through the crate's router, rules and trace lines included (see
/// `examples/custom_plane.rs`).
#[async_trait::async_trait]
pub trait ResourcePlane: Debug + Send + Sync {
    /// The root, limit and containment class this plane serves.
    fn scope(&self) -> &ExportScope;

    /// `GET /resources/files` (D-3). The work stops soon after `cancel` is raised (the client
    /// left); the router also drops the future then.
    ///
    /// # Errors
    /// `outside_root` when the root escapes the workdir, `io_error` when it cannot be read or
    /// the listing was cancelled.
    async fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal>;

    /// `GET /resources/files/<path>` under an `If-None-Match` condition (D-13), with `path`
    /// already decoded and checked by the router (D-2.1 to D-2.3).
    ///
    /// Every refusal comes first, exactly as for an unconditional read; then
    /// [`ReadOutcome::NotModified`] when the file's etag matches, else the file. A plane may
    /// ignore `if_none_match` and always answer [`ReadOutcome::File`]: the router turns a file
    /// whose etag matches into the `304` itself. A plane that knows a file's hash without
    /// reading it (the crate's own, from its listing cache) answers the `304` at the cost of an
    /// `fstat`. A plane may answer [`ReadOutcome::Stream`] to send a body as it comes from its
    /// store, vouching for its sha256 and size.
    ///
    /// # Errors
    /// `outside_root` (the file resolves outside the root), `not_found`, `symlink_refused`,
    /// `not_a_regular_file`, `too_large`, `io_error`.
    async fn read(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
    ) -> Result<ReadOutcome, Refusal>;
}

/// What a read answers when it is not refused: the one outcome of [`ResourcePlane::read`],
/// which the router renders into the response and its `resource_read` trace line.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadOutcome {
    /// The file (`200`).
    File(ServedFile),
    /// The file as a stream of bytes (`200`), with the sha256, size and modification time its
    /// plane vouches for: the router sends the etag and `content-length` from them before the
    /// first byte, and streams the body (see [`StreamedFile`]).
    Stream(StreamedFile),
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

    /// This outcome under `if_none_match`: a [`File`](Self::File) or a
    /// [`Stream`](Self::Stream) whose etag matches becomes [`NotModified`](Self::NotModified)
    /// (a stream is dropped unread); anything else stays as it is.
    pub fn under(self, if_none_match: &IfNoneMatch) -> Self {
        match self {
            ReadOutcome::File(file) => ReadOutcome::compare(file, if_none_match),
            ReadOutcome::Stream(stream) if if_none_match.matches(stream.sha256()) => {
                ReadOutcome::NotModified {
                    sha256: stream.sha256().to_owned(),
                    mtime_ms: stream.mtime_ms(),
                }
            }
            other => other,
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

/// What a redeem is asked: `GET /resources/peer/<token>` with its headers, as sent. The router
/// builds one per request; a test builds one with [`new`](Self::new).
///
/// Its `Debug` names the token by its handle id, never the token itself.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct RedeemRequest<'a> {
    /// The token as sent: the path after `/resources/peer/`, its query cut, not decoded.
    pub token: &'a str,
    /// Every `x-murmur-audience` value, in order.
    pub audience: &'a [&'a [u8]],
    /// Every `x-murmur-proof` value, in order (D-14.3); empty when none was sent.
    pub proof: &'a [&'a [u8]],
}

impl<'a> RedeemRequest<'a> {
    /// A redeem of `token` with the `x-murmur-audience` values `audience` and no proof.
    pub fn new(token: &'a str, audience: &'a [&'a [u8]]) -> Self {
        RedeemRequest {
            token,
            audience,
            proof: &[],
        }
    }

    /// The same redeem with the `x-murmur-proof` values `proof`.
    pub fn with_proof(self, proof: &'a [&'a [u8]]) -> Self {
        RedeemRequest { proof, ..self }
    }
}

impl fmt::Debug for RedeemRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedeemRequest")
            .field("handle_id", &crate::hex::handle_id(self.token))
            .field("audience", &self.audience.len())
            .field("proof", &self.proof.len())
            .finish()
    }
}

/// What a redeem answers: the one outcome of [`PeerPlane::redeem`], which the router renders
/// into the response and its `peer_handle_redeem` trace line. It holds what only the plane
/// learns; the router adds what the request itself says (the handle id of the token sent, the
/// normalised audience asserted).
#[derive(Debug)]
pub struct RedeemOutcome {
    /// The payload's `p`, only once the MAC has verified (a forgery never names a path).
    pub path: Option<String>,
    /// Once the MAC has verified: `"ed25519"` when a proof header was sent (whether or not it
    /// then verified), else `"none"`; `None` before (D-14.5).
    pub audience_proof: Option<&'static str>,
    /// The file, or the refusal.
    pub result: Result<ServedFile, Refusal>,
}

impl RedeemOutcome {
    /// A redeem refused before the MAC verified: no path, no `audience_proof`.
    pub fn refused(refusal: Refusal) -> Self {
        RedeemOutcome {
            path: None,
            audience_proof: None,
            result: Err(refusal),
        }
    }
}

/// The peer plane (`exports.peer_files`): mint handles for one audience, redeem them.
///
/// [`redeem`](Self::redeem), the request's call, is async (through
/// [`async_trait`](https://docs.rs/async-trait), so the trait stays dyn-compatible): the router
/// awaits a runtime's own plane on its async worker, and writes `client_gone` if the request's
/// future is dropped first. The mint-side calls are blocking: `share-file` calls
/// [`resolve_for_mint`](Self::resolve_for_mint) on tokio's blocking pool, and
/// [`mint`](Self::mint) signs in memory. The crate's own [`HmacPeerPlane`] is never awaited by
/// the router, which answers plain redeems inline and the rest on the blocking pool.
///
/// A runtime's own plane, here a decorator counting the crate's plane's redeems:
///
/// ```
/// use resource_plane::planes::RelPath;
/// use resource_plane::planes::{
///     ExportScope, HmacPeerPlane, Minted, PeerPlane, RedeemOutcome, RedeemRequest,
/// };
/// use resource_plane::Refusal;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// #[derive(Debug)]
/// struct Counted {
///     inner: HmacPeerPlane,
///     redeems: AtomicUsize,
/// }
///
/// #[async_trait::async_trait]
/// impl PeerPlane for Counted {
///     fn scope(&self) -> &ExportScope {
///         self.inner.scope()
///     }
///     fn resolve_for_mint(&self, path: &str) -> Result<RelPath, Refusal> {
///         self.inner.resolve_for_mint(path)
///     }
///     fn mint(&self, path: &RelPath, audience: &str, ttl_secs: u64) -> Result<Minted, Refusal> {
///         self.inner.mint(path, audience, ttl_secs)
///     }
///     async fn redeem(&self, request: RedeemRequest<'_>) -> RedeemOutcome {
///         self.redeems.fetch_add(1, Ordering::Relaxed);
///         self.inner.redeem(request).await
///     }
///     fn end_session(&self) {
///         self.inner.end_session()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # use resource_plane::backends::{FixedKeyStore, ManualClock, MemoryFilesystem};
/// # use resource_plane::planes::ByteBudget;
/// # use resource_plane::scope::{Containment, RootPath};
/// # use std::sync::Arc;
/// # let fs = Arc::new(MemoryFilesystem::new());
/// # fs.add_file("out/report.md", "hello", 0);
/// # let inner = HmacPeerPlane::new(
/// #     fs,
/// #     Arc::new(ManualClock::new(0)),
/// #     Arc::new(FixedKeyStore::new([7; 32])),
/// #     ExportScope { root: RootPath::parse("out/").unwrap(), max_bytes: 1 << 20, containment: Containment::Sealed },
/// #     "ses_doc".into(),
/// #     ByteBudget::new(1 << 20),
/// #     resource_plane::planes::Origin::of_url("http://127.0.0.1:41234").unwrap(),
/// # );
/// let plane = Counted { inner, redeems: AtomicUsize::new(0) };
/// let path = plane.resolve_for_mint("report.md").unwrap();
/// let minted = plane.mint(&path, "reader@127.0.0.1:9000", 60).unwrap();
/// let audience: &[&[u8]] = &[b"reader@127.0.0.1:9000"];
/// let redeemed = plane.redeem(RedeemRequest::new(&minted.token, audience)).await;
/// assert_eq!(&redeemed.result.unwrap().bytes[..], b"hello");
/// assert_eq!(redeemed.path.as_deref(), Some("report.md"));
/// assert_eq!(plane.redeems.load(Ordering::Relaxed), 1);
/// # }
/// ```
#[async_trait::async_trait]
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

    /// `GET /resources/peer/<token>`, checked in the order of D-7.2; with an `x-murmur-proof`
    /// (D-14.4), the MAC is checked over `<audience>#ed25519:<key from the header>` and the
    /// proof's origin (D-14.3.1: the plane's own), signature, freshness and nonce after it, a
    /// refused proof being `handle_not_valid`.
    ///
    /// A plane that does not know proofs may ignore `request.proof` and check the plain
    /// audience (D-14.3). Its refusals: `malformed_handle`, `missing_audience`,
    /// `handle_not_valid` (every MAC failure collapses into it), `handle_expired`, then any
    /// refusal of a read (`not_found`, `too_large`, …) in
    /// [`result`](RedeemOutcome::result).
    async fn redeem(&self, request: RedeemRequest<'_>) -> RedeemOutcome;

    /// Ends the session: zeroes the key, so no outstanding handle verifies again (D-12).
    fn end_session(&self);
}
