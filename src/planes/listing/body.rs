//! A listing's JSON body (D-3.5), produced chunk by chunk from its entries: compact JSON
//! exactly as `serde_json` writes it, its exact length known before the first byte, so the
//! listing is never held twice (entries and body) and stays charged to the in-flight budget
//! until the last chunk is sent (D-4.6).

use super::Listing;
use bytes::Bytes;

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
    use crate::planes::ListingEntry;
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
}
