//! The OS random source: session ids, event ids, handle nonces, redeem-proof nonces, the minting
//! key and the identity key.

/// Fills `N` bytes from the operating system's CSPRNG.
///
/// # Panics
/// If the OS has no random source at all; nothing secure can be done without one.
#[allow(clippy::disallowed_methods)] // the one place randomness is drawn
pub fn bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).expect("the operating system's random source failed");
    out
}

/// `N` random bytes as lowercase hex.
pub fn hex<const N: usize>() -> String {
    crate::hex::encode(&bytes::<N>())
}

#[cfg(test)]
mod tests {
    #[test]
    fn random_hex_is_distinct_and_sized() {
        let a = super::hex::<16>();
        let b = super::hex::<16>();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
