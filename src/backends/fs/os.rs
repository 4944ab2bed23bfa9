//! The real filesystem: the workdir held as a directory descriptor from launch, every open
//! contained by the kernel (D-2.4).
//!
//! Primary path: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (plus
//! `RESOLVE_NO_SYMLINKS` below the root under `scoped`), retried on `EAGAIN`. Fallback, when the
//! kernel lacks `openat2` or a test forces it: the shared resolver of `resolve.rs` driven one
//! component at a time with `O_PATH | O_NOFOLLOW`. Either way the final file is probed with
//! `O_PATH`, typed with `fstat`, and only a regular file is reopened for reading, through its
//! own descriptor, so a FIFO never blocks and a device's open routine never runs (D-2.6).

use super::resolve::{self, Lookup, Node, Symlinks};
use super::{FileMeta, Filesystem, FsError, FsErrorKind, OpenFile, RootDir};
use crate::backends::random::{OsRandom, Random};
use crate::path::RelPath;
use crate::scope::{Containment, RootPath};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

/// How many times an `openat2` that answers `EAGAIN` (a concurrent rename) is retried.
const EAGAIN_RETRIES: usize = 16;

/// Which resolution strategy an [`OsFilesystem`] uses. Both contain every open beneath the
/// root and answer alike; `openat2` lets the kernel do it in one call, the fallback walks one
/// component at a time where the kernel lacks `openat2` (or a seccomp policy hides it).
///
/// ```
/// use resource_plane::backends::{OsFilesystem, Strategy};
///
/// # fn main() -> std::io::Result<()> {
/// let workdir = tempfile::tempdir()?;
/// let forced = OsFilesystem::open_with_fallback_walk(workdir.path())?;
/// assert_eq!(forced.strategy(), Strategy::FallbackWalk);
/// // What this kernel offers: `Openat2` on Linux 5.6 and later, unless a policy hides it.
/// let chosen = OsFilesystem::open(workdir.path())?.strategy();
/// println!("containment by {chosen:?}");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Kernel-contained `openat2`.
    Openat2,
    /// Component-by-component walk with `O_NOFOLLOW`.
    FallbackWalk,
}

/// The host filesystem under one workdir, held as a directory descriptor from
/// [`open`](Self::open) on: every later open is resolved beneath it by the kernel, so a path
/// never escapes the workdir or an export root, whatever symlinks or renames the agent makes.
/// A FIFO never blocks an open and a device's open routine never runs.
///
/// ```
/// use resource_plane::backends::{Filesystem, FsErrorKind, OsFilesystem};
/// use resource_plane::scope::{Containment, RootPath};
/// use std::io::Read;
///
/// # fn main() -> std::io::Result<()> {
/// let workdir = tempfile::tempdir()?;
/// std::fs::create_dir(workdir.path().join("out"))?;
/// std::fs::write(workdir.path().join("out/report.md"), "hello")?;
/// std::os::unix::fs::symlink("/etc/hostname", workdir.path().join("out/host"))?;
///
/// let fs = OsFilesystem::open(workdir.path())?;
/// let root = fs.open_root(&RootPath::parse("out/").unwrap(), Containment::Advisory).unwrap();
/// let mut paths = root.walk().unwrap();
/// paths.sort();
/// assert_eq!(paths.iter().map(|p| p.as_str()).collect::<Vec<_>>(), ["host", "report.md"]);
/// assert_eq!(root.open_file(&paths[0]).unwrap_err().kind, FsErrorKind::OutsideRoot);
/// let mut text = String::new();
/// root.open_file(&paths[1]).unwrap().read_to_string(&mut text)?;
/// assert_eq!(text, "hello");
/// # Ok(())
/// # }
/// ```
pub struct OsFilesystem {
    workdir: Arc<OwnedFd>,
    strategy: Strategy,
    /// `/proc/self/fd`, held open so a reopen costs one lookup, not four. Held only when it
    /// is procfs (checked at open): a reopen through it then lands on the probed inode by
    /// construction.
    proc_fds: Option<Arc<OwnedFd>>,
}

impl fmt::Debug for OsFilesystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OsFilesystem")
            .field("workdir_fd", &self.workdir.as_raw_fd())
            .field("strategy", &self.strategy)
            .finish()
    }
}

impl OsFilesystem {
    /// Opens `workdir` and keeps it as a directory handle; uses `openat2` when the kernel has it.
    ///
    /// # Errors
    /// The OS error when `workdir` cannot be opened as a directory.
    pub fn open(workdir: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            workdir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let strategy = if openat2_available(&fd) {
            Strategy::Openat2
        } else {
            Strategy::FallbackWalk
        };
        let proc_fds = rustix::fs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .filter(|dir| lists_our_fds(dir, &fd))
        .map(Arc::new);
        Ok(OsFilesystem {
            workdir: Arc::new(fd),
            strategy,
            proc_fds,
        })
    }

    /// Like [`OsFilesystem::open`], but always uses the fallback walk (for tests, and for
    /// kernels whose seccomp policy hides `openat2`).
    ///
    /// # Errors
    /// As [`OsFilesystem::open`].
    pub fn open_with_fallback_walk(workdir: &Path) -> io::Result<Self> {
        let mut fs = Self::open(workdir)?;
        fs.strategy = Strategy::FallbackWalk;
        Ok(fs)
    }

