//! The redeem proof codec, peer-proof v2 (D-14.3, D-14.3.1): one `x-murmur-proof` header,
//! `ed25519;key=<b64url 32 bytes>;o=<origin>;t=<unix ms>;n=<b64url 16 bytes>;sig=<b64url 64
//! bytes>`, whose signature covers `murmur-peer-redeem-v2` 0x1f `<o>` 0x1f `<handle_id>` 0x1f
//! `<t>` 0x1f `<n>`, with `o`, `t` and `n` exactly as the header writes them.
//!
//! `o` is the [`Origin`] the fetcher sent the request to. Signing it is what stops a relay: a
//! peer that a fetcher was told to fetch from receives a proof naming that peer's own origin,
//! and the real minter, whose origin differs, refuses it.
//!
//! Pure: parsing, formatting, the signed bytes and verification against the key the header
//! names. Whether that key is the one the handle was minted for is the MAC's question (the
//! minter checks the MAC over `<audience>#ed25519:<key>`, D-14.4), and whether `o` is the
//! minter's own origin is the minter's; signing lives behind the [`IdentityKey`].

use crate::backends::IdentityKey;
use crate::policy::Address;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ED25519, UnparsedPublicKey};
use std::fmt;

/// The signature's domain-separation prefix.
pub const PROOF_CONTEXT: &[u8] = b"murmur-peer-redeem-v2";
/// The separator between the signed fields.
pub const PROOF_SEPARATOR: u8 = 0x1f;
/// The header's scheme, its first parameter.
pub const SCHEME: &str = "ed25519";
/// How far `t` may lie from the minter's clock, either way, inclusive (D-14.4).
pub const FRESHNESS_MS: i64 = 60_000;
/// Random bytes in `n`.
pub const NONCE_BYTES: usize = 16;
/// The longest `t` read: `i64::MAX` has 19 digits.
const MAX_T_DIGITS: usize = 19;

/// Where a request is sent: `scheme://host:port` of an http(s) URL, lowercased, the port always
/// explicit (80 for http, 443 for https when the URL writes none), an IPv6 host in brackets, as
/// D-8 normalises an audience's tail. A path, query or fragment is not part of it.
///
/// A proof names the origin its fetcher sent the redeem to, and a minter accepts only proofs
/// naming the origin of its own advertised URL (D-14.3.1).
///
/// ```
/// use resource_plane::planes::Origin;
///
/// let origin = Origin::of_url("HTTP://Peer.Example/capsules/a?x").unwrap();
/// assert_eq!(origin.as_str(), "http://peer.example:80");
/// assert_eq!(Origin::of_url("https://[::1]").unwrap().as_str(), "https://[::1]:443");
/// assert_eq!(Origin::of_url("ftp://peer.example"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin(String);

impl Origin {
    /// The origin of `url`, an `http` or `https` URL with a host; `None` for anything else
    /// (another scheme, no host, userinfo, a port out of range).
    pub fn of_url(url: &str) -> Option<Self> {
        crate::policy::url_address(url).map(|address| Self::of_address(&address))
    }

    /// The origin a connection to `address` reaches: its scheme (`http` when none is written)
    /// and its host and port as D-8 writes them.
    pub(crate) fn of_address(address: &Address) -> Self {
        Origin(address.base_url())
    }

    /// `scheme://host:port`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` is an origin written exactly as [`Origin::as_str`] writes one: the only
    /// spelling a proof's `o` may have.
    fn is_canonical(text: &str) -> bool {
        Self::of_url(text).is_some_and(|origin| origin.0 == text)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A proof header whose shape is valid. Nothing about it is trusted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof<'a> {
    /// The key exactly as the header writes it: the tail of the MAC audience.
    pub key_text: &'a str,
    /// The decoded public key.
    pub key: [u8; 32],
    /// `o` exactly as the header writes it, the origin the proof was sent to: a canonical
    /// [`Origin`] spelling, which the signature covers.
    pub origin: &'a str,
    /// `t` exactly as the header writes it: the signature covers these characters.
    pub t_text: &'a str,
    /// `t` as a number, Unix milliseconds.
    pub t: i64,
    /// `n` exactly as the header writes it.
    pub n_text: &'a str,
    /// The decoded nonce.
    pub n: [u8; NONCE_BYTES],
    /// The decoded signature.
    pub sig: [u8; 64],
}

/// A proof header that does not parse. `key_text` is the key when the header got that far
/// (its scheme and `key` parameter are well formed): the minter can still check the MAC over
/// that key, and name the handle's path in its trace once the MAC verifies (D-14.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed<'a> {
    /// The well-formed key, when the header got that far.
    pub key_text: Option<&'a str>,
    /// What is wrong, for the trace's `reason`.
    pub why: &'static str,
}

