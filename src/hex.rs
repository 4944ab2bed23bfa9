//! Lowercase hex, and the sha256 helpers every etag, `handle_id` and trace digest goes through.

use sha2::{Digest, Sha256};

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// Appends the lowercase hex of `bytes` to `out`, allocating nothing when it has room.
pub fn extend(out: &mut Vec<u8>, bytes: &[u8]) {
    for b in bytes {
        out.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]);
    }
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    encode(&Sha256::digest(bytes))
}

/// The `handle_id` of a token: the first 16 hex characters of its sha256.
pub fn handle_id(token: &str) -> String {
    let mut id = sha256_hex(token.as_bytes());
    id.truncate(16);
    id
}

/// The 32 bytes that 64 lowercase hex digits spell, or `None` for anything else.
pub fn decode32(text: &str) -> Option<[u8; 32]> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (at, pair) in bytes.chunks_exact(2).enumerate() {
        out[at] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn decode32_takes_exactly_64_lowercase_digits() {
        let hex = super::sha256_hex(b"x");
        assert_eq!(
            super::decode32(&hex).map(|b| super::encode(&b)),
            Some(hex.clone())
        );
        assert_eq!(super::decode32(&hex.to_uppercase()), None);
        assert_eq!(super::decode32(&hex[1..]), None);
        assert_eq!(super::decode32(&format!("{hex}0")), None);
        assert_eq!(super::decode32(&format!("g{}", &hex[1..])), None);
    }

    #[test]
    fn known_vectors() {
        assert_eq!(super::encode(&[0x00, 0xff, 0x1a]), "00ff1a");
        let mut out = b"x".to_vec();
        super::extend(&mut out, &[0x00, 0xff, 0x1a]);
        assert_eq!(out, b"x00ff1a");
        assert_eq!(
            super::sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(super::handle_id(""), "e3b0c44298fc1c14");
    }
}
