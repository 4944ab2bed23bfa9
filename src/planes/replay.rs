//! The minter's memory of accepted redeem proofs (D-14.4): a proof's `(handle_id, n)` pair is
//! accepted at most once while a copy of it could still pass the freshness check.
//!
//! A proof passes freshness while `|now − t| ≤ 60 s`, and it was accepted at a time within 60 s
//! of its `t`, so a copy can pass for at most 120 s after the acceptance: the memory keeps each
//! pair that long ([`REPLAY_WINDOW_MS`]) and then forgets it. A clock that moves back only makes
//! it keep pairs longer.
//!
//! The memory is bounded: at most its capacity of pairs (default [`DEFAULT_REPLAY_CAPACITY`],
//! about 10 MiB at most) are held at once. A proof that would have to be remembered while the
//! memory is full is **refused**, not admitted by forgetting an older pair early: forgetting
//! would let a copy of that pair redeem again, refusing only delays a fetcher that retries. Only
//! a peer that holds a live handle and the key it was minted for can add pairs (the MAC, the
//! signature and the freshness check all come first), so the cap bounds what a misbehaving
//! authenticated peer can make the minter hold.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// How long an accepted pair is remembered: twice the freshness window.
pub(crate) const REPLAY_WINDOW_MS: i64 = 2 * super::proof::FRESHNESS_MS;
/// Pairs remembered at most by default: about 1,090 proof redeems a second, sustained.
pub const DEFAULT_REPLAY_CAPACITY: usize = 131_072;

/// One remembered pair: the handle id's 16 hex characters, then the nonce's 16 bytes.
type Pair = [u8; 32];

/// Why a proof's pair is not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAdmitted {
    /// The pair was accepted within the window: a replay.
    Replayed,
    /// The memory holds its capacity of pairs still within the window.
    Full,
}

/// Accepted `(handle_id, n)` pairs of the last [`REPLAY_WINDOW_MS`], bounded.
#[derive(Debug)]
pub(crate) struct ReplayMemory {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    seen: HashSet<Pair>,
    /// Pairs in the order they were accepted, with the time of acceptance.
    order: VecDeque<(i64, Pair)>,
}

impl ReplayMemory {
    /// An empty memory holding at most `capacity` pairs (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        ReplayMemory {
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
        }
    }

    /// Admits the pair (`handle_id`, `n`) accepted at `now_ms`, remembering it, unless it was
    /// accepted within the window or the memory is full. Check and record are one step, so of
    /// two copies of a proof arriving together exactly one is admitted.
    ///
    /// # Errors
    /// [`NotAdmitted::Replayed`] or [`NotAdmitted::Full`].
    pub(crate) fn admit(
        &self,
        handle_id: &str,
        n: &[u8; 16],
        now_ms: i64,
    ) -> Result<(), NotAdmitted> {
        let mut pair = [0u8; 32];
        let id = handle_id.as_bytes();
        pair[..id.len().min(16)].copy_from_slice(&id[..id.len().min(16)]);
        pair[16..].copy_from_slice(n);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(&(accepted, old)) = state.order.front() {
            if now_ms.saturating_sub(accepted) <= REPLAY_WINDOW_MS {
                break;
            }
            state.order.pop_front();
            state.seen.remove(&old);
        }
        if state.seen.contains(&pair) {
            return Err(NotAdmitted::Replayed);
        }
        if state.seen.len() >= self.capacity {
            return Err(NotAdmitted::Full);
        }
        state.seen.insert(pair);
        state.order.push_back((now_ms, pair));
        Ok(())
    }

    /// Pairs held now (some may be past the window until the next admission forgets them).
    pub(crate) fn len(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .seen
            .len()
    }
}

impl Default for ReplayMemory {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_787_577_327_015;

    #[test]
    fn a_pair_is_admitted_once_within_the_window_and_forgotten_after_it() {
        let memory = ReplayMemory::new(8);
        assert_eq!(memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T), Ok(()));
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T + REPLAY_WINDOW_MS),
            Err(NotAdmitted::Replayed)
        );
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[2; 16], T),
            Ok(()),
            "another n"
        );
        assert_eq!(
            memory.admit("bbbbbbbbbbbbbbbb", &[1; 16], T),
            Ok(()),
            "another handle"
        );
        assert_eq!(memory.len(), 3);
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T + REPLAY_WINDOW_MS + 1),
            Ok(()),
            "forgotten once a copy could no longer be fresh"
        );
        assert_eq!(memory.len(), 1, "the expired pairs went with it");
    }

    #[test]
    fn a_clock_moved_back_keeps_pairs_longer() {
        let memory = ReplayMemory::new(8);
        memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T).unwrap();
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T - 3_600_000),
            Err(NotAdmitted::Replayed)
        );
    }

    #[test]
    fn a_full_memory_refuses_rather_than_forgets() {
        let memory = ReplayMemory::new(2);
        memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T).unwrap();
        memory.admit("aaaaaaaaaaaaaaaa", &[2; 16], T + 1).unwrap();
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[3; 16], T + 2),
            Err(NotAdmitted::Full)
        );
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[1; 16], T + 2),
            Err(NotAdmitted::Replayed),
            "the oldest pair is still remembered"
        );
        assert_eq!(
            memory.admit("aaaaaaaaaaaaaaaa", &[3; 16], T + REPLAY_WINDOW_MS + 1),
            Ok(()),
            "room again once the first pair's window has passed"
        );
        assert_eq!(memory.len(), 2);
    }
}
