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

#[cfg(test)]
mod tests {
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
