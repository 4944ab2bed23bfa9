//! The listing's hash cache (D-3.6) on the real filesystem: a repeat listing reuses hashes, and
//! a file rewritten in place with the same size and the same mtime is always re-hashed.
#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs

mod support;

use resource_plane::backends::{FileMeta, Filesystem, FsError, OpenFile, RootDir};
use resource_plane::backends::{OsFilesystem, SystemClock};
use resource_plane::budget::ByteBudget;
use resource_plane::path::RelPath;
use resource_plane::planes::{ExportScope, OperatorPlane};
use resource_plane::scope::{Containment, RootPath};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts the read calls that reach files and the files opened (a cache hit makes neither),
/// each read taking `delay`. Every method of the traits is forwarded, so the OS backend's own
/// walk (with its stats) is what runs.
#[derive(Debug)]
struct CountingFs<F = OsFilesystem> {
    inner: F,
    reads: Arc<AtomicUsize>,
    opens: Arc<AtomicUsize>,
    delay: Duration,
}

#[derive(Debug)]
struct CountingRoot {
    inner: Box<dyn RootDir>,
    reads: Arc<AtomicUsize>,
    opens: Arc<AtomicUsize>,
    delay: Duration,
}

#[derive(Debug)]
struct CountingFile {
    inner: Box<dyn OpenFile>,
    reads: Arc<AtomicUsize>,
    delay: Duration,
}

impl Read for CountingFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        self.inner.read(buf)
    }
}

impl OpenFile for CountingFile {
    fn meta(&self) -> FileMeta {
        self.inner.meta()
    }
    /// One counted read call, taking `delay`, however many reads the inner file makes.
    fn read_up_to(&mut self, limit: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        self.inner.read_up_to(limit, out)
    }
}

impl RootDir for CountingRoot {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        self.opens.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(CountingFile {
            inner: self.inner.open_file(target)?,
            reads: self.reads.clone(),
            delay: self.delay,
        }))
    }
    fn canonical_path(&self, target: &RelPath) -> Result<RelPath, FsError> {
        self.inner.canonical_path(target)
    }
    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        self.inner.walk()
    }
    fn walk_each(&self, found: &mut dyn FnMut(RelPath)) -> Result<(), FsError> {
        self.inner.walk_each(found)
    }
    fn walk_with_meta(
        &self,
        with_meta: bool,
        found: &mut dyn FnMut(&RelPath, Option<FileMeta>),
    ) -> Result<(), FsError> {
        self.inner.walk_with_meta(with_meta, found)
    }
}

impl<F: Filesystem> Filesystem for CountingFs<F> {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        Ok(Box::new(CountingRoot {
            inner: self.inner.open_root(root, class)?,
            reads: self.reads.clone(),
            opens: self.opens.clone(),
            delay: self.delay,
        }))
    }
    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.inner.check_root(root)
    }
    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.inner.land(dir, name, bytes)
    }
    fn unland(&self, dir: &str, name: &str) -> Result<(), FsError> {
        self.inner.unland(dir, name)
    }
}

/// Counters of a [`CountingFs`].
struct Counts {
    reads: Arc<AtomicUsize>,
    opens: Arc<AtomicUsize>,
}

fn counting_fs(workdir: &std::path::Path, delay: Duration) -> (CountingFs, Counts) {
    let counts = Counts {
        reads: Arc::new(AtomicUsize::new(0)),
        opens: Arc::new(AtomicUsize::new(0)),
    };
    let fs = CountingFs {
        inner: OsFilesystem::open(workdir).unwrap(),
        reads: counts.reads.clone(),
        opens: counts.opens.clone(),
        delay,
    };
    (fs, counts)
}

/// An operator plane over `workdir/out` whose file reads are counted.
fn counting_plane(
    workdir: &std::path::Path,
    class: Containment,
) -> (OperatorPlane, Arc<AtomicUsize>) {
    let (plane, counts) = counting_plane_opens(workdir, class);
    (plane, counts.reads)
}

/// An operator plane over `workdir/out` whose file reads and opens are counted.
fn counting_plane_opens(workdir: &std::path::Path, class: Containment) -> (OperatorPlane, Counts) {
    let (fs, counts) = counting_fs(workdir, Duration::ZERO);
    let plane = OperatorPlane::new(
        Arc::new(fs),
        Arc::new(SystemClock),
        ExportScope {
            root: RootPath::parse("out").unwrap(),
            max_bytes: 1 << 20,
            containment: class,
        },
        ByteBudget::new(1 << 20),
    );
    (plane, counts)
}

