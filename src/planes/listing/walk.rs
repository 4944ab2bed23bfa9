//! Listing an export root (D-3): walk it, take each hash the cache still vouches for (D-3.6),
//! charge the listing to the in-flight budget (D-4.6), and hand the files left to hash to the
//! listing's [`pool`](super::pool).

use super::pool::Hashing;
use super::{ENTRY_BYTES, Listing, ListingBuilder, Pending};
use crate::backends::fs::{Filesystem, FsErrorKind};
use crate::budget::{BudgetPermit, ByteBudget};
use crate::cancel::Cancel;
use crate::planes::hash_cache::HashCache;
use crate::refusal::Refusal;
use crate::scope::ExportScope;

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
        Err(e) if e.kind == FsErrorKind::NotFound => return Ok(Listing::default()),
        Err(e) => return Err(e.into()),
    };
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
    cancel.check()?;
    let permit = budget.map(|budget| charge(budget, &listed, misses.len()));
    drop(gate);
    if misses.len() >= CACHE_RESERVE_FROM {
        cache.reserve(misses.len());
    }
    let hashing = Hashing {
        root: root.as_ref(),
        view: &view,
        hashed_at_ns: i128::from(now_ms) * 1_000_000,
        budget,
        cancel,
    };
    let hashed = hashing.hash(&misses, &mut listed);
    cancel.check()?;
    hashed?;
    // The fresh hashes are in; forget what this listing found gone or changed.
    cache.update([], hashing.hashed_at_ns, view.listing());
    Ok(listed.finish(permit))
}

/// Borrows from `budget` what a listing of the entries walked into `listed`, `misses` of them
/// still to hash, takes until it is dropped (D-4.6): the entries with their paths, the index
/// of each miss, and a body chunk in flight. A small listing takes free bytes at once, as a
/// small read does, so it never queues behind large reads waiting for bytes that clients who
/// stopped reading hold; a large one waits its turn.
fn charge(budget: &ByteBudget, listed: &ListingBuilder, misses: usize) -> BudgetPermit {
    let wanted = listed.len() as u64 * ENTRY_BYTES
        + listed.path_bytes()
        + (misses * std::mem::size_of::<Pending>()) as u64
        + BODY_CHUNK_BYTES;
    let at_once = if wanted <= LISTING_AT_ONCE {
        budget.try_acquire(wanted)
    } else {
        budget.try_acquire_in_turn(wanted)
    };
    at_once.unwrap_or_else(|| budget.acquire_blocking(wanted))
}

/// The largest charge a listing takes from the budget's free bytes ahead of borrowers queued
/// for theirs: about 10,000 entries.
const LISTING_AT_ONCE: u64 = 1 << 20;

/// How many files a listing must have to hash before it sizes the cache for them at once
/// (see [`HashCache::reserve`]): below it, each shard's share is a few entries.
const CACHE_RESERVE_FROM: usize = 4096;

/// The bytes of a listing body chunk in flight (see [`ListingBody`](super::ListingBody)).
const BODY_CHUNK_BYTES: u64 = 80 * 1024;

#[cfg(test)]
mod tests;
