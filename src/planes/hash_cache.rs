//! The listing's hash cache (D-3.6): a hash is reused only when the same descriptor reports the
//! same (device, inode, size, mtime ns, ctime ns) as when it was hashed, and never for a file
//! changed within 2 s of when it was hashed (the racy-git rule), so a listed hash always
//! describes the file's current bytes.
//!
//! The ctime in the key is what makes this safe against a same-size, same-mtime rewrite in
//! place: the kernel moves ctime on every write and no caller can set it back.

use crate::backends::fs::FileMeta;
use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard};

/// How close to its last change a file may be hashed and still be cached, in nanoseconds.
const RACY_WINDOW_NS: i128 = 2_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Key {
    fn of(meta: &FileMeta) -> Self {
        Key {
            size: meta.size,
            mtime_ns: meta.mtime_ns,
            ctime_ns: meta.ctime_ns,
        }
    }
}

/// Whether a hash taken at `hashed_at_ns` of a file last changed as `meta` says may be reused:
/// not if the file changed within the racy window before the hash (it may change again within
/// the same timestamp granularity).
fn admits(meta: &FileMeta, hashed_at_ns: i128) -> bool {
    hashed_at_ns - meta.mtime_ns.max(meta.ctime_ns) >= RACY_WINDOW_NS
}

/// A listing's shared read of the cache (see [`HashCache::view`]).
#[derive(Debug)]
pub struct CacheView<'a>(RwLockReadGuard<'a, HashMap<(u64, u64), (Key, String)>>);

impl CacheView<'_> {
    /// The cached hash for a file whose descriptor reports `meta`, if still valid.
    pub fn get(&self, meta: &FileMeta) -> Option<String> {
        match self.0.get(&(meta.dev, meta.ino)) {
            Some((key, hash)) if *key == Key::of(meta) => Some(hash.clone()),
            _ => None,
        }
    }
}

/// Hashes of files by identity, for repeat listings.
#[derive(Debug, Default)]
pub struct HashCache {
    entries: RwLock<HashMap<(u64, u64), (Key, String)>>,
}

impl HashCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached hash for a file whose descriptor reports `meta`, if still valid.
    pub fn get(&self, meta: &FileMeta) -> Option<String> {
        self.view().get(meta)
    }

    /// A read-only view for one listing's workers to share: one read lock for the whole
    /// listing instead of one per file, so parallel workers do not bounce the lock's cache line
    /// between cores. New hashes go in afterwards, all at once, with [`update`](Self::update).
    pub fn view(&self) -> CacheView<'_> {
        CacheView(self.entries.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// After a listing: caches each `(meta, sha256)` hashed at `hashed_at_ns` that the racy-git
    /// rule admits, and forgets every identity not in `live`, under one write lock; or, when
    /// another listing is still reading the cache, does nothing. Waiting there would queue
    /// every later listing behind the slowest one in progress (the lock prefers writers), and
    /// the cache is only a saving: the next listing hashes those files again.
    pub fn update<'a>(
        &self,
        hashed: impl IntoIterator<Item = (&'a FileMeta, &'a str)>,
        hashed_at_ns: i128,
        live: &std::collections::HashSet<(u64, u64)>,
    ) {
        let mut entries = match self.entries.try_write() {
            Ok(entries) => entries,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        for (meta, sha256) in hashed {
            if admits(meta, hashed_at_ns) {
                entries.insert((meta.dev, meta.ino), (Key::of(meta), sha256.to_owned()));
            }
        }
        entries.retain(|id, _| live.contains(id));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// One listing's worth: caches `sha256` for `meta` (if admitted) and keeps that file alive.
    fn put(cache: &HashCache, meta: &FileMeta, sha256: &str, hashed_at_ns: i128) {
        let live = std::collections::HashSet::from([(meta.dev, meta.ino)]);
        cache.update([(meta, sha256)], hashed_at_ns, &live);
    }

    #[test]
    fn reuses_only_the_same_identity_and_times() {
        let cache = HashCache::new();
        let m = meta(10, 1_000, 1_000);
        put(&cache, &m, "h", 10_000_000_000);
        assert_eq!(cache.get(&m).as_deref(), Some("h"));
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
            "h",
            now,
        );
        assert!(cache.is_empty(), "mtime within 2 s");
        put(&cache, &meta(1, now - 5_000_000_000, now - 10), "h", now);
        assert!(cache.is_empty(), "ctime within 2 s");
        put(
            &cache,
            &meta(1, now + 5_000_000_000, now + 5_000_000_000),
            "h",
            now,
        );
        assert!(cache.is_empty(), "a change time in the future");
        put(
            &cache,
            &meta(1, now - 2_000_000_000, now - 2_000_000_000),
            "h",
            now,
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn retain_prunes() {
        let cache = HashCache::new();
        put(&cache, &meta(1, 0, 0), "h", 10_000_000_000);
        assert_eq!(cache.len(), 1);
        cache.update([], 20_000_000_000, &Default::default());
        assert!(cache.is_empty(), "a file no listing saw is forgotten");
    }

    /// A listing still reading the cache (a slow or stuck one) never makes another wait: the
    /// other's update is skipped instead, and a third listing can still read.
    #[test]
    fn an_update_never_waits_for_a_listing_in_progress() {
        let cache = HashCache::new();
        let m = meta(10, 1_000, 1_000);
        let live = std::collections::HashSet::from([(1, 7)]);
        let reading = cache.view();
        cache.update([(&m, "h")], 10_000_000_000, &live);
        assert_eq!(reading.get(&m), None, "skipped while a listing reads");
        let another = cache.view();
        drop((reading, another));
        cache.update([(&m, "h")], 10_000_000_000, &live);
        assert_eq!(
            cache.get(&m).as_deref(),
            Some("h"),
            "applied once nobody reads"
        );
    }
}
