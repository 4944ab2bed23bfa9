//! The filesystem backend: opening an export root beneath the workdir, opening a regular file
//! beneath the root under a containment class, walking the root for a listing, and landing a
//! fetched file (D-2, D-3, D-10.4).
//!
//! Two implementations answer identically, which one conformance suite checks
//! (`tests/fs_conformance.rs`): [`OsFilesystem`] lets the kernel contain every open
//! (`openat2` + `RESOLVE_BENEATH`, with a component-by-component fallback), and
//! [`MemoryFilesystem`] runs the same rules over an in-memory tree.

mod inotify;
mod memory;
mod notify;
mod os;
mod resolve;

pub use memory::MemoryFilesystem;
pub use notify::{ChangeNotifier, Notice};
pub use os::{OsFilesystem, Strategy};

use crate::path::RelPath;
use crate::refusal::{Code, Refusal};
use crate::scope::{Containment, RootCheckError, RootPath};
use std::fmt::{self, Debug};
use std::io::Read;

/// The path a resolution's canonical `names` spell beneath a root (see
/// [`RootDir::canonical_path`]).
///
/// # Errors
/// `Io` when a name is not UTF-8 (no handle can carry it) or there is no name at all (the root
/// itself, which is no file).
fn rel_path_of(names: &[Vec<u8>]) -> Result<RelPath, FsError> {
    let joined = names
        .iter()
        .map(|name| std::str::from_utf8(name))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| FsError::new(FsErrorKind::Io, "the file's canonical path is not UTF-8"))?
        .join("/");
    RelPath::parse_canonical(&joined)
        .map_err(|_| FsError::new(FsErrorKind::Io, "the file has no canonical path"))
}

/// Why a filesystem operation refused; maps one-to-one onto a public [`Code`], so a
/// runtime's own [`Filesystem`] picks the kind and the crate answers with the code.
///
/// ```
/// use resource_plane::backends::{FsError, FsErrorKind};
/// use resource_plane::{Code, Refusal};
///
/// for (kind, code) in [
///     (FsErrorKind::NotFound, Code::NotFound),
///     (FsErrorKind::OutsideRoot, Code::OutsideRoot),
///     (FsErrorKind::SymlinkRefused, Code::SymlinkRefused),
///     (FsErrorKind::NotARegularFile, Code::NotARegularFile),
///     (FsErrorKind::PathRefused, Code::PathRefused),
///     (FsErrorKind::Io, Code::IoError),
/// ] {
///     assert_eq!(Refusal::from(FsError::new(kind, "detail")).code, code);
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsErrorKind {
    /// Nothing there (`ENOENT`, `ENOTDIR`, `ENAMETOOLONG`, a loop under a follow class).
    NotFound,
    /// Resolution left the root (`EXDEV`, an absolute link, `..` above the root).
    OutsideRoot,
    /// A symlink under `scoped`.
    SymlinkRefused,
    /// A directory, FIFO, socket or device.
    NotARegularFile,
    /// Landing met a symlink or a non-directory.
    PathRefused,
    /// Anything else.
    Io,
}

/// A filesystem refusal: its kind plus OS detail for the trace. The detail never reaches the
/// wire: converted into a [`Refusal`], it becomes the trace's `reason`, and the public message
/// is the code's fixed one.
///
/// ```
/// use resource_plane::backends::{FsError, FsErrorKind};
/// use resource_plane::{Code, Refusal};
///
/// let error = FsError::new(FsErrorKind::Io, "EACCES opening out/secret-plan.md");
/// assert_eq!(error.to_string(), "Io: EACCES opening out/secret-plan.md");
/// let refusal = Refusal::from(error);
/// assert_eq!(refusal.code, Code::IoError);
/// assert_eq!(refusal.reason, "EACCES opening out/secret-plan.md"); // for the trace
/// assert_eq!(refusal.to_string(), "io_error: the file could not be read"); // for the wire
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    /// The kind, which decides the public code.
    pub kind: FsErrorKind,
    /// Detail for the trace's `reason` (never sent on the wire).
    pub detail: String,
}

impl FsError {
    /// An error of `kind` with `detail`.
    pub fn new(kind: FsErrorKind, detail: impl Into<String>) -> Self {
        FsError {
            kind,
            detail: detail.into(),
        }
    }
}

