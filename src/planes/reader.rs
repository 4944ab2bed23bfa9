//! The one reader both planes call (spec: "a peer redeem calls the same reader"): resolve,
//! type-check, size-check and read one file from one descriptor, and walk a root for a listing.

use super::condition::IfNoneMatch;
use super::hash_cache::{CacheView, HashCache};
use super::listing::{ENTRY_BYTES, Listing, ListingBuilder, Pending};
use crate::backends::fs::{FileMeta, Filesystem, OpenFile};
use crate::budget::{BudgetPermit, ByteBudget, FillSlot};
use crate::cancel::Cancel;
use crate::page_aligned;
use crate::path::RelPath;
use crate::refusal::{Code, Refusal};
use crate::scope::ExportScope;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::io::Read;

/// One file's bytes as served, with the validator computed over exactly those bytes (D-2.7).
/// The bytes hold their share of the in-flight budget until the last clone is dropped.
#[derive(Debug)]
pub struct ServedFile {
    /// The body.
    pub bytes: Bytes,
    /// Lowercase hex sha256 of `bytes`: the etag and the trace's `sha256`.
    pub sha256: String,
    /// `x-murmur-mtime-ms`, from the same descriptor.
    pub mtime_ms: i64,
}

/// A body buffer that holds its share of the in-flight budget for as long as any clone of it
/// lives, including in the HTTP layer's write queue after the response body is handed over.
/// On drop, the buffer goes back to the budget's pool and the bytes to the budget.
struct Budgeted {
    buffer: Vec<u8>,
    /// Where the file's bytes start: the bytes before are page-alignment padding.
    start: usize,
    permit: Option<BudgetPermit>,
}

impl AsRef<[u8]> for Budgeted {
    fn as_ref(&self) -> &[u8] {
        &self.buffer[self.start..]
    }
}

impl Drop for Budgeted {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            permit.recycle(std::mem::take(&mut self.buffer));
        }
    }
}

/// The body over `buffer[start..]`, holding its permit until the last clone is dropped.
fn budgeted(buffer: Vec<u8>, start: usize, permit: Option<BudgetPermit>) -> Bytes {
    match permit {
        None => Bytes::from(buffer).slice(start..),
        permit => Bytes::from_owner(Budgeted {
            buffer,
            start,
            permit,
        }),
    }
}

/// How many times a read starts over because its file grew after the `fstat`. The last
/// attempt borrows for the most it may read (`max_bytes + 1`, capped at the whole budget) in
/// one piece and reads to the end of the file: a file appended to faster than it can be read is
/// served as it is then, or refused `too_large` once it has grown past `max_bytes`.
const GROWTH_RETRIES: usize = 2;

/// Borrows `bytes` for a read in `mode`: `prepaid` when it covers them (borrowed for the read
/// on the async side); else only if free right now on an async worker (`None`: the read moves
/// to the blocking path); else waiting for them without the fill slot, so that bodies clients
/// stopped reading never hold up reads that need no bytes. A read that starts over because its
/// file grew (`attempt` > 0) waits at most [`GROWTH_PATIENCE`]: it holds a blocking lane, which
/// reads queued with their bytes wait for.
///
/// # Errors
/// `io_error` when a grown file's bytes did not come within [`GROWTH_PATIENCE`].
fn borrow(
    budget: &ByteBudget,
    mode: ReadMode,
    bytes: u64,
    attempt: usize,
    filling: &mut Option<FillSlot>,
    prepaid: &mut Option<BudgetPermit>,
) -> Result<Option<BudgetPermit>, Refusal> {
    if let Some(permit) = prepaid.take()
        && permit.covers(bytes)
    {
        return Ok(Some(permit));
    }
    match mode {
        ReadMode::Inline { .. } => Ok(budget.try_acquire(bytes)),
        ReadMode::Blocking => {
            if let Some(permit) = budget.try_acquire_in_turn(bytes) {
                return Ok(Some(permit));
            }
            drop(filling.take());
            let patience = (attempt > 0).then_some(GROWTH_PATIENCE);
            let permit = budget
                .acquire_blocking_within(bytes, patience)
                .ok_or_else(|| {
                    Refusal::new(
                        Code::IoError,
                        "the file grew during the read, and the bytes for its new size did not come in time",
                    )
                })?;
            filling.replace(budget.fill_slot());
            Ok(Some(permit))
        }
    }
}

/// How long a read that starts over because its file grew waits for the bytes of its new size.
const GROWTH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// What attempt `attempt` of a read of a file whose descriptor gave `size` may read (one byte
/// more than that size, to see growth, or on the last attempt all a read may take,
/// `max_bytes + 1`, to see growth past it), and what it borrows for it: that and a page of
/// slack, so the bytes can start on a page boundary (see `page_aligned`: a misaligned read copy
/// is ten times slower).
fn wanted(size: u64, max_bytes: u64, attempt: usize) -> (u64, u64) {
    let limit = max_bytes.saturating_add(1);
    let wanted = if attempt == GROWTH_RETRIES {
        limit
    } else {
        size.saturating_add(1).min(limit)
    };
    (wanted, wanted.saturating_add(page_aligned::SLACK as u64))
}

fn open(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
) -> Result<Box<dyn OpenFile>, Refusal> {
    let root = fs.open_root(&scope.root, scope.containment)?;
    Ok(root.open_file(target)?)
}

/// The canonical path beneath the scope's root of the regular file `target` resolves to,
/// reading nothing (D-9.2; the spec's "canonicalised at mint time"): each symlink followed is
/// replaced by where it led, under the same rules as a read.
///
/// # Errors
/// `not_found`, `outside_root`, `symlink_refused`, `not_a_regular_file`, `io_error`.
pub(crate) fn canonical_file(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
) -> Result<RelPath, Refusal> {
    let root = fs.open_root(&scope.root, scope.containment)?;
    Ok(root.canonical_path(target)?)
}

/// Where a read runs, as the router decided: the crate's planes pass it down to here, the one
/// place it changes what a read does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadMode {
    /// On a blocking thread: any size; waits for the in-flight budget.
    Blocking,
    /// On an async worker: stops before reading a byte when the file is larger than `limit`
    /// or its bytes are not free in the budget right now, handing the file as opened to the
    /// blocking pool ([`Step::Resume`]), so the worker never stalls.
    Inline {
        /// The largest file read inline.
        limit: u64,
    },
}

