//! Read buffers whose first byte sits on a page boundary.
//!
//! Why this exists: the kernel copies page-cache bytes to user memory with `rep movsb`. On the
//! AMD EPYC machines this crate is measured on, that copy runs about ten times slower when the
//! destination lies 1 to 63 bytes past a page boundary relative to the source, and a large
//! `malloc` block starts exactly 16 bytes past the page its mapping begins on. Measured with a
//! 1 MiB `pread` from a warm page cache: 640 µs into a buffer at page offset 16, 66 µs at offset
//! 0 or 80 and beyond (`bench/load.sh` showed it as a 1 MiB read costing 1.7 ms of CPU). Reads
//! that start at file offset 0 therefore land in a buffer that starts on a page.
//!
//! Everything here is safe code: the buffer is over-allocated by one page and the bytes before
//! the boundary are padding that is never served.

/// The page size the alignment targets. A larger real page only means a smaller gain, never a
/// wrong answer: alignment is a speed matter, not a correctness one.
pub const PAGE: usize = 4096;

/// Extra capacity to allocate so that a buffer can always be padded to a page boundary.
pub const SLACK: usize = PAGE;

/// How many bytes, appended to `buffer` as it stands, bring its end to a page boundary.
fn pad_len(buffer: &[u8]) -> usize {
    let end = buffer.as_ptr().addr() + buffer.len();
    (PAGE - end % PAGE) % PAGE
}

/// Empties `buffer` and pads it with zeros so that the next byte appended lands on a page
/// boundary; returns the padding's length, which is where the payload starts. `buffer` must
/// have at least [`SLACK`] bytes of capacity beyond the payload for the alignment to hold (if
/// it has not, appending still works, only without the alignment).
pub fn pad_to_page(buffer: &mut Vec<u8>) -> usize {
    buffer.clear();
    let pad = pad_len(buffer);
    buffer.resize(pad, 0);
    pad
}

/// A zeroed scratch buffer of `len` bytes starting on a page boundary: the storage and the
/// offset of the usable bytes within it.
pub fn zeroed(len: usize) -> (Vec<u8>, usize) {
    let mut storage = Vec::with_capacity(len + SLACK);
    let start = pad_to_page(&mut storage);
    storage.resize(start + len, 0);
    (storage, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_brings_the_next_byte_to_a_page_boundary() {
        for capacity in [1, 17, 4095, 4096, 70_000, 1 << 20] {
            let mut buffer = Vec::with_capacity(capacity + SLACK);
            buffer.extend_from_slice(b"stale bytes from an earlier use");
            let pad = pad_to_page(&mut buffer);
            assert!(pad < PAGE);
            assert_eq!(buffer.len(), pad, "only padding is left");
            assert!(buffer.iter().all(|b| *b == 0));
            buffer.push(7);
            assert_eq!(
                buffer[pad..].as_ptr().addr() % PAGE,
                0,
                "capacity {capacity}"
            );
            assert_eq!(buffer.as_ptr().addr() + pad, buffer[pad..].as_ptr().addr());
        }
    }

    #[test]
    fn zeroed_scratch_is_aligned_and_exactly_long_enough() {
        for len in [1, 4096, 256 * 1024] {
            let (storage, start) = zeroed(len);
            assert_eq!(storage.len() - start, len);
            assert_eq!(storage[start..].as_ptr().addr() % PAGE, 0);
            assert!(storage.iter().all(|b| *b == 0));
        }
    }
}
