//! The path decoder never panics, and whatever it accepts is a plain relative path.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resource_plane::path::decode_request_path;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    if let Ok(path) = decode_request_path(raw) {
        let text = path.as_str();
        assert!(!text.is_empty() && !text.starts_with('/') && !text.contains('\0'));
        for component in path.components() {
            assert!(!matches!(component, "" | "." | ".."), "{raw:?} -> {text:?}");
        }
    }
});
