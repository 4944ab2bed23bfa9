//! The listing's hash cache (D-3.6): a hash is reused only when the same descriptor reports the
//! same (device, inode, size, mtime ns, ctime ns) as when it was hashed, and never for a file
//! changed within 2 s of when it was hashed (the racy-git rule), so a listed hash always
//! describes the file's current bytes.
//!
//! The ctime in the key is what makes this safe against a same-size, same-mtime rewrite in
//! place: the kernel moves ctime on every write and no caller can set it back.
//!
//! A million-file tree puts a million entries here, held beside the listing that is being
//! sent, so an entry is kept small: 72 bytes and a 4-byte listing mark, held densely in one of
//! 64 [`shard`]s. A listing with many files to hash sizes the shards for them before it starts
//! ([`HashCache::reserve`]).

mod shard;

use crate::backends::fs::FileMeta;
use shard::{Key, Mark, Shard, Stored, identity_hash, mark_of, raise};
use std::fmt;
use std::hash::RandomState;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// How close to its last change a file may be hashed and still be cached, in nanoseconds.
const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// Whether a hash taken at `hashed_at_ns` of a file last changed as `meta` says may be reused:
/// not if the file changed within the racy window before the hash (it may change again within
/// the same timestamp granularity).
fn admits(meta: &FileMeta, hashed_at_ns: i128) -> bool {
    let in_range = |ns: i128| i64::try_from(ns).is_ok_and(|ns| ns != i64::MIN && ns != i64::MAX);
    in_range(meta.mtime_ns)
        && in_range(meta.ctime_ns)
        && hashed_at_ns - meta.mtime_ns.max(meta.ctime_ns) >= RACY_WINDOW_NS
}

/// Shards of the cache, each under its own lock: a lookup holds one shard's read lock for one
/// lookup, and an update one shard's write lock at a time, so no listing ever holds the cache
/// for its whole run, and every listing's hashes reach it whatever overlaps.
const SHARDS: usize = 64;

/// A listing's handle on the cache (see [`HashCache::view`]): its number, for marking hits and
/// the hashes it takes.
#[derive(Debug)]
pub(crate) struct CacheView<'a> {
    cache: &'a HashCache,
    listing: u64,
}

impl CacheView<'_> {
    /// The cached hash for a file whose descriptor reports `meta`, if still valid; a hit
    /// marks the entry as seen by this view's listing, so [`HashCache::update`] keeps it.
    pub(crate) fn get(&self, meta: &FileMeta) -> Option<[u8; 32]> {
        self.cache.lookup(meta, mark_of(self.listing))
    }

    /// Caches one hash this view's listing took at `hashed_at_ns`, as
    /// [`HashCache::insert_seen`] does: its [`update`](HashCache::update) keeps it.
    pub(crate) fn insert(&self, meta: &FileMeta, sha256: &[u8; 32], hashed_at_ns: i128) {
        self.cache
            .insert_seen(meta, sha256, hashed_at_ns, self.listing);
    }

    /// This view's listing number, for [`HashCache::update`] once the listing is done.
    pub(crate) fn listing(&self) -> u64 {
        self.listing
    }
}

/// Hashes of files by identity, for repeat listings.
pub(crate) struct HashCache {
    shards: Box<[RwLock<Shard>]>,
    /// How the shards' indexes hash (device, inode): keyed afresh for each cache, so no one
    /// can pick inode numbers that collide.
    hasher: RandomState,
    /// The last listing number handed out; numbers only grow.
    listings: AtomicU64,
}

impl fmt::Debug for HashCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashCache")
            .field("entries", &self.len())
            .field("listings", &self.listings.load(Ordering::Relaxed))
            .finish()
    }
}

impl Default for HashCache {
    fn default() -> Self {
        HashCache {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            hasher: RandomState::new(),
            listings: AtomicU64::new(0),
        }
    }
}