/// A file a read opened and checked on an async worker but did not read there: resolved
/// beneath the root, typed and sized from its descriptor (D-2.4 to D-2.7), and passed on to the
/// blocking pool to be read from that same descriptor. The bytes then come from the descriptor
/// that was checked, and a request resolves its file once.
#[derive(Debug)]
pub(crate) struct Opened {
    file: Box<dyn OpenFile>,
    /// How many times the read had started over when it opened `file` (see
    /// [`GROWTH_RETRIES`]): the blocking pool goes on counting from there.
    attempt: usize,
}

impl Opened {
    /// The bytes the read of this file under `max_bytes` borrows first: what a caller on the
    /// async side borrows for it beforehand ([`ByteBudget::acquire`]), so that the blocking
    /// read does not wait for them on its thread.
    pub(crate) fn first_borrow(&self, max_bytes: u64) -> u64 {
        wanted(self.file.meta().size, max_bytes, self.attempt).1
    }
}

/// How far a read got where it ran.
#[derive(Debug)]
pub(crate) enum Step<T> {
    /// Answered.
    Done(T),
    /// Only in [`ReadMode::Inline`]: the read would wait, and is to go on on the blocking pool
    /// from the file as opened ([`read_opened`], [`read_file_if`]). Nothing was read, and
    /// nothing stays borrowed from the budget.
    Resume(Opened),
}

impl<T> Step<T> {
    /// The answer of a read that ran on a blocking thread, which never stops to resume.
    fn answered(self) -> T {
        match self {
            Step::Done(answer) => answer,
            Step::Resume(_) => unreachable!("only an inline read stops to resume"),
        }
    }
}

/// Reads `target` under the scope (D-2.4 to D-2.7): size from the descriptor first (`too_large`
/// before any byte is read), then one byte more than that size, so a file that grew past
/// `max_bytes` during the read is `too_large` too. The size is borrowed from `budget`, in one
/// piece, before reading. A file that grew (under `max_bytes`) after its `fstat` is read again
/// from a fresh open and `fstat` with one borrow for its new size, never by borrowing more
/// while holding bytes: waiting for more while holding some can wait for ever, and everyone
/// queued behind waits too. After two such restarts the read borrows its limit
/// and reads to the end. [`Step::Resume`] only in [`ReadMode::Inline`], when the read should
/// go on on a blocking thread ([`read_opened`]).
///
/// # Errors
/// `not_found`, `outside_root`, `symlink_refused`, `not_a_regular_file`, `too_large`,
/// `io_error`.
pub(crate) fn read_file(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
    budget: Option<&ByteBudget>,
    mode: ReadMode,
) -> Result<Step<ServedFile>, Refusal> {
    let read = OneRead {
        fs,
        scope,
        target,
        budget,
        condition: &IfNoneMatch::absent(),
        cache: None,
        cancel: &Cancel::never(),
    };
    let step = read.run(mode, None, None)?;
    Ok(match step {
        Step::Done(answer) => Step::Done(answer.served()),
        Step::Resume(opened) => Step::Resume(opened),
    })
}

/// [`read_file`] on a blocking thread, going on from `opened`, the file as an inline read of
/// the same `target` opened it: read from that descriptor, without resolving it again unless
/// the file grew and the read starts over.
///
/// # Errors
/// As [`read_file`].
pub(crate) fn read_opened(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
    budget: Option<&ByteBudget>,
    opened: Opened,
) -> Result<ServedFile, Refusal> {
    let read = OneRead {
        fs,
        scope,
        target,
        budget,
        condition: &IfNoneMatch::absent(),
        cache: None,
        cancel: &Cancel::never(),
    };
    Ok(read
        .run(ReadMode::Blocking, Some(opened), None)?
        .answered()
        .served())
}

/// What a conditional read found.
#[derive(Debug)]
pub(crate) enum ReadAnswer {
    /// The file, and the descriptor's metadata with the hash's bytes when the bytes served
    /// are exactly the size it gave (the hash may then be cached under it).
    File {
        served: ServedFile,
        cacheable: Option<(FileMeta, [u8; 32])>,
    },
    /// The condition matched: the file's hash and modification time, nothing read when the
    /// hash came from the cache.
    NotModified { sha256: String, mtime_ms: i64 },
}

impl ReadAnswer {
    /// The file of an answer to a read without a condition.
    fn served(self) -> ServedFile {
        match self {
            ReadAnswer::File { served, .. } => served,
            ReadAnswer::NotModified { .. } => unreachable!("no condition, so no 304"),
        }
    }
}

/// [`read_file`] under an `If-None-Match` condition (D-13): every refusal first, exactly as a
/// read decides it; then, when `cache` holds the hash for the descriptor's metadata and the
/// condition matches it, [`ReadAnswer::NotModified`] without reading a byte; else the file is
/// read and hashed as for a 200, and the caller compares. With `opened` (the file as an inline
/// read of the same `target` opened it), the read goes on from that descriptor, as
/// [`read_opened`] does, instead of resolving `target` again; with `prepaid` (bytes borrowed
/// for it beforehand, [`Opened::first_borrow`]) it borrows nothing more unless the file grew.
/// The read stops between steps of at most 64 MiB, and its hash between steps too, once
/// `read.cancel` is raised (`io_error`).
///
/// # Errors
/// As [`read_file`].
pub(crate) fn read_file_if(
    read: &OneRead<'_>,
    mode: ReadMode,
    opened: Option<Opened>,
    prepaid: Option<BudgetPermit>,
) -> Result<Step<ReadAnswer>, Refusal> {
    read.run(mode, opened, prepaid)
}

/// One read's fixed inputs.
pub(crate) struct OneRead<'a> {
    pub(crate) fs: &'a dyn Filesystem,
    pub(crate) scope: &'a ExportScope,
    pub(crate) target: &'a RelPath,
    pub(crate) budget: Option<&'a ByteBudget>,
    pub(crate) condition: &'a IfNoneMatch,
    pub(crate) cache: Option<&'a HashCache>,
    /// Raised when nobody waits for the answer any more.
    pub(crate) cancel: &'a Cancel,
}

