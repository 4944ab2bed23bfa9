//! One shard of the hash cache: its entries held densely in a `Vec` (72 bytes each), each
//! with the mark of the newest listing that found it valid in a `Vec` beside it, found through
//! an index of 4-byte positions keyed by (device, inode). Capacity the shard has not yet used
//! is never written, so it is never resident; the index is the only table with slack, at 5
//! bytes a bucket (a position and a control byte).

use crate::backends::fs::FileMeta;
use hashbrown::HashTable;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU32, Ordering};

/// The part of a file's identity the cache compares beside (device, inode). Times are held in 64
/// bits (nanoseconds from 1678 to 2262; a time outside is pinned to the end of the range, which can
/// only make two different times look alike if both lie outside it, and such a file is never
/// cached: see [`admits`](super::admits)), so that an entry of a million-file cache stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

/// Nanoseconds in 64 bits, pinned to the range.
fn ns64(ns: i128) -> i64 {
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

impl Key {
    pub(super) fn of(meta: &FileMeta) -> Self {
        Key {
            size: meta.size,
            mtime_ns: ns64(meta.mtime_ns),
            ctime_ns: ns64(meta.ctime_ns),
        }
    }
}

/// One cached hash: the file's identity, the key it was hashed under, and the hash (72 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stored {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) key: Key,
    pub(super) sha256: [u8; 32],
}

impl Stored {
    pub(super) fn of(meta: &FileMeta, sha256: &[u8; 32]) -> Self {
        Stored {
            dev: meta.dev,
            ino: meta.ino,
            key: Key::of(meta),
            sha256: *sha256,
        }
    }
}

/// A listing's number as an entry holds it: its low 32 bits. Numbers are compared modulo 2^32
/// ([`later`], [`HashCache::update`](super::HashCache::update)), which is exact while the listings
/// compared are fewer than 2^31 apart; every finished listing forgets the entries no listing since
/// its start has marked, so the marks held stay close to the newest number. A mark compared wrongly
/// (an entry untouched across 2^31 listings none of which finished) can only keep an entry a few
/// updates longer or forget it early: a mark never decides whether a hash is reused.
pub(super) type Mark = u32;

pub(super) fn mark_of(listing: u64) -> Mark {
    listing as Mark // the low bits, as the type says
}

/// Whether listing `a` started after listing `b`, modulo 2^32 (see [`Mark`]).
pub(super) fn later(a: Mark, b: Mark) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

/// Raises `mark` to `to` unless a later listing has already marked it: an earlier listing's
/// hit never lowers a later one's mark.
pub(super) fn raise(mark: &AtomicU32, to: Mark) {
    let _ = mark.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
        later(to, held).then_some(to)
    });
}

/// One shard: its entries in no order, each entry's mark (the newest listing that found it
/// valid) at the same position, and an index of the positions by (device, inode).
#[derive(Default)]
pub(super) struct Shard {
    stored: Vec<Stored>,
    marks: Vec<AtomicU32>,
    index: HashTable<u32>,
}

/// The hash a shard's index files (device, inode) under.
pub(super) fn identity_hash(hasher: &RandomState, dev: u64, ino: u64) -> u64 {
    hasher.hash_one((dev, ino))
}

impl Shard {
    /// The position of the entry for (`dev`, `ino`), whose [`identity_hash`] is `hash`.
    pub(super) fn position(&self, hash: u64, dev: u64, ino: u64) -> Option<usize> {
        let stored = &self.stored;
        self.index
            .find(hash, |&at| {
                let held = &stored[at as usize];
                held.dev == dev && held.ino == ino
            })
            .map(|&at| at as usize)
    }

    /// Holds `fresh` (whose identity hashes to `hash`) marked by listing `mark`, in place of
    /// whatever was held for the same file. The same file under the same key keeps the later
    /// of its two marks. A shard already holding 2^32 entries takes no more.
    pub(super) fn put(&mut self, hash: u64, fresh: Stored, mark: Mark, hasher: &RandomState) {
        if let Some(at) = self.position(hash, fresh.dev, fresh.ino) {
            let same_key = self.stored[at].key == fresh.key;
            self.stored[at] = fresh;
            let held = self.marks[at].get_mut();
            if !same_key || later(mark, *held) {
                *held = mark;
            }
            return;
        }
        let Ok(at) = u32::try_from(self.stored.len()) else {
            return;
        };
        self.stored.push(fresh);
        self.marks.push(AtomicU32::new(mark));
        let Shard { stored, index, .. } = self;
        index.insert_unique(hash, at, |&at| {
            let held = &stored[at as usize];
            identity_hash(hasher, held.dev, held.ino)
        });
    }