impl HashCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn shard(&self, meta: &FileMeta) -> &RwLock<Shard> {
        &self.shards[shard_of(meta)]
    }

    /// The cached hash for `meta`, if still valid, a hit raising the entry's mark to `mark`.
    /// The identity is hashed before the shard's read lock is taken.
    fn lookup(&self, meta: &FileMeta, mark: Mark) -> Option<[u8; 32]> {
        let hash = identity_hash(&self.hasher, meta.dev, meta.ino);
        let shard = self.shard(meta).read().unwrap_or_else(|e| e.into_inner());
        let at = shard.position(hash, meta.dev, meta.ino)?;
        let (held, held_mark) = shard.entry(at);
        if held.key != Key::of(meta) {
            return None;
        }
        raise(held_mark, mark);
        Some(held.sha256)
    }

    /// The cached hash for a file whose descriptor reports `meta`, if still valid. A lookup
    /// of its own: a hit counts as seen by the newest listing so far, so every listing in
    /// progress keeps the entry.
    pub(crate) fn get(&self, meta: &FileMeta) -> Option<[u8; 32]> {
        self.lookup(meta, mark_of(self.listings.load(Ordering::Relaxed)))
    }

    /// A handle for one listing, numbered after every earlier one. New hashes go in afterwards,
    /// all at once, with [`update`](Self::update).
    pub(crate) fn view(&self) -> CacheView<'_> {
        CacheView {
            cache: self,
            listing: self.listings.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// After listing number `listing`: caches each `(meta, sha256)` hashed at `hashed_at_ns`
    /// that the racy-git rule admits, and forgets every entry that neither this listing nor a
    /// later one found valid (a file gone, or changed since its hash was taken). One shard is
    /// locked at a time, briefly, so an update lands whatever other listings are doing. The
    /// marks [`CacheView::get`] leaves on hits make the pruning one pass, with no set of the
    /// identities listed to build and look up.
    pub(crate) fn update<'a>(
        &self,
        hashed: impl IntoIterator<Item = (&'a FileMeta, &'a [u8; 32])>,
        hashed_at_ns: i128,
        listing: u64,
    ) {
        let mut by_shard: Vec<Vec<(&FileMeta, &[u8; 32])>> = vec![Vec::new(); SHARDS];
        for (meta, sha256) in hashed {
            if admits(meta, hashed_at_ns) {
                by_shard[shard_of(meta)].push((meta, sha256));
            }
        }
        let mark = mark_of(listing);
        for (shard, fresh) in self.shards.iter().zip(by_shard) {
            let mut shard = shard.write().unwrap_or_else(|e| e.into_inner());
            for (meta, sha256) in fresh {
                let hash = identity_hash(&self.hasher, meta.dev, meta.ino);
                shard.put(hash, Stored::of(meta, sha256), mark, &self.hasher);
            }
            // Read under the write lock: every mark already left in this shard came from a
            // listing numbered no later than this.
            let newest = mark_of(self.listings.load(Ordering::Relaxed).max(listing));
            let span = newest.wrapping_sub(mark);
            shard.retain(&self.hasher, |held| held.wrapping_sub(mark) <= span);
        }
    }

    /// Makes room, before a listing hashes `files` files, for their entries: each shard takes
    /// its share (and an eighth more, for shards the inode numbers fill unevenly) at once,
    /// rather than growing step by step while the listing's workers insert, which would copy
    /// each shard's entries and rebuild its index a dozen times and leave the smaller copies
    /// behind in the allocator. Capacity no entry fills is never written, so it is never
    /// resident; only the index's control bytes (about one a file) are.
    pub(crate) fn reserve(&self, files: usize) {
        let share = files / SHARDS;
        let additional = share + share / 8 + 1;
        for shard in self.shards.iter() {
            let mut shard = shard.write().unwrap_or_else(|e| e.into_inner());
            shard.reserve(additional, &self.hasher);
        }
    }

    /// Caches one hash that a read took (D-13.3) of a file whose descriptor reported `meta`,
    /// under the listing's rules (the racy-git rule), without forgetting anything else. The
    /// entry counts as seen by the newest listing so far, so a listing in progress keeps it.
    /// A file already cached under the same key and hash (a file polled by reads) costs one
    /// read lock, not a write lock.
    pub(crate) fn insert(&self, meta: &FileMeta, sha256: &[u8; 32], hashed_at_ns: i128) {
        let hash = identity_hash(&self.hasher, meta.dev, meta.ino);
        let held = {
            let shard = self.shard(meta).read().unwrap_or_else(|e| e.into_inner());
            shard
                .position(hash, meta.dev, meta.ino)
                .is_some_and(|at| *shard.entry(at).0 == Stored::of(meta, sha256))
        };
        if !held {
            let newest = self.listings.load(Ordering::Relaxed);
            self.insert_seen(meta, sha256, hashed_at_ns, newest);
        }
    }

    /// Caches one hash that listing number `listing` took, as [`insert`](Self::insert) does, the
    /// entry counting as seen by that listing: its [`update`](Self::update) keeps it.
    pub(crate) fn insert_seen(
        &self,
        meta: &FileMeta,
        sha256: &[u8; 32],
        hashed_at_ns: i128,
        listing: u64,
    ) {
        if !admits(meta, hashed_at_ns) {
            return;
        }
        let hash = identity_hash(&self.hasher, meta.dev, meta.ino);
        let mut shard = self.shard(meta).write().unwrap_or_else(|e| e.into_inner());
        shard.put(
            hash,
            Stored::of(meta, sha256),
            mark_of(listing),
            &self.hasher,
        );
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.read().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// Whether the cache is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The shard a file's entry lives in. Inode numbers of one filesystem are dense: their low bits
/// spread well. (The index within a shard hashes the identity afresh, so the bits chosen here
/// do not thin its buckets.)
fn shard_of(meta: &FileMeta) -> usize {
    let mixed = meta.ino ^ meta.dev.rotate_left(17);
    (mixed % SHARDS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: [u8; 32] = [1; 32];
    const H_A: [u8; 32] = [2; 32];
    const H_B: [u8; 32] = [3; 32];

    fn meta(size: u64, mtime_ns: i128, ctime_ns: i128) -> FileMeta {
        FileMeta {
            size,
            mtime_ms: (mtime_ns / 1_000_000) as i64,
            dev: 1,
            ino: 7,
            mtime_ns,
            ctime_ns,
        }
    }

    /// One listing's worth: caches `sha256` for `meta` (if admitted) and forgets every other
    /// entry.
    fn put(cache: &HashCache, meta: &FileMeta, sha256: &[u8; 32], hashed_at_ns: i128) {
        let listing = cache.view().listing();
        cache.update([(meta, sha256)], hashed_at_ns, listing);
    }

    #[test]
    fn reuses_only_the_same_identity_and_times() {
        let cache = HashCache::new();
        let m = meta(10, 1_000, 1_000);
        put(&cache, &m, &H, 10_000_000_000);
        assert_eq!(cache.get(&m), Some(H));
        assert_eq!(cache.get(&meta(11, 1_000, 1_000)), None, "size changed");
        assert_eq!(cache.get(&meta(10, 1_001, 1_000)), None, "mtime changed");
        assert_eq!(
            cache.get(&meta(10, 1_000, 1_001)),
            None,
            "ctime changed: a same-size rewrite"
        );
    }

    #[test]
    fn racy_files_are_never_cached() {
        let cache = HashCache::new();
        let now = 100_000_000_000i128;
        put(
            &cache,
            &meta(1, now - 1_999_999_999, now - 5_000_000_000),
            &H,
            now,
        );
        assert!(cache.is_empty(), "mtime within 2 s");
        put(&cache, &meta(1, now - 5_000_000_000, now - 10), &H, now);
        assert!(cache.is_empty(), "ctime within 2 s");
        put(
            &cache,
            &meta(1, now + 5_000_000_000, now + 5_000_000_000),
            &H,
            now,
        );
        assert!(cache.is_empty(), "a change time in the future");
        put(
            &cache,
            &meta(1, now - 2_000_000_000, now - 2_000_000_000),
            &H,
            now,
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn retain_prunes() {
        let cache = HashCache::new();
        put(&cache, &meta(1, 0, 0), &H, 10_000_000_000);
        assert_eq!(cache.len(), 1);
        let listing = cache.view().listing();
        cache.update([], 20_000_000_000, listing);
        assert!(cache.is_empty(), "a file no listing saw is forgotten");
    }

    /// An entry stays while listings find it valid; one a listing found changed (a new ctime
    /// that is not yet cacheable) is forgotten, not kept under its stale key; and one that
    /// only a later listing still in progress found is kept for that listing.
    #[test]
    fn only_entries_a_listing_found_valid_survive_its_update() {
        let cache = HashCache::new();
        let (a, b) = (
            meta(1, 0, 0),
            FileMeta {
                ino: 8,
                ..meta(2, 0, 0)
            },
        );
        let first = cache.view().listing();
        cache.update([(&a, &H_A), (&b, &H_B)], 10_000_000_000, first);
        assert_eq!(cache.len(), 2);

        let view = cache.view();
        assert_eq!(view.get(&a), Some(H_A));
        let b_rewritten = FileMeta {
            ctime_ns: 9_999_999_999,
            ..b
        };
        assert_eq!(view.get(&b_rewritten), None, "b changed since its hash");
        let listing = view.listing();
        cache.update([], 10_000_000_000, listing);
        assert_eq!(cache.get(&a), Some(H_A), "found valid: kept");
        assert_eq!(cache.len(), 1, "b, not found valid, is forgotten");

        let earlier = cache.view().listing();
        let later = cache.view();
        assert_eq!(later.get(&a), Some(H_A));
        cache.update([], 10_000_000_000, earlier);
        assert_eq!(cache.len(), 1, "seen by a later listing: kept");
    }

    /// Listings overlap: one that started earlier and hits an entry after a later one did must
    /// not lower the later one's mark, or the later one's update would forget a file it found
    /// valid.
    #[test]
    fn an_earlier_listings_hit_never_lowers_a_later_ones_mark() {
        let cache = HashCache::new();
        let a = meta(1, 0, 0);
        put(&cache, &a, &H, 10_000_000_000);
        let earlier = cache.view();
        let later = cache.view();
        assert!(later.get(&a).is_some());
        assert!(earlier.get(&a).is_some(), "after the later hit");
        let listing = later.listing();
        cache.update([], 10_000_000_000, listing);
        assert_eq!(cache.len(), 1, "the later listing found it valid");
    }

    /// Listings that overlap each leave their hashes: an update lands while another listing
    /// is in progress, and both listings hit afterwards (two pollers never starve the cache).
    #[test]
    fn an_update_lands_while_another_listing_is_in_progress() {
        let cache = HashCache::new();
        let m = meta(10, 1_000, 1_000);
        let reading = cache.view();
        assert_eq!(reading.get(&m), None);
        let another = cache.view();
        cache.update([(&m, &H)], 10_000_000_000, another.listing());
        assert_eq!(
            reading.get(&m),
            Some(H),
            "applied while the other listing still runs"
        );
        let listing = reading.listing();
        cache.update([], 10_000_000_000, listing);
        assert_eq!(cache.get(&m), Some(H), "and kept by its update");
    }

    /// Many files in one shard: lookups through the cache hit each, miss on each key field, and
    /// an update that found only some keeps exactly those.
    #[test]
    fn a_crowded_shard_keeps_exactly_what_a_listing_found() {
        let cache = HashCache::new();
        let file = |ino: u64| FileMeta {
            ino: ino * SHARDS as u64,
            ..meta(ino, 1_000, 1_000)
        };
        let files: Vec<FileMeta> = (0..500).map(file).collect();
        let hashes: Vec<[u8; 32]> = (0..500u32).map(|n| [(n % 251) as u8; 32]).collect();
        let first = cache.view().listing();
        cache.update(files.iter().zip(&hashes), 10_000_000_000, first);
        assert_eq!(cache.len(), 500);
        assert_eq!(
            cache
                .shards
                .iter()
                .filter(|s| s.read().unwrap().len() > 0)
                .count(),
            1,
            "all in one shard"
        );
        let view = cache.view();
        for (n, f) in files.iter().enumerate() {
            assert_eq!(cache.get(&FileMeta { dev: 2, ..*f }), None, "device");
            assert_eq!(
                cache.get(&FileMeta {
                    ino: f.ino + 1,
                    ..*f
                }),
                None,
                "inode"
            );
            assert_eq!(
                cache.get(&FileMeta {
                    size: f.size + 1,
                    ..*f
                }),
                None,
                "size"
            );
            let mtime_ns = f.mtime_ns + 1;
            assert_eq!(cache.get(&FileMeta { mtime_ns, ..*f }), None, "mtime");
            let ctime_ns = f.ctime_ns + 1;
            assert_eq!(cache.get(&FileMeta { ctime_ns, ..*f }), None, "ctime");
            if n % 3 == 0 {
                assert_eq!(view.get(f), Some(hashes[n]));
            }
        }
        cache.update([], 10_000_000_000, view.listing());
        assert_eq!(cache.len(), 167);
        for (n, f) in files.iter().enumerate() {
            let expected = (n % 3 == 0).then_some(hashes[n]);
            assert_eq!(cache.get(f), expected, "file {n}");
        }
        cache.shards[0]
            .read()
            .unwrap()
            .assert_consistent(&cache.hasher);
    }

    /// Across the wrap of listing numbers past 32 bits (see [`Mark`]), an update keeps what it
    /// or a later listing found and drops the rest.
    #[test]
    fn listing_numbers_wrap_past_32_bits() {
        let cache = HashCache::new();
        cache
            .listings
            .store(u64::from(u32::MAX) - 1, Ordering::Relaxed);
        let (a, b) = (
            meta(1, 0, 0),
            FileMeta {
                ino: 8,
                ..meta(2, 0, 0)
            },
        );
        let first = cache.view(); // 2^32 - 1
        cache.update([(&a, &H_A), (&b, &H_B)], 10_000_000_000, first.listing());
        let earlier = cache.view(); // 2^32: mark 0
        let later_view = cache.view(); // 2^32 + 1: mark 1
        assert_eq!(later_view.get(&a), Some(H_A));
        assert_eq!(earlier.get(&a), Some(H_A), "does not lower the mark");
        cache.update([], 10_000_000_000, later_view.listing());
        assert_eq!(cache.len(), 1, "b, seen by no listing since, is gone");
        cache.update([], 10_000_000_000, earlier.listing());
        assert_eq!(cache.get(&a), Some(H_A), "a was seen by a later listing");
    }

    /// Sized for a listing's files at once, the shards take them without growing (no copy of
    /// their entries, no rebuilt index), and find each afterwards.
    #[test]
    fn a_cache_sized_for_a_listing_takes_its_files_without_growing() {
        let cache = HashCache::new();
        let files: Vec<FileMeta> = (0..6_400)
            .map(|ino| FileMeta {
                ino,
                ..meta(1, 0, 0)
            })
            .collect();
        cache.reserve(files.len());
        let room = |cache: &HashCache| -> Vec<(usize, usize, usize)> {
            cache
                .shards
                .iter()
                .map(|shard| shard.read().unwrap().room())
                .collect()
        };
        let reserved = room(&cache);
        assert!(
            reserved
                .iter()
                .all(|&(stored, marks, index)| stored >= 100 && marks >= 100 && index >= 100)
        );
        let listing = cache.view().listing();
        for file in &files {
            cache.insert_seen(file, &H, 10_000_000_000, listing);
        }
        assert_eq!(room(&cache), reserved);
        cache.update([], 10_000_000_000, listing);
        assert_eq!(cache.len(), 6_400);
        assert!(files.iter().all(|file| cache.get(file) == Some(H)));
    }
}