impl<'a> Malformed<'a> {
    fn before_key(why: &'static str) -> Self {
        Malformed {
            key_text: None,
            why,
        }
    }
}

/// Parses one `x-murmur-proof` value (D-14.3, D-14.3.1): parameters `key`, `o`, `t`, `n`, `sig`
/// once each, in that order, separated by `;` with no spaces; base64url strict (no padding,
/// canonical trailing bits) and of the exact lengths; `o` an origin in its one canonical
/// spelling (see [`Origin`]); `t` in decimal with no sign and no leading zero. Whether `o` is
/// the minter's own origin is not asked here.
///
/// # Errors
/// [`Malformed`], naming the first part that is wrong.
pub fn parse(header: &[u8]) -> Result<Proof<'_>, Malformed<'_>> {
    let text = std::str::from_utf8(header)
        .ok()
        .filter(|t| t.is_ascii())
        .ok_or(Malformed::before_key("the header is not ASCII"))?;
    let mut parts = text.split(';');
    if parts.next() != Some(SCHEME) {
        return Err(Malformed::before_key("the scheme is not ed25519"));
    }
    let (key_text, key) = parts
        .next()
        .and_then(|p| p.strip_prefix("key="))
        .and_then(|k| Some((k, decode_exact::<32>(k)?)))
        .ok_or(Malformed::before_key(
            "key is not the second parameter, or not 32 bytes of unpadded base64url",
        ))?;
    let malformed = |why| Malformed {
        key_text: Some(key_text),
        why,
    };
    let origin = parts
        .next()
        .and_then(|p| p.strip_prefix("o="))
        .ok_or(malformed("o is not the third parameter"))?;
    if !Origin::is_canonical(origin) {
        return Err(malformed(
            "o is not an origin written scheme://host:port, lowercased, with its port",
        ));
    }
    let t_text = parts
        .next()
        .and_then(|p| p.strip_prefix("t="))
        .ok_or(malformed("t is not the fourth parameter"))?;
    let t = parse_t(t_text).ok_or(malformed(
        "t is not a decimal number of milliseconds without sign or leading zero",
    ))?;
    let n_text = parts
        .next()
        .and_then(|p| p.strip_prefix("n="))
        .ok_or(malformed("n is not the fifth parameter"))?;
    let n = decode_exact::<NONCE_BYTES>(n_text)
        .ok_or(malformed("n is not 16 bytes of unpadded base64url"))?;
    let sig = parts
        .next()
        .and_then(|p| p.strip_prefix("sig="))
        .ok_or(malformed("sig is not the sixth parameter"))
        .and_then(|s| {
            decode_exact::<64>(s).ok_or(malformed("sig is not 64 bytes of unpadded base64url"))
        })?;
    if parts.next().is_some() {
        return Err(malformed("parameters follow sig"));
    }
    Ok(Proof {
        key_text,
        key,
        origin,
        t_text,
        t,
        n_text,
        n,
        sig,
    })
}

/// Exactly `N` bytes of strict base64url, or `None`.
fn decode_exact<const N: usize>(text: &str) -> Option<[u8; N]> {
    // Unpadded base64url of N bytes is ceil(4N / 3) characters; a longer text is not decoded.
    if text.len() != (4 * N).div_ceil(3) {
        return None;
    }
    URL_SAFE_NO_PAD.decode(text).ok()?.try_into().ok()
}

/// `t`: decimal digits, no sign, no leading zero (`0` itself is allowed), fitting an `i64`.
fn parse_t(text: &str) -> Option<i64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let canonical = text == "0" || !text.starts_with('0');
    (digits_only && canonical && text.len() <= MAX_T_DIGITS)
        .then(|| text.parse().ok())
        .flatten()
}

/// The bytes a proof signs: `murmur-peer-redeem-v2` 0x1f `origin` 0x1f `handle_id` 0x1f `t`
/// 0x1f `n`.
pub fn signed_message(origin: &str, handle_id: &str, t_text: &str, n_text: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(
        PROOF_CONTEXT.len() + 4 + origin.len() + handle_id.len() + t_text.len() + n_text.len(),
    );
    for (i, part) in [
        PROOF_CONTEXT,
        origin.as_bytes(),
        handle_id.as_bytes(),
        t_text.as_bytes(),
        n_text.as_bytes(),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            message.push(PROOF_SEPARATOR);
        }
        message.extend_from_slice(part);
    }
    message
}

