//! A listing as it is held (D-3.5): its entries, sorted, in a compact form (every path in one
//! string, each hash as 32 bytes), charged to the in-flight budget until it is dropped (D-4.6).
//!
//! Beside it: how a root is listed ([`walk`], hashing on the listing's [`pool`]) and how a
//! listing is sent ([`body`]: the JSON streamed chunk by chunk with its exact length known in
//! advance, so a listing is never held twice).

mod body;
mod pool;
pub(crate) mod walk;

pub use body::ListingBody;
pub(crate) use body::ListingHead;
pub(crate) use walk::list_files;

use crate::budget::BudgetPermit;
use std::fmt;

/// One listing entry (D-3.3, D-3.5).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListingEntry {
    /// Path relative to the export root, `/`-separated.
    pub path: String,
    /// The bytes hashed.
    pub size_bytes: u64,
    /// Modification time from the same descriptor.
    pub mtime_ms: i64,
    /// Lowercase hex sha256 of the bytes hashed.
    pub sha256: String,
}

/// One entry, compact (56 bytes): its path is `paths[span.range()]` of its listing.
#[derive(Debug, Clone, Copy)]
struct Compact {
    span: Span,
    size: u64,
    mtime_ms: i64,
    sha256: [u8; 32],
}

/// Where an entry's path lies in its listing's paths, and whether the entry is still waiting
/// for its file to be hashed (see [`Filler`]; never so in a finished listing), in one word: the
/// path's start in the high 47 bits, the pending flag in bit 16, the path's length in the low
/// 16 bits.
#[derive(Debug, Clone, Copy)]
struct Span(u64);

impl Span {
    const PENDING: u64 = 1 << 16;

    /// The span of a path of `len` bytes from `at`; `None` for a path longer than
    /// [`PATH_MAX`](crate::path::PATH_MAX), or starting past 2^47 bytes of paths.
    fn new(at: usize, len: usize) -> Option<Span> {
        if len > crate::path::PATH_MAX {
            return None;
        }
        let at = u64::try_from(at).ok().filter(|at| at >> 47 == 0)?;
        Some(Span(at << 17 | len as u64))
    }

    fn range(self) -> std::ops::Range<usize> {
        // The start was a usize before it was packed.
        let at = (self.0 >> 17) as usize;
        at..at + (self.0 & 0xffff) as usize
    }

    fn is_pending(self) -> bool {
        self.0 & Self::PENDING != 0
    }

    fn pending(self, pending: bool) -> Span {
        Span(if pending {
            self.0 | Self::PENDING
        } else {
            self.0 & !Self::PENDING
        })
    }
}

/// The memory one entry takes beside its path bytes, for charging a listing to the budget.
pub(crate) const ENTRY_BYTES: u64 = std::mem::size_of::<Compact>() as u64;

/// A listing: the regular files under an export root, sorted byte-lexicographically by path.
///
/// ```
/// use resource_plane::planes::{Listing, ListingEntry};
///
/// let listing = Listing::from_entries(vec![ListingEntry {
///     path: "b.md".into(),
///     size_bytes: 5,
///     mtime_ms: 1_700_000_000_000,
///     sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into(),
/// }]);
/// assert_eq!(listing.len(), 1);
/// assert_eq!(listing.total_bytes(), 5);
/// assert_eq!(listing.iter().next().unwrap().path, "b.md");
/// ```
#[derive(Default)]
pub struct Listing {
    paths: String,
    entries: Vec<Compact>,
    /// The in-flight budget bytes this listing holds until it is dropped (after its body is
    /// sent, or its client cut).
    permit: Option<BudgetPermit>,
}

impl fmt::Debug for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listing")
            .field("entries", &self.entries.len())
            .field("path_bytes", &self.paths.len())
            .field("charged", &self.permit.is_some())
            .finish()
    }
}

impl PartialEq for Listing {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Listing {
    /// A listing of `entries` (sorted here), for a plane that builds its own. An entry whose
    /// `sha256` is not 64 lowercase hex digits is left out: a listing only names files it
    /// hashed. So is one whose path is longer than `PATH_MAX` (4,096) bytes:
    /// no read could reach it, and a walk never lists one.
    pub fn from_entries(entries: Vec<ListingEntry>) -> Self {
        let mut builder = ListingBuilder::with_capacity(entries.len());
        for entry in entries {
            if let Some(sha256) = crate::hex::decode32(&entry.sha256) {
                builder.push(&entry.path, entry.size_bytes, entry.mtime_ms, sha256);
            }
        }
        builder.finish(None)
    }