    /// The strategy in use.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }
}

/// Whether `dir` is procfs and lists this process's descriptors: looking up `ours` through
/// it must land on the very inode `ours` is. Checked once, so that a reopen through `dir`
/// needs no check of its own (a procfs directory of another process mounted over
/// `/proc/self/fd` fails here).
fn lists_our_fds(dir: &OwnedFd, ours: &OwnedFd) -> bool {
    let is_procfs =
        rustix::fs::fstatfs(dir).is_ok_and(|fs| fs.f_type == rustix::fs::PROC_SUPER_MAGIC);
    let same_inode = || -> rustix::io::Result<bool> {
        let looked_up = rustix::fs::openat(
            dir,
            ours.as_raw_fd().to_string(),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let (a, b) = (rustix::fs::fstat(&looked_up)?, rustix::fs::fstat(ours)?);
        Ok(a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    };
    is_procfs && same_inode().unwrap_or(false)
}

fn openat2_available(dir: &OwnedFd) -> bool {
    !matches!(
        rustix::fs::openat2(
            dir,
            ".",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH,
        ),
        Err(Errno::NOSYS | Errno::PERM)
    )
}

/// The one errno → kind mapping of D-2.8.
fn kind_of(errno: Errno, class: Containment) -> FsErrorKind {
    match errno {
        Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG => FsErrorKind::NotFound,
        Errno::XDEV => FsErrorKind::OutsideRoot,
        Errno::LOOP if class.follows_symlinks() => FsErrorKind::NotFound,
        Errno::LOOP => FsErrorKind::SymlinkRefused,
        Errno::NXIO => FsErrorKind::NotARegularFile,
        _ => FsErrorKind::Io,
    }
}

fn fs_error(errno: Errno, class: Containment, what: &str) -> FsError {
    FsError::new(kind_of(errno, class), format!("{what}: {errno}"))
}

fn openat2_retrying(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    resolve: ResolveFlags,
) -> Result<OwnedFd, Errno> {
    let mut attempts = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) if attempts < EAGAIN_RETRIES => attempts += 1,
            other => return other,
        }
    }
}

fn special_kind(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        _ => "not a regular file",
    }
}

fn meta_of(stat: &rustix::fs::Stat) -> FileMeta {
    let mtime_ns = i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec);
    let ctime_ns = i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec);
    FileMeta {
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mtime_ms: i64::try_from(mtime_ns.div_euclid(1_000_000)).unwrap_or(i64::MAX),
        dev: stat.st_dev,
        ino: stat.st_ino,
        mtime_ns,
        ctime_ns,
    }
}

/// Types an `O_PATH` probe and accepts it only if it is a regular file. Nothing is opened for
/// reading yet: that happens on the first read, through `/proc/self/fd`, so it cannot land on
/// another inode, and a caller that only needs the metadata (a listing's cache hit) never pays
/// for it (D-2.6, D-3.6).
fn accept_regular(
    probe: OwnedFd,
    class: Containment,
    proc_fds: Option<Arc<OwnedFd>>,
) -> Result<Box<dyn OpenFile>, FsError> {
    let probed = rustix::fs::fstat(&probe).map_err(|e| fs_error(e, class, "fstat"))?;
    match FileType::from_raw_mode(probed.st_mode) {
        FileType::RegularFile => Ok(Box::new(OsOpenFile {
            state: OpenState::Probed(probe),
            meta: meta_of(&probed),
            proc_fds,
        })),
        FileType::Symlink => Err(FsError::new(
            FsErrorKind::SymlinkRefused,
            "final component is a symlink under the scoped class",
        )),
        other => Err(FsError::new(
            FsErrorKind::NotARegularFile,
            format!("the target is {}", special_kind(other)),
        )),
    }
}

/// Reopens a probed regular file for reading, non-blocking and without a controlling
/// terminal. Through the held procfs `fd` directory the magic link is the probe itself, so
/// the result is the probed inode by construction; through a path looked up now (no procfs
/// handle was held at launch), the inode and type are checked with `fstat` before any read.
fn reopen_for_reading(
    probe: &OwnedFd,
    meta: &FileMeta,
    proc_fds: Option<&OwnedFd>,
) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match proc_fds {
        Some(dir) => {
            return Ok(File::from(rustix::fs::openat(
                dir,
                probe.as_raw_fd().to_string(),
                flags,
                Mode::empty(),
            )?));
        }
        None => rustix::fs::open(
            format!("/proc/self/fd/{}", probe.as_raw_fd()),
            flags,
            Mode::empty(),
        )?,
    };
    let stat = rustix::fs::fstat(&fd)?;
    if stat.st_dev != meta.dev
        || stat.st_ino != meta.ino
        || FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
    {
        return Err(io::Error::other("the inode changed during reopen"));
    }
    Ok(File::from(fd))
}

#[derive(Debug)]
enum OpenState {
    Probed(OwnedFd),
    Reading(File),
}

