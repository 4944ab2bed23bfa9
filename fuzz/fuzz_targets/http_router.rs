//! The router never panics, never serves a byte from outside the export root, answers only
//! codes from the spec, and leaves exactly one trace line per request under /resources.
#![no_main]
use http::Method;
use libfuzzer_sys::fuzz_target;
use resource_plane::backends::{FixedKeyStore, ManualClock, MemoryFilesystem, TraceSink};
use std::sync::atomic::{AtomicUsize, Ordering};
use resource_plane::http::{Route, Router};
use resource_plane::scope::Containment;
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use std::sync::{Arc, OnceLock};

/// Counts lines and checks each is one JSON object with no token in it.
#[derive(Debug, Default)]
struct CountingSink(AtomicUsize);

impl TraceSink for CountingSink {
    fn append_line(&self, line: &[u8]) -> std::io::Result<()> {
        assert!(line.ends_with(b"\n"));
        let value: serde_json::Value = serde_json::from_slice(line).expect("a trace line is JSON");
        assert!(value.is_object());
        assert!(!line.windows(4).any(|w| w == b"mh1."), "a token reached the trace");
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

struct World {
    router: Router,
    trace: Arc<CountingSink>,
}

fn world(class: usize) -> &'static World {
    static WORLDS: OnceLock<Vec<World>> = OnceLock::new();
    &WORLDS.get_or_init(|| {
        Containment::ALL
            .iter()
            .map(|class| {
                let fs = Arc::new(MemoryFilesystem::new());
                fs.add_file("secret.txt", "SENTINEL-OUTSIDE", 0);
                fs.add_file("out/report.md", "inside", 0);
                fs.add_file("out/sub/f", "inside", 0);
                fs.add_symlink("out/l", "report.md");
                fs.add_symlink("out/s", "../secret.txt");
                fs.add_symlink("out/a", "/secret.txt");
                fs.add_symlink("out/ld", "sub");
                fs.add_symlink("out/up", "../out/report.md");
                fs.add_fifo("out/fifo");
                let manifest = Manifest::from_yaml(
                    "name: fuzz\nexports:\n  files: { root: out, mode: read-only }\n  peer_files: { root: out }\n",
                )
                .unwrap()
                .manifest;
                let config = CapsuleConfig::new("http://127.0.0.1:1")
                    .unwrap()
                    .containment(*class);
                let trace = Arc::new(CountingSink::default());
                let capsule = Capsule::launch(
                    &manifest,
                    config,
                    Backends {
                        fs,
                        clock: Arc::new(ManualClock::new(0)),
                        keys: Some(Arc::new(FixedKeyStore::new([1; 32]))),
                        trace: trace.clone(),
                    },
                )
                .unwrap();
                World { router: capsule.router(), trace }
            })
            .collect()
    })[class % 3]
}

const METHODS: [&str; 5] = ["GET", "HEAD", "POST", "DELETE", "OPTIONS"];
const CODES: [&str; 13] = [
    "not_found", "outside_root", "symlink_refused", "not_a_regular_file", "too_large",
    "method_not_allowed", "io_error", "no_resource_plane", "no_peer_plane", "malformed_handle",
    "missing_audience", "handle_not_valid", "handle_expired",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(path) = std::str::from_utf8(rest) else { return };
    let world = world(usize::from(selector));
    let method = Method::from_bytes(METHODS[usize::from(selector >> 2) % METHODS.len()].as_bytes()).unwrap();
    let before = world.trace.0.load(Ordering::SeqCst);
    let response = world.router.respond(&method, path, &[b"reader@127.0.0.1:2"]);
    let body = response.body().bytes();
    assert!(!body.windows(8).any(|w| w == b"SENTINEL"), "leak for {path:?}");
    if response.status() != 200 {
        let json: serde_json::Value = serde_json::from_slice(&body).expect("refusals are JSON");
        let code = json["error"].as_str().unwrap();
        assert!(CODES.contains(&code), "unexpected code {code}");
    }
    let traced = world.trace.0.load(Ordering::SeqCst) - before;
    let expected = usize::from(!matches!(Route::of(path), Route::Foreign | Route::AgentCard));
    assert_eq!(traced, expected, "trace lines for {path:?}");
});
