//! The one reader both planes call (spec: "a peer redeem calls the same reader"): resolve,
//! type-check, size-check and read one file from one descriptor ([`OneRead::run`]), its bytes
//! held against the in-flight budget until the last clone of them is dropped.

use super::condition::IfNoneMatch;
use super::hash_cache::HashCache;
use crate::backends::fs::{FileMeta, Filesystem, OpenFile};
use crate::budget::{BudgetPermit, ByteBudget, FillSlot};
use crate::cancel::Cancel;
use crate::page_aligned;
use crate::path::RelPath;
use crate::refusal::{Code, Refusal};
use crate::scope::ExportScope;
use bytes::Bytes;
use sha2::{Digest, Sha256};

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

/// One read: what it reads, the budget its bytes are held against, and what may end it early.
/// [`new`](Self::new) makes a read without a condition that nobody cancels; the other methods
/// add those; [`run`](Self::run) reads.
#[derive(Clone, Copy)]
pub(crate) struct OneRead<'a> {
    fs: &'a dyn Filesystem,
    scope: &'a ExportScope,
    target: &'a RelPath,
    /// `None` holds the bytes against nothing.
    budget: Option<&'a ByteBudget>,
    /// The `If-None-Match` condition and the cache that may answer it without a read.
    condition: Option<(&'a IfNoneMatch, &'a HashCache)>,
    /// Raised when nobody waits for the answer any more.
    cancel: &'a Cancel,
}

/// The flag of reads whose caller always waits.
static NEVER: Cancel = Cancel::never();

/// Where a read starts and runs, as the router decided: the crate's planes pass it down to
/// here, the one place it changes what a read does.
#[derive(Debug)]
pub(crate) enum Start {
    /// On a blocking thread, from a fresh open: any size; waits for the in-flight budget.
    Blocking,
    /// On an async worker, from a fresh open: stops before reading a byte when the file is
    /// larger than `limit` or its bytes are not free in the budget right now, handing the file
    /// as opened to the blocking pool ([`Step::Resume`]), so the worker never stalls.
    Inline {
        /// The largest file read inline.
        limit: u64,
    },
    /// On a blocking thread, from the file an inline read of the same target opened: read
    /// from that descriptor, without resolving it again unless the file grew and the read
    /// starts over. With `prepaid` (bytes borrowed for it beforehand,
    /// [`Opened::first_borrow`]) it borrows nothing more unless the file grew.
    Resumed {
        opened: Opened,
        prepaid: Option<BudgetPermit>,
    },
}

/// Where a read runs: what [`Start`] says once the file is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Blocking,
    Inline { limit: u64 },
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
    /// Only from [`Start::Inline`]: the read would wait, and is to go on on the blocking pool
    /// from the file as opened ([`Start::Resumed`]). Nothing was read, and nothing stays
    /// borrowed from the budget.
    Resume(Opened),
}

impl<T> Step<T> {
    /// The answer of a read that ran on a blocking thread, which never stops to resume.
    pub(crate) fn answered(self) -> T {
        match self {
            Step::Done(answer) => answer,
            Step::Resume(_) => unreachable!("only an inline read stops to resume"),
        }
    }

    /// The same step with its answer mapped by `f`.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U> {
        match self {
            Step::Done(answer) => Step::Done(f(answer)),
            Step::Resume(opened) => Step::Resume(opened),
        }
    }
}

/// What a read found.
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
    pub(crate) fn served(self) -> ServedFile {
        match self {
            ReadAnswer::File { served, .. } => served,
            ReadAnswer::NotModified { .. } => unreachable!("no condition, so no 304"),
        }
    }
}

impl<'a> OneRead<'a> {
    /// A read of `target` under `scope` from `fs`, its bytes borrowed from `budget` (`None`:
    /// from nothing), without a condition, never cancelled.
    pub(crate) fn new(
        fs: &'a dyn Filesystem,
        scope: &'a ExportScope,
        target: &'a RelPath,
        budget: Option<&'a ByteBudget>,
    ) -> Self {
        OneRead {
            fs,
            scope,
            target,
            budget,
            condition: None,
            cancel: &NEVER,
        }
    }

    /// The same read under an `If-None-Match` `condition` (D-13): when `cache` holds the hash
    /// for the descriptor's metadata and the condition matches it, [`ReadAnswer::NotModified`]
    /// without reading a byte; else the file is read and hashed as for a 200, and the caller
    /// compares.
    pub(crate) fn under(self, condition: &'a IfNoneMatch, cache: &'a HashCache) -> Self {
        OneRead {
            condition: Some((condition, cache)),
            ..self
        }
    }