#[derive(Debug)]
struct OsOpenFile {
    state: OpenState,
    meta: FileMeta,
    proc_fds: Option<Arc<OwnedFd>>,
}

impl Read for OsOpenFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut file = self.reading()?;
        file.read(buf)
    }
}

impl OsOpenFile {
    fn reading(&mut self) -> io::Result<&File> {
        if let OpenState::Probed(probe) = &self.state {
            self.state = OpenState::Reading(reopen_for_reading(
                probe,
                &self.meta,
                self.proc_fds.as_deref(),
            )?);
        }
        match &self.state {
            OpenState::Reading(file) => Ok(file),
            OpenState::Probed(_) => unreachable!("reopened above"),
        }
    }
}

impl OpenFile for OsOpenFile {
    fn meta(&self) -> FileMeta {
        self.meta
    }

    fn read_up_to(&mut self, limit: u64, out: &mut Vec<u8>) -> io::Result<()> {
        // `File` reads into the vector's spare capacity directly: no zeroing, no extra copy.
        self.reading()?.take(limit).read_to_end(out).map(drop)
    }
}

/// `O_PATH | O_NOFOLLOW` lookups, one name at a time: the fallback walk's primitive.
struct OsLookup {
    class: Containment,
}

impl Lookup for OsLookup {
    type Dir = Arc<OwnedFd>;
    type File = OwnedFd;

    fn lookup(&self, dir: &Self::Dir, name: &[u8]) -> Result<Node<Self::Dir, OwnedFd>, FsError> {
        let fd = rustix::fs::openat(
            dir.as_fd(),
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fs_error(e, self.class, "openat"))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| fs_error(e, self.class, "fstat"))?;
        Ok(match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => Node::Dir(Arc::new(fd)),
            FileType::RegularFile => Node::File(fd),
            FileType::Symlink => Node::Symlink(
                rustix::fs::readlinkat(&fd, "", Vec::new())
                    .map_err(|e| fs_error(e, self.class, "readlinkat"))?
                    .into_bytes(),
            ),
            other => Node::Special(special_kind(other)),
        })
    }
}

impl OsFilesystem {
    /// The export root, opened beneath the workdir (`O_PATH`); symlinks in the root's own
    /// path are followed only while they stay inside the workdir (D-2.4, D-2.5).
    ///
    /// # Errors
    /// As [`Filesystem::open_root`].
    fn root_fd(&self, root: &RootPath) -> Result<Arc<OwnedFd>, FsError> {
        let relative = root.relative();
        Ok(match self.strategy {
            Strategy::Openat2 => Arc::new(
                openat2_retrying(
                    self.workdir.as_fd(),
                    &relative,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
                )
                // The root's own path follows symlinks in every class: a loop is "missing".
                .map_err(|e| fs_error(e, Containment::Advisory, "open export root"))?,
            ),
            Strategy::FallbackWalk => {
                let lookup = OsLookup {
                    class: Containment::Advisory,
                };
                match resolve::resolve(
                    &lookup,
                    &self.workdir,
                    relative.as_bytes(),
                    Symlinks::Follow,
                )? {
                    Node::Dir(d) => d,
                    _ => {
                        return Err(FsError::new(
                            FsErrorKind::NotFound,
                            "export root is not a directory",
                        ));
                    }
                }
            }
        })
    }
}

impl Filesystem for OsFilesystem {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        let fd = self.root_fd(root)?;
        Ok(Box::new(OsRootDir {
            proc_fds: self.proc_fds.clone(),
            fd,
            class,
            strategy: self.strategy,
        }))
    }

    fn notifier(&self, root: &RootPath) -> Result<Box<dyn super::ChangeNotifier>, FsError> {
        let fd = self.root_fd(root)?;
        super::inotify::Inotify::start(fd)
            .map(|watcher| Box::new(watcher) as Box<dyn super::ChangeNotifier>)
            .map_err(|e| FsError::new(FsErrorKind::Io, e.0))
    }

    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        let lookup = OsLookup {
            class: Containment::Advisory,
        };
        resolve::check_root(&lookup, &self.workdir, root)
    }

    fn unland(&self, dir: &str, name: &str) -> Result<(), FsError> {
        super::check_landing_names(dir, name)?;
        let dir_fd = rustix::fs::openat(
            self.workdir.as_fd(),
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| land_error(e, "open landing directory"))?;
        rustix::fs::unlinkat(&dir_fd, name, AtFlags::empty())
            .map_err(|e| land_error(e, "remove the landed file"))
    }

    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        land_in(
            self.workdir.as_fd(),
            self.proc_fds.as_deref(),
            dir,
            name,
            bytes,
        )
    }
}

fn land_error(errno: Errno, what: &str) -> FsError {
    let kind = match errno {
        Errno::LOOP | Errno::NOTDIR | Errno::ISDIR | Errno::EXIST => FsErrorKind::PathRefused,
        _ => FsErrorKind::Io,
    };
    FsError::new(kind, format!("{what}: {errno}"))
}

