//! The fetcher's identity key (D-14.1): an Ed25519 key pair drawn at launch for a capsule that
//! declares `capabilities.peer_fetch`. Its public half goes into the capsule's agent card; its
//! secret half signs redeem proofs and never leaves the store (design habit 2).
//!
//! The store holds only the 32-byte seed, in a zeroizing box: `destroy` (at session end)
//! overwrites it, and every later `sign` is `None`. *ring* expands the seed into a signing key
//! for each signature; that expanded key lives on the stack for the length of one `sign` call
//! and is not itself zeroed (*ring* does not zeroize its key types), which is why no expanded
//! key is kept between calls. Expanding costs one fixed-base scalar multiplication per
//! signature, about as much as the signature itself: the fetcher pays it once per redeem.

use super::random::{OsRandom, Random};
use super::secret::Secret;
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use std::fmt;

/// Bytes of an Ed25519 public key.
pub(crate) const PUBLIC_KEY_LEN: usize = 32;
/// Bytes of an Ed25519 signature.
pub(crate) const SIGNATURE_LEN: usize = 64;

/// An Ed25519 key that signs and shows its public half, but never reveals its secret: a
/// fetching capsule's identity. Its agent card publishes the public half, a minter binds
/// handles to it, and each redeem carries a fresh signature by it. Ending the session destroys
/// the secret.
///
/// ```
/// use resource_plane::backends::{IdentityKey, OsRandomIdentityKey};
/// use ring::signature::{ED25519, UnparsedPublicKey};
/// use std::sync::Arc;
///
/// let key: Arc<dyn IdentityKey> = Arc::new(OsRandomIdentityKey::generate());
/// let public = key.public_key(); // what the agent card publishes
/// let signature = key.sign(b"a redeem proof").unwrap();
/// let verifier = UnparsedPublicKey::new(&ED25519, public);
/// assert!(verifier.verify(b"a redeem proof", &signature).is_ok());
/// assert!(verifier.verify(b"another message", &signature).is_err());
///
/// key.destroy(); // the session ended
/// assert_eq!(key.sign(b"a redeem proof"), None);
/// assert_eq!(key.public_key(), public, "the public half is no secret");
/// ```
pub trait IdentityKey: fmt::Debug + Send + Sync {
    /// The public key. It stays readable after [`destroy`](Self::destroy): it is no secret.
    fn public_key(&self) -> [u8; PUBLIC_KEY_LEN];

    /// An Ed25519 signature over `message`, or `None` once the key is destroyed.
    fn sign(&self, message: &[u8]) -> Option<[u8; SIGNATURE_LEN]>;

    /// Zeroes the secret; every later `sign` is `None` (D-14.1, D-12).
    fn destroy(&self);
}

/// Shared implementation: the seed, and the public key of the pair it expands to.
struct SeedCell {
    seed: Secret,
    public: [u8; PUBLIC_KEY_LEN],
}

impl SeedCell {
    fn new(seed: Secret) -> Self {
        let public = seed
            .with(|seed| {
                let mut public = [0; PUBLIC_KEY_LEN];
                public.copy_from_slice(Self::expand(seed)?.public_key().as_ref());
                Some(public)
            })
            .unwrap_or([0; PUBLIC_KEY_LEN]);
        SeedCell { seed, public }
    }

    /// The key pair of `seed`. Every 32-byte string is a valid Ed25519 seed (RFC 8032 §5.1.5),
    /// so this never fails for a seed of that length.
    fn expand(seed: &[u8; 32]) -> Option<Ed25519KeyPair> {
        Ed25519KeyPair::from_seed_unchecked(seed).ok()
    }

    fn sign(&self, message: &[u8]) -> Option<[u8; SIGNATURE_LEN]> {
        // Signed under the lock: `destroy` waits for a signature under way, and no expanded
        // key outlives it.
        self.seed.with(|seed| {
            let mut out = [0; SIGNATURE_LEN];
            out.copy_from_slice(Self::expand(seed)?.sign(message).as_ref());
            Some(out)
        })
    }

    fn destroy(&self) {
        self.seed.destroy();
    }
}

/// A key pair from 32 bytes of the OS random source, drawn at launch and held only in memory:
/// what a capsule that declares `capabilities.peer_fetch` draws unless it is given one. A
/// runtime that draws its own hands it in through
/// [`CapsuleBuilder::identity`](crate::CapsuleBuilder::identity).
///
/// ```
/// use base64::Engine as _;
/// use resource_plane::backends::{
///     IdentityKey, MemoryFilesystem, OsRandomIdentityKey, RecordingTraceSink,
/// };
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// let yaml = "name: reader\ncapabilities: { peer_fetch: { allow: [localhost] } }";
/// let manifest = Manifest::from_yaml(yaml).unwrap().manifest;
/// let key = Arc::new(OsRandomIdentityKey::generate());
/// let capsule = Capsule::builder(&manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41235")
///     .identity(key.clone())
///     .launch()
///     .unwrap();
/// let card_key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.public_key());
/// assert_eq!(capsule.identity_key(), Some(card_key));
/// capsule.end_session();
/// assert_eq!(key.sign(b"proof"), None, "the session's end destroyed the secret");
/// ```
pub struct OsRandomIdentityKey {
    cell: SeedCell,
}

