//! The manifest parser never panics; a refusal is always E-MAN-003 naming a field.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resource_plane::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Manifest::from_yaml(text) {
        Ok(parsed) => assert!(!parsed.manifest.name.is_empty()),
        Err(e) => {
            assert_eq!(e.code(), "E-MAN-003");
            assert!(e.message().contains(':'));
        }
    }
});
