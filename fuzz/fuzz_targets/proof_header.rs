//! The redeem-proof header parser (peer-proof v2, D-14.3 and D-14.3.1) never panics; anything it
//! accepts is exactly its own canonical spelling (`o` included: an origin as `Origin` writes
//! one), and a malformed header that names a key starts with that key. A redeem of a live handle
//! minted for a keyed audience, with arbitrary bytes as its proof, is always the one
//! `handle_not_valid` (no proof can be forged without the key) and reads no file.
#![no_main]
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use libfuzzer_sys::fuzz_target;
use resource_plane::backends::{
    FixedIdentityKey, FixedKeyStore, IdentityKey, ManualClock, MemoryFilesystem,
};
use resource_plane::budget::ByteBudget;
use resource_plane::path::RelPath;
use resource_plane::planes::{
    ExportScope, HmacPeerPlane, Origin, PeerPlane, RedeemRequest, proof,
};
use resource_plane::refusal::Code;
use resource_plane::scope::{Containment, RootPath};
use std::sync::Arc;

const NOW: i64 = 1_787_577_327_015;
const ORIGIN: &str = "http://127.0.0.1:41234";

fuzz_target!(|data: &[u8]| {
    match proof::parse(data) {
        Ok(p) => {
            let origin = Origin::of_url(p.origin).expect("an accepted o is an origin");
            assert_eq!(origin.as_str(), p.origin, "accepted a non-canonical origin");
            let spelt = format!(
                "ed25519;key={};o={origin};t={};n={};sig={}",
                URL_SAFE_NO_PAD.encode(p.key),
                p.t,
                URL_SAFE_NO_PAD.encode(p.n),
                URL_SAFE_NO_PAD.encode(p.sig)
            );
            assert_eq!(spelt.as_bytes(), data, "accepted a non-canonical spelling");
            assert_eq!(p.key_text, URL_SAFE_NO_PAD.encode(p.key));
        }
        Err(malformed) => {
            if let Some(key) = malformed.key_text {
                assert!(data.starts_with(format!("ed25519;key={key}").as_bytes()));
                assert_eq!(key.len(), 43);
            }
        }
    }

    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "x", 0);
    let plane = HmacPeerPlane::new(
        fs,
        Arc::new(ManualClock::new(NOW)),
        Arc::new(FixedKeyStore::new([7; 32])),
        ExportScope {
            root: RootPath::parse("out").unwrap(),
            max_bytes: 1024,
            containment: Containment::Sealed,
        },
        "ses_fuzz".into(),
        ByteBudget::new(1 << 20),
        Origin::of_url(ORIGIN).unwrap(),
    );
    let key = URL_SAFE_NO_PAD.encode(FixedIdentityKey::new([9; 32]).public_key());
    let audience = format!("reader@127.0.0.1:1#ed25519:{key}");
    let token = plane
        .mint(&RelPath::parse_canonical("report.md").unwrap(), &audience, 600)
        .unwrap()
        .token;
    let redeem = plane.redeem_blocking(RedeemRequest::new(&token, &[b"reader@127.0.0.1:1"]).with_proof(&[data]));
    let code = redeem.result.err().map(|r| r.code);
    assert_eq!(code, Some(Code::HandleNotValid), "an unsigned proof reached {code:?}");
});
