//! Capsules on in-memory backends in one line, for tests of a runtime that embeds the crate
//! (and the crate's own). Behind the `test-util` feature: nothing here is for production.
//!
//! A [`TestCapsule`] runs on a [`MemoryFilesystem`], a [`ManualClock`], a
//! [`RecordingTraceSink`] and a [`FixedKeyStore`], with a fixed session id, and reads no file:
//! its https trust is built but never loaded.
//!
//! ```
//! use resource_plane::test_util::capsule;
//!
//! let t = capsule("name: reporter\nexports: { peer_files: { root: out/, max_ttl: 15m } }");
//! t.fs.add_file("out/report.md", "hello", 0);
//! let token = t.mint("report.md", "reader@127.0.0.1:9000", 60);
//! t.clock.advance(61_000);
//! let response = t.get(&format!("/resources/peer/{token}"), Some("reader@127.0.0.1:9000"));
//! assert_eq!(response.status(), 410);
//! assert_eq!(t.fs.files_opened(), 0, "an expired handle never reaches a file");
//! ```

use crate::backends::tls::PeerTls;
use crate::backends::{FixedKeyStore, ManualClock, MemoryFilesystem, RecordingTraceSink};
use crate::capsule::{Capsule, CapsuleBuilder};
use crate::http::PlaneBody;
use crate::manifest::{LaunchError, Manifest};
use http::{Method, Response};
use std::sync::Arc;

/// The advertised URL of a test capsule.
pub const TEST_URL: &str = "http://127.0.0.1:41234";
/// The session id of a test capsule.
pub const TEST_SESSION_ID: &str = "ses_00000000000000000000000000000000";
/// What a test capsule's [`ManualClock`] reads at launch (2023-11-14, Unix milliseconds).
pub const TEST_START_MS: i64 = 1_700_000_000_000;
/// The minting key of a test capsule.
pub const TEST_KEY: [u8; 32] = [7; 32];

/// A capsule launched from `yaml` on in-memory backends, with handles to them.
///
/// # Panics
/// When the manifest is refused (the panic message is the refusal's `error[…]` text).
pub fn capsule(yaml: &str) -> TestCapsule {
    TestCapsule::launch(yaml).unwrap_or_else(|refused| panic!("{refused}"))
}

/// A capsule and the in-memory backends it runs on, each reachable from the test: add files,
/// move the clock, read the trace lines.
///
/// ```
/// use resource_plane::scope::Containment;
/// use resource_plane::test_util::{TEST_START_MS, TestCapsule};
///
/// let yaml = "name: r\nexports: { files: { root: out/, mode: read-only } }";
/// let t = TestCapsule::launch_with(yaml, |b| b.containment(Containment::Scoped)).unwrap();
/// t.fs.add_file("out/a.md", "hello", 0);
/// t.fs.add_symlink("out/b.md", "a.md");
/// assert_eq!(t.get("/resources/files/a.md", None).status(), 200);
/// assert_eq!(t.get("/resources/files/b.md", None).status(), 403);
/// assert_eq!(t.trace.events()[1]["outcome"], "symlink_refused");
/// assert_eq!(t.trace.events()[0]["timestamp"], TEST_START_MS);
///
/// // A refused launch is returned, not panicked.
/// let absolute = "name: r\nexports: { files: { root: /etc, mode: read-only } }";
/// assert_eq!(TestCapsule::launch(absolute).unwrap_err().code(), "E-MAN-003");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct TestCapsule {
    /// The capsule.
    pub capsule: Capsule,
    /// Its workdir: add files here, and read [`MemoryFilesystem::files_opened`].
    pub fs: Arc<MemoryFilesystem>,
    /// Its clock, starting at [`TEST_START_MS`].
    pub clock: Arc<ManualClock>,
    /// Every trace line it wrote.
    pub trace: Arc<RecordingTraceSink>,
    /// Its https trust: [`PeerTls::roots_loaded`] stays false unless a peer is reached over
    /// https.
    pub peer_tls: PeerTls,
}

impl TestCapsule {
    /// [`capsule`], returning a refused launch instead of panicking.
    ///
    /// # Errors
    /// As [`Manifest::from_yaml`] and [`CapsuleBuilder::launch`].
    pub fn launch(yaml: &str) -> Result<Self, LaunchError> {
        Self::launch_with(yaml, |builder| builder)
    }

    /// [`launch`](Self::launch) with `customise` applied to the builder after the in-memory
    /// backends are set: to replace a plane, set a containment class or an identity key.
    ///
    /// # Errors
    /// As [`Manifest::from_yaml`] and [`CapsuleBuilder::launch`].
    pub fn launch_with(
        yaml: &str,
        customise: impl FnOnce(CapsuleBuilder<'_>) -> CapsuleBuilder<'_>,
    ) -> Result<Self, LaunchError> {
        let manifest = Manifest::from_yaml(yaml)?.manifest;
        let fs = Arc::new(MemoryFilesystem::new());
        let clock = Arc::new(ManualClock::new(TEST_START_MS));
        let trace = Arc::new(RecordingTraceSink::new());
        let peer_tls = PeerTls::system();
        let builder = Capsule::builder(&manifest)
            .filesystem(fs.clone())
            .clock(clock.clone())
            .keys(Arc::new(FixedKeyStore::new(TEST_KEY)))
            .trace(trace.clone())
            .advertised_url(TEST_URL)
            .session_id(TEST_SESSION_ID)
            .peer_tls(peer_tls.clone());
        let capsule = customise(builder).launch()?;
        Ok(TestCapsule {
            capsule,
            fs,
            clock,
            trace,
            peer_tls,
        })
    }

    /// Mints a handle for the file at `path` (as `share-file` takes it) bound to `audience`
    /// (a peer's `name@host:port`) for `ttl_secs`, as `share-file` would after fetching that
    /// peer's card, and returns its token. Writes no trace line.
    ///
    /// # Panics
    /// When `exports.peer_files` is not declared, or the path is refused (the refusal's code
    /// and reason).
    pub fn mint(&self, path: &str, audience: &str, ttl_secs: u64) -> String {
        let plane = self
            .capsule
            .peer_plane()
            .expect("the manifest declares exports.peer_files");
        let minted = plane
            .resolve_for_mint(path)
            .and_then(|target| plane.mint(&target, &audience.to_ascii_lowercase(), ttl_secs))
            .unwrap_or_else(|refused| {
                panic!(
                    "mint {path:?}: {} ({})",
                    refused.code.as_str(),
                    refused.reason
                )
            });
        minted.token
    }

    /// Answers `GET raw_path` through the capsule's router, in process, with `audience` as
    /// the `x-murmur-audience` header when given.
    pub fn get(&self, raw_path: &str, audience: Option<&str>) -> Response<PlaneBody> {
        let headers: Vec<&[u8]> = audience.map(str::as_bytes).into_iter().collect();
        self.capsule
            .router()
            .respond(&Method::GET, raw_path, &headers)
    }
}