/// Whether `proof`'s signature over its `o`, `t` and `n` for `handle_id` verifies with the key
/// the proof names.
pub fn verify_signature(proof: &Proof<'_>, handle_id: &str) -> bool {
    UnparsedPublicKey::new(&ED25519, &proof.key)
        .verify(
            &signed_message(proof.origin, handle_id, proof.t_text, proof.n_text),
            &proof.sig,
        )
        .is_ok()
}

/// Whether `|now − t| ≤ 60 s` (D-14.4), without overflow for any `t`.
pub fn is_fresh(t: i64, now_ms: i64) -> bool {
    now_ms.abs_diff(t) <= FRESHNESS_MS.unsigned_abs()
}

/// The header value a fetcher sends to `origin` for `handle_id` at `t_ms` with nonce `n`,
/// signed by `identity`; `None` once the key is destroyed.
pub fn header_value(
    identity: &dyn IdentityKey,
    origin: &Origin,
    handle_id: &str,
    t_ms: i64,
    n: &[u8; NONCE_BYTES],
) -> Option<String> {
    let t_text = t_ms.max(0).to_string();
    let n_text = URL_SAFE_NO_PAD.encode(n);
    let sig = identity.sign(&signed_message(origin.as_str(), handle_id, &t_text, &n_text))?;
    Some(format!(
        "{SCHEME};key={};o={origin};t={t_text};n={n_text};sig={}",
        crate::audience::encode_key(&identity.public_key()),
        URL_SAFE_NO_PAD.encode(sig)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::FixedIdentityKey;

    const HANDLE_ID: &str = "3f2a91c40b7e5d68";
    const T: i64 = 1_787_577_327_015;
    const ORIGIN: &str = "http://127.0.0.1:41234";

    fn origin() -> Origin {
        Origin::of_url(ORIGIN).unwrap()
    }

    fn good() -> String {
        header_value(
            &FixedIdentityKey::new([3; 32]),
            &origin(),
            HANDLE_ID,
            T,
            &[5; 16],
        )
        .unwrap()
    }

    /// The header's parameters: `[scheme, key=…, o=…, t=…, n=…, sig=…]`.
    fn params() -> Vec<String> {
        good().split(';').map(str::to_owned).collect()
    }

    fn with(index: usize, value: &str) -> String {
        let mut p = params();
        p[index] = value.to_owned();
        p.join(";")
    }

    #[test]
    fn a_signed_header_parses_and_verifies() {
        let header = good();
        let proof = parse(header.as_bytes()).expect("well formed");
        assert_eq!(proof.origin, ORIGIN);
        assert_eq!(proof.t, T);
        assert_eq!(proof.t_text, T.to_string());
        assert_eq!(proof.n, [5; 16]);
        assert_eq!(proof.n_text, URL_SAFE_NO_PAD.encode([5; 16]));
        assert_eq!(
            proof.key,
            FixedIdentityKey::new([3; 32]).public_key(),
            "the key named is the signer's"
        );
        assert!(verify_signature(&proof, HANDLE_ID));
        assert!(
            !verify_signature(&proof, "3f2a91c40b7e5d69"),
            "another handle"
        );
        assert!(header.starts_with("ed25519;key="));
        assert_eq!(params()[2], format!("o={ORIGIN}"));
        // The same signature under another origin (a relay's): it does not verify.
        let relayed = Proof {
            origin: "http://127.0.0.1:41235",
            ..proof
        };
        assert!(!verify_signature(&relayed, HANDLE_ID), "another origin");
    }

    #[test]
    fn the_signed_bytes_are_the_spec_layout() {
        assert_eq!(
            signed_message("http://h:80", "h", "12", "nn"),
            b"murmur-peer-redeem-v2\x1fhttp://h:80\x1fh\x1f12\x1fnn".to_vec()
        );
    }

    #[test]
    fn an_origin_is_scheme_host_and_explicit_port() {
        for (url, origin) in [
            ("http://127.0.0.1:41234", "http://127.0.0.1:41234"),
            ("HTTP://LocalHost", "http://localhost:80"),
            ("https://peer.example", "https://peer.example:443"),
            ("https://peer.example:8443/capsules/a", "https://peer.example:8443"),
            ("http://h:1/?q#f", "http://h:1"),
            ("http://[::1]:9", "http://[::1]:9"),
            ("https://[FE80::1]", "https://[fe80::1]:443"),
        ] {
            assert_eq!(Origin::of_url(url).unwrap().as_str(), origin, "{url}");
            assert!(Origin::is_canonical(origin), "{origin}");
        }
        for url in ["ftp://h", "h:80", "http://", "http://u@h:1", "http://h:0", ""] {
            assert_eq!(Origin::of_url(url), None, "{url}");
        }
        for not_canonical in [
            "http://h",
            "HTTP://h:80",
            "http://H:80",
            "http://h:80/",
            "http://h:080",
            " http://h:80",
            "http://h:80 ",
            "https://[FE80::1]:443",
        ] {
            assert!(!Origin::is_canonical(not_canonical), "{not_canonical}");
        }
    }

    /// A good header's parameters as written (`key=…`, `o=…`, `n=…`, `sig=…`) and the
    /// base64url values of its key, nonce and signature, to build malformed headers from.
    struct Pieces {
        key: String,
        o: String,
        n: String,
        sig: String,
        key_b64: String,
        n_b64: String,
        sig_b64: String,
    }

    fn pieces() -> Pieces {
        let p = params();
        let value = |at: usize, name: &str| p[at].strip_prefix(name).unwrap().to_owned();
        Pieces {
            key_b64: value(1, "key="),
            n_b64: value(4, "n="),
            sig_b64: value(5, "sig="),
            key: p[1].clone(),
            o: p[2].clone(),
            n: p[4].clone(),
            sig: p[5].clone(),
        }
    }

    /// Asserts that each of `cases`, a label and a header, is refused, naming the good
    /// header's key exactly when `key_known`: the header got that far, so the minter can check
    /// the MAC over it (D-14.5).
    fn assert_refused(cases: &[(&str, Vec<u8>)], key_known: bool) {
        let key_b64 = pieces().key_b64;
        for (label, header) in cases {
            let refused = parse(header).expect_err(label);
            assert_eq!(
                refused.key_text.is_some(),
                key_known,
                "{label}: key known ({})",
                refused.why
            );
            if let Some(key) = refused.key_text {
                assert_eq!(key, key_b64, "{label}");
            }
        }
    }

    /// A header that is not ASCII, or wrong in its scheme, its key, its first separators or the
    /// order of what comes before its key.
    #[test]
    fn a_header_malformed_up_to_its_key_names_no_key() {
        let Pieces { key, o, n, sig, key_b64, .. } = pieces();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("not ASCII", {
 let mut bytes = good().into_bytes();
 bytes.push(0xc3);
 bytes
 }),
            ("UTF-8 but not ASCII", format!("{}é", good()).into_bytes()),
            ("scheme only", b"ed25519".to_vec()),
            ("scheme in capitals", with(0, "ED25519").into_bytes()),
            ("another scheme", with(0, "rsa").into_bytes()),
            ("space after the scheme", with(0, "ed25519 ").into_bytes()),
            ("leading space", format!(" {}", good()).into_bytes()),
            ("key missing", format!("ed25519;t={T}").into_bytes()),
            ("key empty", with(1, "key=").into_bytes()),
            ("key name in capitals", with(1, &format!("KEY={key_b64}")).into_bytes()),
            ("key padded", with(1, &format!("{key}=")).into_bytes()),
            ("key short", with(1, &key[..key.len() - 1]).into_bytes()),
            ("key long", with(1, &format!("{key}A")).into_bytes()),
            ("key in the standard alphabet", with(1, "key=+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/s").into_bytes()),
            ("key with non-canonical trailing bits", with(1, &format!("key={}B", &key_b64[..42])).into_bytes()),
            ("t before key", format!("ed25519;t={T};{key};{o};{n};{sig}").into_bytes()),
            ("o before key", format!("ed25519;{o};{key};t={T};{n};{sig}").into_bytes()),
            ("spaces after separators", good().replace(';', "; ").into_bytes()),
            ("a comma for a separator", good().replace(';', ",").into_bytes()),
        ];
        assert_refused(&cases, false);
    }

    /// `o` missing, not an origin in its one canonical spelling, or out of its place.
    #[test]
    fn a_malformed_origin_is_refused_naming_the_key() {
        let Pieces { key, o, n, sig, .. } = pieces();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("o missing (a v1 header)", format!("ed25519;{key};t={T};{n};{sig}").into_bytes()),
            ("o empty", with(2, "o=").into_bytes()),
            ("o without a port", with(2, "o=http://127.0.0.1").into_bytes()),
            ("o in capitals", with(2, "o=HTTP://127.0.0.1:41234").into_bytes()),
            ("o with a path", with(2, "o=http://127.0.0.1:41234/").into_bytes()),
            ("o another scheme", with(2, "o=ftp://127.0.0.1:41234").into_bytes()),
            ("o bare", with(2, "o=127.0.0.1:41234").into_bytes()),
            ("o name in capitals", with(2, &format!("O={ORIGIN}")).into_bytes()),
            ("o after t", format!("ed25519;{key};t={T};{o};{n};{sig}").into_bytes()),
        ];
        assert_refused(&cases, true);
    }

    /// `t` missing, or not a decimal number without sign or leading zero that fits an `i64`.
    #[test]
    fn a_malformed_time_is_refused_naming_the_key() {
        let Pieces { key, o, n, sig, .. } = pieces();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("t missing", format!("ed25519;{key};{o};{n};{sig}").into_bytes()),
            ("t empty", with(3, "t=").into_bytes()),
            ("t signed", with(3, &format!("t=+{T}")).into_bytes()),
            ("t negative", with(3, &format!("t=-{T}")).into_bytes()),
            ("t leading zero", with(3, &format!("t=0{T}")).into_bytes()),
            ("t decimal point", with(3, &format!("t={T}.0")).into_bytes()),
            ("t hex", with(3, "t=0x1f").into_bytes()),
            ("t over i64", with(3, "t=9223372036854775808").into_bytes()),
            ("t of 20 digits", with(3, "t=10000000000000000000").into_bytes()),
            ("t with a space", with(3, &format!("t= {T}")).into_bytes()),
        ];
        assert_refused(&cases, true);
    }

    /// `n` or `sig` missing, padded, not canonical, or not of their exact lengths.
    #[test]
    fn a_malformed_nonce_or_signature_is_refused_naming_the_key() {
        let Pieces { key, o, n, sig, n_b64, sig_b64, .. } = pieces();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("n missing", format!("ed25519;{key};{o};t={T};{sig}").into_bytes()),
            ("n empty", with(4, "n=").into_bytes()),
            ("n padded", with(4, &format!("n={n_b64}==")).into_bytes()),
            ("n of 15 bytes", with(4, &format!("n={}", URL_SAFE_NO_PAD.encode([1; 15]))).into_bytes()),
            ("n of 17 bytes", with(4, &format!("n={}", URL_SAFE_NO_PAD.encode([1; 17]))).into_bytes()),
            ("n as hex", with(4, &format!("n={}", "ab".repeat(16))).into_bytes()),
            ("n non-canonical", with(4, &format!("n={}B", &n_b64[..21])).into_bytes()),
            ("sig missing", format!("ed25519;{key};{o};t={T};{n}").into_bytes()),
            ("sig empty", with(5, "sig=").into_bytes()),
            ("sig of 63 bytes", with(5, &format!("sig={}", URL_SAFE_NO_PAD.encode([1; 63]))).into_bytes()),
            ("sig of 65 bytes", with(5, &format!("sig={}", URL_SAFE_NO_PAD.encode([1; 65]))).into_bytes()),
            ("sig padded", with(5, &format!("sig={sig_b64}==")).into_bytes()),
        ];
        assert_refused(&cases, true);
    }

    /// Parameters after the key swapped, repeated, added to, or followed by a separator or a
    /// space.
    #[test]
    fn a_malformed_parameter_list_after_the_key_is_refused_naming_the_key() {
        let Pieces { key, o, n, sig, .. } = pieces();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("n and t swapped", format!("ed25519;{key};{o};{n};t={T};{sig}").into_bytes()),
            ("a parameter twice", format!("ed25519;{key};{o};t={T};t={T};{n};{sig}").into_bytes()),
            ("a seventh parameter", format!("{};x=1", good()).into_bytes()),
            ("a trailing separator", format!("{};", good()).into_bytes()),
            ("a trailing space", format!("{} ", good()).into_bytes()),
        ];
        assert_refused(&cases, true);
    }

    #[test]
    fn t_zero_is_a_number_and_freshness_is_inclusive() {
        assert_eq!(parse_t("0"), Some(0));
        assert_eq!(parse_t("00"), None);
        assert_eq!(parse_t("9223372036854775807"), Some(i64::MAX));
        assert!(is_fresh(T - 60_000, T));
        assert!(is_fresh(T + 60_000, T));
        assert!(!is_fresh(T - 60_001, T));
        assert!(!is_fresh(T + 60_001, T));
        assert!(!is_fresh(i64::MAX, i64::MIN));
        assert!(!is_fresh(0, T));
    }

    #[test]
    fn a_destroyed_key_writes_no_header() {
        let key = FixedIdentityKey::new([3; 32]);
        key.destroy();
        assert_eq!(header_value(&key, &origin(), HANDLE_ID, T, &[5; 16]), None);
    }
}