    /// Entries listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The sum of the entries' sizes.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = ListingEntry> + '_ {
        self.entries.iter().map(|e| ListingEntry {
            path: self.path(e).to_owned(),
            size_bytes: e.size,
            mtime_ms: e.mtime_ms,
            sha256: crate::hex::encode(&e.sha256),
        })
    }

    fn path(&self, entry: &Compact) -> &str {
        &self.paths[entry.span.range()]
    }

    /// The entries, in order, borrowed: path, size, mtime and hash, with nothing allocated
    /// (a watcher compares two listings of 100,000 entries on every change).
    pub(crate) fn raw_entries(&self) -> impl Iterator<Item = RawEntry<'_>> + '_ {
        self.raw_entries_after(None)
    }

    /// The entries whose path sorts after `after` (all of them for `None`), in order,
    /// borrowed; the first found by binary search, so a page deep into a large listing costs
    /// no walk from its start.
    pub(crate) fn raw_entries_after(
        &self,
        after: Option<&str>,
    ) -> impl Iterator<Item = RawEntry<'_>> + '_ {
        let start = after.map_or(0, |after| {
            self.entries.partition_point(|e| self.path(e) <= after)
        });
        self.entries[start..].iter().map(|e| RawEntry {
            path: self.path(e),
            size: e.size,
            mtime_ms: e.mtime_ms,
            sha256: &e.sha256,
        })
    }

    /// Gives the listing's in-flight budget bytes back while the listing lives on: a watcher
    /// keeps one listing per export root for as long as anyone waits on it, and a budget held
    /// that long would stall every read behind it. The one such listing per root is the
    /// watcher's own memory, outside the budget.
    pub(crate) fn release_budget(&mut self) {
        self.permit = None;
    }
}

/// One entry of a [`Listing`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawEntry<'a> {
    pub(crate) path: &'a str,
    pub(crate) size: u64,
    pub(crate) mtime_ms: i64,
    pub(crate) sha256: &'a [u8; 32],
}

/// Collects entries into a [`Listing`].
#[derive(Debug, Default)]
pub(crate) struct ListingBuilder {
    paths: String,
    entries: Vec<Compact>,
}

impl ListingBuilder {
    pub(crate) fn with_capacity(entries: usize) -> Self {
        ListingBuilder {
            paths: String::new(),
            entries: Vec::with_capacity(entries),
        }
    }

    /// Entries so far.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The bytes of the paths so far.
    pub(crate) fn path_bytes(&self) -> u64 {
        self.paths.len() as u64
    }

    /// Adds an entry; its index, or `None` when its path is left out (see [`Span::new`]).
    pub(crate) fn push(
        &mut self,
        path: &str,
        size: u64,
        mtime_ms: i64,
        sha256: [u8; 32],
    ) -> Option<usize> {
        let span = Span::new(self.paths.len(), path.len())?;
        self.paths.push_str(path);
        self.entries.push(Compact {
            span,
            size,
            mtime_ms,
            sha256,
        });
        Some(self.entries.len() - 1)
    }

    /// An entry for `path` whose file is still to be hashed: its index, for [`Filler::fill`],
    /// or `None` as for [`push`](Self::push), and once the builder holds 2^32 entries (more
    /// than 200 GiB of them). An entry never filled is left out of the finished listing.
    pub(crate) fn push_pending(&mut self, path: &str) -> Option<Pending> {
        let at = Pending::try_from(self.entries.len()).ok()?;
        self.push(path, 0, 0, [0; 32])?;
        let entry = &mut self.entries[at as usize];
        entry.span = entry.span.pending(true);
        Some(at)
    }

    /// A handle through which several threads fill pending entries at once.
    pub(crate) fn filler(&mut self) -> Filler<'_> {
        Filler {
            paths: &self.paths,
            entries: std::sync::Mutex::new(&mut self.entries),
        }
    }

    /// The listing, sorted byte-lexicographically by path (D-3.5), holding `permit`; entries
    /// left pending are dropped. Sorted in place: the entries are never held twice.
    pub(crate) fn finish(self, permit: Option<BudgetPermit>) -> Listing {
        let ListingBuilder { paths, mut entries } = self;
        entries.retain(|e| !e.span.is_pending());
        let path = |e: &Compact| &paths.as_bytes()[e.span.range()];
        entries.sort_unstable_by(|a, b| path(a).cmp(path(b)));
        Listing {
            paths,
            entries,
            permit,
        }
    }
}

/// The index of a pending entry in its builder: 4 bytes, for a listing keeps one for each file
/// it has still to hash.
pub(crate) type Pending = u32;