    /// The same read stopping between steps of at most 64 MiB, and its hash between steps
    /// too, once `cancel` is raised (`io_error`).
    pub(crate) fn cancelled_by(self, cancel: &'a Cancel) -> Self {
        OneRead { cancel, ..self }
    }

    /// Reads the target (D-2.4 to D-2.7): every refusal first; then, under a condition the
    /// cache answers, the `304` without reading; else size from the descriptor first
    /// (`too_large` before any byte is read), then one byte more than that size, so a file
    /// that grew past `max_bytes` during the read is `too_large` too. The size is borrowed from
    /// the budget, in one piece, before reading. A file that grew (under `max_bytes`) after its
    /// `fstat` is read again from a fresh open and `fstat` with one borrow for its new size,
    /// never by borrowing more while holding bytes: waiting for more while holding some can
    /// wait for ever, and everyone queued behind waits too. After two such restarts the read
    /// borrows its limit and reads to the end. [`Step::Resume`] only from [`Start::Inline`],
    /// when the read should go on on a blocking thread.
    ///
    /// # Errors
    /// `not_found`, `outside_root`, `symlink_refused`, `not_a_regular_file`, `too_large`,
    /// `io_error` (a failed read, a grown file's bytes that did not come in time, a cancelled
    /// read).
    pub(crate) fn run(&self, start: Start) -> Result<Step<ReadAnswer>, Refusal> {
        let (mode, mut opened, mut prepaid) = match start {
            Start::Blocking => (Mode::Blocking, None, None),
            Start::Inline { limit } => (Mode::Inline { limit }, None, None),
            Start::Resumed { opened, prepaid } => (Mode::Blocking, Some(opened), prepaid),
        };
        // Blocking reads open, fill and hash at most one per core at a time (see `FillSlots`).
        let mut filling = match (mode, self.budget) {
            (Mode::Blocking, Some(budget)) => Some(budget.fill_slot()),
            _ => None,
        };
        let mut attempt = opened.as_ref().map_or(0, |opened| opened.attempt);
        loop {
            let file = match opened.take() {
                Some(opened) => opened.file,
                None => self.open()?,
            };
            let meta = file.meta();
            if meta.size > self.scope.max_bytes {
                return Err(Refusal::new(
                    Code::TooLarge,
                    format!(
                        "{} bytes exceeds max_bytes {}",
                        meta.size, self.scope.max_bytes
                    ),
                ));
            }
            if attempt == 0
                && let Some(answer) = self.not_modified(&meta)
            {
                return Ok(Step::Done(answer));
            }
            // Inline, a read never takes the last attempt, which may read up to max_bytes: the
            // async worker would stall every connection it serves.
            if let Mode::Inline { limit } = mode
                && (meta.size > limit || attempt == GROWTH_RETRIES)
            {
                return Ok(Step::Resume(Opened { file, attempt }));
            }
            let (wanted, want) = wanted(meta.size, self.scope.max_bytes, attempt);
            let permit = match self.budget {
                Some(budget) => {
                    match borrow(budget, mode, want, attempt, &mut filling, &mut prepaid)? {
                        Some(permit) => Some(permit),
                        None => return Ok(Step::Resume(Opened { file, attempt })),
                    }
                }
                None => None,
            };
            let last = attempt == GROWTH_RETRIES;
            // Grew after the fstat, still under max_bytes: start over, holding nothing.
            let Some(filled) = self.fill(file, &meta, wanted, permit, last)? else {
                attempt += 1;
                continue;
            };
            let answer = self.answer(meta, filled)?;
            drop(filling);
            return Ok(Step::Done(answer));
        }
    }

    fn open(&self) -> Result<Box<dyn OpenFile>, Refusal> {
        let root = self
            .fs
            .open_root(&self.scope.root, self.scope.containment)?;
        Ok(root.open_file(self.target)?)
    }

    /// The `304` the cache answers for a file whose descriptor reports `meta`, without a read:
    /// when the read has a condition, the cache holds the file's hash, and the condition
    /// matches it.
    fn not_modified(&self, meta: &FileMeta) -> Option<ReadAnswer> {
        let (condition, cache) = self.condition?;
        if condition.is_absent() {
            return None;
        }
        let sha256 = crate::hex::encode(&cache.get(meta)?);
        condition.matches(&sha256).then(|| ReadAnswer::NotModified {
            sha256,
            mtime_ms: meta.mtime_ms,
        })
    }

