//! The minter's memory of accepted redeem proofs (D-14.4): a proof's `(handle_id, n)` pair is
//! accepted at most once while a copy of it could still pass the freshness check.
//!
//! A proof passes freshness while `|now − t| ≤ 60 s`, and it was accepted at a time within 60 s
//! of its `t`, so a copy can pass for at most 120 s after the acceptance: the memory keeps each
//! pair that long ([`REPLAY_WINDOW_MS`]) and then forgets it. A clock that moves back only makes
//! it keep pairs longer.
//!
//! The memory is bounded: at most its capacity of pairs (default [`DEFAULT_REPLAY_CAPACITY`])
//! are held at once: about 28 MiB at most for the default, counting the pairs, their order with
//! the key of each, and a count per key (as many keys as pairs at worst). A proof that would have to be remembered while the
//! memory is full is **refused**, not admitted by forgetting an older pair early: forgetting
//! would let a copy of that pair redeem again, refusing only delays a fetcher that retries. Only
//! a peer that holds a live handle and the key it was minted for can add pairs (the MAC, the
//! signature and the freshness check all come first), so the cap bounds what a misbehaving
//! authenticated peer can make the minter hold.
//!
//! The capacity is shared fairly between keys (D-14.4.1): each pair is counted against the
//! identity key that signed its proof, and no key holds more than an eighth of the capacity
//! ([`KEY_SHARE_DIVISOR`]). A key at its share has its own next proofs refused while every other
//! key's proofs are still admitted, so one peer redeeming as fast as it can no longer locks the
//! others out for the length of the window. Filling the whole memory takes eight keys, each
//! holding a live handle minted for it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

/// How long an accepted pair is remembered: twice the freshness window.
pub(crate) const REPLAY_WINDOW_MS: i64 = 2 * super::proof::FRESHNESS_MS;
/// Pairs remembered at most by default: about 1,090 proof redeems a second, sustained.
pub const DEFAULT_REPLAY_CAPACITY: usize = 131_072;
/// No key holds more than `capacity / KEY_SHARE_DIVISOR` pairs (at least one).
pub(crate) const KEY_SHARE_DIVISOR: usize = 8;

/// One remembered pair: the handle id's 16 hex characters, then the nonce's 16 bytes.
type Pair = [u8; 32];
/// The Ed25519 public key that signed a proof.
type Key = [u8; 32];

/// Why a proof's pair is not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAdmitted {
    /// The pair was accepted within the window: a replay.
    Replayed,
    /// The key that signed the proof holds its share of the memory in pairs still within the
    /// window.
    KeyShareFull,
    /// The memory holds its capacity of pairs still within the window.
    Full,
}

/// Accepted `(handle_id, n)` pairs of the last [`REPLAY_WINDOW_MS`], bounded in total and per
/// signing key.
#[derive(Debug)]
pub(crate) struct ReplayMemory {
    capacity: usize,
    key_share: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    seen: HashSet<Pair>,
    /// Pairs in the order they were accepted, with the time of acceptance and the key that
    /// signed them.
    order: VecDeque<(i64, Pair, Key)>,
    /// Pairs held per key; a key holding none has no entry, so this map is never larger than
    /// `seen`.
    per_key: HashMap<Key, usize>,
}

impl ReplayMemory {
    /// An empty memory holding at most `capacity` pairs (at least one), of which at most
    /// `capacity / 8` (at least one) for any one key.
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        ReplayMemory {
            capacity,
            key_share: (capacity / KEY_SHARE_DIVISOR).max(1),
            state: Mutex::new(State::default()),
        }
    }

    /// Admits the pair (`handle_id`, `n`) of a proof signed by `key`, accepted at `now_ms`,
    /// remembering it, unless it was accepted within the window, `key` holds its share, or the
    /// memory is full (checked in that order: a replay is named a replay whatever else holds).
    /// Check and record are one step, so of two copies of a proof arriving together exactly
    /// one is admitted.
    ///
    /// # Errors
    /// [`NotAdmitted::Replayed`], [`NotAdmitted::KeyShareFull`] or [`NotAdmitted::Full`].
    pub(crate) fn admit(
        &self,
        key: &[u8; 32],
        handle_id: &str,
        n: &[u8; 16],
        now_ms: i64,
    ) -> Result<(), NotAdmitted> {
        let mut pair = [0u8; 32];
        let id = handle_id.as_bytes();
        pair[..id.len().min(16)].copy_from_slice(&id[..id.len().min(16)]);
        pair[16..].copy_from_slice(n);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.forget_before(now_ms.saturating_sub(REPLAY_WINDOW_MS));
        if state.seen.contains(&pair) {
            return Err(NotAdmitted::Replayed);
        }
        if state.per_key.get(key).copied().unwrap_or(0) >= self.key_share {
            return Err(NotAdmitted::KeyShareFull);
        }
        if state.seen.len() >= self.capacity {
            return Err(NotAdmitted::Full);
        }
        state.seen.insert(pair);
        state.order.push_back((now_ms, pair, *key));
        *state.per_key.entry(*key).or_insert(0) += 1;
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

    /// Keys holding at least one pair now.
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .per_key
            .len()
    }
}

