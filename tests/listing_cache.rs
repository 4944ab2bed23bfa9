//! The listing's hash cache (D-3.6) on the real filesystem: a repeat listing reuses hashes, and
//! a file rewritten in place with the same size and the same mtime is always re-hashed.
#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs

use resource_plane::backends::fs::{
    Containment, FileMeta, Filesystem, FsError, OpenFile, RootDir, RootPath,
};
use resource_plane::backends::{OsFilesystem, SystemClock};
use resource_plane::budget::ByteBudget;
use resource_plane::path::RelPath;
use resource_plane::planes::{ExportScope, OperatorPlane, ResourcePlane};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts the read calls that reach files: a cache hit makes none.
#[derive(Debug)]
struct CountingFs {
    inner: OsFilesystem,
    reads: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct CountingRoot {
    inner: Box<dyn RootDir>,
    reads: Arc<AtomicUsize>,
}

#[derive(Debug)]
struct CountingFile {
    inner: Box<dyn OpenFile>,
    reads: Arc<AtomicUsize>,
}

impl Read for CountingFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(buf)
    }
}

impl OpenFile for CountingFile {
    fn meta(&self) -> FileMeta {
        self.inner.meta()
    }
}

impl RootDir for CountingRoot {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        Ok(Box::new(CountingFile {
            inner: self.inner.open_file(target)?,
            reads: self.reads.clone(),
        }))
    }
    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        self.inner.walk()
    }
}

impl Filesystem for CountingFs {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        Ok(Box::new(CountingRoot {
            inner: self.inner.open_root(root, class)?,
            reads: self.reads.clone(),
        }))
    }
    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.inner.check_root(root)
    }
    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.inner.land(dir, name, bytes)
    }
}

/// An operator plane over `workdir/out` whose file reads are counted.
fn counting_plane(
    workdir: &std::path::Path,
    class: Containment,
) -> (OperatorPlane, Arc<AtomicUsize>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let fs = CountingFs {
        inner: OsFilesystem::open(workdir).unwrap(),
        reads: reads.clone(),
    };
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
    (plane, reads)
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
        .list(&resource_plane::planes::Cancel::default())
        .unwrap();
    assert_eq!(first.len(), 100);
    assert!(
        reads.load(Ordering::SeqCst) >= 100,
        "a cold listing reads every file"
    );

    reads.store(0, Ordering::SeqCst);
    let second = plane
        .list(&resource_plane::planes::Cancel::default())
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
        .list(&resource_plane::planes::Cancel::default())
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
        .list(&resource_plane::planes::Cancel::default())
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
        .list(&resource_plane::planes::Cancel::default())
        .unwrap();
    reads.store(0, Ordering::SeqCst);
    plane
        .list(&resource_plane::planes::Cancel::default())
        .unwrap();
    assert!(
        reads.load(Ordering::SeqCst) >= 1,
        "a file changed within 2 s is never served from the cache"
    );
}
