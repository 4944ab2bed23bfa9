//! A listing as it is held and sent (D-3.5): its entries, sorted, in a compact form (every path
//! in one string, each hash as 32 bytes), and the JSON body streamed from them chunk by chunk
//! with its exact length known in advance, so a listing is never held twice (entries and body)
//! and its memory is charged to the in-flight budget until the last chunk is sent (D-4.6).

use crate::budget::BudgetPermit;
use bytes::Bytes;
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
        self.entries.iter().map(|e| RawEntry {
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

/// What the listing body says besides its entries (D-3.5's key order).
#[derive(Debug, Clone)]
pub(crate) struct ListingHead<'a> {
    pub(crate) root: &'a str,
    pub(crate) max_bytes: u64,
    pub(crate) generation: u64,
    pub(crate) containment_achieved: &'static str,
}

/// The bytes a body chunk holds at most (one entry may take it past).
const CHUNK: usize = 64 * 1024;

/// A listing's JSON body, produced chunk by chunk from the entries: compact JSON exactly as
/// `serde_json` writes it, with its length known before the first byte.
#[derive(Debug)]
pub struct ListingBody {
    listing: Listing,
    opening: Vec<u8>,
    cursor: Cursor,
    len: u64,
    /// Bytes handed out by [`next_chunk`](Self::next_chunk) so far.
    sent: u64,
}

/// Where a body's production stands: `0` before the opening, `n + 1` before entry `n`, and
/// `entries + 1` before the closing; `done` once that is written too.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    next: usize,
    done: bool,
}

impl ListingBody {
    pub(crate) fn new(listing: Listing, head: &ListingHead<'_>) -> Self {
        let mut opening = Vec::with_capacity(160 + head.root.len());
        opening.extend_from_slice(b"{\"root\":");
        json::write_str(&mut opening, head.root);
        opening.extend_from_slice(b",\"mode\":\"read-only\",\"max_bytes\":");
        json::write_u64(&mut opening, head.max_bytes);
        opening.extend_from_slice(b",\"generation\":");
        json::write_u64(&mut opening, head.generation);
        opening.extend_from_slice(b",\"containment_achieved\":");
        json::write_str(&mut opening, head.containment_achieved);
        opening.extend_from_slice(b",\"entries\":[");
        let entries: u64 = listing
            .entries
            .iter()
            .map(|e| json::entry_len(listing.path(e), e.size, e.mtime_ms) as u64)
            .sum();
        let commas = listing.len().saturating_sub(1) as u64;
        let len = opening.len() as u64 + entries + commas + CLOSING.len() as u64;
        ListingBody {
            listing,
            opening,
            cursor: Cursor::default(),
            len,
            sent: 0,
        }
    }

    /// The body's exact length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the body is empty (never: it is a JSON object).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes not yet handed out.
    pub fn remaining(&self) -> u64 {
        self.len - self.sent
    }

    /// Whether every chunk has been produced.
    pub fn is_end(&self) -> bool {
        self.cursor.done
    }

    /// The next chunk, or `None` once all is sent.
    pub(crate) fn next_chunk(&mut self) -> Option<Bytes> {
        let mut cursor = self.cursor;
        let chunk = self.chunk_at(&mut cursor);
        self.cursor = cursor;
        self.sent += chunk.as_ref().map_or(0, |c| c.len() as u64);
        chunk.map(Bytes::from)
    }

    /// The chunk at `cursor`, moving it on.
    fn chunk_at(&self, cursor: &mut Cursor) -> Option<Vec<u8>> {
        if cursor.done {
            return None;
        }
        let mut chunk = Vec::with_capacity(CHUNK + 512);
        if cursor.next == 0 {
            chunk.extend_from_slice(&self.opening);
            cursor.next = 1;
        }
        let entries = &self.listing.entries;
        while cursor.next <= entries.len() && chunk.len() < CHUNK {
            let at = cursor.next - 1;
            if at > 0 {
                chunk.push(b',');
            }
            let e = &entries[at];
            json::write_entry(
                &mut chunk,
                self.listing.path(e),
                e.size,
                e.mtime_ms,
                &e.sha256,
            );
            cursor.next += 1;
        }
        if cursor.next > entries.len() && chunk.len() < CHUNK {
            chunk.extend_from_slice(CLOSING);
            cursor.done = true;
        }
        Some(chunk)
    }