fn set_mtime(path: &std::path::Path, mtime: std::time::SystemTime) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(mtime).unwrap();
}

#[test]
fn repeat_listing_reuses_hashes_and_rehashes_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for i in 0..100 {
        let path = out.join(format!("f{i:03}"));
        std::fs::write(&path, format!("content {i:03}")).unwrap();
        set_mtime(&path, old);
    }
    // ctime cannot be set back: wait out the racy window so the first listing may cache.
    std::thread::sleep(Duration::from_millis(2100));
    let (plane, reads) = counting_plane(dir.path(), Containment::Advisory);

    let first = plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    assert_eq!(first.len(), 100);
    assert!(
        reads.load(Ordering::SeqCst) >= 100,
        "a cold listing reads every file"
    );

    reads.store(0, Ordering::SeqCst);
    let second = plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    assert_eq!(second, first, "an unchanged tree lists identically");
    assert_eq!(
        reads.load(Ordering::SeqCst),
        0,
        "a warm listing reads no file"
    );

    // Rewrite one file in place: same size, and put the same mtime back.
    let victim = out.join("f042");
    std::fs::write(&victim, "CONTENT 042").unwrap();
    set_mtime(&victim, old);
    reads.store(0, Ordering::SeqCst);
    let third = plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    let entry = third.iter().find(|e| e.path == "f042").unwrap();
    assert_eq!(
        entry.sha256,
        resource_plane::hex::sha256_hex(b"CONTENT 042"),
        "the rewrite is re-hashed"
    );
    assert_eq!(
        entry.size_bytes,
        first.iter().find(|e| e.path == "f042").unwrap().size_bytes
    );
    assert!(
        reads.load(Ordering::SeqCst) >= 1,
        "the rewritten file was read"
    );
    assert!(
        reads.load(Ordering::SeqCst) <= 3,
        "only the rewritten file was read"
    );

    // Rewritten again right away (inside the racy window): still re-hashed, never stale.
    std::fs::write(&victim, "cOnTeNt 042").unwrap();
    set_mtime(&victim, old);
    let fourth = plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    let entry = fourth.iter().find(|e| e.path == "f042").unwrap();
    assert_eq!(
        entry.sha256,
        resource_plane::hex::sha256_hex(b"cOnTeNt 042")
    );
}

#[test]
fn fresh_files_are_hashed_every_time() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    std::fs::write(dir.path().join("out/new"), "fresh").unwrap();
    let (plane, reads) = counting_plane(dir.path(), Containment::Scoped);
    plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    reads.store(0, Ordering::SeqCst);
    plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    assert!(
        reads.load(Ordering::SeqCst) >= 1,
        "a file changed within 2 s is never served from the cache"
    );
}

/// A repeat listing recognises cached files from a stat relative to the walk's directory: it
/// opens no file at all, let alone reads one (D-3.6).
#[test]
fn a_warm_listing_opens_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out/sub");
    std::fs::create_dir_all(&out).unwrap();
    for i in 0..50 {
        std::fs::write(out.join(format!("f{i}")), format!("{i}")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(2100));
    let (plane, counts) = counting_plane_opens(dir.path(), Containment::Scoped);
    let cancel = resource_plane::planes::Cancel::default();
    let first = plane.list_blocking(&cancel).unwrap();
    assert_eq!(counts.opens.load(Ordering::SeqCst), 50);
    counts.opens.store(0, Ordering::SeqCst);
    let second = plane.list_blocking(&cancel).unwrap();
    assert_eq!(second, first);
    assert_eq!(counts.opens.load(Ordering::SeqCst), 0, "nothing opened");
    assert_eq!(
        counts.reads.load(Ordering::SeqCst),
        50,
        "only the first listing read"
    );
}