impl OneRead<'_> {
    /// The read in `mode`, from `opened` when an inline read opened the file already, else
    /// from a fresh open.
    fn run(
        &self,
        mode: ReadMode,
        mut opened: Option<Opened>,
        mut prepaid: Option<BudgetPermit>,
    ) -> Result<Step<ReadAnswer>, Refusal> {
        let OneRead {
            fs,
            scope,
            target,
            budget,
            condition,
            cache,
            cancel,
        } = *self;
        // Blocking reads open, fill and hash at most one per core at a time (see `FillSlots`).
        let mut filling = match (mode, budget) {
            (ReadMode::Blocking, Some(budget)) => Some(budget.fill_slot()),
            _ => None,
        };
        let mut attempt = opened.as_ref().map_or(0, |opened| opened.attempt);
        loop {
            let mut file = match opened.take() {
                Some(opened) => opened.file,
                None => open(fs, scope, target)?,
            };
            let meta = file.meta();
            if meta.size > scope.max_bytes {
                return Err(Refusal::new(
                    Code::TooLarge,
                    format!("{} bytes exceeds max_bytes {}", meta.size, scope.max_bytes),
                ));
            }
            if attempt == 0
                && !condition.is_absent()
                && let Some(sha256) = cache.and_then(|cache| cache.get(&meta))
            {
                let sha256 = crate::hex::encode(&sha256);
                if condition.matches(&sha256) {
                    return Ok(Step::Done(ReadAnswer::NotModified {
                        sha256,
                        mtime_ms: meta.mtime_ms,
                    }));
                }
            }
            // Inline, a read never takes the last attempt, which may read up to max_bytes: the
            // async worker would stall every connection it serves.
            if let ReadMode::Inline { limit: inline } = mode
                && (meta.size > inline || attempt == GROWTH_RETRIES)
            {
                return Ok(Step::Resume(Opened { file, attempt }));
            }
            let last = attempt == GROWTH_RETRIES;
            let (wanted, want) = wanted(meta.size, scope.max_bytes, attempt);
            let mut permit = match budget {
                Some(budget) => {
                    match borrow(budget, mode, want, attempt, &mut filling, &mut prepaid)? {
                        Some(permit) => Some(permit),
                        None => return Ok(Step::Resume(Opened { file, attempt })),
                    }
                }
                None => None,
            };
            // Room for what the descriptor said, not for `wanted`: on the last attempt that is
            // max_bytes + 1, which may be far more than memory (a configured `1000Gi`). The read
            // grows the buffer if the file really is larger, within the bytes borrowed above.
            let capacity = usize::try_from(
                meta.size
                    .saturating_add(1)
                    .min(wanted)
                    .saturating_add(page_aligned::SLACK as u64),
            )
            .unwrap_or(usize::MAX);
            let mut buffer = match &mut permit {
                Some(permit) => permit.buffer(capacity),
                None => Vec::new(),
            };
            let start =
                page_aligned::read_into_unless(&mut file, &mut buffer, meta.size, wanted, cancel)
                    .map_err(|e| Refusal::new(Code::IoError, format!("read failed: {e}")))?;
            let read = (buffer.len() - start) as u64;
            if read > scope.max_bytes {
                return Err(Refusal::new(
                    Code::TooLarge,
                    format!(
                        "the file grew past max_bytes {} during the read",
                        scope.max_bytes
                    ),
                ));
            }
            if read > meta.size && !last {
                // Grew after the fstat, still under max_bytes: start over, holding nothing.
                if let Some(permit) = permit {
                    permit.recycle(buffer);
                }
                attempt += 1;
                continue;
            }
            let digest = digest_unless(&buffer[start..], cancel)?;
            let sha256 = crate::hex::encode(&digest);
            drop(filling);
            return Ok(Step::Done(ReadAnswer::File {
                served: ServedFile {
                    bytes: budgeted(buffer, start, permit),
                    sha256,
                    mtime_ms: meta.mtime_ms,
                },
                cacheable: (read == meta.size).then_some((meta, digest)),
            }));
        }
    }
}

/// The sha256 of `bytes`, taken a [`page_aligned::READ_STEP`] at a time, stopping between steps
/// once `cancel` is raised.
///
/// # Errors
/// `io_error` when cancelled.
fn digest_unless(bytes: &[u8], cancel: &Cancel) -> Result<[u8; 32], Refusal> {
    let mut hasher = Sha256::new();
    for step in bytes.chunks(page_aligned::READ_STEP) {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        hasher.update(step);
    }
    Ok(hasher.finalize().into())
}

/// Lists every regular file under the scope (D-3): sorted byte-lexicographically, each entry
/// from one open with its hash streamed (memory stays bounded), symlinks decided by the class,
/// vanished, failing or growing entries omitted. A missing root, or one that is not a
/// directory, lists as empty. Hashes come from `cache` when D-3.6 allows; a cached file is
/// recognised from a stat relative to the walk's directory and not opened at all.
///
/// With a `budget` (D-4.6): the walk passes the budget's walk gate alone, then the listing
/// borrows the bytes its entries and its body's chunks will take, in one piece (capped at the
/// whole budget: a listing larger than the budget waits to run alone) before hashing, and the
/// [`Listing`] holds them until it is dropped. Files are hashed by the listing's own thread
/// and, once there are 64 of them, by as many more threads as the
/// budget's hashing slots have free (twice the cores in all, however many listings run).
///
/// `cancel` stops the work between files and between a file's chunks: the listing then ends
/// `io_error` within moments.
///
/// # Errors
/// `outside_root` when the root escapes the workdir, `io_error` when it cannot be read or the
/// listing was cancelled.
pub(crate) fn list_files(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    cache: &HashCache,
    now_ms: i64,
    budget: Option<&ByteBudget>,
    cancel: &Cancel,
) -> Result<Listing, Refusal> {
    let root = match fs.open_root(&scope.root, scope.containment) {
        Ok(root) => root,
        Err(e) if e.kind == crate::backends::fs::FsErrorKind::NotFound => {
            return Ok(Listing::default());
        }
        Err(e) => return Err(e.into()),
    };
    let root = root.as_ref();
    let hashed_at_ns = i128::from(now_ms) * 1_000_000;
    let view = cache.view();
    let gate = budget.map(ByteBudget::walk_gate);
    let mut listed = ListingBuilder::default();
    // Entries still to hash, by index: their paths are in `listed` already.
    let mut misses: Vec<Pending> = Vec::new();
    let with_meta = !cache.is_empty();
    root.walk_with_meta(with_meta, &mut |path, meta| {
        if let Some(meta) = meta
            && let Some(sha256) = view.get(&meta)
        {
            listed.push(path.as_str(), meta.size, meta.mtime_ms, sha256);
        } else if let Some(at) = listed.push_pending(path.as_str()) {
            misses.push(at);
        }
    })?;
    if cancel.is_cancelled() {
        return Err(cancelled());
    }
    let permit = budget.map(|budget| {
        // The entries with their paths, the index of each miss, and a body chunk in flight.
        let wanted = listed.len() as u64 * ENTRY_BYTES
            + listed.path_bytes()
            + (misses.len() * std::mem::size_of::<Pending>()) as u64
            + BODY_CHUNK_BYTES;
        // A small listing takes free bytes at once, as a small read does, so it never queues
        // behind large reads waiting for bytes that clients who stopped reading hold; a large
        // one waits its turn.
        let at_once = if wanted <= LISTING_AT_ONCE {
            budget.try_acquire(wanted)
        } else {
            budget.try_acquire_in_turn(wanted)
        };
        at_once.unwrap_or_else(|| budget.acquire_blocking(wanted))
    });
    drop(gate);
    if misses.len() >= CACHE_RESERVE_FROM {
        cache.reserve(misses.len());
    }
    let fresh = FreshHashes {
        cache,
        hashed_at_ns,
        listing: view.listing(),
    };
    let hashed = hash_misses(root, &misses, &view, &fresh, budget, cancel, &mut listed);
    if cancel.is_cancelled() {
        return Err(cancelled());
    }
    hashed?;
    // The fresh hashes are in; forget what this listing found gone or changed.
    cache.update([], hashed_at_ns, view.listing());
    Ok(listed.finish(permit))
}

