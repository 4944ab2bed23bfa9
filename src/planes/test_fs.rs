//! Filesystems that misbehave as real ones can, for the tests of the reader and the listing:
//! sizes that went stale between the `fstat` and the read, short reads, slow disks.

use crate::backends::fs::{FileMeta, Filesystem, FsError, MemoryFilesystem, OpenFile, RootDir};
use crate::path::RelPath;
use crate::scope::{Containment, ExportScope, RootPath};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The scope `out`, advisory, serving files of at most `max_bytes`.
pub(crate) fn scope(max_bytes: u64) -> ExportScope {
    ExportScope {
        root: RootPath::parse("out").expect("a valid root"),
        max_bytes,
        containment: Containment::Advisory,
    }
}

/// A filesystem whose files report the size they had before they grew (an `fstat` taken
/// just before a writer appended) on their first `stale_opens` opens, and whose reads return
/// at most `piece` bytes each (as a network or FUSE filesystem may).
#[derive(Debug)]
pub(crate) struct StaleSizes(MemoryFilesystem, u64, usize, Arc<AtomicUsize>);
#[derive(Debug)]
struct StaleRoot(Box<dyn RootDir>, u64, usize, Arc<AtomicUsize>);

impl StaleSizes {
    /// Every open reports `size`.
    pub(crate) fn always(fs: MemoryFilesystem, size: u64, piece: usize) -> Self {
        StaleSizes(fs, size, piece, Arc::new(AtomicUsize::new(usize::MAX)))
    }

    /// The first `opens` opens report `size`; later ones the truth.
    pub(crate) fn first(fs: MemoryFilesystem, size: u64, opens: usize) -> Self {
        StaleSizes(fs, size, usize::MAX, Arc::new(AtomicUsize::new(opens)))
    }
}
#[derive(Debug)]
struct StaleFile(Box<dyn OpenFile>, u64, usize);

impl std::io::Read for StaleFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let piece = buf.len().min(self.2);
        self.0.read(&mut buf[..piece])
    }
}
impl OpenFile for StaleFile {
    fn meta(&self) -> FileMeta {
        FileMeta {
            size: self.1,
            ..self.0.meta()
        }
    }
}
impl RootDir for StaleRoot {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        let inner = self.0.open_file(target)?;
        let stale = self
            .3
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        let size = if stale { self.1 } else { inner.meta().size };
        Ok(Box::new(StaleFile(inner, size, self.2)))
    }
    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        self.0.walk()
    }
}
impl Filesystem for StaleSizes {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        Ok(Box::new(StaleRoot(
            self.0.open_root(root, class)?,
            self.1,
            self.2,
            self.3.clone(),
        )))
    }
    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.0.check_root(root)
    }
    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.0.land(dir, name, bytes)
    }
}

/// A filesystem whose reads wait like a cold disk's (each takes `DISK_WAIT`) and which
/// counts the reads in progress at once, keeping the most it saw.
#[derive(Debug, Default)]
pub(crate) struct ColdDisk {
    pub(crate) files: MemoryFilesystem,
    /// Reads in progress now.
    pub(crate) reading: Arc<AtomicUsize>,
    /// The most reads in progress at once so far.
    pub(crate) most: Arc<AtomicUsize>,
}
#[derive(Debug)]
struct ColdRoot(Box<dyn RootDir>, Arc<AtomicUsize>, Arc<AtomicUsize>);
#[derive(Debug)]
struct ColdFile(Box<dyn OpenFile>, Arc<AtomicUsize>, Arc<AtomicUsize>);

const DISK_WAIT: std::time::Duration = std::time::Duration::from_millis(3);

impl std::io::Read for ColdFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let now = self.1.fetch_add(1, Ordering::SeqCst) + 1;
        self.2.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(DISK_WAIT);
        let read = self.0.read(buf);
        self.1.fetch_sub(1, Ordering::SeqCst);
        read
    }
}
impl OpenFile for ColdFile {
    fn meta(&self) -> FileMeta {
        self.0.meta()
    }
}
impl RootDir for ColdRoot {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        let inner = self.0.open_file(target)?;
        Ok(Box::new(ColdFile(inner, self.1.clone(), self.2.clone())))
    }
    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        self.0.walk()
    }
}
impl Filesystem for ColdDisk {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        let inner = self.files.open_root(root, class)?;
        Ok(Box::new(ColdRoot(
            inner,
            self.reading.clone(),
            self.most.clone(),
        )))
    }
    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.files.check_root(root)
    }
    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.files.land(dir, name, bytes)
    }
}