/// A listing whose request future is dropped (its client's connection is gone) stops its work
/// within a second: over files whose reads take 20 ms each, the reads stop soon after.
#[test]
fn a_listing_stops_when_its_request_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    for i in 0..400 {
        std::fs::write(dir.path().join(format!("out/f{i}")), "x").unwrap();
    }
    let (fs, counts) = counting_fs(dir.path(), Duration::from_millis(20));
    let manifest = resource_plane::Manifest::from_yaml(
        "name: lister\nexports: { files: { root: out, mode: read-only } }",
    )
    .unwrap()
    .manifest;
    let capsule = resource_plane::Capsule::launch(
        &manifest,
        resource_plane::CapsuleConfig::new("http://127.0.0.1:9").unwrap(),
        resource_plane::Backends {
            fs: Arc::new(fs),
            clock: Arc::new(SystemClock),
            keys: None,
            trace: Arc::new(resource_plane::backends::RecordingTraceSink::new()),
        },
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let router = capsule.router();
    let request = http::Request::get("/resources/files").body(()).unwrap();
    let listing = runtime.spawn(async move { router.handle(request).await });
    std::thread::sleep(Duration::from_millis(200));
    assert!(!listing.is_finished(), "400 reads of 20 ms take longer");
    listing.abort();
    std::thread::sleep(Duration::from_millis(1000));
    let after_a_second = counts.reads.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        counts.reads.load(Ordering::SeqCst),
        after_a_second,
        "reads went on after the request was dropped"
    );
    assert!(after_a_second < 400, "{after_a_second} files read");
}

/// D-13.3: a 304 for a file whose key the cache holds (from a listing, or from an earlier 200
/// read) is decided from its descriptor's metadata: the file is opened, never read. A file the
/// cache does not know is read and hashed as for a 200, and a changed file is a 200 again.
#[test]
fn a_304_from_the_cache_reads_nothing() {
    use resource_plane::planes::{IfNoneMatch, ReadOutcome};
    let rel = |path: &str| resource_plane::path::RelPath::parse_canonical(path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("listed"), vec![7u8; 300_000]).unwrap();
    std::fs::write(out.join("polled"), "polled").unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    let (plane, counts) = counting_plane_opens(dir.path(), Containment::Advisory);
    let etag = |bytes: &[u8]| format!("\"sha256:{}\"", resource_plane::hex::sha256_hex(bytes));
    let condition = |tag: &str| IfNoneMatch::parse(&[tag.as_bytes()]);

    plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    counts.reads.store(0, Ordering::SeqCst);
    let listed = condition(&etag(&[7u8; 300_000]));
    assert!(matches!(
        plane.read_blocking(&rel("listed"), &listed).unwrap(),
        ReadOutcome::NotModified { .. }
    ));
    assert!(matches!(
        plane
            .read_blocking(&rel("listed"), &condition("*"))
            .unwrap(),
        ReadOutcome::NotModified { .. }
    ));
    assert_eq!(
        counts.reads.load(Ordering::SeqCst),
        0,
        "nothing read for the 304s"
    );

    // A file polled by reads alone: the first 200 caches its hash, the 304s after read nothing.
    std::fs::write(out.join("fresh"), "fresh").unwrap();
    let fresh = condition(&etag(b"fresh"));
    assert!(matches!(
        plane.read_blocking(&rel("fresh"), &fresh).unwrap(),
        ReadOutcome::NotModified { .. }
    ));
    assert!(
        counts.reads.load(Ordering::SeqCst) > 0,
        "unknown to the cache: read"
    );
    let polled = condition(&etag(b"polled"));
    assert!(matches!(
        plane.read_blocking(&rel("polled"), &polled).unwrap(),
        ReadOutcome::NotModified { .. }
    ));
    counts.reads.store(0, Ordering::SeqCst);
    for _ in 0..3 {
        assert!(matches!(
            plane.read_blocking(&rel("polled"), &polled).unwrap(),
            ReadOutcome::NotModified { .. }
        ));
    }
    assert_eq!(
        counts.reads.load(Ordering::SeqCst),
        0,
        "cached by the first read"
    );

    // Rewritten: the key changes, the file is read, and the old etag no longer matches.
    std::fs::write(out.join("polled"), "changed").unwrap();
    match plane.read_blocking(&rel("polled"), &polled).unwrap() {
        ReadOutcome::File(file) => assert_eq!(&file.bytes[..], b"changed"),
        ReadOutcome::NotModified { .. } => panic!("a changed file is not a 304"),
        other => panic!("the crate's plane answers a file whole: {other:?}"),
    }
}

/// The counting wrapper passes the filesystem conformance suite on every implementation.
#[test]
fn the_counting_wrapper_conforms() {
    support::fs_suite::run_all(support::fs_suite::Wrap {
        name: "listing_cache::CountingFs",
        wrap: |fs| {
            Arc::new(CountingFs {
                inner: support::fs_suite::Shared(fs),
                reads: Arc::new(AtomicUsize::new(0)),
                opens: Arc::new(AtomicUsize::new(0)),
                delay: Duration::ZERO,
            })
        },
    });
}