/// Lands `bytes` as `dir/name` beneath the workdir (D-10.4): written whole and fsynced under
/// a temporary name, then renamed over the target, following no symlink on the way.
///
/// The file is first created without any name (`O_TMPFILE`) and linked to its temporary name
/// through `/proc/self/fd` only once whole, so a session that ends mid-write (a signal, a
/// crash) leaves nothing behind, short of the instant between the link and the rename; where
/// the filesystem or `/proc` cannot do that, it is created under the temporary name from the
/// start, and removed on any failure.
///
/// # Errors
/// `PathRefused` when the directory or the target is not what it must be (a symlink, a file
/// where the directory goes, a directory at the target); `Io` otherwise.
fn land_in(
    workdir: BorrowedFd<'_>,
    proc_fds: Option<&OwnedFd>,
    dir: &str,
    name: &str,
    bytes: &[u8],
) -> Result<(), FsError> {
    super::check_landing_names(dir, name)?;
    match rustix::fs::mkdirat(workdir, dir, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(land_error(e, "create landing directory")),
    }
    let dir_fd = rustix::fs::openat(
        workdir,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| land_error(e, "open landing directory"))?;
    let random: &dyn Random = &OsRandom;
    let temp = format!(".{name}.{}.part", random.hex::<8>());
    let unnamed = proc_fds.and_then(|proc_fds| {
        rustix::fs::openat(
            &dir_fd,
            ".",
            OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .ok()
        .map(|fd| (proc_fds, fd))
    });
    let placed = match unnamed {
        Some((proc_fds, fd)) => {
            let mut file = File::from(fd);
            write_whole(&mut file, bytes)?;
            let linked = rustix::fs::linkat(
                proc_fds,
                file.as_raw_fd().to_string().as_str(),
                &dir_fd,
                temp.as_str(),
                AtFlags::SYMLINK_FOLLOW,
            );
            drop(file);
            match linked {
                Ok(()) => Ok(()),
                // `/proc` would not link it (a security policy, an unusual procfs): the named
                // way, from the start.
                Err(_) => write_named(&dir_fd, &temp, bytes),
            }
        }
        None => write_named(&dir_fd, &temp, bytes),
    };
    let renamed = placed.and_then(|()| {
        rustix::fs::renameat(&dir_fd, temp.as_str(), &dir_fd, name)
            .map_err(|e| land_error(e, "rename into place"))
    });
    if let Err(e) = renamed {
        let _ = rustix::fs::unlinkat(&dir_fd, temp.as_str(), AtFlags::empty());
        return Err(e);
    }
    // Make the rename durable; a failure here leaves a whole file, so it is not an error.
    let _ = rustix::fs::fsync(&dir_fd);
    Ok(())
}

/// Creates `temp` in `dir` (never over anything, following nothing) and writes `bytes` to it.
fn write_named(dir: &OwnedFd, temp: &str, bytes: &[u8]) -> Result<(), FsError> {
    let fd = rustix::fs::openat(
        dir,
        temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| land_error(e, "create temp file"))?;
    write_whole(&mut File::from(fd), bytes)
}

/// Writes `bytes` to `file` and waits for them to reach the disk.
fn write_whole(file: &mut File, bytes: &[u8]) -> Result<(), FsError> {
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| FsError::new(FsErrorKind::Io, format!("write temp file: {e}")))
}

#[derive(Debug)]
struct OsRootDir {
    proc_fds: Option<Arc<OwnedFd>>,
    fd: Arc<OwnedFd>,
    class: Containment,
    strategy: Strategy,
}

