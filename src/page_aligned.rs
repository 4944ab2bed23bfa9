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

/// Where, in `buffer`'s allocation, the first byte on a page boundary lies: the padding a body
/// read into it starts after, whatever the buffer holds now.
fn page_start(buffer: &[u8]) -> usize {
    (PAGE - buffer.as_ptr().addr() % PAGE) % PAGE
}

/// Reads `file`, whose descriptor said it holds `size` bytes, into `buffer` from a page
/// boundary, reading at most `limit` bytes in all; returns where the bytes start (they end at
/// `buffer.len()`). Room is made for `size + 1` bytes (within `limit`), the one byte more showing
/// a file that grew after its `fstat`; only when that room fills and `limit` allows more does the
/// buffer grow (a read's last attempt, reading a growing file to its end).
///
/// As few `read(2)` calls as the kernel allows: the bytes go straight into the buffer, and a
/// read that comes back short exactly at `size` is the end of the file as its descriptor saw it,
/// so no call is made just to see `0`. A regular file in the page cache is read in one call.
/// Any other short read (a network filesystem, a growing file) reads on.
///
/// The buffer is used as it is where it already holds bytes (a recycled body buffer keeps its
/// length): they are overwritten or cut off, never served, so only bytes never written before
/// are zeroed. A buffer without room for `size + 1` bytes and a page of padding is emptied and
/// grown first.
///
/// # Errors
/// The read's error (`Interrupted` is retried); `buffer` then holds the bytes read before it.
pub fn read_into<R: std::io::Read + ?Sized>(
    file: &mut R,
    buffer: &mut Vec<u8>,
    size: u64,
    limit: u64,
) -> std::io::Result<usize> {
    read_into_unless(file, buffer, size, limit, &crate::cancel::Cancel::never())
}

/// The most one `read(2)` of [`read_into_unless`] asks for, so that a cancelled read of a large
/// file stops within one step: 64 MiB (D-3.3.1's bound).
pub const READ_STEP: usize = 64 << 20;