/// Refuses a landing `dir` or `name` that is not one plain component.
pub(crate) fn check_landing_names(dir: &str, name: &str) -> Result<(), FsError> {
    let plain = |c: &str| !c.is_empty() && c != "." && c != ".." && !c.contains(['/', '\0']);
    if plain(dir) && plain(name) {
        Ok(())
    } else {
        Err(FsError::new(
            FsErrorKind::PathRefused,
            "landing names must be single plain components",
        ))
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.detail)
    }
}

impl From<FsError> for Refusal {
    fn from(e: FsError) -> Self {
        let code = match e.kind {
            FsErrorKind::NotFound => Code::NotFound,
            FsErrorKind::OutsideRoot => Code::OutsideRoot,
            FsErrorKind::SymlinkRefused => Code::SymlinkRefused,
            FsErrorKind::NotARegularFile => Code::NotARegularFile,
            FsErrorKind::PathRefused => Code::PathRefused,
            FsErrorKind::Io => Code::IoError,
        };
        Refusal::new(code, e.detail)
    }
}

impl From<FsError> for RootCheckError {
    /// `OutsideRoot` is an escape (`E-CAP-007`); any other kind says the workdir could not be
    /// read to tell.
    fn from(e: FsError) -> Self {
        match e.kind {
            FsErrorKind::OutsideRoot => RootCheckError::Escapes,
            _ => RootCheckError::Uncheckable(e.detail),
        }
    }
}

/// What one descriptor says about its file, taken from the descriptor the bytes are read
/// through: the size a read checks against `max_bytes`, the modification time a listing and
/// the `x-murmur-mtime-ms` header show, and the identity (device, inode, times) by which a
/// listing recognises a file whose hash it has cached.
///
/// ```
/// use resource_plane::backends::{Filesystem, MemoryFilesystem};
/// use resource_plane::scope::{Containment, RootPath};
///
/// let fs = MemoryFilesystem::new();
/// fs.add_file("out/report.md", "hello", 1_700_000_000_000);
/// let root = fs.open_root(&RootPath::parse("out").unwrap(), Containment::Advisory).unwrap();
/// let path = root.walk().unwrap().remove(0);
/// let before = root.open_file(&path).unwrap().meta();
/// assert_eq!((before.size, before.mtime_ms), (5, 1_700_000_000_000));
///
/// fs.write_in_place("out/report.md", "hello, world", 1_700_000_060_000);
/// let after = root.open_file(&path).unwrap().meta();
/// assert_eq!((after.dev, after.ino), (before.dev, before.ino), "the same file");
/// assert_eq!(after.size, 12);
/// assert!(after.mtime_ns > before.mtime_ns && after.ctime_ns > before.ctime_ns);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// Size in bytes at open.
    pub size: u64,
    /// Modification time, Unix milliseconds.
    pub mtime_ms: i64,
    /// Device and inode: the file's identity, for the hash cache.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// Modification time, Unix nanoseconds.
    pub mtime_ns: i128,
    /// Status-change time, Unix nanoseconds.
    pub ctime_ns: i128,
}

/// An open regular file: bytes and metadata both come from this one descriptor, so what is
/// served and what is described cannot come from two different files.
///
/// ```
/// use resource_plane::backends::{Filesystem, MemoryFilesystem};
/// use resource_plane::scope::{Containment, RootPath};
/// use std::io::Read;
///
/// let fs = MemoryFilesystem::new();
/// fs.add_file("out/report.md", "hello, world", 0);
/// let root = fs.open_root(&RootPath::parse("out").unwrap(), Containment::Advisory).unwrap();
/// let path = root.walk().unwrap().remove(0);
///
/// let mut file = root.open_file(&path).unwrap();
/// assert_eq!(file.meta().size, 12);
/// let mut head = Vec::new();
/// file.read_up_to(5, &mut head).unwrap(); // never more than the limit
/// assert_eq!(head, b"hello");
/// let mut rest = String::new();
/// file.read_to_string(&mut rest).unwrap(); // it is a `Read` too
/// assert_eq!(rest, ", world");
/// ```
pub trait OpenFile: Read + Send + Debug {
    /// The descriptor's metadata, read at open.
    fn meta(&self) -> FileMeta;