    /// The sha256 of the whole body, from its start, whatever has been sent: the listing's
    /// etag (D-17.1). Computed chunk by chunk, so the body is never held whole.
    pub fn sha256(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        let mut cursor = Cursor::default();
        while let Some(chunk) = self.chunk_at(&mut cursor) {
            hasher.update(&chunk);
        }
        hasher.finalize().into()
    }

    /// The listing this body was built from.
    pub(crate) fn into_listing(self) -> Listing {
        self.listing
    }

    /// The listing this body is built from.
    pub(crate) fn listing(&self) -> &Listing {
        &self.listing
    }

    /// The whole body, from its start, whatever has been sent (tests and in-process callers).
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
        let mut cursor = Cursor::default();
        while let Some(chunk) = self.chunk_at(&mut cursor) {
            out.extend_from_slice(&chunk);
        }
        out
    }
}

const CLOSING: &[u8] = b"]}";

/// Compact JSON for the listing, byte for byte as `serde_json` writes it, with the length of
/// each piece computable without writing it.
mod json {
    const HEX: &[u8; 16] = b"0123456789abcdef";

    /// The escape `serde_json` writes for `byte`, if any: two-character escapes for the usual
    /// controls, `\u00XX` for the rest below 0x20, and `\"` and `\\`.
    fn escape(byte: u8) -> Option<&'static [u8]> {
        Some(match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => b"\\u00",
            _ => return None,
        })
    }

    /// Whether `text` holds a byte that [`escape`] rewrites. Most paths hold none: the check
    /// reads every byte without stopping early, so it runs as a few wide comparisons.
    fn needs_escape(text: &str) -> bool {
        text.bytes().fold(false, |any, b| {
            any | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    }

    pub(super) fn str_len(text: &str) -> usize {
        if !needs_escape(text) {
            return 2 + text.len();
        }
        2 + text
            .bytes()
            .map(|b| match escape(b) {
                Some(b"\\u00") => 6,
                Some(_) => 2,
                None => 1,
            })
            .sum::<usize>()
    }

    pub(super) fn write_str(out: &mut Vec<u8>, text: &str) {
        out.push(b'"');
        let bytes = text.as_bytes();
        if !needs_escape(text) {
            out.extend_from_slice(bytes);
            out.push(b'"');
            return;
        }
        let mut plain = 0;
        for (at, &byte) in bytes.iter().enumerate() {
            if let Some(escaped) = escape(byte) {
                out.extend_from_slice(&bytes[plain..at]);
                out.extend_from_slice(escaped);
                if escaped == b"\\u00" {
                    out.push(HEX[usize::from(byte >> 4)]);
                    out.push(HEX[usize::from(byte & 0xf)]);
                }
                plain = at + 1;
            }
        }
        out.extend_from_slice(&bytes[plain..]);
        out.push(b'"');
    }

    fn u64_len(mut n: u64) -> usize {
        let mut len = 1;
        while n >= 10 {
            n /= 10;
            len += 1;
        }
        len
    }

    fn i64_len(n: i64) -> usize {
        usize::from(n < 0) + u64_len(n.unsigned_abs())
    }

    pub(super) fn write_u64(out: &mut Vec<u8>, n: u64) {
        let start = out.len();
        let mut n = n;
        loop {
            out.push(b'0' + (n % 10) as u8);
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out[start..].reverse();
    }

    fn write_i64(out: &mut Vec<u8>, n: i64) {
        if n < 0 {
            out.push(b'-');
        }
        write_u64(out, n.unsigned_abs());
    }

    const PATH: &[u8] = b"{\"path\":";
    const SIZE: &[u8] = b",\"size_bytes\":";
    const MTIME: &[u8] = b",\"mtime_ms\":";
    const SHA: &[u8] = b",\"sha256\":\"";
    const END: &[u8] = b"\"}";

    pub(super) fn entry_len(path: &str, size: u64, mtime_ms: i64) -> usize {
        PATH.len()
            + str_len(path)
            + SIZE.len()
            + u64_len(size)
            + MTIME.len()
            + i64_len(mtime_ms)
            + SHA.len()
            + 64
            + END.len()
    }

    pub(super) fn write_entry(
        out: &mut Vec<u8>,
        path: &str,
        size: u64,
        mtime_ms: i64,
        sha256: &[u8; 32],
    ) {
        out.extend_from_slice(PATH);
        write_str(out, path);
        out.extend_from_slice(SIZE);
        write_u64(out, size);
        out.extend_from_slice(MTIME);
        write_i64(out, mtime_ms);
        out.extend_from_slice(SHA);
        let mut hex = [0u8; 64];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(sha256) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0xf)];
        }
        out.extend_from_slice(&hex);
        out.extend_from_slice(END);
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The fast check and the escape table name the same bytes, and a string the check
        /// passes is written as it is, as `serde_json` writes it.
        #[test]
        fn the_fast_check_names_exactly_the_bytes_escape_rewrites() {
            for byte in 0u8..=0x7f {
                let text = char::from(byte).to_string();
                assert_eq!(
                    needs_escape(&text),
                    escape(byte).is_some(),
                    "byte {byte:#04x}"
                );
                let mut out = Vec::new();
                write_str(&mut out, &text);
                assert_eq!(out, serde_json::to_vec(&text).unwrap(), "byte {byte:#04x}");
                assert_eq!(str_len(&text), out.len());
            }
            let plain = "reports/2024/q3/é summary.md";
            assert!(!needs_escape(plain));
            let mut out = Vec::new();
            write_str(&mut out, plain);
            assert_eq!(out, serde_json::to_vec(plain).unwrap());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `serde_json` writes for the same listing: the body must be byte-identical.
    #[derive(serde::Serialize)]
    struct Reference<'a> {
        root: &'a str,
        mode: &'static str,
        max_bytes: u64,
        generation: u64,
        containment_achieved: &'static str,
        entries: &'a [ListingEntry],
    }

    fn entry() -> impl Strategy<Value = ListingEntry> {
        (
            "(\\PC|[\"\\\\\\x00-\\x1f\\x7f])*",
            any::<u64>(),
            any::<i64>(),
            any::<[u8; 32]>(),
        )
            .prop_map(|(path, size_bytes, mtime_ms, sha)| ListingEntry {
                path,
                size_bytes,
                mtime_ms,
                sha256: crate::hex::encode(&sha),
            })
    }

    proptest! {
        #[test]
        fn the_streamed_body_is_what_serde_json_writes(
            entries in prop::collection::vec(entry(), 0..40),
            root in "(\\PC|[\"\\\\\\x00-\\x1f])*",
            max_bytes in any::<u64>(),
            generation in any::<u64>(),
        ) {
            let listing = Listing::from_entries(entries);
            let sorted: Vec<ListingEntry> = listing.iter().collect();
            let expected = serde_json::to_vec(&Reference {
                root: &root,
                mode: "read-only",
                max_bytes,
                generation,
                containment_achieved: "scoped",
                entries: &sorted,
            }).expect("serialisable");
            let head = ListingHead { root: &root, max_bytes, generation, containment_achieved: "scoped" };
            let body = ListingBody::new(listing, &head);
            prop_assert_eq!(body.len(), expected.len() as u64);
            let got = body.render();
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected));
        }
    }

    #[test]
    fn a_large_listing_streams_in_bounded_chunks_and_sorts_by_bytes() {
        let entries: Vec<ListingEntry> = (0..5_000)
            .rev()
            .map(|n| ListingEntry {
                path: format!("d{}/f{n}", n % 7),
                size_bytes: n,
                mtime_ms: -1,
                sha256: "ab".repeat(32),
            })
            .collect();
        let listing = Listing::from_entries(entries);
        let paths: Vec<String> = listing.iter().map(|e| e.path).collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        let head = ListingHead {
            root: "out",
            max_bytes: 1,
            generation: 0,
            containment_achieved: "advisory",
        };
        let mut body = ListingBody::new(listing, &head);
        let len = body.len();
        let mut total = 0u64;
        let mut chunks = 0;
        while let Some(chunk) = body.next_chunk() {
            assert!(chunk.len() < CHUNK + 512, "{}", chunk.len());
            assert_eq!(body.remaining(), len - total - chunk.len() as u64);
            total += chunk.len() as u64;
            chunks += 1;
        }
        assert_eq!(total, len);
        assert!(chunks > 5, "{chunks} chunks");
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