/// Fills a builder's pending entries from several threads: the paths are read freely, each
/// fill takes a lock for one entry's few bytes.
#[derive(Debug)]
pub(crate) struct Filler<'a> {
    paths: &'a str,
    entries: std::sync::Mutex<&'a mut Vec<Compact>>,
}

impl Filler<'_> {
    /// The path of entry `at`.
    pub(crate) fn path(&self, at: Pending) -> &str {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let range = entries[at as usize].span.range();
        drop(entries);
        &self.paths[range]
    }

    /// Entry `at` describes a file of `size` bytes hashed to `sha256`.
    pub(crate) fn fill(&self, at: Pending, size: u64, mtime_ms: i64, sha256: [u8; 32]) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = &mut entries[at as usize];
        (entry.size, entry.mtime_ms, entry.sha256) = (size, mtime_ms, sha256);
        entry.span = entry.span.pending(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_after_a_path_start_at_the_first_that_sorts_after_it() {
        let entry = |path: &str| ListingEntry {
            path: path.into(),
            size_bytes: 1,
            mtime_ms: 0,
            sha256: "00".repeat(32),
        };
        let listing = Listing::from_entries(["b/x", "a", "b", "c"].map(entry).to_vec());
        let after = |cursor| {
            listing
                .raw_entries_after(cursor)
                .map(|e| e.path)
                .collect::<Vec<_>>()
        };
        assert_eq!(after(None), ["a", "b", "b/x", "c"]);
        assert_eq!(after(Some("a")), ["b", "b/x", "c"]);
        assert_eq!(
            after(Some("b")),
            ["b/x", "c"],
            "a path is never on two pages"
        );
        assert_eq!(
            after(Some("b/")),
            ["b/x", "c"],
            "a cursor that is gone still places"
        );
        assert_eq!(after(Some("")), ["a", "b", "b/x", "c"]);
        assert!(after(Some("d")).is_empty());
    }

    #[test]
    fn entries_with_a_hash_that_is_not_64_hex_digits_are_not_listed() {
        let listing = Listing::from_entries(vec![ListingEntry {
            path: "a".into(),
            size_bytes: 1,
            mtime_ms: 0,
            sha256: "not a hash".into(),
        }]);
        assert!(listing.is_empty());
    }

    #[test]
    fn an_entry_is_56_bytes_and_its_span_packs_start_length_and_pending() {
        assert_eq!(ENTRY_BYTES, 56);
        let span = Span::new(123_456_789, crate::path::PATH_MAX).expect("fits");
        assert_eq!(
            span.range(),
            123_456_789..123_456_789 + crate::path::PATH_MAX
        );
        assert!(!span.is_pending());
        let pending = span.pending(true);
        assert!(pending.is_pending());
        assert_eq!(
            pending.range(),
            span.range(),
            "the flag leaves the path alone"
        );
        assert!(!pending.pending(false).is_pending());
        let last = (1usize << 47) - 1;
        assert_eq!(Span::new(last, 7).map(Span::range), Some(last..last + 7));
        assert!(Span::new(1 << 47, 1).is_none(), "past 2^47 bytes of paths");
        assert!(Span::new(0, crate::path::PATH_MAX + 1).is_none());
    }

    #[test]
    fn pending_entries_never_filled_are_left_out_and_filled_ones_are_listed() {
        let mut builder = ListingBuilder::default();
        builder.push("c", 1, 1, [1; 32]);
        let a = builder.push_pending("a").expect("a short path");
        let b = builder.push_pending("b").expect("a short path");
        builder.filler().fill(b, 2, 2, [2; 32]);
        assert_eq!(builder.filler().path(a), "a");
        let listing = builder.finish(None);
        let paths: Vec<String> = listing.iter().map(|e| e.path).collect();
        assert_eq!(paths, ["b", "c"]);
        assert_eq!(listing.iter().next().expect("b").sha256, "02".repeat(32));
    }

    #[test]
    fn entries_with_a_path_longer_than_path_max_are_not_listed() {
        let entry = |path: String| ListingEntry {
            path,
            size_bytes: 1,
            mtime_ms: 0,
            sha256: "ab".repeat(32),
        };
        let listing = Listing::from_entries(vec![
            entry("x".repeat(crate::path::PATH_MAX + 1)),
            entry("y".repeat(crate::path::PATH_MAX)),
        ]);
        assert_eq!(listing.len(), 1);
        assert_eq!(listing.iter().next().expect("one").path.len(), 4095);
        assert!(
            ListingBuilder::default()
                .push_pending(&"z".repeat(5_000))
                .is_none()
        );
    }
}
