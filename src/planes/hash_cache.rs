//! The listing's hash cache (D-3.6): a hash is reused only when the same descriptor reports the
//! same (device, inode, size, mtime ns, ctime ns) as when it was hashed, and never for a file
//! changed within 2 s of when it was hashed (the racy-git rule), so a listed hash always
//! describes the file's current bytes.
//!
//! The ctime in the key is what makes this safe against a same-size, same-mtime rewrite in
//! place: the kernel moves ctime on every write and no caller can set it back.

use crate::backends::fs::FileMeta;
use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// How close to its last change a file may be hashed and still be cached, in nanoseconds.
const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// The part of a file's identity the cache compares beside (device, inode). Times are held
/// in 64 bits (nanoseconds from 1678 to 2262; a time outside is pinned to the end of the range,
/// which can only make two different times look alike if both lie outside it, and such a file
/// is never cached: see [`admits`]), so that an entry of a million-file cache stays small.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

/// Nanoseconds in 64 bits, pinned to the range.
fn ns64(ns: i128) -> i64 {
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

impl Key {
    fn of(meta: &FileMeta) -> Self {
        Key {
            size: meta.size,
            mtime_ns: ns64(meta.mtime_ns),
            ctime_ns: ns64(meta.ctime_ns),
        }
    }
}

/// Whether a hash taken at `hashed_at_ns` of a file last changed as `meta` says may be reused:
/// not if the file changed within the racy window before the hash (it may change again within
/// the same timestamp granularity).
fn admits(meta: &FileMeta, hashed_at_ns: i128) -> bool {
    let in_range = |ns: i128| i64::try_from(ns).is_ok_and(|ns| ns != i64::MIN && ns != i64::MAX);
    in_range(meta.mtime_ns)
        && in_range(meta.ctime_ns)
        && hashed_at_ns - meta.mtime_ns.max(meta.ctime_ns) >= RACY_WINDOW_NS
}

/// One cached hash: the key it was taken under, the hash, and the newest listing that found
/// it still valid (see [`HashCache::update`]).
#[derive(Debug)]
struct Cached {
    key: Key,
    sha256: [u8; 32],
    seen: AtomicU64,
}

type Entries = HashMap<(u64, u64), Cached>;

/// Shards of the cache, each under its own lock: a lookup holds one shard's read lock for one
/// lookup, and an update one shard's write lock at a time, so no listing ever holds the cache
/// for its whole run, and every listing's hashes reach it whatever overlaps.
const SHARDS: usize = 64;

/// A listing's handle on the cache (see [`HashCache::view`]): its number, for marking hits.
#[derive(Debug)]
pub(crate) struct CacheView<'a> {
    cache: &'a HashCache,
    listing: u64,
}

impl CacheView<'_> {
    /// The cached hash for a file whose descriptor reports `meta`, if still valid; a hit
    /// marks the entry as seen by this view's listing, so [`HashCache::update`] keeps it.
    pub(crate) fn get(&self, meta: &FileMeta) -> Option<[u8; 32]> {
        let shard = self
            .cache
            .shard(meta)
            .read()
            .unwrap_or_else(|e| e.into_inner());
        match shard.get(&(meta.dev, meta.ino)) {
            Some(cached) if cached.key == Key::of(meta) => {
                cached.seen.fetch_max(self.listing, Ordering::Relaxed);
                Some(cached.sha256)
            }
            _ => None,
        }
    }

    /// This view's listing number, for [`HashCache::update`] once the listing is done.
    pub(crate) fn listing(&self) -> u64 {
        self.listing
    }
}

/// Hashes of files by identity, for repeat listings.
#[derive(Debug)]
pub(crate) struct HashCache {
    shards: Box<[RwLock<Entries>]>,
    /// The last listing number handed out; numbers only grow.
    listings: AtomicU64,
}

impl Default for HashCache {
    fn default() -> Self {
        HashCache {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            listings: AtomicU64::new(0),
        }
    }
}

impl HashCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn shard(&self, meta: &FileMeta) -> &RwLock<Entries> {
        // Inode numbers of one filesystem are dense: their low bits spread well.
        let mixed = meta.ino ^ meta.dev.rotate_left(17);
        &self.shards[(mixed % SHARDS as u64) as usize]
    }

    /// The cached hash for a file whose descriptor reports `meta`, if still valid. A lookup
    /// of its own: a hit counts as seen by a new listing number, as through a [`view`](Self::view).
    pub(crate) fn get(&self, meta: &FileMeta) -> Option<[u8; 32]> {
        self.view().get(meta)
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
                let mixed = meta.ino ^ meta.dev.rotate_left(17);
                by_shard[(mixed % SHARDS as u64) as usize].push((meta, sha256));
            }
        }
        for (shard, fresh) in self.shards.iter().zip(by_shard) {
            let mut entries = shard.write().unwrap_or_else(|e| e.into_inner());
            for (meta, sha256) in fresh {
                let cached = Cached {
                    key: Key::of(meta),
                    sha256: *sha256,
                    seen: AtomicU64::new(listing),
                };
                entries.insert((meta.dev, meta.ino), cached);
            }
            entries.retain(|_, cached| *cached.seen.get_mut() >= listing);
        }
    }

    /// Caches one hash that a read took (D-13.3) of a file whose descriptor reported `meta`,
    /// under the listing's rules (the racy-git rule), without forgetting anything else. The
    /// entry counts as seen by the newest listing so far, so a listing in progress keeps it.
    /// A file already cached under the same key and hash (a file polled by reads) costs one
    /// read lock, not a write lock.
    pub(crate) fn insert(&self, meta: &FileMeta, sha256: &[u8; 32], hashed_at_ns: i128) {
        let held = self
            .shard(meta)
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(meta.dev, meta.ino))
            .is_some_and(|cached| cached.key == Key::of(meta) && cached.sha256 == *sha256);
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
        let key = Key::of(meta);
        let mut entries = self.shard(meta).write().unwrap_or_else(|e| e.into_inner());
        match entries.entry((meta.dev, meta.ino)) {
            // The same file hashed again: keep the newest listing's mark on it.
            std::collections::hash_map::Entry::Occupied(mut held) if held.get().key == key => {
                let held = held.get_mut();
                held.sha256 = *sha256;
                *held.seen.get_mut() = (*held.seen.get_mut()).max(listing);
            }
            std::collections::hash_map::Entry::Occupied(mut held) => {
                held.insert(Cached {
                    key,
                    sha256: *sha256,
                    seen: AtomicU64::new(listing),
                });
            }
            std::collections::hash_map::Entry::Vacant(place) => {
                place.insert(Cached {
                    key,
                    sha256: *sha256,
                    seen: AtomicU64::new(listing),
                });
            }
        }
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
}
