//! The minting key (D-7.5, design habit 2): the key never leaves its `KeyStore`. The store signs
//! and verifies; it never exposes the bytes, never prints them, and zeroes them on `destroy`.

use super::random::{OsRandom, Random};
use super::secret::Secret;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// An HMAC-SHA256 key that can sign and verify but never be read: the peer plane's minting
/// key, which MACs every handle it mints and checks every handle redeemed. Ending the session
/// destroys it, and from then on no handle it signed verifies.
///
/// ```
/// use resource_plane::backends::{KeyStore, OsRandomKeyStore};
/// use std::sync::Arc;
///
/// let keys: Arc<dyn KeyStore> = Arc::new(OsRandomKeyStore::generate());
/// let tag = keys.sign(&[b"payload", b"|reader@127.0.0.1:9000"]).unwrap();
/// // The parts are MAC'd as one concatenated message, compared in constant time.
/// assert!(keys.verify(&[b"payload|reader@127.0.0.1:9000"], &tag));
/// assert!(!keys.verify(&[b"payload|intruder@127.0.0.1:9000"], &tag));
/// assert!(!keys.verify(&[b"payload|reader@127.0.0.1:9000"], &tag[..31]));
///
/// keys.destroy(); // the session ended
/// assert_eq!(keys.sign(&[b"payload"]), None);
/// assert!(!keys.verify(&[b"payload|reader@127.0.0.1:9000"], &tag));
/// ```
pub trait KeyStore: fmt::Debug + Send + Sync {
    /// HMAC-SHA256 over the concatenation of `parts`, or `None` once the key is destroyed.
    fn sign(&self, parts: &[&[u8]]) -> Option<[u8; 32]>;

    /// Constant-time check of `tag` against the HMAC of `parts`. Always `false` once destroyed.
    fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool;

    /// Zeroes the key; every later `sign` is `None` and every `verify` is `false` (D-12).
    fn destroy(&self);
}

/// Shared implementation: the key, and the MAC keyed by it.
struct KeyCell {
    key: Secret,
}

impl KeyCell {
    fn mac(&self, parts: &[&[u8]]) -> Option<HmacSha256> {
        self.key.with(|key| {
            let mut mac = HmacSha256::new_from_slice(key.as_slice()).ok()?;
            for part in parts {
                mac.update(part);
            }
            Some(mac)
        })
    }

    fn sign(&self, parts: &[&[u8]]) -> Option<[u8; 32]> {
        let tag = self.mac(parts)?.finalize().into_bytes();
        let mut out = [0u8; 32];
        out.copy_from_slice(&tag);
        Some(out)
    }

    fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        // `verify_slice` compares in constant time and rejects a tag of the wrong length.
        self.mac(parts).is_some_and(|m| m.verify_slice(tag).is_ok())
    }

    fn destroy(&self) {
        self.key.destroy();
    }
}

/// A key of 32 bytes from the OS random source, generated at launch and held only in memory:
/// what a capsule uses when [`Backends::keys`](crate::Backends::keys) is `None`. Its `Debug`
/// shows no byte of the key.
///
/// ```
/// use resource_plane::backends::{KeyStore, OsRandomKeyStore};
///
/// let a = OsRandomKeyStore::generate();
/// let b = OsRandomKeyStore::generate();
/// assert_ne!(a.sign(&[b"handle"]), b.sign(&[b"handle"]), "every key is fresh");
/// assert_eq!(format!("{a:?}"), "OsRandomKeyStore(<redacted>)");
/// ```
pub struct OsRandomKeyStore {
    cell: KeyCell,
}

impl OsRandomKeyStore {
    /// Generates a fresh key from the OS random source (D-7.5).
    pub fn generate() -> Self {
        Self::generate_from(&OsRandom)
    }

    /// Generates a fresh key from `random`: the capsule's own source, which is the OS's
    /// unless a test put a [`SeededRandom`](super::SeededRandom) in its place.
    pub fn generate_from(random: &dyn Random) -> Self {
        OsRandomKeyStore {
            cell: KeyCell {
                key: Secret::drawn_from(random),
            },
        }
    }
}

/// A caller-chosen key: the test double, so two stores can share or differ on purpose (a
/// test that forges a handle with another key, or checks a MAC by an independent store).
///
/// ```
/// use resource_plane::backends::{FixedKeyStore, KeyStore};
///
/// let minter = FixedKeyStore::new([7; 32]);
/// let tag = minter.sign(&[b"handle"]).unwrap();
/// assert!(FixedKeyStore::new([7; 32]).verify(&[b"handle"], &tag), "same key, same MAC");
/// assert!(!FixedKeyStore::new([8; 32]).verify(&[b"handle"], &tag));
/// assert_eq!(format!("{minter:?}"), "FixedKeyStore(<redacted>)");
/// ```
pub struct FixedKeyStore {
    cell: KeyCell,
}

impl FixedKeyStore {
    /// A store holding `key`.
    pub fn new(key: [u8; 32]) -> Self {
        FixedKeyStore {
            cell: KeyCell {
                key: Secret::new(key),
            },
        }
    }
}

/// The `Debug` and `KeyStore` of a store that holds its key in a [`KeyCell`] named `cell`:
/// `Debug` names the type and never the key; the trait is the cell's.
macro_rules! store_over_cell {
    ($($store:ident),*) => {$(
        impl fmt::Debug for $store {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($store), "(<redacted>)"))
            }
        }

        impl KeyStore for $store {
            fn sign(&self, parts: &[&[u8]]) -> Option<[u8; 32]> {
                self.cell.sign(parts)
            }
            fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
                self.cell.verify(parts, tag)
            }
            fn destroy(&self) {
                self.cell.destroy();
            }
        }
    )*};
}

store_over_cell!(OsRandomKeyStore, FixedKeyStore);

#[cfg(test)]
mod tests {
    use super::*;

    fn conformance(store: &dyn KeyStore) {
        let tag = store.sign(&[b"a", b"b"]).expect("live key signs");
        assert!(store.verify(&[b"ab"], &tag), "split does not matter");
        assert!(!store.verify(&[b"abc"], &tag));
        let mut bad = tag;
        bad[31] ^= 1;
        assert!(!store.verify(&[b"ab"], &bad));
        assert!(!store.verify(&[b"ab"], &tag[..31]));
        assert!(!format!("{store:?}").contains(&crate::hex::encode(&tag)));
        store.destroy();
        assert!(store.sign(&[b"ab"]).is_none());
        assert!(
            !store.verify(&[b"ab"], &tag),
            "destroyed key verifies nothing"
        );
    }

    #[test]
    fn os_random_store_conforms() {
        conformance(&OsRandomKeyStore::generate());
    }

    #[test]
    fn fixed_store_conforms_and_matches_rfc4231_shape() {
        conformance(&FixedKeyStore::new([7; 32]));
        let a = FixedKeyStore::new([1; 32]).sign(&[b"x"]).unwrap();
        let b = FixedKeyStore::new([2; 32]).sign(&[b"x"]).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn two_random_stores_differ() {
        let a = OsRandomKeyStore::generate().sign(&[b"x"]).unwrap();
        let b = OsRandomKeyStore::generate().sign(&[b"x"]).unwrap();
        assert_ne!(a, b);
    }
}