    /// Room for `additional` more entries than the shard holds, in one allocation each (see
    /// [`HashCache::reserve`](super::HashCache::reserve)).
    pub(super) fn reserve(&mut self, additional: usize, hasher: &RandomState) {
        self.stored.reserve_exact(additional);
        self.marks.reserve_exact(additional);
        let Shard { stored, index, .. } = self;
        index.reserve(additional, |&at| {
            let held = &stored[at as usize];
            identity_hash(hasher, held.dev, held.ino)
        });
    }

    /// Forgets every entry whose mark `keep` refuses, then gives back the room of a shard left
    /// at a quarter of its capacity or less.
    pub(super) fn retain(&mut self, hasher: &RandomState, mut keep: impl FnMut(Mark) -> bool) {
        let mut at = 0;
        while at < self.stored.len() {
            if keep(*self.marks[at].get_mut()) {
                at += 1;
            } else {
                self.remove(at, hasher);
            }
        }
        if self.stored.len() <= self.stored.capacity() / 4 {
            self.stored.shrink_to_fit();
            self.marks.shrink_to_fit();
            let stored = &self.stored;
            self.index.shrink_to_fit(|&at| {
                let held = &stored[at as usize];
                identity_hash(hasher, held.dev, held.ino)
            });
        }
    }

    /// Removes the entry at `at`: the last entry moves into its place, and the index, which
    /// knew it by its old position, learns the new one.
    fn remove(&mut self, at: usize, hasher: &RandomState) {
        let gone = self.stored[at];
        let last = self.stored.len() - 1;
        if let Ok(bucket) = self
            .index
            .find_entry(identity_hash(hasher, gone.dev, gone.ino), |&held| {
                held as usize == at
            })
        {
            bucket.remove();
        }
        self.stored.swap_remove(at);
        self.marks.swap_remove(at);
        if at < last {
            let moved = self.stored[at];
            let hash = identity_hash(hasher, moved.dev, moved.ino);
            if let Some(held) = self.index.find_mut(hash, |&held| held as usize == last) {
                // `at` is below `last`, itself a u32.
                *held = at as u32;
            }
        }
    }
}

impl Shard {
    /// The entry at `at` (a [`position`](Self::position)) and its mark.
    pub(super) fn entry(&self, at: usize) -> (&Stored, &AtomicU32) {
        (&self.stored[at], &self.marks[at])
    }

    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.stored.len()
    }
}

#[cfg(test)]
impl Shard {
    /// Checks the shard's invariants: one mark per entry, one index bucket per entry, and each
    /// entry found at its own position.
    pub(super) fn assert_consistent(&self, hasher: &RandomState) {
        assert_eq!(self.marks.len(), self.stored.len());
        assert_eq!(self.index.len(), self.stored.len());
        for (at, held) in self.stored.iter().enumerate() {
            let hash = identity_hash(hasher, held.dev, held.ino);
            assert_eq!(
                self.position(hash, held.dev, held.ino),
                Some(at),
                "entry {at} ({}, {})",
                held.dev,
                held.ino
            );
        }
    }

