#![allow(dead_code)] // each test file uses a subset

//! Handles and proofs built from the spec's layouts, independently of the crate's codecs:
//!
//! - a handle is `mh1.<payload_b64>.<mac_b64>` with the MAC
//!   `HMAC-SHA256(key, "murmur-peer-handle-v1" 0x1f payload_b64 0x1f audience)` (computed
//!   through `FixedKeyStore::sign`) and a v1 payload `{"v","iss","p","exp","n"}` in that order;
//! - its handle id is the first 16 lowercase hex of sha256(token);
//! - a redeem proof (peer-proof v2, D-14.3 and D-14.3.1) is `ed25519;key=…;o=…;t=…;n=…;sig=…`,
//!   the signature an Ed25519 one (through *ring* directly) over `murmur-peer-redeem-v2` 0x1f o
//!   0x1f handle_id 0x1f t 0x1f n, `o` the origin (`scheme://host:port`) the proof is sent to.

use super::sha256_hex;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use resource_plane::backends::{FixedKeyStore, KeyStore};
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde_json::json;
use std::net::SocketAddr;

/// The nonce of every payload built here.
pub const NONCE: &str = "00112233445566778899aabbccddeeff";

/// Unpadded base64url.
pub fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// First 16 lowercase hex characters of sha256(token).
pub fn handle_id(token: &str) -> String {
    sha256_hex(token.as_bytes())[..16].to_owned()
}

/// The MAC of the spec over `payload_b64` and `audience`.
pub fn mac(key: [u8; 32], payload_b64: &str, audience: &str) -> [u8; 32] {
    FixedKeyStore::new(key)
        .sign(&[
            b"murmur-peer-handle-v1",
            &[0x1f],
            payload_b64.as_bytes(),
            &[0x1f],
            audience.as_bytes(),
        ])
        .expect("a live key signs")
}

/// The MAC segment over `payload_b64` and `audience`.
pub fn mac_b64(key: [u8; 32], payload_b64: &str, audience: &str) -> String {
    b64(mac(key, payload_b64, audience))
}

/// `mh1.<payload_b64>.<b64(mac)>` with the payload segment taken verbatim.
pub fn sign_b64(key: [u8; 32], payload_b64: &str, audience: &str) -> String {
    format!("mh1.{payload_b64}.{}", mac_b64(key, payload_b64, audience))
}

/// A token over arbitrary payload bytes, correctly signed.
pub fn sign_json(key: [u8; 32], json: &str, audience: &str) -> String {
    sign_b64(key, &b64(json), audience)
}

/// A v1 payload in the spec's key order.
pub fn payload(iss: &str, p: &str, exp: i64, n: &str) -> String {
    format!(r#"{{"v":1,"iss":"{iss}","p":"{p}","exp":{exp},"n":"{n}"}}"#)
}

/// A well-formed, correctly signed handle for `p` of session `iss`, expiring at `exp`, with
/// [`NONCE`].
pub fn forge(key: [u8; 32], iss: &str, p: &str, exp: i64, audience: &str) -> String {
    sign_json(key, &payload(iss, p, exp, NONCE), audience)
}

/// `(payload_b64, mac_b64)` of a token; a token not of three segments fails the test.
pub fn segments(token: &str) -> (String, String) {
    let mut it = token.split('.');
    assert_eq!(it.next(), Some("mh1"), "token prefix");
    let p = it.next().expect("payload segment").to_owned();
    let m = it.next().expect("mac segment").to_owned();
    assert_eq!(it.next(), None, "exactly three segments");
    (p, m)
}

/// Whether `token`'s MAC is the one `key` gives over `audience`.
pub fn is_bound_to(key: [u8; 32], token: &str, audience: &str) -> bool {
    let (payload, mac) = segments(token);
    mac_b64(key, &payload, audience) == mac
}

/// The card extension `uri` that publishes a peer-proof v2 key.
pub const PEER_PROOF_V2: &str = "urn:resource-plane:peer-proof:v2";

/// A peer's Ed25519 key, signing redeem proofs by the layout of D-14.3.1.
pub struct Signer {
    pub pair: Ed25519KeyPair,
    /// The public key, unpadded base64url.
    pub key: String,
}

impl Signer {
    pub fn new(seed: [u8; 32]) -> Self {
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).expect("any 32 bytes are a seed");
        let key = b64(pair.public_key().as_ref());
        Signer { pair, key }
    }

    /// `<audience>#ed25519:<key>`: the MAC audience of a handle minted for this key.
    pub fn keyed(&self, audience: &str) -> String {
        format!("{audience}#ed25519:{}", self.key)
    }

    /// The signature over `origin`, `handle_id`, `t` and `n` as sent.
    pub fn sig(&self, origin: &str, handle_id: &str, t: &str, n: &str) -> String {
        let message = format!("murmur-peer-redeem-v2\x1f{origin}\x1f{handle_id}\x1f{t}\x1f{n}");
        b64(self.pair.sign(message.as_bytes()).as_ref())
    }

    /// A proof header naming `key_text` as the key and `origin` as where it is sent, signed by
    /// this key.
    pub fn header(
        &self,
        key_text: &str,
        origin: &str,
        handle_id: &str,
        t: &str,
        n: &str,
    ) -> String {
        let sig = self.sig(origin, handle_id, t, n);
        format!("ed25519;key={key_text};o={origin};t={t};n={n};sig={sig}")
    }

    /// A proof for `token` sent to `origin` at `t` with nonce `n`.
    pub fn proof(&self, origin: &str, token: &str, t: i64, n: [u8; 16]) -> String {
        self.header(
            &self.key,
            origin,
            &handle_id(token),
            &t.to_string(),
            &b64(n),
        )
    }

    /// An agent card naming `name` at `addr` and publishing this key.
    pub fn card(&self, name: &str, addr: SocketAddr) -> String {
        json!({
            "name": name,
            "url": format!("http://{addr}"),
            "capabilities": {"extensions": [{
                "uri": PEER_PROOF_V2,
                "required": false,
                "params": {"alg": "Ed25519", "key": self.key},
            }]},
        })
        .to_string()
    }
}