    /// Reads `file`, whose descriptor reported `meta`, into a buffer from `permit`: at most
    /// `wanted` bytes, up to the end of the file on the `last` attempt. `None` when the file
    /// grew after its `fstat` (the buffer and its bytes then go back to the budget).
    ///
    /// # Errors
    /// `io_error` (a failed or cancelled read), `too_large` (the file grew past `max_bytes`).
    fn fill(
        &self,
        mut file: Box<dyn OpenFile>,
        meta: &FileMeta,
        wanted: u64,
        mut permit: Option<BudgetPermit>,
        last: bool,
    ) -> Result<Option<Filled>, Refusal> {
        // Room for what the descriptor said, not for `wanted`: on the last attempt that is
        // max_bytes + 1, which may be far more than memory (a configured `1000Gi`). The read
        // grows the buffer if the file really is larger, within the bytes borrowed.
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
            page_aligned::read_into_unless(&mut file, &mut buffer, meta.size, wanted, self.cancel)
                .map_err(|e| Refusal::new(Code::IoError, format!("read failed: {e}")))?;
        let read = (buffer.len() - start) as u64;
        if read > self.scope.max_bytes {
            return Err(Refusal::new(
                Code::TooLarge,
                format!(
                    "the file grew past max_bytes {} during the read",
                    self.scope.max_bytes
                ),
            ));
        }
        if read > meta.size && !last {
            if let Some(permit) = permit {
                permit.recycle(buffer);
            }
            return Ok(None);
        }
        Ok(Some(Filled {
            buffer,
            start,
            permit,
        }))
    }

    /// The answer serving the file `filled` holds, whose descriptor reported `meta`, hashed.
    ///
    /// # Errors
    /// `io_error` when the read was cancelled while hashing.
    fn answer(&self, meta: FileMeta, filled: Filled) -> Result<ReadAnswer, Refusal> {
        let Filled {
            buffer,
            start,
            permit,
        } = filled;
        let digest = digest_unless(&buffer[start..], self.cancel)?;
        let read = (buffer.len() - start) as u64;
        Ok(ReadAnswer::File {
            served: ServedFile {
                bytes: budgeted(buffer, start, permit),
                sha256: crate::hex::encode(&digest),
                mtime_ms: meta.mtime_ms,
            },
            cacheable: (read == meta.size).then_some((meta, digest)),
        })
    }
}

/// A file's bytes as read into `buffer[start..]` (the bytes before are page-alignment
/// padding), and the permit that paid for the buffer.
struct Filled {
    buffer: Vec<u8>,
    start: usize,
    permit: Option<BudgetPermit>,
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

/// How many times a read starts over because its file grew after the `fstat`. The last
/// attempt borrows for the most it may read (`max_bytes + 1`, capped at the whole budget) in
/// one piece and reads to the end of the file: a file appended to faster than it can be read is
/// served as it is then, or refused `too_large` once it has grown past `max_bytes`.
const GROWTH_RETRIES: usize = 2;

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
    mode: Mode,
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
        Mode::Inline { .. } => Ok(budget.try_acquire(bytes)),
        Mode::Blocking => {
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

/// A body buffer that holds its share of the in-flight budget for as long as any clone of it
/// lives, including in the HTTP layer's write queue after the response body is handed over.
/// On drop, the buffer goes back to the budget's pool and the bytes to the budget.
struct Budgeted {
    buffer: Vec<u8>,
    /// Where the file's bytes start: the bytes before are page-alignment padding.
    start: usize,
    permit: Option<BudgetPermit>,
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

/// The sha256 of `bytes`, taken a [`page_aligned::READ_STEP`] at a time, stopping between steps
/// once `cancel` is raised.
///
/// # Errors
/// `io_error` when cancelled.
fn digest_unless(bytes: &[u8], cancel: &Cancel) -> Result<[u8; 32], Refusal> {
    let mut hasher = Sha256::new();
    for step in bytes.chunks(page_aligned::READ_STEP) {
        cancel.check()?;
        hasher.update(step);
    }
    Ok(hasher.finalize().into())
}

#[cfg(test)]
mod tests;