    /// The room of the entries, the marks and the index.
    pub(super) fn room(&self) -> (usize, usize, usize) {
        (
            self.stored.capacity(),
            self.marks.capacity(),
            self.index.capacity(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(dev: u64, ino: u64, sha: u8) -> Stored {
        Stored {
            dev,
            ino,
            key: Key {
                size: ino,
                mtime_ns: 5,
                ctime_ns: 6,
            },
            sha256: [sha; 32],
        }
    }

    fn put_in(shard: &mut Shard, hasher: &RandomState, fresh: Stored, mark: Mark) {
        let hash = identity_hash(hasher, fresh.dev, fresh.ino);
        shard.put(hash, fresh, mark, hasher);
    }

    #[test]
    fn a_shard_finds_each_entry_by_device_and_inode_and_nothing_else() {
        let hasher = RandomState::new();
        let mut shard = Shard::default();
        for ino in 0..1_000 {
            put_in(&mut shard, &hasher, stored(1, ino, ino as u8), 1);
        }
        put_in(&mut shard, &hasher, stored(2, 7, 0xee), 1);
        assert_eq!(shard.stored.len(), 1_001);
        shard.assert_consistent(&hasher);
        let find = |dev, ino| {
            let at = shard.position(identity_hash(&hasher, dev, ino), dev, ino)?;
            Some(shard.stored[at].sha256[0])
        };
        assert_eq!(find(1, 7), Some(7));
        assert_eq!(find(2, 7), Some(0xee), "same inode, another device");
        assert_eq!(find(3, 7), None, "a device never cached");
        assert_eq!(find(1, 1_000), None, "an inode never cached");
    }

    #[test]
    fn the_same_file_put_again_is_replaced_not_added() {
        let hasher = RandomState::new();
        let mut shard = Shard::default();
        put_in(&mut shard, &hasher, stored(1, 7, 1), 5);
        put_in(&mut shard, &hasher, stored(1, 7, 2), 3);
        assert_eq!(shard.stored.len(), 1);
        assert_eq!(shard.stored[0].sha256, [2; 32]);
        assert_eq!(
            *shard.marks[0].get_mut(),
            5,
            "same key: the later mark stays"
        );
        let rewritten = Stored {
            key: Key {
                ctime_ns: 9,
                ..stored(1, 7, 3).key
            },
            ..stored(1, 7, 3)
        };
        put_in(&mut shard, &hasher, rewritten, 4);
        assert_eq!(shard.stored.len(), 1);
        assert_eq!(shard.stored[0], rewritten);
        assert_eq!(*shard.marks[0].get_mut(), 4, "a new key takes its own mark");
        shard.assert_consistent(&hasher);
    }

    /// Removal moves the last entry into the gap; the index must follow it, whichever entry is
    /// removed (the first, one in the middle, the last, or all of them).
    #[test]
    fn pruning_keeps_marked_entries_and_fixes_the_index_of_each_moved_one() {
        let hasher = RandomState::new();
        let mut shard = Shard::default();
        for ino in 0..200u64 {
            // Odd inodes were seen by listing 2, even ones only by listing 1.
            let mark = if ino % 2 == 1 { 2 } else { 1 };
            put_in(&mut shard, &hasher, stored(1, ino, ino as u8), mark);
        }
        shard.retain(&hasher, |mark| mark >= 2);
        assert_eq!(shard.stored.len(), 100);
        shard.assert_consistent(&hasher);
        for ino in 0..200u64 {
            let at = shard.position(identity_hash(&hasher, 1, ino), 1, ino);
            assert_eq!(at.is_some(), ino % 2 == 1, "inode {ino}");
            if let Some(at) = at {
                assert_eq!(shard.stored[at].sha256, [ino as u8; 32], "inode {ino}");
            }
        }
        // The last entry alone, then the first alone.
        let last = *shard.stored.last().expect("entries");
        shard.retain(&hasher, |_| true);
        let mut seen = 0;
        shard.retain(&hasher, |_| {
            seen += 1;
            seen != 100
        });
        assert_eq!(shard.stored.len(), 99);
        assert!(!shard.stored.contains(&last));
        shard.assert_consistent(&hasher);
        let first = shard.stored[0];
        let mut seen = 0;
        shard.retain(&hasher, |_| {
            seen += 1;
            seen != 1
        });
        assert_eq!(shard.stored.len(), 98);
        assert!(!shard.stored.contains(&first));
        shard.assert_consistent(&hasher);
        shard.retain(&hasher, |_| false);
        assert!(shard.stored.is_empty());
        shard.assert_consistent(&hasher);
        put_in(&mut shard, &hasher, stored(1, 3, 3), 1);
        shard.assert_consistent(&hasher);
    }

    #[test]
    fn a_shard_pruned_to_a_quarter_gives_its_room_back() {
        let hasher = RandomState::new();
        let mut shard = Shard::default();
        for ino in 0..4_096 {
            put_in(&mut shard, &hasher, stored(1, ino, 0), u32::from(ino < 100));
        }
        let (stored, buckets) = (shard.stored.capacity(), shard.index.capacity());
        shard.retain(&hasher, |mark| mark == 1);
        assert_eq!(shard.stored.len(), 100);
        assert!(shard.stored.capacity() < stored / 4, "{stored}");
        assert!(shard.index.capacity() < buckets / 4, "{buckets}");
        shard.assert_consistent(&hasher);
    }

    /// Marks hold listing numbers modulo 2^32: across the wrap, a later listing's mark is still
    /// later.
    #[test]
    fn marks_compare_across_the_wrap() {
        assert!(later(0, u32::MAX));
        assert!(later(5, u32::MAX - 5));
        assert!(!later(u32::MAX, 0));
        assert!(!later(7, 7));
    }
}
