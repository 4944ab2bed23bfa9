//! The token parser never panics; anything it accepts re-encodes to the same payload, and a
//! redeem of arbitrary bytes answers only the shape, audience or MAC codes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resource_plane::backends::{FixedKeyStore, ManualClock, MemoryFilesystem};
use resource_plane::budget::ByteBudget;
use resource_plane::planes::{ExportScope, HmacPeerPlane, Origin, RedeemRequest, handle};
use resource_plane::refusal::Code;
use resource_plane::scope::{Containment, RootPath};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else { return };
    if let Some(parsed) = handle::parse(token) {
        assert_eq!(parsed.payload.v, 1);
    }
    let fs = Arc::new(MemoryFilesystem::new());
    fs.add_file("out/report.md", "x", 0);
    let plane = HmacPeerPlane::new(
        fs,
        Arc::new(ManualClock::new(0)),
        Arc::new(FixedKeyStore::new([7; 32])),
        ExportScope { root: RootPath::parse("out").unwrap(), max_bytes: 1024, containment: Containment::Sealed },
        "ses_fuzz".into(),
        ByteBudget::new(1 << 20),
        Origin::of_url("http://127.0.0.1:41234").unwrap(),
    );
    let redeem = plane.redeem_blocking(RedeemRequest::new(token, &[b"reader@127.0.0.1:1"]));
    let code = redeem.result.err().map(|r| r.code);
    assert!(
        matches!(code, Some(Code::MalformedHandle | Code::HandleNotValid)),
        "an unsigned token reached {code:?}"
    );
    assert!(redeem.path.is_none(), "a forgery named a path");
});
