//! The 32 secret bytes a key store signs with (the minting key's, the identity key's seed):
//! held only in memory, in a zeroizing box behind a lock, lent out only for the length of one
//! computation, and overwritten by `destroy` at the session's end, after which nothing can use
//! them (D-12).

use super::random::Random;
use std::sync::RwLock;
use zeroize::Zeroizing;

/// 32 secret bytes until [`destroy`](Self::destroy).
pub(super) struct Secret(RwLock<Option<Zeroizing<[u8; 32]>>>);

impl Secret {
    /// Holds `bytes`.
    pub(super) fn new(bytes: [u8; 32]) -> Self {
        Secret(RwLock::new(Some(Zeroizing::new(bytes))))
    }

    /// 32 bytes drawn from `random`, written straight into the box.
    pub(super) fn drawn_from(random: &dyn Random) -> Self {
        let mut bytes = Zeroizing::new([0u8; 32]);
        random.fill(bytes.as_mut_slice());
        Secret(RwLock::new(Some(bytes)))
    }

    /// What `use_bytes` makes of the bytes, or `None` once they are destroyed.
    pub(super) fn with<T>(&self, use_bytes: impl FnOnce(&[u8; 32]) -> Option<T>) -> Option<T> {
        let guard = self.0.read().unwrap_or_else(|e| e.into_inner());
        use_bytes(guard.as_ref()?)
    }

    /// Overwrites the bytes: dropping the `Zeroizing` box zeroes them before the memory is
    /// freed.
    pub(super) fn destroy(&self) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::random::SeededRandom;

    #[test]
    fn the_bytes_are_lent_until_destroyed() {
        let secret = Secret::new([7; 32]);
        assert_eq!(secret.with(|b| Some(b[0])), Some(7));
        secret.destroy();
        assert_eq!(secret.with(|b| Some(b[0])), None);
    }

    #[test]
    fn drawn_bytes_come_from_the_source() {
        let drawn = |seed| Secret::drawn_from(&SeededRandom::new(seed)).with(|b| Some(*b));
        assert_eq!(drawn([1; 32]), drawn([1; 32]));
        assert_ne!(drawn([1; 32]), drawn([2; 32]));
    }
}