/// Where a listing's workers put each hash that describes its file as its descriptor saw it:
/// straight into the cache, as seen by this listing, so the listing holds no list of them.
struct FreshHashes<'a> {
    cache: &'a HashCache,
    hashed_at_ns: i128,
    listing: u64,
}

/// The largest charge a listing takes from the budget's free bytes ahead of borrowers queued
/// for theirs: about 10,000 entries.
const LISTING_AT_ONCE: u64 = 1 << 20;

/// How many files a listing must have to hash before it sizes the cache for them at once
/// (see [`HashCache::reserve`]): below it, each shard's share is a few entries.
const CACHE_RESERVE_FROM: usize = 4096;

/// The refusal of a listing whose caller went away.
fn cancelled() -> Refusal {
    Refusal::new(Code::IoError, "cancelled: the client disconnected")
}

/// The bytes of a listing body chunk in flight (see [`Listing`]'s body).
const BODY_CHUNK_BYTES: u64 = 80 * 1024;

/// Hashes the pending entries `misses` of `listed` (see [`list_one`]), on this thread alone
/// for a few, with more threads from the budget's hashing slots for many, each fresh hash going
/// to `fresh` as it is taken.
///
/// # Errors
/// `io_error` when a hashing thread failed: no listing rather than a short one.
fn hash_misses(
    root: &dyn crate::backends::fs::RootDir,
    misses: &[Pending],
    cache: &CacheView<'_>,
    fresh: &FreshHashes<'_>,
    budget: Option<&ByteBudget>,
    cancel: &Cancel,
    listed: &mut ListingBuilder,
) -> Result<(), Refusal> {
    let local;
    let slots_from = match budget {
        Some(budget) => budget,
        None => {
            local = ByteBudget::new(1);
            &local
        }
    };
    // Threads that may join the listing's own thread: the budget's hashing slots (twice the
    // cores: hashing is CPU-bound when warm, and the extra threads keep the disk busy when
    // cold), less its own.
    let more = if misses.len() >= LISTING_PARALLEL_FROM {
        slots_from.hashing_capacity().saturating_sub(1).max(1)
    } else {
        0
    };
    let slots = slots_from.hashing_slots(more);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let filler = listed.filler();
    let work = || {
        let (mut storage, start) = page_aligned::zeroed(LISTING_CHUNK);
        let buffer = &mut storage[start..];
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&entry) = misses.get(at) else { break };
            if cancel.is_cancelled() {
                break;
            }
            let Ok(path) = RelPath::parse_canonical(filler.path(entry)) else {
                continue;
            };
            if let Some(hashed) = list_one(root, &path, cache, buffer, cancel) {
                if let Some(meta) = hashed.fresh {
                    fresh.cache.insert_seen(
                        &meta,
                        &hashed.sha256,
                        fresh.hashed_at_ns,
                        fresh.listing,
                    );
                }
                filler.fill(entry, hashed.size, hashed.mtime_ms, hashed.sha256);
            }
        }
    };
    let panicked = std::thread::scope(|threads| {
        // A thread the system will not start (a process limit) is work the others do.
        let helpers: Vec<_> = slots[1..]
            .iter()
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(threads, work).ok())
            .collect();
        work();
        helpers.into_iter().any(|helper| helper.join().is_err())
    });
    drop(slots);
    if panicked {
        return Err(Refusal::new(Code::IoError, "a listing worker failed"));
    }
    Ok(())
}

/// The bytes a listing worker reads and hashes at a time.
const LISTING_CHUNK: usize = 256 * 1024;

/// How many files to hash before a listing takes more threads: below it, threads would cost
/// more than they save.
const LISTING_PARALLEL_FROM: usize = 64;

/// One hashed file, and its descriptor's metadata when the hash describes the file as that
/// descriptor saw it (to cache).
struct Hashed {
    size: u64,
    mtime_ms: i64,
    sha256: [u8; 32],
    fresh: Option<FileMeta>,
}