impl RootDir for OsRootDir {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        let class = self.class;
        let probe = match self.strategy {
            Strategy::Openat2 => {
                let mut flags = OFlags::PATH | OFlags::CLOEXEC;
                let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
                if !class.follows_symlinks() {
                    flags |= OFlags::NOFOLLOW;
                    resolve |= ResolveFlags::NO_SYMLINKS;
                }
                openat2_retrying(self.fd.as_fd(), target.as_str(), flags, resolve)
                    .map_err(|e| fs_error(e, class, "open beneath the export root"))?
            }
            Strategy::FallbackWalk => resolve::regular_file(resolve::resolve(
                &OsLookup { class },
                &self.fd,
                target.as_str().as_bytes(),
                Symlinks::under(class),
            )?)?,
        };
        accept_regular(probe, class, self.proc_fds.clone())
    }

    /// The fallback walk's own resolution, one `O_PATH | O_NOFOLLOW` lookup per name beneath
    /// the root, which follows symlinks as `openat2` does (the conformance suite holds both to
    /// the same answers) and knows the name of every directory it passes through.
    fn canonical_path(&self, target: &RelPath) -> Result<RelPath, FsError> {
        resolve::canonical_path(
            &OsLookup { class: self.class },
            &self.fd,
            target,
            Symlinks::under(self.class),
        )
    }

    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        let mut out = Vec::new();
        self.walk_each(&mut |path| out.push(path))?;
        Ok(out)
    }

    fn walk_each(&self, found: &mut dyn FnMut(RelPath)) -> Result<(), FsError> {
        self.walk_with_meta(false, &mut |path, _| found(path.clone()))
    }

    fn walk_with_meta(
        &self,
        with_meta: bool,
        found: &mut dyn FnMut(&RelPath, Option<FileMeta>),
    ) -> Result<(), FsError> {
        let root = rustix::fs::openat(
            self.fd.as_fd(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fs_error(e, self.class, "open export root for listing"))?;
        let mut pending = Vec::new();
        // Every candidate's path is built in this one buffer.
        let mut named = None;
        list_dir(
            &root,
            None,
            with_meta,
            &mut |name, meta| found(RelPath::set_child(&mut named, None, name), meta),
            &mut pending,
        )
        .map_err(|e| fs_error(e, self.class, "read export root"))?;
        if with_meta && !pending.is_empty() && self.walk_shared(&mut pending, found) {
            return Ok(());
        }
        // Depth-first with an explicit stack of paths, not of descriptors, and no recursion,
        // however deep the tree an agent built. Only the directory listed last stays open: its
        // children, which the stack hands out next, open beneath it by name; any other
        // directory opens afresh from the root.
        let mut listed: (Option<RelPath>, OwnedFd) = (None, root);
        while let Some(path) = pending.pop() {
            let (parent, name) = match path.as_str().rsplit_once('/') {
                Some((parent, name)) => (Some(parent), name),
                None => (None, path.as_str()),
            };
            let opened = if parent == listed.0.as_ref().map(RelPath::as_str) {
                rustix::fs::openat(&listed.1, name, SUBDIR_FLAGS, Mode::empty())
            } else {
                self.open_subdir(&path)
            };
            // An unreadable or vanished subdirectory is omitted, not fatal (D-3.3).
            if let Ok(dir) = opened {
                let _ = list_dir(
                    &dir,
                    Some(&path),
                    with_meta,
                    &mut |name, meta| {
                        found(RelPath::set_child(&mut named, Some(&path), name), meta);
                    },
                    &mut pending,
                );
                listed = (Some(path), dir);
            }
        }
        Ok(())
    }
}

/// How the walk opens a directory to read its entries: `O_NOFOLLOW`, so a directory swapped
/// for a symlink since `getdents` is not descended (D-3.2), and `O_DIRECTORY`, which refuses
/// anything else before any open routine runs.
const SUBDIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Threads that read directories and stat their names at once in a walk that takes metadata:
/// the stats are path lookups in the kernel, which the cores do side by side. The cores are
/// asked once per process, at the first such walk, never when a filesystem is built.
fn stat_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4)))
}

/// The directories a shared walk has still to read, and how many are being read.
struct WalkQueue {
    dirs: Vec<RelPath>,
    busy: usize,
}

fn lock_queue(queue: &std::sync::Mutex<WalkQueue>) -> std::sync::MutexGuard<'_, WalkQueue> {
    queue.lock().unwrap_or_else(|e| e.into_inner())
}

/// Candidates with their stats, as a shared walk's thread hands them to the calling thread:
/// each candidate's name under its directory, the names back to back in one string, so a batch
/// takes a few allocations however many files it names.
struct Batch {
    /// The directories the batch's candidates are in.
    dirs: Vec<RelPath>,
    /// The candidates' names, back to back.
    names: String,
    /// Each candidate: its directory's index in `dirs`, where its name ends in `names`, and
    /// its stat.
    entries: Vec<(u32, usize, Option<FileMeta>)>,
}

