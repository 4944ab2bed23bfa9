//! The real filesystem: the workdir held as a directory descriptor from launch, every open
//! contained by the kernel (D-2.4).
//!
//! Primary path: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (plus
//! `RESOLVE_NO_SYMLINKS` below the root under `scoped`), retried on `EAGAIN`. Fallback, when the
//! kernel lacks `openat2` or a test forces it: the shared resolver of `resolve.rs` driven one
//! component at a time with `O_PATH | O_NOFOLLOW`. Either way the final file is probed with
//! `O_PATH`, typed with `fstat`, and only a regular file is reopened for reading, through its
//! own descriptor, so a FIFO never blocks and a device's open routine never runs (D-2.6).
//!
//! This file resolves (the strategy, the root, a path beneath it); `read` opens what it
//! resolved, `walk` and `listing` list a root, `land` writes a fetched file into the workdir.

mod land;
mod listing;
mod read;
mod walk;

use super::resolve::{self, Lookup, Node, Symlinks};
use super::{FileMeta, Filesystem, FsError, FsErrorKind, OpenFile, RootDir};
use crate::path::RelPath;
use crate::scope::{Containment, RootPath};
use read::accept_regular;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::fmt;
use std::io;
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
        land::unland_from(self.workdir.as_fd(), dir, name)
    }

    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        land::land_in(
            self.workdir.as_fd(),
            self.proc_fds.as_deref(),
            dir,
            name,
            bytes,
        )
    }
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
        self.walk_tree(with_meta, found)
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
}