/// One file: opened (D-2.6), then its cached hash if the descriptor's metadata finds one, else
/// hashed from its descriptor, reading at most one byte more than the size its `fstat` gave
/// (D-3.3): a file that grew past that size is being written and is omitted, whatever it grows
/// to; one that came back shorter was truncated while hashed and is omitted too (D-3.3.1: a
/// listing never reports a size no version of the file had). Nothing when the entry vanished,
/// is not a regular file under the class rules, failed mid-read, or `cancel` was raised.
fn list_one(
    root: &dyn crate::backends::fs::RootDir,
    path: &RelPath,
    cache: &CacheView<'_>,
    buffer: &mut [u8],
    cancel: &Cancel,
) -> Option<Hashed> {
    let mut file = root.open_file(path).ok()?;
    let meta = file.meta();
    // A symlinked entry, or a walk that could not stat: the descriptor's metadata may still
    // find the hash cached.
    if let Some(sha256) = cache.get(&meta) {
        return Some(Hashed {
            size: meta.size,
            mtime_ms: meta.mtime_ms,
            sha256,
            fresh: None,
        });
    }
    let limit = meta.size.saturating_add(1);
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    while size < limit {
        let want = usize::try_from(limit - size)
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        match file.read(&mut buffer[..want]) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                size += n as u64;
                // A short read that reaches the size the descriptor gave is a local file's
                // end: stop without the read(2) that would return 0 (one call in seven per
                // file). Any other short read (a network filesystem, a growing file) reads on.
                if n < want && size == meta.size {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        if cancel.is_cancelled() {
            return None;
        }
    }
    // Grown past its size (being written), or shorter than it (truncated while hashed): the
    // bytes hashed are no version of the file (D-3.3.1).
    if size != meta.size {
        return None;
    }
    Some(Hashed {
        size,
        mtime_ms: meta.mtime_ms,
        sha256: hasher.finalize().into(),
        fresh: Some(meta),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::fs::MemoryFilesystem;
    use crate::planes::ListingEntry;
    use crate::scope::{Containment, RootPath};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn scope(max_bytes: u64) -> ExportScope {
        ExportScope {
            root: RootPath::parse("out").expect("a valid root"),
            max_bytes,
            containment: Containment::Advisory,
        }
    }

    #[test]
    fn served_bytes_start_on_a_page_and_match_the_file() {
        let fs = MemoryFilesystem::new();
        let budget = ByteBudget::new(64 << 20);
        for size in [1usize, 4096, 70_000, 1 << 20] {
            let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            fs.add_file("out/f", content.clone(), 0);
            let target = RelPath::parse_canonical("f").expect("a valid path");
            for budget in [None, Some(&budget)] {
                let served = read_file(&fs, &scope(2 << 20), &target, budget, ReadMode::Blocking)
                    .expect("readable")
                    .answered();
                assert_eq!(served.bytes.as_ref(), content.as_slice(), "size {size}");
                assert_eq!(
                    served.sha256,
                    crate::hex::encode(&Sha256::digest(&content)),
                    "the etag describes the bytes served, not the padding"
                );
                assert_eq!(
                    served.bytes.as_ptr().addr() % page_aligned::PAGE,
                    0,
                    "size {size}: a misaligned buffer makes the kernel's copy ten times slower"
                );
            }
        }
        assert_eq!(budget.available(), 64 << 20, "every byte went back");
    }

    use crate::backends::fs::{FileMeta, FsError, RootDir};
    use std::sync::Arc;

    /// A filesystem whose files report the size they had before they grew (an `fstat` taken
    /// just before a writer appended) on their first `stale_opens` opens, and whose reads return
    /// at most `piece` bytes each (as a network or FUSE filesystem may).
    #[derive(Debug)]
    struct StaleSizes(MemoryFilesystem, u64, usize, Arc<AtomicUsize>);
    #[derive(Debug)]
    struct StaleRoot(Box<dyn RootDir>, u64, usize, Arc<AtomicUsize>);

    impl StaleSizes {
        /// Every open reports `size`.
        fn always(fs: MemoryFilesystem, size: u64, piece: usize) -> Self {
            StaleSizes(fs, size, piece, Arc::new(AtomicUsize::new(usize::MAX)))
        }

        /// The first `opens` opens report `size`; later ones the truth.
        fn first(fs: MemoryFilesystem, size: u64, opens: usize) -> Self {
            StaleSizes(fs, size, usize::MAX, Arc::new(AtomicUsize::new(opens)))
        }
    }
    #[derive(Debug)]
    struct StaleFile(Box<dyn OpenFile>, u64, usize);

    impl std::io::Read for StaleFile {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let piece = buf.len().min(self.2);
            self.0.read(&mut buf[..piece])
        }
    }
    impl OpenFile for StaleFile {
        fn meta(&self) -> FileMeta {
            FileMeta {
                size: self.1,
                ..self.0.meta()
            }
        }
    }
    impl RootDir for StaleRoot {
        fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
            let inner = self.0.open_file(target)?;
            let stale = self
                .3
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok();
            let size = if stale { self.1 } else { inner.meta().size };
            Ok(Box::new(StaleFile(inner, size, self.2)))
        }
        fn walk(&self) -> Result<Vec<RelPath>, FsError> {
            self.0.walk()
        }
    }
    impl Filesystem for StaleSizes {
        fn open_root(
            &self,
            root: &RootPath,
            class: Containment,
        ) -> Result<Box<dyn RootDir>, FsError> {
            Ok(Box::new(StaleRoot(
                self.0.open_root(root, class)?,
                self.1,
                self.2,
                self.3.clone(),
            )))
        }
        fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
            self.0.check_root(root)
        }
        fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
            self.0.land(dir, name, bytes)
        }
    }

    /// A filesystem whose reads wait like a cold disk's (each takes `DISK_WAIT`) and which
    /// counts the reads in progress at once, keeping the most it saw.
    #[derive(Debug, Default)]
    struct ColdDisk {
        files: MemoryFilesystem,
        reading: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }
    #[derive(Debug)]
    struct ColdRoot(Box<dyn RootDir>, Arc<AtomicUsize>, Arc<AtomicUsize>);
    #[derive(Debug)]
    struct ColdFile(Box<dyn OpenFile>, Arc<AtomicUsize>, Arc<AtomicUsize>);

    const DISK_WAIT: std::time::Duration = std::time::Duration::from_millis(3);

    impl std::io::Read for ColdFile {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let now = self.1.fetch_add(1, Ordering::SeqCst) + 1;
            self.2.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(DISK_WAIT);
            let read = self.0.read(buf);
            self.1.fetch_sub(1, Ordering::SeqCst);
            read
        }
    }
    impl OpenFile for ColdFile {
        fn meta(&self) -> FileMeta {
            self.0.meta()
        }
    }
    impl RootDir for ColdRoot {
        fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
            let inner = self.0.open_file(target)?;
            Ok(Box::new(ColdFile(inner, self.1.clone(), self.2.clone())))
        }
        fn walk(&self) -> Result<Vec<RelPath>, FsError> {
            self.0.walk()
        }
    }
    impl Filesystem for ColdDisk {
        fn open_root(
            &self,
            root: &RootPath,
            class: Containment,
        ) -> Result<Box<dyn RootDir>, FsError> {
            let inner = self.files.open_root(root, class)?;
            Ok(Box::new(ColdRoot(
                inner,
                self.reading.clone(),
                self.most.clone(),
            )))
        }
        fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
            self.files.check_root(root)
        }
        fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
            self.files.land(dir, name, bytes)
        }
    }

    /// A cold cache keeps more files in flight than there are cores: with reads
    /// that wait on the disk, the listing has more of them waiting at once than the machine
    /// has cores, and still lists every file, hashed whole.
    #[test]
    fn a_cold_listing_keeps_more_reads_in_flight_than_there_are_cores() {
        let cores = crate::budget::DEFAULT_CORES;
        // Enough files for every thread the listing may start, on any machine.
        let files = (LISTING_PARALLEL_FROM * 3).max(cores * 4);
        let disk = ColdDisk::default();
        for n in 0..files {
            disk.files
                .add_file(&format!("out/d{}/f{n}", n % 5), vec![n as u8; 100], 0);
        }
        let listed = list_files(
            &disk,
            &scope(1 << 20),
            &HashCache::new(),
            0,
            None,
            &Cancel::default(),
        )
        .expect("listable")
        .iter()
        .collect::<Vec<_>>();
        assert_eq!(listed.len(), files);
        let digest = crate::hex::encode(&Sha256::digest([7u8; 100]));
        let seven = listed.iter().find(|e| e.path == "d2/f7").expect("listed");
        assert_eq!(
            (seven.size_bytes, seven.sha256.as_str()),
            (100, digest.as_str())
        );
        let most = disk.most.load(Ordering::SeqCst);
        assert!(
            most > cores,
            "{most} reads in flight at most, on {cores} cores"
        );
        assert_eq!(disk.reading.load(Ordering::SeqCst), 0, "every read ended");
    }

    fn log_of(len: u32) -> (MemoryFilesystem, Vec<u8>) {
        let fs = MemoryFilesystem::new();
        let content: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        fs.add_file("out/log", content.clone(), 0);
        (fs, content)
    }

    fn read_log(
        fs: &StaleSizes,
        max_bytes: u64,
        budget: &ByteBudget,
    ) -> Result<ServedFile, Refusal> {
        let target = RelPath::parse_canonical("log").expect("a valid path");
        read_file(
            fs,
            &scope(max_bytes),
            &target,
            Some(budget),
            ReadMode::Blocking,
        )
        .map(Step::answered)
    }

    /// Compares bodies by length and hash: a failure prints two lines, not megabytes.
    fn digest(bytes: &[u8]) -> (usize, String) {
        (bytes.len(), crate::hex::encode(&Sha256::digest(bytes)))
    }

    #[test]
    fn a_file_that_grew_after_the_fstat_is_read_again_whole_with_every_byte_borrowed() {
        let (inner, content) = log_of(3 << 20);
        let fs = StaleSizes::first(inner, 100, 1);
        let capacity = 64 << 20;
        let budget = ByteBudget::new(capacity);
        let served = read_log(&fs, 10 << 20, &budget).expect("readable");
        assert_eq!(
            digest(&served.bytes),
            digest(&content),
            "the file as it is now"
        );
        assert_eq!(served.sha256, digest(&content).1);
        assert!(
            budget.available() <= capacity - content.len() as u64,
            "every byte held is borrowed: {} of {capacity} still free",
            budget.available()
        );
        drop(served);
        assert_eq!(budget.available(), capacity, "and all of them come back");

        // Grown past max_bytes: the fresh fstat says so; nothing stays borrowed.
        let fs = StaleSizes::first(log_of(3 << 20).0, 100, 1);
        let refused = read_log(&fs, 1 << 20, &budget).expect_err("too large");
        assert_eq!(refused.code, Code::TooLarge);
        assert_eq!(budget.available(), capacity);
    }

    #[test]
    fn a_file_that_keeps_growing_is_read_to_its_end_on_the_last_attempt() {
        let (inner, content) = log_of(3 << 20);
        let fs = StaleSizes::always(inner, 100, usize::MAX);
        let capacity = 64 << 20;
        let budget = ByteBudget::new(capacity);
        let served = read_log(&fs, 10 << 20, &budget).expect("readable");
        assert_eq!(digest(&served.bytes), digest(&content));
        assert_eq!(served.sha256, digest(&content).1);
        assert!(
            budget.available() <= capacity - (10 << 20),
            "the last attempt borrowed its whole limit: {} still free",
            budget.available()
        );
        drop(served);
        assert_eq!(budget.available(), capacity);
        // Past max_bytes by then: too_large, and nothing stays borrowed.
        let fs = StaleSizes::always(log_of(3 << 20).0, 100, usize::MAX);
        let refused = read_log(&fs, 1 << 20, &budget).expect_err("too large");
        assert_eq!(refused.code, Code::TooLarge);
        assert_eq!(budget.available(), capacity);
    }

    /// With `max_bytes` above the budget, a read that sees growth must not borrow "the rest, up
    /// to max_bytes" (capped at the whole budget) while still holding its first bytes: it would
    /// wait for ever, and every large read would queue behind it.
    #[test]
    fn growth_never_waits_for_bytes_while_holding_some() {
        let (inner, content) = log_of(300_000);
        let fs = Arc::new(StaleSizes::first(inner, 1_000, 1));
        let budget = Arc::new(ByteBudget::new(1 << 20));
        let (done, finished) = std::sync::mpsc::channel();
        {
            let (fs, budget) = (fs.clone(), budget.clone());
            std::thread::spawn(move || {
                let served = read_log(&fs, 1 << 30, &budget).map(|s| s.bytes.len());
                let _ = done.send(served);
            });
        }
        let served = finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the read finished instead of waiting for ever");
        assert_eq!(served.expect("readable"), content.len());
        assert_eq!(budget.available(), 1 << 20, "nothing stays borrowed");
    }

    /// Lists `content` as `out/f` through `StaleSizes(_, stale_size, piece)`.
    fn list_through(content: &[u8], stale_size: u64, piece: usize) -> Vec<ListingEntry> {
        let inner = MemoryFilesystem::new();
        inner.add_file("out/f", content.to_vec(), 0);
        let fs = StaleSizes::always(inner, stale_size, piece);
        list_files(
            &fs,
            &scope(1 << 30),
            &HashCache::new(),
            0,
            None,
            &Cancel::default(),
        )
        .expect("listable")
        .iter()
        .collect::<Vec<_>>()
    }

    #[test]
    fn a_listed_hash_covers_the_whole_file_however_its_reads_come_back() {
        let content: Vec<u8> = (0..(LISTING_CHUNK * 2 + 77) as u32)
            .map(|i| (i % 241) as u8)
            .collect();
        let whole = crate::hex::encode(&Sha256::digest(&content));
        let size = content.len() as u64;
        // (size the descriptor reports, most bytes one read returns)
        for (stale_size, piece) in [
            (size, usize::MAX), // the plain case
            (size, 1000),       // short reads long before the end must not end the hash
            (size, 4096),       // short reads of exactly a page
        ] {
            let listed = list_through(&content, stale_size, piece);
            assert_eq!(listed.len(), 1);
            assert_eq!(
                (listed[0].size_bytes, listed[0].sha256.as_str()),
                (size, whole.as_str()),
                "stale size {stale_size}, reads of at most {piece} bytes"
            );
        }
        // A file that grew past the size its descriptor gave is being written: omitted.
        for (stale_size, piece) in [(100, usize::MAX), (100, 1000), (size - 1, 65_536)] {
            assert!(
                list_through(&content, stale_size, piece).is_empty(),
                "stale size {stale_size}, reads of at most {piece} bytes"
            );
        }
        // The one case that stops early: a short read ending exactly at the size the
        // descriptor gave. The entry then describes those bytes, the file as its fstat saw it.
        let listed = list_through(&content, 131_072, 65_536);
        let prefix = crate::hex::encode(&Sha256::digest(&content[..131_072]));
        assert_eq!(
            (listed[0].size_bytes, listed[0].sha256.as_str()),
            (131_072, prefix.as_str())
        );
    }

    /// A file truncated while hashed ends before the size its descriptor gave: the bytes
    /// hashed are no version of it, and it is omitted (D-3.3.1), however its reads come back;
    /// the rest of the listing is unaffected.
    #[test]
    fn a_file_that_shrank_while_hashed_is_omitted() {
        let content: Vec<u8> = (0..(LISTING_CHUNK * 2 + 77) as u32)
            .map(|i| (i % 239) as u8)
            .collect();
        let size = content.len() as u64;
        for (stale_size, piece) in [
            (size + 1, usize::MAX),
            (size * 3, 1000),
            (size + 4096, 4096),
            (3 << 30, usize::MAX),
        ] {
            assert!(
                list_through(&content, stale_size, piece).is_empty(),
                "descriptor said {stale_size}, the file holds {size}, reads of at most {piece}"
            );
        }
    }

    /// A file whose every read returns more (a sparse file grown by `ftruncate` faster than it
    /// can be read): its descriptor said 1,000 bytes, so at most 1,001 are read, and it is
    /// omitted; the rest of the listing is unaffected.
    #[test]
    fn an_endlessly_growing_file_is_read_to_its_size_plus_one_and_omitted() {
        #[derive(Debug)]
        struct Endless(Arc<AtomicUsize>);
        impl std::io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.0.fetch_add(buf.len(), Ordering::SeqCst);
                buf.fill(7);
                Ok(buf.len())
            }
        }
        impl OpenFile for Endless {
            fn meta(&self) -> FileMeta {
                FileMeta {
                    size: 1_000,
                    mtime_ms: 0,
                    dev: 1,
                    ino: 99,
                    mtime_ns: 0,
                    ctime_ns: 0,
                }
            }
        }
        #[derive(Debug)]
        struct Root(Box<dyn RootDir>, Arc<AtomicUsize>);
        impl RootDir for Root {
            fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
                if target.as_str() == "growing" {
                    return Ok(Box::new(Endless(self.1.clone())));
                }
                self.0.open_file(target)
            }
            fn walk(&self) -> Result<Vec<RelPath>, FsError> {
                self.0.walk()
            }
        }
        #[derive(Debug)]
        struct Growing(MemoryFilesystem, Arc<AtomicUsize>);
        impl Filesystem for Growing {
            fn open_root(
                &self,
                root: &RootPath,
                class: Containment,
            ) -> Result<Box<dyn RootDir>, FsError> {
                Ok(Box::new(Root(
                    self.0.open_root(root, class)?,
                    self.1.clone(),
                )))
            }
            fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
                self.0.check_root(root)
            }
            fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
                self.0.land(dir, name, bytes)
            }
        }
        let fs = Growing(MemoryFilesystem::new(), Arc::new(AtomicUsize::new(0)));
        fs.0.add_file("out/growing", vec![0u8; 10], 0);
        fs.0.add_file("out/still", b"still".to_vec(), 0);
        let listed: Vec<ListingEntry> = list_files(
            &fs,
            &scope(1 << 40),
            &HashCache::new(),
            0,
            None,
            &Cancel::default(),
        )
        .expect("listable")
        .iter()
        .collect();
        assert_eq!(
            listed.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
            ["still"]
        );
        assert_eq!(
            fs.1.load(Ordering::SeqCst),
            1_001,
            "bytes asked of the growing file"
        );
    }

    /// A listing whose caller went away stops between files: raised mid-way through a slow
    /// tree, the listing ends `io_error` long before it could have read every file, and no
    /// read is left running.
    #[test]
    fn a_cancelled_listing_stops_soon() {
        let disk = ColdDisk::default();
        for n in 0..2_000 {
            disk.files.add_file(&format!("out/f{n}"), vec![1u8; 10], 0);
        }
        let cancel = Cancel::default();
        let started = std::time::Instant::now();
        let listing = std::thread::scope(|threads| {
            let listing = threads
                .spawn(|| list_files(&disk, &scope(1 << 20), &HashCache::new(), 0, None, &cancel));
            std::thread::sleep(std::time::Duration::from_millis(30));
            cancel.cancel();
            listing.join().expect("no panic")
        });
        // 2,000 reads of 3 ms on 2 x cores threads would take over a second on any machine
        // this runs on with fewer than 500 cores.
        let took = started.elapsed();
        assert_eq!(listing.expect_err("cancelled").code, Code::IoError);
        assert!(took < std::time::Duration::from_millis(500), "{took:?}");
        assert_eq!(
            disk.reading.load(Ordering::SeqCst),
            0,
            "no read left running"
        );
    }

    /// A listing's entries and body are charged to the in-flight budget until the listing is
    /// dropped (D-4.6); one larger than the whole budget waits until it can run alone, and is
    /// then served, not refused.
    #[test]
    fn a_listing_is_charged_to_the_budget_and_one_larger_than_it_waits_to_run_alone() {
        let fs = MemoryFilesystem::new();
        for n in 0..300 {
            fs.add_file(&format!("out/d{}/file-{n}", n % 3), vec![n as u8; 20], 0);
        }
        let cache = HashCache::new();
        let budget = ByteBudget::new(64 << 20);
        let listing = list_files(
            &fs,
            &scope(1 << 20),
            &cache,
            0,
            Some(&budget),
            &Cancel::default(),
        )
        .expect("listable");
        let charged = (64 << 20) - budget.available();
        assert!(
            charged >= 300 * super::ENTRY_BYTES,
            "{charged} bytes charged for 300 entries"
        );
        drop(listing);
        assert_eq!(budget.available(), 64 << 20, "all of it comes back");

        let small = ByteBudget::new(4096);
        let held = small.acquire_blocking(1);
        std::thread::scope(|threads| {
            let listing = threads.spawn(|| {
                list_files(
                    &fs,
                    &scope(1 << 20),
                    &cache,
                    0,
                    Some(&small),
                    &Cancel::default(),
                )
                .map(|listing| listing.len())
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(!listing.is_finished(), "waits for the whole budget");
            drop(held);
            assert_eq!(listing.join().expect("no panic").expect("listable"), 300);
        });
        assert_eq!(small.available(), 4096);
    }

    /// Listings share one cache: each holds one read of it while its workers run and writes
    /// its new hashes after. Concurrent listings neither deadlock nor disagree.
    #[test]
    fn concurrent_listings_share_the_cache_without_waiting_on_each_other() {
        let fs = MemoryFilesystem::new();
        for n in 0..200 {
            fs.add_file(&format!("out/d{}/f{n}", n % 7), vec![n as u8; 300], 0);
        }
        let cache = HashCache::new();
        let scope = scope(1 << 20);
        let first = list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default())
            .expect("listable")
            .iter()
            .collect::<Vec<_>>();
        assert_eq!(first.len(), 200);
        assert_eq!(
            cache.len(),
            200,
            "hashed long after the files changed: all cached"
        );
        std::thread::scope(|threads| {
            let listings: Vec<_> = (0..4)
                .map(|_| {
                    threads
                        .spawn(|| list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default()))
                })
                .collect();
            for listing in listings {
                assert_eq!(
                    listing
                        .join()
                        .expect("no panic")
                        .expect("listable")
                        .iter()
                        .collect::<Vec<_>>(),
                    first
                );
            }
        });
        assert_eq!(cache.len(), 200);
    }

    /// Pollers whose listings always overlap (another one is in progress whenever one ends,
    /// as with two pollers 250 ms apart over a slow tree) still fill the cache: each listing's
    /// update lands while the others run, and the next listing reads nothing.
    #[test]
    fn overlapping_listings_fill_the_cache() {
        let disk = ColdDisk::default();
        for n in 0..40 {
            disk.files
                .add_file(&format!("out/f{n}"), vec![n as u8; 64], 0);
        }
        let cache = HashCache::new();
        let scope = scope(1 << 20);
        // A listing in progress throughout: its view is open.
        let in_progress = cache.view();
        std::thread::scope(|threads| {
            let first = threads
                .spawn(|| list_files(&disk, &scope, &cache, 10_000, None, &Cancel::default()));
            std::thread::sleep(std::time::Duration::from_millis(5));
            let second = list_files(&disk, &scope, &cache, 10_000, None, &Cancel::default())
                .expect("listable")
                .iter()
                .collect::<Vec<_>>();
            assert_eq!(second.len(), 40);
            assert_eq!(
                first
                    .join()
                    .expect("no panic")
                    .expect("listable")
                    .iter()
                    .collect::<Vec<_>>(),
                second
            );
        });
        assert_eq!(cache.len(), 40, "every hash reached the cache");
        disk.most.store(0, Ordering::SeqCst);
        let third = list_files(&disk, &scope, &cache, 10_000, None, &Cancel::default())
            .expect("listable")
            .iter()
            .collect::<Vec<_>>();
        assert_eq!(third.len(), 40);
        assert_eq!(
            disk.most.load(Ordering::SeqCst),
            0,
            "all hits: nothing read"
        );
        assert!(in_progress.listing() < cache.view().listing());
    }

    /// After each listing the cache holds exactly the files it listed with a cacheable hash: a
    /// file gone is forgotten, and one rewritten inside the racy window is listed with its new
    /// hash but not cached (its old entry is forgotten too) until a listing out of the window.
    #[test]
    fn listing_prunes_gone_and_changed_files_and_keeps_listed_ones() {
        let fs = MemoryFilesystem::new();
        for name in ["keep", "gone", "racy"] {
            fs.add_file(&format!("out/{name}"), name.as_bytes().to_vec(), 0);
        }
        let cache = HashCache::new();
        let scope = scope(1 << 20);
        assert_eq!(
            list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default())
                .expect("listable")
                .iter()
                .collect::<Vec<_>>()
                .len(),
            3
        );
        assert_eq!(cache.len(), 3);
        fs.remove("out/gone");
        fs.write_in_place("out/racy", b"r2".to_vec(), 9_000); // within 2 s of the listing
        let listed = list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default())
            .expect("listable")
            .iter()
            .collect::<Vec<_>>();
        assert_eq!(listed.len(), 2);
        let racy = listed.iter().find(|e| e.path == "racy").expect("listed");
        assert_eq!(racy.sha256, crate::hex::encode(&Sha256::digest(b"r2")));
        assert_eq!(
            cache.len(),
            1,
            "gone vanished; racy changed and is not admitted"
        );
        list_files(&fs, &scope, &cache, 20_000, None, &Cancel::default()).expect("listable");
        assert_eq!(cache.len(), 2, "racy cached once out of the window");
    }

    /// The last attempt never allocates `max_bytes + 1` up front, which with a generous
    /// `max_bytes` (1 TiB here) would abort the process: the buffer starts at what the
    /// descriptor said and grows with the file.
    #[test]
    fn the_last_attempt_allocates_for_the_file_not_for_max_bytes() {
        let (inner, content) = log_of(300_000);
        let fs = StaleSizes::always(inner, 1_000, usize::MAX);
        let budget = ByteBudget::new(64 << 20);
        let served = read_log(&fs, 1 << 40, &budget).expect("readable");
        assert_eq!(digest(&served.bytes), digest(&content));
    }

    /// Inline (on an async worker), a file that keeps growing moves to the blocking path
    /// instead of being read to its end there.
    #[test]
    fn an_inline_read_of_a_growing_file_moves_to_the_blocking_path() {
        let (inner, _) = log_of(3 << 20);
        let fs = StaleSizes::always(inner, 100, usize::MAX);
        let budget = ByteBudget::new(64 << 20);
        let target = RelPath::parse_canonical("log").expect("a valid path");
        let inline = ReadMode::Inline { limit: 64 * 1024 };
        let answer =
            read_file(&fs, &scope(10 << 20), &target, Some(&budget), inline).expect("no refusal");
        assert!(
            matches!(answer, Step::Resume(_)),
            "handed to a blocking thread"
        );
        assert_eq!(budget.available(), 64 << 20, "nothing stays borrowed");
    }
}