impl Batch {
    fn with_capacity(entries: usize) -> Self {
        Batch {
            dirs: Vec::new(),
            // Room for names of a typical length; a longer one grows the string.
            names: String::with_capacity(entries * 24),
            entries: Vec::with_capacity(entries),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds `name`, in the directory added to `dirs` last, with its stat.
    fn push(&mut self, name: &str, meta: Option<FileMeta>) {
        // At most WALK_BATCH directories: one per entry.
        let at = self.dirs.len().saturating_sub(1) as u32;
        self.names.push_str(name);
        self.entries.push((at, self.names.len(), meta));
    }

    /// Each candidate, in the order pushed: its directory, its name, its stat.
    fn each(&self, mut found: impl FnMut(&RelPath, &str, Option<FileMeta>)) {
        let mut start = 0;
        for &(dir, end, meta) in &self.entries {
            found(&self.dirs[dir as usize], &self.names[start..end], meta);
            start = end;
        }
    }
}

/// The candidates a shared walk's thread sends at once: enough that the calling thread wakes a
/// few times per thousand files rather than once per directory.
const WALK_BATCH: usize = 1024;

/// A shared walk thread's batch in the making. Once the calling thread has gone, what the
/// thread finds is dropped.
struct BatchSender {
    batch: Batch,
    /// Whether the batch holds the directory being read (it does not before its first entry,
    /// nor after a flush).
    has_dir: bool,
    send: Option<std::sync::mpsc::SyncSender<Batch>>,
}

impl BatchSender {
    fn new(send: std::sync::mpsc::SyncSender<Batch>) -> Self {
        BatchSender {
            batch: Batch::with_capacity(WALK_BATCH),
            has_dir: false,
            send: Some(send),
        }
    }

    /// The entries pushed from now on are in another directory, which the next push adds to
    /// the batch.
    fn enter(&mut self) {
        self.has_dir = false;
    }

    /// Adds `name` in `dir`, the directory last [`enter`](Self::enter)ed, with its stat.
    fn push(&mut self, dir: &RelPath, name: &str, meta: Option<FileMeta>) {
        if self.send.is_none() {
            return;
        }
        if !self.has_dir {
            self.batch.dirs.push(dir.clone());
            self.has_dir = true;
        }
        self.batch.push(name, meta);
        if self.batch.len() >= WALK_BATCH {
            self.flush();
        }
    }

    /// Sends what the batch holds, if anything.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.batch, Batch::with_capacity(WALK_BATCH));
        self.has_dir = false;
        if let Some(send) = &self.send
            && send.send(batch).is_err()
        {
            self.send = None;
        }
    }
}

/// The next directory for a shared walk's thread to read, counted busy; `None` once every
/// directory has been read, or the calling thread has stopped taking batches. A thread about
/// to wait for another to queue a directory first sends the batch it holds, so the calling
/// thread is not kept waiting for it.
fn take_dir(
    queue: &std::sync::Mutex<WalkQueue>,
    changed: &std::sync::Condvar,
    out: &mut BatchSender,
) -> Option<RelPath> {
    let mut state = lock_queue(queue);
    loop {
        out.send.as_ref()?;
        if let Some(path) = state.dirs.pop() {
            state.busy += 1;
            return Some(path);
        }
        if state.busy == 0 {
            return None;
        }
        if !out.batch.is_empty() {
            drop(state);
            out.flush();
            state = lock_queue(queue);
            continue;
        }
        state = changed.wait(state).unwrap_or_else(|e| e.into_inner());
    }
}

impl OsRootDir {
    /// Reads the directories in `pending` (and every directory beneath them) on
    /// [`stat_threads`] threads at once, each opening its directory beneath the root as the
    /// sequential walk does and handing its candidates, with their stats, to `found` on the
    /// calling thread in batches of up to [`WALK_BATCH`] (a thread sends what it holds when
    /// its batch is full, when it finds no directory left to take, and when it ends). Each
    /// thread holds one directory descriptor at a time, whatever the tree's depth, and at most
    /// one batch however large a directory. `false`, with `pending` untouched, when no thread
    /// could be started: the caller walks alone.
    fn walk_shared(
        &self,
        pending: &mut Vec<RelPath>,
        found: &mut dyn FnMut(&RelPath, Option<FileMeta>),
    ) -> bool {
        let queue = std::sync::Mutex::new(WalkQueue {
            dirs: std::mem::take(pending),
            busy: 0,
        });
        let changed = std::sync::Condvar::new();
        let (send, receive) = std::sync::mpsc::sync_channel::<Batch>(stat_threads() * 2);
        let started = std::thread::scope(|threads| {
            let work = |send: std::sync::mpsc::SyncSender<Batch>| {
                let mut out = BatchSender::new(send);
                while let Some(path) = take_dir(&queue, &changed, &mut out) {
                    let mut subdirs = Vec::new();
                    // An unreadable or vanished subdirectory is omitted, not fatal (D-3.3).
                    if let Ok(dir) = self.open_subdir(&path) {
                        out.enter();
                        let _ = list_dir(
                            &dir,
                            Some(&path),
                            true,
                            &mut |name, meta| out.push(&path, name, meta),
                            &mut subdirs,
                        );
                    }
                    let mut state = lock_queue(&queue);
                    let more = !subdirs.is_empty();
                    state.dirs.append(&mut subdirs);
                    state.busy -= 1;
                    // Only a thread waiting for a directory, or for the walk's end, needs
                    // waking.
                    if more || state.busy == 0 {
                        changed.notify_all();
                    }
                }
                out.flush();
            };
            let started = (0..stat_threads())
                .filter(|_| {
                    let send = send.clone();
                    std::thread::Builder::new()
                        .spawn_scoped(threads, move || work(send))
                        .is_ok()
                })
                .count();
            drop(send);
            let mut named = None;
            for batch in receive {
                batch.each(|dir, name, meta| {
                    found(RelPath::set_child(&mut named, Some(dir), name), meta)
                });
            }
            started
        });
        if started == 0 {
            *pending = queue.into_inner().unwrap_or_else(|e| e.into_inner()).dirs;
        }
        started > 0
    }