/// [`read_into`], stopping between steps of at most [`READ_STEP`] bytes once `cancel` is
/// raised.
///
/// # Errors
/// As [`read_into`]; `Interrupted` when `cancel` was raised (the bytes read before are kept).
pub fn read_into_unless<R: std::io::Read + ?Sized>(
    file: &mut R,
    buffer: &mut Vec<u8>,
    size: u64,
    limit: u64,
    cancel: &crate::cancel::Cancel,
) -> std::io::Result<usize> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut room = usize::try_from(size.saturating_add(1))
        .unwrap_or(usize::MAX)
        .min(limit);
    if buffer.capacity() < room.saturating_add(SLACK) {
        buffer.clear();
        buffer.reserve_exact(room.saturating_add(SLACK));
    }
    let start = page_start(buffer);
    let mut filled = 0usize;
    loop {
        if filled == room {
            if room == limit {
                break;
            }
            // Larger than its descriptor said and allowed more: grow with the file.
            room = room.saturating_mul(2).clamp(room + 1, limit);
        }
        if cancel.is_cancelled() {
            buffer.truncate(start + filled);
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "cancelled: the client left",
            ));
        }
        buffer.resize(start + room, 0);
        let asked = (room - filled).min(READ_STEP);
        match file.read(&mut buffer[start + filled..start + filled + asked]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if n < asked && filled as u64 == size {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buffer.truncate(start + filled);
                return Err(e);
            }
        }
    }
    buffer.truncate(start + filled);
    Ok(start)
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

    /// A reader over `content` that records the length of every read asked of it and returns
    /// at most `piece` bytes a call; past its end it returns `more` bytes of `7` a call for ever
    /// (a file growing faster than it is read) when `more` is not 0.
    struct Reads {
        content: Vec<u8>,
        at: usize,
        piece: usize,
        more: usize,
        asked: Vec<usize>,
    }

    impl Reads {
        fn of(content: Vec<u8>, piece: usize, more: usize) -> Self {
            Reads {
                content,
                at: 0,
                piece,
                more,
                asked: Vec::new(),
            }
        }
    }

    impl std::io::Read for Reads {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.asked.push(buf.len());
            let left = &self.content[self.at.min(self.content.len())..];
            let n = if left.is_empty() {
                let n = buf.len().min(self.more);
                buf[..n].fill(7);
                n
            } else {
                let n = buf.len().min(self.piece).min(left.len());
                buf[..n].copy_from_slice(&left[..n]);
                n
            };
            self.at += n;
            Ok(n)
        }
    }

    fn content(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// A file whose reads return all that is asked (a regular file in the page cache) is read
    /// in one call, the buffer holding exactly its bytes from a page boundary.
    #[test]
    fn a_file_of_known_size_is_read_in_one_call() {
        for len in [0usize, 1, 4096, 70_000, 1 << 20] {
            let mut file = Reads::of(content(len), usize::MAX, 0);
            let mut buffer = Vec::new();
            let start = read_into(&mut file, &mut buffer, len as u64, len as u64 + 1).unwrap();
            assert_eq!(&buffer[start..], &content(len)[..], "size {len}");
            assert_eq!(buffer[start..].as_ptr().addr() % PAGE, 0, "size {len}");
            assert_eq!(file.asked, [len + 1], "size {len}: one call, for size + 1 bytes");
        }
    }

    /// Short reads before the size read on; a short read ending exactly at the size is the end
    /// as the descriptor saw it; a file that grew is read to size + 1 bytes and no further
    /// within a limit of size + 1, however its reads come back.
    #[test]
    fn short_reads_read_on_and_growth_stops_at_the_limit() {
        let len = 10_000;
        // Pieces of 1,000: ten calls, the last ending at the size.
        let mut file = Reads::of(content(len), 1000, 0);
        let mut buffer = Vec::new();
        let start = read_into(&mut file, &mut buffer, len as u64, len as u64 + 1).unwrap();
        assert_eq!(&buffer[start..], &content(len)[..]);
        assert_eq!(file.asked.len(), 10, "{:?}", file.asked);
        // Pieces of 3,000: the fourth call comes back short at 10,000.
        let mut file = Reads::of(content(len), 3000, 0);
        let start = read_into(&mut file, &mut buffer, len as u64, len as u64 + 1).unwrap();
        assert_eq!(&buffer[start..], &content(len)[..]);
        assert_eq!(file.asked.len(), 4, "{:?}", file.asked);
        // Shorter than the descriptor said: read to its end.
        let mut file = Reads::of(content(len - 10), usize::MAX, 0);
        let start = read_into(&mut file, &mut buffer, len as u64, len as u64 + 1).unwrap();
        assert_eq!(&buffer[start..], &content(len - 10)[..]);
        assert_eq!(file.asked, [len + 1, 11]);
        // Grown (and growing for ever): size + 1 bytes asked in all, then it stops.
        for piece in [usize::MAX, 999] {
            let mut file = Reads::of(content(len), piece, 4096);
            let start = read_into(&mut file, &mut buffer, 100, 101).unwrap();
            assert_eq!(&buffer[start..], &content(len)[..101], "piece {piece}");
            assert_eq!(file.asked.iter().sum::<usize>(), 101, "piece {piece}");
        }
    }

    /// With a limit above size + 1 (a read's last attempt), the buffer grows with a file larger
    /// than its descriptor said, up to the limit; it never starts at the limit's size.
    #[test]
    fn a_larger_limit_grows_the_buffer_with_the_file() {
        let len = 300_000;
        let mut file = Reads::of(content(len), usize::MAX, 0);
        let mut buffer = Vec::new();
        let start = read_into(&mut file, &mut buffer, 1000, 1 << 40).unwrap();
        assert_eq!(&buffer[start..], &content(len)[..]);
        assert_eq!(file.asked[0], 1001, "room for the size the descriptor gave first");
        let mut endless = Reads::of(content(len), 65_536, 65_536);
        let start = read_into(&mut endless, &mut buffer, 1000, 500_001).unwrap();
        assert_eq!(buffer.len() - start, 500_001, "stops at the limit");
        assert_eq!(endless.at, 500_001, "bytes handed over");
    }

    /// A buffer that held a longer body before is reused in place: its old bytes are cut off,
    /// never served, and its allocation is kept.
    #[test]
    fn a_used_buffer_is_filled_in_place_and_its_old_bytes_cut_off() {
        let mut buffer = Vec::new();
        let mut long = Reads::of(vec![9u8; 50_000], usize::MAX, 0);
        read_into(&mut long, &mut buffer, 50_000, 50_001).unwrap();
        let address = buffer.as_ptr();
        let mut short = Reads::of(content(1000), usize::MAX, 0);
        let start = read_into(&mut short, &mut buffer, 1000, 1001).unwrap();
        assert_eq!(&buffer[start..], &content(1000)[..]);
        assert_eq!(buffer.as_ptr(), address, "the same allocation");
        assert_eq!(buffer[start..].as_ptr().addr() % PAGE, 0);
    }

    /// A read error ends the read with it, keeping the bytes read before; an interrupted read
    /// is retried.
    #[test]
    fn a_read_error_is_returned_and_an_interruption_retried() {
        struct Failing(usize);
        impl std::io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.0 += 1;
                match self.0 {
                    1 => Err(std::io::ErrorKind::Interrupted.into()),
                    2 => {
                        buf[..10].fill(1);
                        Ok(10)
                    }
                    _ => Err(std::io::Error::other("EIO")),
                }
            }
        }
        let mut buffer = Vec::new();
        let error = read_into(&mut Failing(0), &mut buffer, 100, 101).unwrap_err();
        assert_eq!(error.to_string(), "EIO");
        assert_eq!(buffer.len() - page_start(&buffer), 10);
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
