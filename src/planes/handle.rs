//! The `mh1` token codec (D-7.1): `mh1.<b64url-nopad(payload JSON)>.<b64url-nopad(mac)>`.
//!
//! Pure: parsing and encoding only. Signing lives behind the `KeyStore`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;

/// The longest token examined at all; longer is malformed without any crypto (D-7.2).
pub const MAX_TOKEN_LEN: usize = 4096;
/// The MAC's domain-separation prefix.
pub const MAC_CONTEXT: &[u8] = b"murmur-peer-handle-v1";
/// The MAC's field separator.
pub const MAC_SEPARATOR: &[u8] = &[0x1f];

/// A v1 payload, serialised with keys in the order `v`, `iss`, `p`, `exp`, `n`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Payload {
    /// Always 1.
    pub v: u8,
    /// The minting session's id.
    pub iss: String,
    /// Path relative to the peer export root, canonical.
    pub p: String,
    /// Absolute expiry, Unix milliseconds.
    pub exp: i64,
    /// 16 random bytes, lowercase hex.
    pub n: String,
}

/// A token whose shape is valid; nothing about it is trusted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    /// The payload segment exactly as sent: the MAC covers these characters.
    pub payload_b64: &'a str,
    /// The decoded MAC bytes.
    pub mac: Vec<u8>,
    /// The decoded payload.
    pub payload: Payload,
}