    /// Opens the directory at `path` beneath the root for reading its entries, following no
    /// symlink on the way in any class (D-3.2).
    fn open_subdir(&self, path: &RelPath) -> Result<OwnedFd, Errno> {
        let flags = SUBDIR_FLAGS;
        match self.strategy {
            Strategy::Openat2 => openat2_retrying(
                self.fd.as_fd(),
                path.as_str(),
                flags,
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS,
            ),
            Strategy::FallbackWalk => {
                let mut dir = rustix::fs::openat(self.fd.as_fd(), ".", flags, Mode::empty())?;
                for name in path.as_str().split('/') {
                    dir = rustix::fs::openat(&dir, name, flags, Mode::empty())?;
                }
                Ok(dir)
            }
        }
    }
}

/// How many of a directory's entries [`list_dir`] reads before it takes them in name order.
const NAME_RUN: usize = 4096;

/// Reads one directory's entries: the name of each regular file and symlink goes to `found`
/// (with its metadata from a stat relative to `dir` that follows no symlink, for a regular file
/// when `with_meta` asks), and each real directory, as a path under `prefix`, to `pending` for
/// the walk to open later. Names whose path a read could not reach (over `PATH_MAX`, or not
/// UTF-8) are left out.
///
/// The entries are taken in byte order of their names, [`NAME_RUN`] at a time (so a huge
/// directory costs a bounded buffer), not in the hash order `getdents` returns them in: on the
/// 100,000-file bench tree, whose names follow the order the files were made in (as generated
/// files' often do), a repeat listing that stats in name order took 5–10% less CPU time,
/// presumably because the kernel's objects for files made one after another lie together.
fn list_dir(
    dir: &OwnedFd,
    prefix: Option<&RelPath>,
    with_meta: bool,
    found: &mut dyn FnMut(&str, Option<FileMeta>),
    pending: &mut Vec<RelPath>,
) -> Result<(), Errno> {
    let mut entries = rustix::fs::Dir::read_from(dir)?;
    let mut run = NameRun::default();
    loop {
        let read = run.read(&mut entries);
        for (name, file_type) in run.in_order() {
            take_entry(dir, prefix, name, file_type, with_meta, found, pending);
        }
        match read {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            // What was read before the failure has been handed out.
            Err(e) => return Err(e),
        }
    }
}

/// Up to [`NAME_RUN`] of a directory's entries with UTF-8 names (D-3.4: another name cannot
/// round-trip into a read), their names back to back in one string.
#[derive(Default)]
struct NameRun {
    names: String,
    /// Each entry: where its name ends in `names`, and its type as `getdents` gave it.
    entries: Vec<(usize, FileType)>,
}

impl NameRun {
    /// Replaces the run with the next entries of `dir` (`.` and `..` skipped): `true` when
    /// there may be more, `false` at the end; an error after the entries read before it.
    fn read(&mut self, dir: &mut rustix::fs::Dir) -> Result<bool, Errno> {
        self.names.clear();
        self.entries.clear();
        while self.entries.len() < NAME_RUN {
            let Some(entry) = dir.read() else {
                return Ok(false);
            };
            let entry = entry?;
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(raw) else {
                continue;
            };
            self.names.push_str(name);
            self.entries.push((self.names.len(), entry.file_type()));
        }
        Ok(true)
    }