    /// Appends at most `limit` bytes to `out`, until end of file.
    ///
    /// # Errors
    /// The read's error.
    fn read_up_to(&mut self, limit: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut left = limit;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
            match self.read(&mut chunk[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    left -= n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// An export root opened beneath the workdir for one request, under one containment class.
/// Every path is resolved beneath it: nothing it opens lies outside the root, and a symlink
/// is followed only under a class that follows symlinks, and only while it stays beneath.
///
/// ```
/// use resource_plane::backends::{Filesystem, FsErrorKind, MemoryFilesystem};
/// use resource_plane::scope::{Containment, RootPath};
///
/// let fs = MemoryFilesystem::new();
/// fs.add_file("out/data/report.md", "hello", 0);
/// fs.add_symlink("out/latest.md", "data/report.md");
/// fs.add_symlink("out/passwd", "../../etc/passwd");
/// let out = RootPath::parse("out").unwrap();
///
/// let root = fs.open_root(&out, Containment::Advisory).unwrap();
/// let mut paths = root.walk().unwrap(); // regular files and symlinks, as candidates
/// paths.sort();
/// let names: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
/// assert_eq!(names, ["data/report.md", "latest.md", "passwd"]);
/// assert_eq!(root.canonical_path(&paths[1]).unwrap().as_str(), "data/report.md");
/// assert_eq!(root.open_file(&paths[2]).unwrap_err().kind, FsErrorKind::OutsideRoot);
///
/// let scoped = fs.open_root(&out, Containment::Scoped).unwrap();
/// assert_eq!(scoped.open_file(&paths[1]).unwrap_err().kind, FsErrorKind::SymlinkRefused);
/// ```
pub trait RootDir: Send + Sync + Debug {
    /// Opens `target` beneath this root and confirms from the descriptor that it is a regular
    /// file, without running any device's or FIFO's open routine (D-2.4 to D-2.6).
    ///
    /// # Errors
    /// `NotFound` when nothing is there, `OutsideRoot` when the path or a symlink on it leads
    /// out of the root, `SymlinkRefused` for any symlink under `scoped`, `NotARegularFile` for
    /// a directory, FIFO, socket or device, `Io` otherwise (D-2.5, D-2.8).
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError>;

    /// The path beneath this root of the regular file `target` resolves to, with the same
    /// checks as [`open_file`](Self::open_file): each symlink followed replaced by where it
    /// led. A handle's `p` is canonicalised at mint time (`docs/protocol.md`, handles), so it
    /// names the file itself, and moving a symlink
    /// afterwards cannot point the handle elsewhere. The default is `target` itself, right
    /// for a root that reaches no file through a symlink; a root that follows symlinks
    /// overrides it.
    ///
    /// # Errors
    /// As [`open_file`](Self::open_file).
    fn canonical_path(&self, target: &RelPath) -> Result<RelPath, FsError> {
        self.open_file(target).map(|_| target.clone())
    }

    /// Every regular file and symlink beneath the root with a UTF-8 path, never descending a
    /// symlinked directory; the caller decides each candidate with `open_file` (D-3.2, D-3.4).
    /// A path longer than `PATH_MAX` (4,096 bytes) is left out, like a name that is
    /// not UTF-8: no read could reach it. The walk is iterative and holds at most a couple of
    /// descriptors whatever the tree's depth, so an agent's ten-thousand-deep tree can neither
    /// overflow a stack nor exhaust the process's descriptors.
    ///
    /// # Errors
    /// `Io` when the root itself cannot be read; unreadable subdirectories are skipped.
    fn walk(&self) -> Result<Vec<RelPath>, FsError>;

    /// [`walk`](Self::walk), handing each candidate to `found` as soon as it is found, so the
    /// caller can open and hash files while the walk goes on (a listing's workers start before
    /// the last directory is read). The candidates and the errors are those of `walk`; only
    /// their timing differs. The default collects `walk` first.
    ///
    /// # Errors
    /// As [`walk`](Self::walk).
    fn walk_each(&self, found: &mut dyn FnMut(RelPath)) -> Result<(), FsError> {
        self.walk()?.into_iter().for_each(found);
        Ok(())
    }

    /// [`walk_each`](Self::walk_each), and, when `with_meta` asks for it, the metadata of each
    /// candidate that is a regular file as the walk found it, taken without opening it (a
    /// stat of the name relative to the walk's own directory descriptor, following no
    /// symlink): enough to recognise a file whose hash a listing has cached (D-3.6), so that
    /// a repeat listing opens nothing. `None` for a symlink, and for every candidate from the
    /// default, which walks with `walk_each`. Each path is lent to `found` for the call: a
    /// walk may build them all in one buffer, so a caller keeps what it needs of one.
    ///
    /// # Errors
    /// As [`walk`](Self::walk).
    fn walk_with_meta(
        &self,
        with_meta: bool,
        found: &mut dyn FnMut(&RelPath, Option<FileMeta>),
    ) -> Result<(), FsError> {
        let _ = with_meta;
        self.walk_each(&mut |path| found(&path, None))
    }
}

/// The filesystem a capsule's workdir lives on: the launch checks ask it whether a declared
/// root stays inside the workdir, the planes open roots and files through it, and
/// `fetch-peer-file` lands what it fetched in it. [`OsFilesystem`] is the real one;
/// [`MemoryFilesystem`] runs the same rules in memory.
///
/// ```
/// use resource_plane::backends::{Filesystem, FsErrorKind, MemoryFilesystem};
/// use resource_plane::scope::{Containment, RootPath};
/// use std::sync::Arc;
///
/// let memory = Arc::new(MemoryFilesystem::new());
/// let fs: Arc<dyn Filesystem> = memory.clone();
/// memory.add_symlink("shared", "../elsewhere");
/// let shared = RootPath::parse("shared").unwrap();
/// let out = RootPath::parse("out").unwrap();
///
/// // The launch check: a root leaving the workdir is refused; a missing one is not.
/// assert_eq!(fs.check_root(&shared).unwrap_err().kind, FsErrorKind::OutsideRoot);
/// assert!(fs.check_root(&out).is_ok());
/// assert_eq!(fs.open_root(&out, Containment::Advisory).unwrap_err().kind, FsErrorKind::NotFound);
///
/// // Landing: the whole file or nothing, only under plain names.
/// fs.land("peer-in", "h1-report.md", b"hello").unwrap();
/// assert_eq!(memory.file_bytes("peer-in/h1-report.md").unwrap(), b"hello");
/// assert_eq!(fs.land("..", "x.md", b"").unwrap_err().kind, FsErrorKind::PathRefused);
/// fs.unland("peer-in", "h1-report.md").unwrap();
/// assert_eq!(memory.file_bytes("peer-in/h1-report.md"), None);
/// ```
pub trait Filesystem: Debug + Send + Sync {
    /// Opens the export root beneath the workdir; symlinks in the root's own path are followed
    /// only while they stay inside the workdir (D-2.4, D-2.5).
    ///
    /// # Errors
    /// `NotFound` when the root is missing or not a directory, `OutsideRoot` when it escapes the
    /// workdir, `Io` otherwise.
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError>;

    /// The launch check that refuses an export root escaping the workdir (`E-CAP-007`,
    /// D-1.9): `Ok` when the root does not exist or resolves inside the workdir through
    /// relative links only.
    ///
    /// # Errors
    /// `OutsideRoot` for a relative link out (dangling or not) or any absolute link in the
    /// root's path; `Io` when the workdir cannot be read.
    fn check_root(&self, root: &RootPath) -> Result<(), FsError>;

    /// Writes `bytes` to `<dir>/<name>` under the workdir by temp file, fsync and rename,
    /// following no symlink; `dir` is created when missing (D-10.4). No partial file remains
    /// on failure. `dir` and `name` are single plain components (no `/`, not `.` or `..`).
    ///
    /// # Errors
    /// `PathRefused` when `dir` is a symlink or not a directory, `name` is a directory, or
    /// either is not a single plain component; `Io` otherwise (`ENOSPC`, ...).
    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError>;

    /// A source of change notices for the export root `root`, for its watcher (D-17.4):
    /// something beneath the root may have changed. Blocking (it may walk the tree to watch
    /// every directory). The default offers none, and the watcher re-lists every 2 s instead;
    /// [`OsFilesystem`] watches every directory with inotify.
    ///
    /// # Errors
    /// `Io` when no notices can be given (none offered, inotify unavailable, the watch limit
    /// reached); `NotFound` or `OutsideRoot` as for [`open_root`](Self::open_root).
    fn notifier(&self, root: &RootPath) -> Result<Box<dyn ChangeNotifier>, FsError> {
        let _ = root;
        Err(FsError::new(
            FsErrorKind::Io,
            "this filesystem gives no change notices",
        ))
    }

    /// Removes the file [`land`](Self::land) put at `<dir>/<name>`, following no symlink: a
    /// fetch whose trace line cannot be written fails closed and leaves no bytes unrecorded
    /// (D-6.4). The default refuses (a filesystem that cannot land cannot unland either).
    ///
    /// # Errors
    /// `PathRefused` as for `land`; `Io` when the file cannot be removed.
    fn unland(&self, dir: &str, name: &str) -> Result<(), FsError> {
        let _ = (dir, name);
        Err(FsError::new(
            FsErrorKind::Io,
            "this filesystem cannot remove a landed file",
        ))
    }
}