/// Whether `text` has the token alphabet: `mh1.` then base64url characters and dots, at most
/// [`MAX_TOKEN_LEN`] bytes (the fetcher's pre-check of D-10.1).
pub fn has_token_shape(text: &str) -> bool {
    text.len() <= MAX_TOKEN_LEN
        && text.starts_with("mh1.")
        && text[4..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Parses a token's shape (D-7.2 step 1). `None` means `malformed_handle`.
pub fn parse(token: &str) -> Option<ParsedToken<'_>> {
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    let mut segments = token.split('.');
    let (Some("mh1"), Some(payload_b64), Some(mac_b64), None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return None;
    };
    let payload_bytes = URL_SAFE_NO_PAD.decode(payload_b64).ok()?;
    let mac = URL_SAFE_NO_PAD.decode(mac_b64).ok()?;
    if payload_bytes.is_empty() || mac.is_empty() {
        return None;
    }
    let payload = decode_payload(&payload_bytes)?;
    Some(ParsedToken {
        payload_b64,
        mac,
        payload,
    })
}

/// The wire form of a payload: typed, so a mistyped field fails the parse (extra keys are
/// ignored; the MAC decides whether they were signed).
#[derive(serde::Deserialize)]
struct WirePayload {
    v: u64,
    iss: String,
    p: String,
    exp: i64,
    n: String,
}

fn decode_payload(bytes: &[u8]) -> Option<Payload> {
    let wire: WirePayload = serde_json::from_slice(bytes).ok()?;
    (wire.v == 1).then_some(Payload {
        v: 1,
        iss: wire.iss,
        p: wire.p,
        exp: wire.exp,
        n: wire.n,
    })
}

/// The payload segment of a new token.
pub fn encode_payload(payload: &Payload) -> String {
    let json = serde_json::to_vec(payload).expect("a payload always serialises");
    URL_SAFE_NO_PAD.encode(json)
}

/// The complete token from its payload segment and MAC.
pub fn assemble(payload_b64: &str, mac: &[u8]) -> String {
    format!("mh1.{payload_b64}.{}", URL_SAFE_NO_PAD.encode(mac))
}

/// The `p` of a token's payload without any verification: the fetcher's basename source
/// (D-10.4). Only `p` is read: a payload that decodes to a JSON object with a string `p` names
/// the file whatever its other keys say (the peer, not the fetcher, judges those). `None` when
/// the payload does not decode that far.
pub fn unverified_path(token: &str) -> Option<String> {
    let payload_b64 = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload_b64).ok()?;
    // A map, not a derived struct: serde would also read a struct from a JSON array.
    let mut payload: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes).ok()?;
    match payload.remove("p")? {
        serde_json::Value::String(p) => Some(p),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Payload {
        Payload {
            v: 1,
            iss: "ses_0123".into(),
            p: "report.md".into(),
            exp: 1_755_950_300_000,
            n: "00".repeat(16),
        }
    }

    #[test]
    fn payload_key_order_and_roundtrip() {
        let b64 = encode_payload(&sample());
        let json = URL_SAFE_NO_PAD.decode(&b64).unwrap();
        assert!(
            String::from_utf8(json).unwrap().starts_with(
                r#"{"v":1,"iss":"ses_0123","p":"report.md","exp":1755950300000,"n":""#
            )
        );
        let token = assemble(&b64, &[9; 32]);
        let parsed = parse(&token).unwrap();
        assert_eq!(parsed.payload, sample());
        assert_eq!(parsed.mac, vec![9; 32]);
        assert!(has_token_shape(&token));
        assert_eq!(unverified_path(&token).as_deref(), Some("report.md"));
    }

    /// The fetcher names a landed file from `p` alone (D-10.4): a payload the peer would refuse
    /// for its other keys still names it, and only a payload that does not decode to an object
    /// with a string `p` leaves it unnamed.
    #[test]
    fn the_unverified_path_needs_only_a_string_p() {
        let token_of = |json: &str| assemble(&URL_SAFE_NO_PAD.encode(json), &[1; 32]);
        for (json, expected) in [
            (r#"{"p":"report.md"}"#, Some("report.md")),
            (
                r#"{"v":2,"iss":7,"p":"a/b.csv","exp":"x"}"#,
                Some("a/b.csv"),
            ),
            (r#"{"v":1,"p":""}"#, Some("")),
            (r#"{"v":1,"p":7}"#, None),
            (r#"{"v":1}"#, None),
            (r#"["p","report.md"]"#, None),
            (r#"["report.md"]"#, None),
            ("not json", None),
        ] {
            assert_eq!(
                unverified_path(&token_of(json)).as_deref(),
                expected,
                "{json}"
            );
        }
        assert_eq!(unverified_path("mh1.%%%.AAAA"), None, "no base64");
        assert_eq!(unverified_path("mh1"), None, "no payload segment");
    }

    #[test]
    fn malformed_shapes() {
        let good = assemble(&encode_payload(&sample()), &[1; 32]);
        let (_, rest) = good.split_once('.').unwrap();
        let (payload, mac) = rest.split_once('.').unwrap();
        let json = |s: &str| URL_SAFE_NO_PAD.encode(s);
        let cases = vec![
            String::new(),
            "mh1".into(),
            "mh1..".into(),
            format!("mh2.{payload}.{mac}"),
            format!("MH1.{payload}.{mac}"),
            format!("mh1.{payload}"),
            format!("mh1.{payload}.{mac}.x"),
            format!("mh1.{payload}."),
            format!("mh1..{mac}"),
            format!("mh1.{payload}=.{mac}"),
            format!("mh1.{payload}.{mac}="),
            format!("mh1.{payload}%2e.{mac}"),
            format!("mh1.{}.{mac}", json("not json")),
            format!("mh1.{}.{mac}", json("[1]")),
            format!(
                "mh1.{}.{mac}",
                json(r#"{"v":2,"iss":"s","p":"a","exp":1,"n":"x"}"#)
            ),
            format!(
                "mh1.{}.{mac}",
                json(r#"{"v":"1","iss":"s","p":"a","exp":1,"n":"x"}"#)
            ),
            format!(
                "mh1.{}.{mac}",
                json(r#"{"v":1,"iss":"s","p":"a","exp":1.5,"n":"x"}"#)
            ),
            format!("mh1.{}.{mac}", json(r#"{"v":1,"iss":"s","p":"a","exp":1}"#)),
            format!(
                "mh1.{}.{mac}",
                json(r#"{"v":1,"iss":7,"p":"a","exp":1,"n":"x"}"#)
            ),
            format!("mh1.{}.{mac}", "A".repeat(MAX_TOKEN_LEN)),
        ];
        for case in cases {
            assert!(parse(&case).is_none(), "{case:?} must be malformed");
        }
    }

    #[test]
    fn non_canonical_trailing_bits_are_refused() {
        // "AB" decodes one byte with non-zero trailing bits only if lenient; "AA" is canonical.
        assert!(URL_SAFE_NO_PAD.decode("AB").is_err());
        assert!(URL_SAFE_NO_PAD.decode("AA").is_ok());
    }
}