    /// The run's entries, sorted by name.
    fn in_order(&self) -> impl Iterator<Item = (&str, FileType)> {
        let mut order: Vec<(&str, FileType)> = Vec::with_capacity(self.entries.len());
        let mut start = 0;
        for &(end, file_type) in &self.entries {
            order.push((&self.names[start..end], file_type));
            start = end;
        }
        order.sort_unstable_by(|a, b| a.0.cmp(b.0));
        order.into_iter()
    }
}

/// One entry of a directory [`list_dir`] reads, as it describes.
fn take_entry(
    dir: &OwnedFd,
    prefix: Option<&RelPath>,
    name: &str,
    mut file_type: FileType,
    with_meta: bool,
    found: &mut dyn FnMut(&str, Option<FileMeta>),
    pending: &mut Vec<RelPath>,
) {
    if file_type == FileType::Unknown {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => file_type = FileType::from_raw_mode(st.st_mode),
            Err(_) => return,
        }
    }
    match file_type {
        FileType::RegularFile if RelPath::child_fits_path_max(prefix, name) => {
            // Still a regular file when stat'ed, or no metadata: the caller opens it.
            let meta = with_meta
                .then(|| rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok())
                .flatten()
                .filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
                .map(|st| meta_of(&st));
            found(name, meta);
        }
        FileType::Symlink if RelPath::child_fits_path_max(prefix, name) => found(name, None),
        FileType::Directory => {
            let path = RelPath::child(prefix, name);
            if path.has_room_for_children() {
                pending.push(path);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)]
    use super::*;

    fn open_dir(path: &str) -> OwnedFd {
        rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("open a directory")
    }

    #[test]
    fn only_our_own_procfs_fd_table_is_trusted_for_reopens() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let ours = open_dir(scratch.path().to_str().expect("utf-8 path"));
        assert!(lists_our_fds(&open_dir("/proc/self/fd"), &ours));
        assert!(
            !lists_our_fds(&open_dir(scratch.path().to_str().expect("utf-8")), &ours),
            "not procfs"
        );
        // Another process's table, where this machine lets us look at one.
        let other = rustix::fs::open(
            "/proc/1/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        );
        if let (Ok(other), false) = (other, std::process::id() == 1) {
            assert!(
                !lists_our_fds(&other, &ours),
                "another process's descriptors"
            );
        }
        let fs = OsFilesystem::open(scratch.path()).expect("open the workdir");
        assert!(fs.proc_fds.is_some(), "the held handle is used on Linux");
    }

    /// Directories larger than a batch (sent in pieces, the directory named again in each) or
    /// than a run of names read at once, and many small ones (several to a batch): the walk
    /// that stats names each file under its own directory, once, with its own stat, as the
    /// plain walk and an open do, and hands out a directory's names in byte order.
    #[test]
    fn the_shared_walk_names_each_file_under_its_own_directory_across_batches() {
        use crate::backends::fs::Filesystem;
        use crate::scope::{Containment, RootPath};
        let scratch = tempfile::tempdir().expect("scratch");
        let out = scratch.path().join("out");
        let mut dirs: Vec<(String, usize)> = vec![
            ("big".into(), NAME_RUN + 300),
            ("big/bigger".into(), WALK_BATCH + 1),
            ("edge".into(), WALK_BATCH),
        ];
        dirs.extend((0..60).map(|d| (format!("small/s{d:02}"), 20)));
        let mut expected = Vec::new();
        for (dir, files) in &dirs {
            std::fs::create_dir_all(out.join(dir)).expect("mkdir");
            for f in 0..*files {
                // The directory is in each name, so a file named under another is caught.
                let name = format!("{}-{f}", dir.replace('/', "_"));
                std::fs::write(out.join(dir).join(&name), vec![b'x'; f % 7]).expect("write");
                expected.push(format!("{dir}/{name}"));
            }
        }
        std::fs::write(out.join("top"), "t").expect("write");
        expected.push("top".into());
        expected.sort();
        let fs = OsFilesystem::open(scratch.path()).expect("open the workdir");
        let root = fs
            .open_root(&RootPath::parse("out").expect("root"), Containment::Sealed)
            .expect("open root");
        let mut found = Vec::new();
        root.walk_with_meta(true, &mut |path, meta| {
            found.push((path.as_str().to_owned(), meta));
        })
        .expect("walk with stats");
        // In the order found, each directory read in one run lists its names in byte order.
        for (dir, files) in dirs.iter().filter(|(_, files)| *files <= NAME_RUN) {
            let inside: Vec<&str> = found
                .iter()
                .filter_map(|(p, _)| p.strip_prefix(dir.as_str())?.strip_prefix('/'))
                .filter(|name| !name.contains('/'))
                .collect();
            assert_eq!(inside.len(), *files, "{dir}");
            assert!(inside.is_sorted(), "{dir}: {:?}", &inside[..5]);
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, expected);
        let mut plain: Vec<String> = root
            .walk()
            .expect("walk")
            .into_iter()
            .map(RelPath::into_string)
            .collect();
        plain.sort();
        assert_eq!(plain, expected, "the plain walk agrees");
        for (path, meta) in &found {
            let meta = meta.unwrap_or_else(|| panic!("{path}: a regular file has its stat"));
            let opened = root
                .open_file(&RelPath::parse_canonical(path).expect("a walked path"))
                .expect("a regular file")
                .meta();
            assert_eq!(
                meta, opened,
                "{path}: the stat is the open's metadata, whole"
            );
        }
    }

    /// The walk that stats (threads sharing the directories) finds exactly what the plain
    /// walk finds, in any order, with the stat of each regular file as its open sees it and
    /// none for a symlink; FIFOs and directory symlinks are never candidates.
    #[test]
    fn the_shared_walk_finds_what_the_plain_walk_finds_with_each_files_stat() {
        use crate::backends::fs::Filesystem;
        use crate::scope::{Containment, RootPath};
        let scratch = tempfile::tempdir().expect("scratch");
        let out = scratch.path().join("out");
        let mut deep = out.clone();
        for level in 0..30 {
            deep = deep.join(format!("l{level}"));
            std::fs::create_dir_all(&deep).expect("mkdir");
            std::fs::write(deep.join("f"), format!("{level}")).expect("write");
        }
        for d in 0..20 {
            let dir = out.join(format!("d{d}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for f in 0..15 {
                std::fs::write(dir.join(format!("f{f}")), vec![b'x'; f]).expect("write");
            }
        }
        std::os::unix::fs::symlink("d1/f3", out.join("link")).expect("symlink");
        std::os::unix::fs::symlink("d2", out.join("dirlink")).expect("symlink");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            out.join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let fs = OsFilesystem::open(scratch.path()).expect("open the workdir");
        let root = fs
            .open_root(
                &RootPath::parse("out").expect("root"),
                Containment::Advisory,
            )
            .expect("open root");
        let mut plain: Vec<String> = root
            .walk()
            .expect("walk")
            .into_iter()
            .map(RelPath::into_string)
            .collect();
        plain.sort();
        let mut shared = Vec::new();
        root.walk_with_meta(true, &mut |path, meta| shared.push((path.clone(), meta)))
            .expect("walk with stats");
        shared.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let names: Vec<&str> = shared.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, plain);
        // Symlinks are candidates (the caller decides them), with no stat.
        assert_eq!(plain.len(), 30 + 20 * 15 + 2);
        for (path, meta) in &shared {
            match meta {
                None => assert!(["link", "dirlink"].contains(&path.as_str()), "{path}"),
                Some(meta) => {
                    let opened = root.open_file(path).expect("a regular file").meta();
                    assert_eq!(
                        *meta, opened,
                        "{path}: the stat is the open's metadata, whole"
                    );
                }
            }
        }
    }
}
