//! The random source: session ids, event ids, handle nonces, redeem-proof nonces, and the
//! minting and identity keys a capsule generates for itself.
//!
//! [`OsRandom`] draws from the operating system's CSPRNG, and is what every capsule uses unless
//! told otherwise; [`SeededRandom`] is the test double, reproducible from its seed, so that a
//! test can launch a capsule whose session id, tokens and keys are the same on every run.
//!
//! ```
//! use resource_plane::backends::{OsRandom, Random, SeededRandom};
//! use std::sync::Arc;
//!
//! let os: Arc<dyn Random> = Arc::new(OsRandom);
//! assert_ne!(os.bytes::<16>(), os.bytes::<16>());
//!
//! let a = SeededRandom::new([7; 32]);
//! let b = SeededRandom::new([7; 32]);
//! let (a, b): (&dyn Random, &dyn Random) = (&a, &b);
//! assert_eq!(a.hex::<8>(), b.hex::<8>());
//! assert_eq!(a.hex::<8>().len(), 16);
//! ```

use sha2::{Digest, Sha256};
use std::fmt::{self, Debug};
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of random bytes: a capsule's session id, trace event ids, handle nonces, redeem
/// proof nonces, and the keys it generates for itself all come from it. A runtime with its own
/// source (a hardware generator, an audited DRBG) puts it in place of the OS's through
/// [`CapsuleBuilder::random`](crate::CapsuleBuilder::random); `fill` must fill all of `out`.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, OsRandom, Random, RecordingTraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// /// The OS's source, counting the draws made from it.
/// #[derive(Debug, Default)]
/// struct Counted(AtomicUsize);
///
/// impl Random for Counted {
///     fn fill(&self, out: &mut [u8]) {
///         self.0.fetch_add(1, Ordering::SeqCst);
///         OsRandom.fill(out);
///     }
/// }
///
/// let random = Arc::new(Counted::default());
/// let capsule = Capsule::builder(&Manifest::from_yaml("name: quiet").unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .random(random.clone())
///     .launch()
///     .unwrap();
/// assert!(random.0.load(Ordering::SeqCst) > 0, "the session id was drawn from it");
/// assert_eq!(capsule.session_id().len(), "ses_".len() + 32);
/// ```
pub trait Random: Debug + Send + Sync {
    /// Fills all of `out` with random bytes.
    ///
    /// # Panics
    /// An implementation may panic when it has no randomness to give (the OS source, when the
    /// kernel has none): nothing that needs a nonce or a key can go on safely without it.
    fn fill(&self, out: &mut [u8]);
}

impl dyn Random + '_ {
    /// `N` random bytes.
    pub fn bytes<const N: usize>(&self) -> [u8; N] {
        let mut out = [0u8; N];
        self.fill(&mut out);
        out
    }

    /// `N` random bytes as `2N` lowercase hex characters.
    pub fn hex<const N: usize>(&self) -> String {
        crate::hex::encode(&self.bytes::<N>())
    }
}

/// The operating system's CSPRNG (`getrandom(2)` on Linux): the default everywhere.
///
/// ```
/// use resource_plane::backends::{OsRandom, Random};
///
/// let random: &dyn Random = &OsRandom;
/// assert_ne!(random.bytes::<16>(), random.bytes::<16>());
/// let nonce = random.hex::<16>();
/// assert_eq!(nonce.len(), 32);
/// assert!(nonce.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

impl Random for OsRandom {
    /// # Panics
    /// If the OS has no random source at all; nothing secure can be done without one.
    fn fill(&self, out: &mut [u8]) {
        getrandom::fill(out).expect("the operating system's random source failed");
    }
}

/// A deterministic source for tests: the same seed and the same sequence of draws give the
/// same bytes on every run and every machine. **Never use it outside a test**: whoever knows
/// the seed knows every nonce and key drawn from it.
///
/// Each [`fill`](Random::fill) draws fresh blocks of SHA-256(seed ‖ counter), the counter
/// counting blocks across every fill of this source; the unused tail of a fill's last block is
/// dropped. Two sources from different seeds share no block.
///
/// A test that launches its capsules on the same seed gets the same session id, tokens and
/// keys on every run:
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, Random, RecordingTraceSink, SeededRandom};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// let manifest = Manifest::from_yaml("name: quiet").unwrap().manifest;
/// let launch = |seed| {
///     Capsule::builder(&manifest)
///         .filesystem(Arc::new(MemoryFilesystem::new()))
///         .trace(Arc::new(RecordingTraceSink::new()))
///         .advertised_url("http://127.0.0.1:41234")
///         .random(Arc::new(SeededRandom::new(seed)))
///         .launch()
///         .unwrap()
/// };
/// assert_eq!(launch([1; 32]).session_id(), launch([1; 32]).session_id());
/// assert_ne!(launch([1; 32]).session_id(), launch([2; 32]).session_id());
///
/// let random: &dyn Random = &SeededRandom::new([1; 32]);
/// assert_ne!(random.bytes::<8>(), random.bytes::<8>(), "each draw moves the stream on");
/// ```
pub struct SeededRandom {
    seed: [u8; 32],
    /// The next block's number.
    block: AtomicU64,
}

impl SeededRandom {
    /// A source replaying the stream of `seed` from its start.
    pub fn new(seed: [u8; 32]) -> Self {
        SeededRandom {
            seed,
            block: AtomicU64::new(0),
        }
    }
}

impl Debug for SeededRandom {
    /// The seed is left out: it is every secret this source will ever give.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeededRandom")
            .field("block", &self.block.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Random for SeededRandom {
    fn fill(&self, out: &mut [u8]) {
        for chunk in out.chunks_mut(32) {
            let block = self.block.fetch_add(1, Ordering::Relaxed);
            let digest = Sha256::new()
                .chain_update(self.seed)
                .chain_update(block.to_be_bytes())
                .finalize();
            chunk.copy_from_slice(&digest[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_hex_is_distinct_and_sized() {
        let os: &dyn Random = &OsRandom;
        let (a, b) = (os.hex::<16>(), os.hex::<16>());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }

    #[test]
    fn seeded_streams_replay_and_differ_by_seed() {
        let draw = |seed| {
            let random: &dyn Random = &SeededRandom::new(seed);
            (random.bytes::<40>(), random.bytes::<8>())
        };
        assert_eq!(draw([1; 32]), draw([1; 32]));
        assert_ne!(draw([1; 32]), draw([2; 32]));
        let (first, second) = draw([1; 32]);
        assert_ne!(
            &first[..8],
            &second[..],
            "a later draw repeats an earlier one"
        );
    }

    #[test]
    fn seeded_debug_hides_the_seed() {
        let debug = format!("{:?}", SeededRandom::new([0xab; 32]));
        assert!(
            !debug.contains("171") && !debug.contains("ab, ab"),
            "{debug}"
        );
    }
}