impl OsRandomIdentityKey {
    /// Draws a fresh key from the OS random source (D-14.1).
    pub fn generate() -> Self {
        Self::generate_from(&OsRandom)
    }

    /// Draws a fresh key from `random`: the capsule's own source, which is the OS's unless a
    /// test put a [`SeededRandom`](super::SeededRandom) in its place.
    pub fn generate_from(random: &dyn Random) -> Self {
        OsRandomIdentityKey {
            cell: SeedCell::new(Secret::drawn_from(random)),
        }
    }
}

/// A key pair from a caller-chosen seed: the test double, so a test can sign as a peer, or
/// know in advance the key a capsule's card will publish. The seed is an RFC 8032 secret key.
///
/// ```
/// use resource_plane::backends::{FixedIdentityKey, IdentityKey};
///
/// fn hex<const N: usize>(text: &str) -> [u8; N] {
///     std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
/// }
///
/// // RFC 8032, section 7.1, test 1: the secret key, its public key, and the signature of the
/// // empty message.
/// let key = FixedIdentityKey::new(hex(
///     "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
/// ));
/// assert_eq!(
///     key.public_key(),
///     hex::<32>("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
/// );
/// assert_eq!(
///     key.sign(b"").unwrap(),
///     hex::<64>(concat!(
///         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555",
///         "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
///     )),
/// );
/// assert_eq!(format!("{key:?}"), "FixedIdentityKey(<redacted>)");
/// ```
pub struct FixedIdentityKey {
    cell: SeedCell,
}

impl FixedIdentityKey {
    /// The key pair of the RFC 8032 seed `seed`.
    pub fn new(seed: [u8; 32]) -> Self {
        FixedIdentityKey {
            cell: SeedCell::new(Secret::new(seed)),
        }
    }
}

/// The `Debug` and `IdentityKey` of a key pair held in a [`SeedCell`] named `cell`: `Debug`
/// names the type and never the seed; the trait is the cell's.
macro_rules! identity_over_cell {
    ($($key:ident),*) => {$(
        impl fmt::Debug for $key {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($key), "(<redacted>)"))
            }
        }

        impl IdentityKey for $key {
            fn public_key(&self) -> [u8; PUBLIC_KEY_LEN] {
                self.cell.public
            }
            fn sign(&self, message: &[u8]) -> Option<[u8; SIGNATURE_LEN]> {
                self.cell.sign(message)
            }
            fn destroy(&self) {
                self.cell.destroy();
            }
        }
    )*};
}

identity_over_cell!(OsRandomIdentityKey, FixedIdentityKey);

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ED25519, UnparsedPublicKey};

    fn verifies(public: &[u8], message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, public)
            .verify(message, signature)
            .is_ok()
    }

    fn conformance(key: &dyn IdentityKey) {
        let public = key.public_key();
        let signature = key.sign(b"message").expect("a live key signs");
        assert!(verifies(&public, b"message", &signature));
        assert!(!verifies(&public, b"messagf", &signature));
        let mut bad = signature;
        bad[0] ^= 1;
        assert!(!verifies(&public, b"message", &bad));
        assert!(!format!("{key:?}").contains(&crate::hex::encode(&public[..4])));
        key.destroy();
        assert!(
            key.sign(b"message").is_none(),
            "a destroyed key signs nothing"
        );
        assert_eq!(key.public_key(), public, "the public half stays");
    }

    #[test]
    fn os_random_key_conforms() {
        conformance(&OsRandomIdentityKey::generate());
    }

    #[test]
    fn fixed_key_conforms() {
        conformance(&FixedIdentityKey::new([7; 32]));
    }

    /// RFC 8032 §7.1, TEST 1: the seed, its public key and the signature of the empty message.
    #[test]
    fn rfc8032_test_vector_1() {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let seed: [u8; 32] =
            hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
                .try_into()
                .unwrap();
        let key = FixedIdentityKey::new(seed);
        assert_eq!(
            key.public_key().to_vec(),
            hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        );
        assert_eq!(
            key.sign(b"").unwrap().to_vec(),
            hex(concat!(
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155",
                "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
            ))
        );
    }

    #[test]
    fn two_random_keys_differ() {
        assert_ne!(
            OsRandomIdentityKey::generate().public_key(),
            OsRandomIdentityKey::generate().public_key()
        );
    }
}
