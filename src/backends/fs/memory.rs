//! An in-memory filesystem running the same D-2 rules through the shared resolver: the test
//! double for planes and tools, checked against the kernel by the conformance suite.

use super::resolve::{self, Lookup, Node, Symlinks};
use super::{FileMeta, Filesystem, FsError, FsErrorKind, OpenFile, RootDir};
use crate::path::RelPath;
use crate::scope::{Containment, RootPath};
use std::collections::BTreeMap;
use std::io::{self, Cursor, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
enum MemNode {
    Dir(Arc<MemDir>),
    File(Arc<MemFile>),
    Symlink(Vec<u8>),
    Special(&'static str),
}

#[derive(Debug, Default)]
struct MemDir {
    entries: Mutex<BTreeMap<Vec<u8>, MemNode>>,
}

impl Drop for MemDir {
    /// Frees subdirectories one at a time from a worklist: the derived drop would recurse once
    /// per level, and a test's thousands-deep tree would overflow the stack.
    fn drop(&mut self) {
        fn take_subdirs(dir: &mut MemDir, into: &mut Vec<Arc<MemDir>>) {
            let entries = dir.entries.get_mut().unwrap_or_else(|e| e.into_inner());
            for (_, node) in std::mem::take(entries) {
                if let MemNode::Dir(sub) = node {
                    into.push(sub);
                }
            }
        }
        let mut orphans = Vec::new();
        take_subdirs(self, &mut orphans);
        while let Some(dir) = orphans.pop() {
            if let Ok(mut dir) = Arc::try_unwrap(dir) {
                take_subdirs(&mut dir, &mut orphans);
            }
        }
    }
}

#[derive(Debug)]
struct MemFile {
    ino: u64,
    /// Bytes, mtime in ms, and the write that last changed them (the in-memory ctime).
    content: Mutex<(bytes::Bytes, i64, u64)>,
    /// When set, every read of this file fails with this error (fault injection).
    read_fault: Mutex<Option<io::ErrorKind>>,
}

/// A workdir held entirely in memory: the test double for planes and tools, which follows the
/// same containment rules as [`OsFilesystem`](super::OsFilesystem) (one conformance suite runs
/// against both). A test builds the tree it needs, symlinks, FIFOs and devices included,
/// injects faults, and counts the files opened.
///
/// Paths given to the builder methods are relative to the workdir, `/`-separated; missing
/// parent directories are created.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/report.md", "hello", 1_700_000_000_000);
/// fs.add_fifo("out/pipe");
/// fs.add_file("out/broken.md", "unreadable", 0);
/// fs.inject_read_fault("out/broken.md", std::io::ErrorKind::Other);
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(fs.clone())
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let router = capsule.router();
/// let get = |path: &str| router.handle(http::Request::get(path).body(()).unwrap());
/// assert_eq!(get("/resources/files/report.md").await.status(), 200);
/// assert_eq!(get("/resources/files/pipe").await.status(), 403); // not_a_regular_file
/// assert_eq!(get("/resources/files/broken.md").await.status(), 500); // io_error
/// assert_eq!(get("/resources/files/..%2fsecret").await.status(), 403); // outside_root
/// assert_eq!(fs.files_opened(), 3, "the lexical refusal opened nothing");
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryFilesystem {
    workdir: Arc<MemDir>,
    next_ino: AtomicU64,
    /// When set, `land` fails with `Io` after creating its temp entry (fault injection).
    land_fault: Mutex<bool>,
    /// Files opened beneath a root, shared with every root opened.
    files_opened: Arc<AtomicU64>,
}

impl Default for MemoryFilesystem {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemoryFilesystem {
    /// An empty workdir.
    pub fn new() -> Self {
        MemoryFilesystem {
            workdir: Arc::new(MemDir::default()),
            next_ino: AtomicU64::new(2),
            land_fault: Mutex::new(false),
            files_opened: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How many times a file has been opened beneath an export root (a read, a listing's
    /// hash, a redeem), successfully or not: what a test asserts to show that a refused
    /// request never reached a file.
    pub fn files_opened(&self) -> u64 {
        self.files_opened.load(Ordering::SeqCst)
    }

    fn parent_of(&self, path: &str) -> (Arc<MemDir>, Vec<u8>) {
        let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let name = parts.pop().expect("a non-empty path").as_bytes().to_vec();
        let mut dir = self.workdir.clone();
        for part in parts {
            let next = {
                let mut entries = lock(&dir.entries);
                let entry = entries
                    .entry(part.as_bytes().to_vec())
                    .or_insert_with(|| MemNode::Dir(Arc::new(MemDir::default())));
                match entry {
                    MemNode::Dir(d) => d.clone(),
                    _ => panic!("{part} in {path} is not a directory"),
                }
            };
            dir = next;
        }
        (dir, name)
    }

    fn put(&self, path: &str, node: MemNode) {
        let (dir, name) = self.parent_of(path);
        lock(&dir.entries).insert(name, node);
    }

    /// Creates or replaces a regular file (a new inode, as a rename over it would).
    pub fn add_file(&self, path: &str, bytes: impl Into<Vec<u8>>, mtime_ms: i64) {
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        self.put(
            path,
            MemNode::File(Arc::new(MemFile {
                ino,
                content: Mutex::new((
                    bytes::Bytes::from(bytes.into()),
                    mtime_ms,
                    self.next_ino.fetch_add(1, Ordering::Relaxed),
                )),
                read_fault: Mutex::new(None),
            })),
        );
    }

    /// Rewrites an existing file in place (same inode), or creates it.
    pub fn write_in_place(&self, path: &str, bytes: impl Into<Vec<u8>>, mtime_ms: i64) {
        let (dir, name) = self.parent_of(path);
        let existing = lock(&dir.entries).get(&name).cloned();
        match existing {
            Some(MemNode::File(f)) => {
                *lock(&f.content) = (
                    bytes::Bytes::from(bytes.into()),
                    mtime_ms,
                    self.next_ino.fetch_add(1, Ordering::Relaxed),
                )
            }
            _ => self.add_file(path, bytes, mtime_ms),
        }
    }

    /// Creates a directory (and its parents).
    pub fn add_dir(&self, path: &str) {
        let (dir, name) = self.parent_of(path);
        lock(&dir.entries)
            .entry(name)
            .or_insert_with(|| MemNode::Dir(Arc::new(MemDir::default())));
    }

    /// Creates a symlink whose text is `target`.
    pub fn add_symlink(&self, path: &str, target: &str) {
        self.put(path, MemNode::Symlink(target.as_bytes().to_vec()));
    }

    /// Creates a FIFO.
    pub fn add_fifo(&self, path: &str) {
        self.put(path, MemNode::Special("a FIFO"));
    }

    /// Creates a socket.
    pub fn add_socket(&self, path: &str) {
        self.put(path, MemNode::Special("a socket"));
    }

    /// Creates a character device.
    pub fn add_char_device(&self, path: &str) {
        self.put(path, MemNode::Special("a character device"));
    }

    /// Removes whatever `path` names (a directory with its contents).
    pub fn remove(&self, path: &str) {
        let (dir, name) = self.parent_of(path);
        lock(&dir.entries).remove(&name);
    }

    /// Makes every later read of the file at `path` fail with `kind` (e.g. `EIO`).
    pub fn inject_read_fault(&self, path: &str, kind: io::ErrorKind) {
        let (dir, name) = self.parent_of(path);
        if let Some(MemNode::File(f)) = lock(&dir.entries).get(&name) {
            *lock(&f.read_fault) = Some(kind);
        }
    }

    /// Makes every later `land` fail as a full disk would.
    pub fn inject_land_fault(&self) {
        *lock(&self.land_fault) = true;
    }

    /// The bytes of the regular file at `path`, following nothing.
    pub fn file_bytes(&self, path: &str) -> Option<Vec<u8>> {
        let (dir, name) = self.parent_of(path);
        match lock(&dir.entries).get(&name) {
            Some(MemNode::File(f)) => Some(lock(&f.content).0.to_vec()),
            _ => None,
        }
    }

    /// The names in the directory at `path` (`""` for the workdir), sorted.
    pub fn dir_names(&self, path: &str) -> Vec<String> {
        let dir = if path.is_empty() {
            Some(self.workdir.clone())
        } else {
            let (parent, name) = self.parent_of(path);
            match lock(&parent.entries).get(&name) {
                Some(MemNode::Dir(d)) => Some(d.clone()),
                _ => None,
            }
        };
        dir.map(|d| {
            lock(&d.entries)
                .keys()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect()
        })
        .unwrap_or_default()
    }
}

struct MemLookup;

impl Lookup for MemLookup {
    type Dir = Arc<MemDir>;
    type File = Arc<MemFile>;

    fn lookup(
        &self,
        dir: &Arc<MemDir>,
        name: &[u8],
    ) -> Result<Node<Arc<MemDir>, Arc<MemFile>>, FsError> {
        match lock(&dir.entries).get(name) {
            None => Err(FsError::new(
                FsErrorKind::NotFound,
                "no such entry (ENOENT)",
            )),
            Some(MemNode::Dir(d)) => Ok(Node::Dir(d.clone())),
            Some(MemNode::File(f)) => Ok(Node::File(f.clone())),
            Some(MemNode::Symlink(t)) => Ok(Node::Symlink(t.clone())),
            Some(MemNode::Special(kind)) => Ok(Node::Special(kind)),
        }
    }
}

impl Filesystem for MemoryFilesystem {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        let relative = root.relative();
        match resolve::resolve(
            &MemLookup,
            &self.workdir,
            relative.as_bytes(),
            Symlinks::Follow,
        )? {
            Node::Dir(dir) => Ok(Box::new(MemRootDir {
                dir,
                class,
                files_opened: self.files_opened.clone(),
            })),
            _ => Err(FsError::new(
                FsErrorKind::NotFound,
                "export root is not a directory",
            )),
        }
    }

    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        resolve::check_root(&MemLookup, &self.workdir, root)
    }

    fn unland(&self, dir: &str, name: &str) -> Result<(), FsError> {
        super::check_landing_names(dir, name)?;
        let landing = match lock(&self.workdir.entries).get(dir.as_bytes()) {
            Some(MemNode::Dir(d)) => d.clone(),
            _ => {
                return Err(FsError::new(
                    FsErrorKind::PathRefused,
                    "landing directory is a symlink or not a directory",
                ));
            }
        };
        match lock(&landing.entries).remove(name.as_bytes()) {
            Some(MemNode::File(_)) => Ok(()),
            _ => Err(FsError::new(FsErrorKind::Io, "no landed file to remove")),
        }
    }

    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        super::check_landing_names(dir, name)?;
        let landing = {
            let mut entries = lock(&self.workdir.entries);
            match entries
                .entry(dir.as_bytes().to_vec())
                .or_insert_with(|| MemNode::Dir(Arc::new(MemDir::default())))
            {
                MemNode::Dir(d) => d.clone(),
                _ => {
                    return Err(FsError::new(
                        FsErrorKind::PathRefused,
                        "landing directory is a symlink or not a directory",
                    ));
                }
            }
        };
        if *lock(&self.land_fault) {
            return Err(FsError::new(
                FsErrorKind::Io,
                "write temp file: no space left on device",
            ));
        }
        let mut entries = lock(&landing.entries);
        if matches!(entries.get(name.as_bytes()), Some(MemNode::Dir(_))) {
            return Err(FsError::new(
                FsErrorKind::PathRefused,
                "rename into place: EISDIR",
            ));
        }
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        entries.insert(
            name.as_bytes().to_vec(),
            MemNode::File(Arc::new(MemFile {
                ino,
                content: Mutex::new((bytes::Bytes::copy_from_slice(bytes), 0, ino)),
                read_fault: Mutex::new(None),
            })),
        );
        Ok(())
    }
}

#[derive(Debug)]
struct MemRootDir {
    dir: Arc<MemDir>,
    class: Containment,
    files_opened: Arc<AtomicU64>,
}

impl RootDir for MemRootDir {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        self.files_opened.fetch_add(1, Ordering::SeqCst);
        let f = resolve::regular_file(resolve::resolve(
            &MemLookup,
            &self.dir,
            target.as_str().as_bytes(),
            Symlinks::under(self.class),
        )?)?;
        let (bytes, mtime_ms, change) = lock(&f.content).clone();
        let fault = *lock(&f.read_fault);
        let size = bytes.len() as u64;
        Ok(Box::new(MemOpenFile {
            cursor: Cursor::new(bytes),
            fault,
            meta: FileMeta {
                size,
                mtime_ms,
                dev: 0,
                ino: f.ino,
                mtime_ns: i128::from(mtime_ms) * 1_000_000,
                // Every write moves the ctime, as the kernel's does.
                ctime_ns: i128::from(mtime_ms) * 1_000_000 + i128::from(change),
            },
        }))
    }

    fn canonical_path(&self, target: &RelPath) -> Result<RelPath, FsError> {
        resolve::canonical_path(&MemLookup, &self.dir, target, Symlinks::under(self.class))
    }

    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        let mut out = Vec::new();
        // Depth-first with an explicit stack, as the OS walk: no recursion on the tree's depth.
        let mut pending = vec![(self.dir.clone(), None::<RelPath>)];
        while let Some((dir, prefix)) = pending.pop() {
            let entries: Vec<(Vec<u8>, MemNode)> = lock(&dir.entries)
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (raw, node) in entries {
                let Ok(name) = std::str::from_utf8(&raw) else {
                    continue;
                };
                let path = match &prefix {
                    Some(p) => p.join(name),
                    None => RelPath::from_name(name),
                };
                match node {
                    MemNode::File(_) | MemNode::Symlink(_) if path.fits_path_max() => {
                        out.push(path);
                    }
                    MemNode::Dir(d) if path.has_room_for_children() => {
                        pending.push((d, Some(path)));
                    }
                    _ => {}
                }
            }
        }
        Ok(out)
    }
}

#[derive(Debug)]
struct MemOpenFile {
    cursor: Cursor<bytes::Bytes>,
    fault: Option<io::ErrorKind>,
    meta: FileMeta,
}

impl Read for MemOpenFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(kind) = self.fault {
            return Err(io::Error::new(kind, "injected read fault (EIO)"));
        }
        self.cursor.read(buf)
    }
}

impl OpenFile for MemOpenFile {
    fn meta(&self) -> FileMeta {
        self.meta
    }
}
