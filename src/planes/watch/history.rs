//! The changes a watcher remembers, so a client that reconnects with the etag it last saw gets
//! every change since, none twice (D-17.3): at least the last 64 batches and the last
//! 5 minutes of them.

use super::change::ChangeBatch;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The batches always kept, however old.
pub(crate) const KEEP_BATCHES: usize = 64;
/// The age under which a batch is always kept, however many there are...
pub(crate) const KEEP_FOR: Duration = Duration::from_secs(5 * 60);
/// ...unless the history's events pass this many bytes: then batches beyond the last 64 go
/// sooner, so a tree churning for five minutes cannot grow the history without bound.
pub(crate) const KEEP_BYTES: u64 = 64 * 1024 * 1024;

/// One remembered batch.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Its place in the watcher's sequence: 1 for the first batch after the first listing.
    pub(crate) seq: u64,
    pub(crate) batch: Arc<ChangeBatch>,
    /// The batch as a `change` event, rendered once for every stream.
    pub(crate) sse: Bytes,
    at: Instant,
}

/// The remembered batches, oldest first, with their sequence numbers contiguous.
#[derive(Debug, Default)]
pub(crate) struct History {
    records: VecDeque<Record>,
    bytes: u64,
}

/// Where a resuming client stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// After batch `seq` (0: before the first): what follows it is what the client misses.
    After(u64),
    /// Not a listing the history reaches.
    Unknown,
}

impl History {
    /// Remembers `batch` as batch `seq`, then forgets what the rules let go.
    pub(crate) fn push(&mut self, seq: u64, batch: Arc<ChangeBatch>, now: Instant) {
        let sse = Bytes::from(super::WatchEvent::Change(batch.clone()).to_sse());
        self.bytes += sse.len() as u64;
        self.records.push_back(Record {
            seq,
            batch,
            sse,
            at: now,
        });
        while self.records.len() > KEEP_BATCHES {
            let front = &self.records[0];
            let old = now.saturating_duration_since(front.at) > KEEP_FOR;
            if !(old || self.bytes > KEEP_BYTES) {
                break;
            }
            self.bytes -= front.sse.len() as u64;
            self.records.pop_front();
        }
    }

    /// Forgets everything (the watcher stopped).
    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.bytes = 0;
    }

    /// Where a client whose listing has etag `etag` stands, given that the current listing's
    /// etag is `current` after batch `last`: up to date, after the latest batch that starts
    /// from `etag`, or unknown.
    pub(crate) fn resume(&self, etag: &str, current: &str, last: u64) -> Resume {
        if etag == current {
            return Resume::After(last);
        }
        self.records
            .iter()
            .rev()
            .find(|r| r.batch.from == etag)
            .map_or(Resume::Unknown, |r| Resume::After(r.seq - 1))
    }

    /// The records after batch `after`, up to about `budget` bytes of events (at least one),
    /// and the bytes of every event after `after`; `None` when the history no longer reaches
    /// back to `after` (the client fell too far behind).
    pub(crate) fn after(&self, after: u64, budget: usize) -> Option<(Vec<Record>, u64)> {
        let first = self.records.front().map_or(after + 1, |r| r.seq);
        if after + 1 < first {
            return None;
        }
        let skip = usize::try_from(after + 1 - first).unwrap_or(usize::MAX);
        let mut behind = 0;
        let mut taken = Vec::new();
        let mut size = 0;
        for record in self.records.iter().skip(skip) {
            behind += record.sse.len() as u64;
            if taken.is_empty() || size + record.sse.len() <= budget {
                size += record.sse.len();
                taken.push(record.clone());
            }
        }
        Some((taken, behind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(from: &str, etag: &str) -> Arc<ChangeBatch> {
        Arc::new(ChangeBatch {
            from: from.into(),
            etag: etag.into(),
            generation: 0,
            changes: Vec::new(),
        })
    }

    #[test]
    fn a_client_resumes_after_the_batch_that_left_its_listing() {
        let mut history = History::default();
        let now = Instant::now();
        history.push(1, batch("a", "b"), now);
        history.push(2, batch("b", "c"), now);
        assert_eq!(history.resume("c", "c", 2), Resume::After(2));
        assert_eq!(history.resume("b", "c", 2), Resume::After(1));
        assert_eq!(history.resume("a", "c", 2), Resume::After(0));
        assert_eq!(history.resume("z", "c", 2), Resume::Unknown);
        let (records, behind) = history.after(0, usize::MAX).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            behind,
            records.iter().map(|r| r.sse.len() as u64).sum::<u64>()
        );
        let (records, _) = history.after(0, 1).unwrap();
        assert_eq!(records.len(), 1, "at least one, within the budget");
        assert!(history.after(2, 10).unwrap().0.is_empty());
    }

    #[test]
    fn the_last_64_batches_and_5_minutes_are_kept() {
        let mut history = History::default();
        let start = Instant::now();
        for seq in 1..=100 {
            history.push(seq, batch(&seq.to_string(), &(seq + 1).to_string()), start);
        }
        assert_eq!(history.records.len(), 100, "all within 5 minutes");
        assert!(history.after(0, 10).is_some());
        let later = start + KEEP_FOR + Duration::from_secs(1);
        history.push(101, batch("101", "102"), later);
        assert_eq!(history.records.len(), KEEP_BATCHES);
        assert_eq!(history.records[0].seq, 101 - 63);
        assert!(history.after(0, 10).is_none(), "fell out of the history");
        assert_eq!(history.resume("1", "102", 101), Resume::Unknown);
    }
}
