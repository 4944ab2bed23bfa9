//! The listing's hashing pool: the files a walk could not take from the hash cache are hashed
//! by the listing's own thread and, when there are many, by threads the budget's hashing slots
//! lend it (twice the cores in all, however many listings run). Each hash goes into the
//! listing's entry, and into the cache as it is taken.

use super::{ListingBuilder, Pending};
use crate::backends::fs::{FileMeta, RootDir};
use crate::budget::ByteBudget;
use crate::cancel::Cancel;
use crate::page_aligned;
use crate::path::RelPath;
use crate::planes::hash_cache::CacheView;
use crate::refusal::{Code, Refusal};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bytes a listing worker reads and hashes at a time.
pub(super) const LISTING_CHUNK: usize = 256 * 1024;

/// How many files to hash before a listing takes more threads: below it, threads would cost
/// more than they save.
pub(super) const LISTING_PARALLEL_FROM: usize = 64;

/// What one listing's hashing works with.
pub(super) struct Hashing<'a> {
    /// The root the files are opened beneath.
    pub(super) root: &'a dyn RootDir,
    /// The listing's view of the hash cache: the hashes a file's descriptor still finds, and
    /// where each fresh hash goes.
    pub(super) view: &'a CacheView<'a>,
    /// When the hashes are taken, for the cache's racy-git rule.
    pub(super) hashed_at_ns: i128,
    /// Whose hashing slots lend the threads; `None`: the listing's own thread alone.
    pub(super) budget: Option<&'a ByteBudget>,
    /// Raised when nobody waits for the listing any more: the workers stop between files and
    /// between a file's chunks.
    pub(super) cancel: &'a Cancel,
}

impl Hashing<'_> {
    /// Hashes the pending entries `misses` of `listed` (see [`hash_one`](Self::hash_one)), on
    /// this thread alone for a few, with more threads from the budget's hashing slots for many.
    ///
    /// # Errors
    /// `io_error` when a hashing thread failed: no listing rather than a short one.
    pub(super) fn hash(
        &self,
        misses: &[Pending],
        listed: &mut ListingBuilder,
    ) -> Result<(), Refusal> {
        let local;
        let slots_from = match self.budget {
            Some(budget) => budget,
            None => {
                local = ByteBudget::new(1);
                &local
            }
        };
        // Threads that may join the listing's own thread: the budget's hashing slots (twice
        // the cores: hashing is CPU-bound when warm, and the extra threads keep the disk busy
        // when cold), less its own.
        let more = if misses.len() >= LISTING_PARALLEL_FROM {
            slots_from.hashing_capacity().saturating_sub(1).max(1)
        } else {
            0
        };
        let slots = slots_from.hashing_slots(more);
        let next = AtomicUsize::new(0);
        let filler = listed.filler();
        let work = || {
            let (mut storage, start) = page_aligned::zeroed(LISTING_CHUNK);
            let buffer = &mut storage[start..];
            loop {
                let at = next.fetch_add(1, Ordering::Relaxed);
                let Some(&entry) = misses.get(at) else { break };
                if self.cancel.is_cancelled() {
                    break;
                }
                let Ok(path) = RelPath::parse_canonical(filler.path(entry)) else {
                    continue;
                };
                if let Some(hashed) = self.hash_one(&path, buffer) {
                    if let Some(meta) = hashed.fresh {
                        self.view.insert(&meta, &hashed.sha256, self.hashed_at_ns);
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

    /// One file: opened (D-2.6), then its cached hash if the descriptor's metadata finds one,
    /// else hashed from its descriptor, reading at most one byte more than the size its
    /// `fstat` gave (D-3.3): a file that grew past that size is being written and is omitted,
    /// whatever it grows to; one that came back shorter was truncated while hashed and is
    /// omitted too (D-3.3.1: a listing never reports a size no version of the file had).
    /// Nothing when the entry vanished, is not a regular file under the class rules, failed
    /// mid-read, or the listing was cancelled.
    fn hash_one(&self, path: &RelPath, buffer: &mut [u8]) -> Option<Hashed> {
        let mut file = self.root.open_file(path).ok()?;
        let meta = file.meta();
        // A symlinked entry, or a walk that could not stat: the descriptor's metadata may
        // still find the hash cached.
        if let Some(sha256) = self.view.get(&meta) {
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
                    // file). Any other short read (a network filesystem, a growing file) reads
                    // on.
                    if n < want && size == meta.size {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
            if self.cancel.is_cancelled() {
                return None;
            }
        }
        // Grown past its size (being written), or shorter than it (truncated while hashed):
        // the bytes hashed are no version of the file (D-3.3.1).
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
}

/// One hashed file, and its descriptor's metadata when the hash describes the file as that
/// descriptor saw it (to cache).
struct Hashed {
    size: u64,
    mtime_ms: i64,
    sha256: [u8; 32],
    fresh: Option<FileMeta>,
}