impl State {
    /// Forgets every pair accepted before `oldest_kept` (a copy of it can no longer be fresh).
    fn forget_before(&mut self, oldest_kept: i64) {
        while let Some(&(accepted, old, key)) = self.order.front() {
            if accepted >= oldest_kept {
                break;
            }
            self.order.pop_front();
            self.seen.remove(&old);
            if let Some(count) = self.per_key.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.per_key.remove(&key);
                }
            }
        }
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
    /// Two signing keys.
    const A: [u8; 32] = [0xaa; 32];
    const B: [u8; 32] = [0xbb; 32];

    #[test]
    fn a_pair_is_admitted_once_within_the_window_and_forgotten_after_it() {
        let memory = ReplayMemory::new(64);
        assert_eq!(memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T), Ok(()));
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T + REPLAY_WINDOW_MS),
            Err(NotAdmitted::Replayed)
        );
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &[2; 16], T),
            Ok(()),
            "another n"
        );
        assert_eq!(
            memory.admit(&A, "bbbbbbbbbbbbbbbb", &[1; 16], T),
            Ok(()),
            "another handle"
        );
        assert_eq!(memory.len(), 3);
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T + REPLAY_WINDOW_MS + 1),
            Ok(()),
            "forgotten once a copy could no longer be fresh"
        );
        assert_eq!(memory.len(), 1, "the expired pairs went with it");
    }

    #[test]
    fn a_clock_moved_back_keeps_pairs_longer() {
        let memory = ReplayMemory::new(8);
        memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T).unwrap();
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T - 3_600_000),
            Err(NotAdmitted::Replayed)
        );
    }

    #[test]
    fn a_full_memory_refuses_rather_than_forgets() {
        // A capacity of 2 gives each key a share of one pair: three keys fill it.
        let memory = ReplayMemory::new(2);
        const C: [u8; 32] = [0xcc; 32];
        memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T).unwrap();
        memory
            .admit(&B, "bbbbbbbbbbbbbbbb", &[2; 16], T + 1)
            .unwrap();
        assert_eq!(
            memory.admit(&C, "cccccccccccccccc", &[3; 16], T + 2),
            Err(NotAdmitted::Full)
        );
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T + 2),
            Err(NotAdmitted::Replayed),
            "the oldest pair is still remembered"
        );
        assert_eq!(
            memory.admit(&C, "cccccccccccccccc", &[3; 16], T + REPLAY_WINDOW_MS + 1),
            Ok(()),
            "room again once the first pair's window has passed"
        );
        assert_eq!(memory.len(), 2);
    }

    #[test]
    fn one_key_holds_at_most_an_eighth_and_every_other_key_still_passes() {
        let memory = ReplayMemory::default();
        let share = DEFAULT_REPLAY_CAPACITY / 8;
        assert_eq!(share, 16_384);
        let n = |i: usize| {
            let mut n = [0u8; 16];
            n[..8].copy_from_slice(&(i as u64).to_le_bytes());
            n
        };
        for i in 0..share {
            assert_eq!(
                memory.admit(&A, "aaaaaaaaaaaaaaaa", &n(i), T),
                Ok(()),
                "{i}"
            );
        }
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &n(share), T),
            Err(NotAdmitted::KeyShareFull),
            "a key over its share is refused"
        );
        assert_eq!(
            memory.admit(&A, "cccccccccccccccc", &n(share), T + 1),
            Err(NotAdmitted::KeyShareFull),
            "on any of its handles"
        );
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &n(0), T + 1),
            Err(NotAdmitted::Replayed),
            "a replay is still named a replay"
        );
        assert_eq!(
            memory.admit(&B, "bbbbbbbbbbbbbbbb", &n(0), T + 1),
            Ok(()),
            "another key's fresh proof passes"
        );
        assert_eq!(
            memory.len(),
            share + 1,
            "the refused proofs were not remembered"
        );
        assert_eq!(memory.keys(), 2);
        // Once the window has passed, the key's share is free again, and its old pairs and
        // their count are gone.
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &n(share), T + REPLAY_WINDOW_MS + 1),
            Ok(())
        );
        assert_eq!(memory.len(), 2, "A's new pair and B's");
        assert_eq!(
            memory.admit(&B, "bbbbbbbbbbbbbbbb", &n(1), T + REPLAY_WINDOW_MS + 2),
            Ok(())
        );
        assert_eq!(memory.len(), 2, "B's first pair went with the window");
        assert_eq!(memory.keys(), 2);
    }

    #[test]
    fn eight_keys_at_their_share_fill_the_memory_and_it_stays_bounded() {
        let memory = ReplayMemory::new(16);
        let key = |k: u8| [k; 32];
        for k in 0..8u8 {
            for i in 0..2u8 {
                assert_eq!(
                    memory.admit(&key(k), "aaaaaaaaaaaaaaaa", &[k * 2 + i; 16], T),
                    Ok(())
                );
            }
            assert_eq!(
                memory.admit(&key(k), "aaaaaaaaaaaaaaaa", &[0xff; 16], T),
                Err(NotAdmitted::KeyShareFull),
                "key {k}"
            );
        }
        assert_eq!(
            memory.admit(&key(9), "aaaaaaaaaaaaaaaa", &[0xfe; 16], T),
            Err(NotAdmitted::Full),
            "the memory itself is never over its capacity"
        );
        assert_eq!(memory.len(), 16);
        assert_eq!(memory.keys(), 8);
    }

    #[test]
    fn a_tiny_memory_still_gives_each_key_one_pair() {
        let memory = ReplayMemory::new(3);
        assert_eq!(memory.admit(&A, "aaaaaaaaaaaaaaaa", &[1; 16], T), Ok(()));
        assert_eq!(
            memory.admit(&A, "aaaaaaaaaaaaaaaa", &[2; 16], T),
            Err(NotAdmitted::KeyShareFull)
        );
        assert_eq!(memory.admit(&B, "aaaaaaaaaaaaaaaa", &[2; 16], T), Ok(()));
    }
}
