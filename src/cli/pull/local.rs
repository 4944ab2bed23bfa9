//! The mirror directory: every open beneath it goes one component at a time from a held
//! directory descriptor with `O_NOFOLLOW`, so nothing is read, written or removed through a
//! symlink or outside the directory, whatever the listing says or the directory holds (D-16).
//!
//! Files land by temp file, fsync and rename in their own directory: a reader of the mirror
//! sees the old bytes or the new, never a part. A symlink (or FIFO, socket, device) standing
//! where a listed file goes is replaced by the file, never followed; a symlink or file standing
//! where a listed file's *directory* goes refuses that file (`local_path_refused`), and so does
//! a directory standing where the file goes.

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timespec, Timestamps};
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use super::listing::EntryPath;

/// How a directory beneath the mirror is opened: never through a symlink, never anything but
/// a directory.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// The suffix of the pull's temporary files, named `.<32 lowercase hex>.pull-part`
/// ([`is_temp_name`]). A run that is killed leaves at most one per download in flight; the
/// next run that holds the directory alone removes them ([`MirrorDir::stale_parts`]).
const TEMP_SUFFIX: &str = ".pull-part";

/// How many hex digits a temporary name carries: 16 random bytes.
const TEMP_HEX_DIGITS: usize = 32;

/// Whether `name` is exactly a temporary name as [`MirrorDir::begin`] makes them: `.`, 32
/// lowercase hex digits, `.pull-part`. Nothing else is ever taken for one.
pub(crate) fn is_temp_name(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(b".") else {
        return false;
    };
    let Some(hex) = rest.strip_suffix(TEMP_SUFFIX.as_bytes()) else {
        return false;
    };
    hex.len() == TEMP_HEX_DIGITS && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A local refusal, reported in the run's `failed` list as `<code>: <text>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalError {
    /// `local_path_refused` (a symlink, file or directory in the way) or `io_error`.
    pub(crate) code: &'static str,
    /// What happened, naming paths relative to the mirror directory.
    pub(crate) text: String,
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.text)
    }
}

fn io_error(what: impl fmt::Display, errno: Errno) -> LocalError {
    LocalError {
        code: "io_error",
        text: format!("{what}: {errno}"),
    }
}

fn refused(text: impl Into<String>) -> LocalError {
    LocalError {
        code: "local_path_refused",
        text: text.into(),
    }
}

/// What stands locally where a listed file goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LocalState {
    /// Nothing, or a symlink, FIFO, socket or device, which a download replaces.
    Absent,
    /// A regular file of another size: it differs, whatever its bytes.
    OtherSize,
    /// A regular file of the listed size with this sha256.
    Hashed(String),
}

/// The mirror directory, held open for the whole run.
#[derive(Debug)]
pub(crate) struct MirrorDir {
    root: OwnedFd,
}

/// Whether `path` can be a mirror directory before anything is fetched: an existing directory
/// this user can write in, or a name that does not exist yet in one. Creates nothing. (The
/// check is `access(2)`'s: root passes it on any directory of a writable filesystem.)
///
/// # Errors
/// A message naming what is wrong.
pub(crate) fn check_usable(path: &Path) -> Result<(), String> {
    use rustix::fs::Access;
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => rustix::fs::access(path, Access::WRITE_OK | Access::EXEC_OK)
            .map_err(|e| format!("not a directory this user can write in: {e}")),
        Ok(_) => Err("exists and is not a directory".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            match std::fs::metadata(parent) {
                Ok(meta) if meta.is_dir() => {
                    rustix::fs::access(parent, Access::WRITE_OK | Access::EXEC_OK)
                        .map_err(|e| format!("cannot be created: its parent is not writable: {e}"))
                }
                _ => Err("does not exist, nor does its parent directory".into()),
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

impl MirrorDir {
    /// Opens `path` as the mirror directory, creating it (one level, like `mkdir`) when it
    /// does not exist. `path` itself may be a symlink to a directory: the operator named it.
    ///
    /// # Errors
    /// The OS error when it cannot be created or opened as a directory.
    pub(crate) fn open_or_create(path: &Path) -> std::io::Result<Self> {
        match rustix::fs::mkdir(path, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(MirrorDir { root })
    }

    /// Opens the directory that holds `path`, one component at a time beneath the root,
    /// creating missing ones when `create` is set. `Ok(None)`: a directory is missing and
    /// `create` is not set.
    fn parent_of(&self, path: &EntryPath, create: bool) -> Result<Option<OwnedFd>, LocalError> {
        let components: Vec<&str> = path.components().collect();
        let (_, parents) = components.split_last().unwrap_or((&"", &[]));
        let mut dir: Option<OwnedFd> = None;
        for (depth, name) in parents.iter().enumerate() {
            let at = dir.as_ref().map_or(self.root.as_fd(), OwnedFd::as_fd);
            if create {
                match rustix::fs::mkdirat(at, *name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => {
                        return Err(io_error(
                            format_args!("create directory {}", parents[..=depth].join("/")),
                            e,
                        ));
                    }
                }
            }
            dir = Some(
                match rustix::fs::openat(at, *name, DIR_FLAGS, Mode::empty()) {
                    Ok(fd) => fd,
                    Err(Errno::NOENT) if !create => return Ok(None),
                    Err(Errno::LOOP | Errno::NOTDIR) => {
                        return Err(refused(format!(
                            "{} is a symlink or not a directory; nothing is written through it",
                            parents[..=depth].join("/")
                        )));
                    }
                    Err(e) => {
                        return Err(io_error(
                            format_args!("open directory {}", parents[..=depth].join("/")),
                            e,
                        ));
                    }
                },
            );
        }
        Ok(Some(match dir {
            Some(dir) => dir,
            None => rustix::fs::openat(&self.root, ".", DIR_FLAGS, Mode::empty())
                .map_err(|e| io_error("open the mirror directory", e))?,
        }))
    }

    /// What stands at `path` now, hashing a regular file of `size` bytes. Reads nothing but
    /// a regular file, opened through its own directory with `O_NOFOLLOW | O_NONBLOCK`.
    ///
    /// # Errors
    /// `local_path_refused` when a directory on the way is a symlink or not a directory, or a
    /// directory stands at `path`; `io_error` when a file cannot be read.
    pub(crate) fn state(&self, path: &EntryPath, size: u64) -> Result<LocalState, LocalError> {
        let Some(dir) = self.parent_of(path, false)? else {
            return Ok(LocalState::Absent);
        };
        let name = last_component(path);
        let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Ok(LocalState::Absent),
            Err(e) => return Err(io_error(format_args!("stat {path}"), e)),
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(directory_in_the_way(path)),
            _ => return Ok(LocalState::Absent),
        }
        if u64::try_from(stat.st_size).ok() != Some(size) {
            return Ok(LocalState::OtherSize);
        }
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error(format_args!("open {path}"), e))?;
        // The name may have changed hands since the stat: hash only the regular file it was.
        let opened =
            rustix::fs::fstat(&fd).map_err(|e| io_error(format_args!("stat {path}"), e))?;
        if FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile
            || (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino)
        {
            return Ok(LocalState::Absent);
        }
        let mut file = File::from(fd);
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => hasher.update(&buffer[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(LocalError {
                        code: "io_error",
                        text: format!("read {path}: {e}"),
                    });
                }
            }
        }
        Ok(LocalState::Hashed(crate::hex::encode(&hasher.finalize())))
    }

    /// Creates a temporary file in the directory `path` goes in (creating that directory
    /// and its parents when missing), to be filled and then [committed](TempFile::commit).
    ///
    /// # Errors
    /// `local_path_refused` when a directory on the way is a symlink or not a directory;
    /// `io_error` when something cannot be created.
    pub(crate) fn begin(&self, path: &EntryPath) -> Result<TempFile, LocalError> {
        let dir = self
            .parent_of(path, true)?
            .ok_or_else(|| refused(format!("the directory of {path} is missing")))?;
        let temp = format!(
            ".{}{TEMP_SUFFIX}",
            crate::cli::random_hex::<{ TEMP_HEX_DIGITS / 2 }>()
        );
        debug_assert!(is_temp_name(temp.as_bytes()));
        let fd = rustix::fs::openat(
            &dir,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| io_error(format_args!("create a temporary file for {path}"), e))?;
        Ok(TempFile {
            dir,
            temp,
            path: path.clone(),
            file: Some(File::from(fd)),
            placed: false,
        })
    }

    /// Every regular file beneath the root whose `/`-joined path is not in `keep`, as
    /// components. Directories are walked without following any symlink; a directory that
    /// cannot be read is skipped.
    pub(crate) fn stale_files(
        &self,
        keep: &std::collections::HashSet<String>,
    ) -> Vec<Vec<Vec<u8>>> {
        self.regular_files(|path| !join(path).is_some_and(|p| keep.contains(&p)))
    }

    /// Every regular file beneath the root named as this program names its temporary files
    /// ([`is_temp_name`]) whose `/`-joined path is not in `keep` (an export may hold a file so
    /// named: it is mirrored like any other). Only a run that holds the directory alone
    /// ([`try_lock_sole`](Self::try_lock_sole)) may remove them: another run's are in flight.
    pub(crate) fn stale_parts(
        &self,
        keep: &std::collections::HashSet<String>,
    ) -> Vec<Vec<Vec<u8>>> {
        self.regular_files(|path| {
            path.last().is_some_and(|name| is_temp_name(name))
                && !join(path).is_some_and(|p| keep.contains(&p))
        })
    }

    /// The regular files beneath the root that `wanted` picks, as components, sorted.
    /// Directories are walked without following any symlink; one that cannot be read is
    /// skipped.
    fn regular_files(&self, mut wanted: impl FnMut(&[Vec<u8>]) -> bool) -> Vec<Vec<Vec<u8>>> {
        let mut found = Vec::new();
        let mut pending: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        while let Some(dir_path) = pending.pop() {
            let Ok(dir) = self.open_dir(&dir_path) else {
                continue;
            };
            let Ok(mut entries) = rustix::fs::Dir::read_from(&dir) else {
                continue;
            };
            while let Some(Ok(entry)) = entries.read() {
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let mut file_type = entry.file_type();
                if file_type == FileType::Unknown {
                    match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => file_type = FileType::from_raw_mode(st.st_mode),
                        Err(_) => continue,
                    }
                }
                let mut child = dir_path.clone();
                child.push(name.to_vec());
                match file_type {
                    FileType::Directory => pending.push(child),
                    FileType::RegularFile if wanted(&child) => found.push(child),
                    _ => {}
                }
            }
        }
        found.sort();
        found
    }

    /// Takes the directory's lock alone (`flock(2)`, exclusive, without waiting): `Ok(true)`
    /// when no other pull holds it, so no temporary file beneath it is in flight and the
    /// stale ones may go; `Ok(false)` when another pull holds it. The lock is the open
    /// directory's and ends with it, so a killed run never leaves it held.
    ///
    /// # Errors
    /// The OS error when the filesystem offers no locks.
    pub(crate) fn try_lock_sole(&self) -> Result<bool, Errno> {
        match rustix::fs::flock(
            &self.root,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Holds the directory's lock shared for the rest of the run (after
    /// [`try_lock_sole`](Self::try_lock_sole), whether or not it succeeded), so that no later
    /// run takes it alone while this one has temporary files in flight. Waits while another
    /// run holds it alone (it is removing stale temporary files).
    ///
    /// # Errors
    /// The OS error when the filesystem offers no locks.
    pub(crate) fn lock_shared(&self) -> Result<(), Errno> {
        rustix::fs::flock(&self.root, rustix::fs::FlockOperation::LockShared)
    }

    /// Opens the directory at `components` beneath the root, following no symlink.
    fn open_dir(&self, components: &[Vec<u8>]) -> Result<OwnedFd, Errno> {
        let mut dir = rustix::fs::openat(&self.root, ".", DIR_FLAGS, Mode::empty())?;
        for name in components {
            dir = rustix::fs::openat(&dir, name.as_slice(), DIR_FLAGS, Mode::empty())?;
        }
        Ok(dir)
    }

    /// Removes the regular file at `components`, never following a symlink and never
    /// removing anything but a regular file.
    ///
    /// # Errors
    /// `local_path_refused` when it is no longer a regular file; `io_error` otherwise.
    pub(crate) fn remove(&self, components: &[Vec<u8>]) -> Result<(), LocalError> {
        let shown = display(components);
        let (name, parents) = components
            .split_last()
            .ok_or_else(|| refused("the mirror directory itself"))?;
        let dir = self
            .open_dir(parents)
            .map_err(|e| io_error(format_args!("open the directory of {shown}"), e))?;
        let stat = rustix::fs::statat(&dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| io_error(format_args!("stat {shown}"), e))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(refused(format!("{shown} is no longer a regular file")));
        }
        rustix::fs::unlinkat(&dir, name.as_slice(), AtFlags::empty())
            .map_err(|e| io_error(format_args!("remove {shown}"), e))
    }

    /// Removes the regular file at the listed `path` when one is there (a watched removal):
    /// `Ok(false)` when nothing is, or a directory on the way is missing. Never follows a
    /// symlink and never removes anything but a regular file.
    ///
    /// # Errors
    /// `local_path_refused` when a directory on the way is a symlink or not a directory, or
    /// something other than a regular file stands at `path`; `io_error` otherwise.
    pub(crate) fn remove_if_present(&self, path: &EntryPath) -> Result<bool, LocalError> {
        let Some(dir) = self.parent_of(path, false)? else {
            return Ok(false);
        };
        let name = last_component(path);
        let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Ok(false),
            Err(e) => return Err(io_error(format_args!("stat {path}"), e)),
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(refused(format!(
                "{path} is not a regular file here; it is not removed"
            )));
        }
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(io_error(format_args!("remove {path}"), e)),
        }
    }

    /// Removes each directory above the `removed` files that is now empty, deepest first,
    /// never the root; a directory that still holds anything stays.
    pub(crate) fn prune(&self, removed: &[Vec<Vec<u8>>]) {
        let mut dirs: Vec<&[Vec<u8>]> = removed
            .iter()
            .flat_map(|path| (1..path.len()).map(move |depth| &path[..depth]))
            .collect();
        dirs.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        dirs.dedup();
        for dir in dirs {
            if let Some((name, parents)) = dir.split_last()
                && let Ok(parent) = self.open_dir(parents)
            {
                let _ = rustix::fs::unlinkat(&parent, name.as_slice(), AtFlags::REMOVEDIR);
            }
        }
    }
}

/// A path's components joined with `/`, when all are UTF-8.
fn join(components: &[Vec<u8>]) -> Option<String> {
    let names: Vec<&str> = components
        .iter()
        .map(|c| std::str::from_utf8(c).ok())
        .collect::<Option<_>>()?;
    Some(names.join("/"))
}

/// A local path for a message (lossy where a name is not UTF-8).
pub(crate) fn display(components: &[Vec<u8>]) -> String {
    components
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn last_component(path: &EntryPath) -> &str {
    path.components().last().unwrap_or_default()
}

fn directory_in_the_way(path: &EntryPath) -> LocalError {
    refused(format!("{path} is a local directory; it is not replaced"))
}

/// A file being downloaded, under a temporary name in its final directory. Dropped before
/// [`commit`](Self::commit), it removes itself.
#[derive(Debug)]
pub(crate) struct TempFile {
    dir: OwnedFd,
    temp: String,
    path: EntryPath,
    file: Option<File>,
    placed: bool,
}

impl TempFile {
    /// The open file, to be written; put it back with [`put_back`](Self::put_back).
    pub(crate) fn take_file(&mut self) -> Option<File> {
        self.file.take()
    }

    /// Returns the file taken by [`take_file`](Self::take_file).
    pub(crate) fn put_back(&mut self, file: File) {
        self.file = Some(file);
    }

    /// Waits for the bytes to reach the disk, sets the modification time to `mtime_ms`, and
    /// renames the file over `path`, then makes the rename durable.
    ///
    /// # Errors
    /// `local_path_refused` when a directory stands at `path`; `io_error` otherwise.
    pub(crate) fn commit(mut self, mtime_ms: i64) -> Result<(), LocalError> {
        let path = self.path.clone();
        let file = self.file.take().ok_or_else(|| LocalError {
            code: "io_error",
            text: format!("{path}: the temporary file was not handed back"),
        })?;
        file.sync_all().map_err(|e| LocalError {
            code: "io_error",
            text: format!("write {path}: {e}"),
        })?;
        // The listing's time is the export's, not the download's; a time that cannot be set
        // leaves the file whole, so it is not an error.
        let _ = rustix::fs::futimens(&file, &timestamps(mtime_ms));
        drop(file);
        let name = last_component(&path);
        match rustix::fs::renameat(&self.dir, self.temp.as_str(), &self.dir, name) {
            Ok(()) => {}
            Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
                return Err(directory_in_the_way(&path));
            }
            Err(e) => return Err(io_error(format_args!("rename into {path}"), e)),
        }
        self.placed = true;
        let _ = rustix::fs::fsync(&self.dir);
        Ok(())
    }

    fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.placed {
            let _ = rustix::fs::unlinkat(self.dir(), self.temp.as_str(), AtFlags::empty());
        }
    }
}

/// Access and modification time both `mtime_ms` (Unix milliseconds, may be negative).
fn timestamps(mtime_ms: i64) -> Timestamps {
    let time = Timespec {
        tv_sec: mtime_ms.div_euclid(1000),
        tv_nsec: mtime_ms.rem_euclid(1000) * 1_000_000,
    };
    Timestamps {
        last_access: time,
        last_modification: time,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // the tests build their own directories with std::fs
    use super::*;
    use crate::cli::pull::listing::check_path;
    use std::collections::HashSet;
    use std::io::Write;

    fn path(p: &str) -> EntryPath {
        check_path(p).unwrap()
    }

    fn land(dir: &MirrorDir, p: &str, bytes: &[u8], mtime_ms: i64) -> Result<(), LocalError> {
        let mut temp = dir.begin(&path(p))?;
        let mut file = temp.take_file().unwrap();
        file.write_all(bytes).unwrap();
        temp.put_back(file);
        temp.commit(mtime_ms)
    }

    #[test]
    fn lands_nested_files_and_hashes_them_back() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("mirror");
        let dir = MirrorDir::open_or_create(&root).unwrap();
        land(&dir, "a/b/c.txt", b"bee", 1_700_000_000_123).unwrap();
        assert_eq!(std::fs::read(root.join("a/b/c.txt")).unwrap(), b"bee");
        let mtime = std::fs::metadata(root.join("a/b/c.txt"))
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        assert_eq!(mtime.as_millis(), 1_700_000_000_123);
        assert_eq!(
            dir.state(&path("a/b/c.txt"), 3).unwrap(),
            LocalState::Hashed(crate::hex::sha256_hex(b"bee"))
        );
        assert_eq!(
            dir.state(&path("a/b/c.txt"), 4).unwrap(),
            LocalState::OtherSize
        );
        assert_eq!(dir.state(&path("a/x/y"), 1).unwrap(), LocalState::Absent);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(root.join("a/b")).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn symlinked_directories_are_never_written_through() {
        let scratch = tempfile::tempdir().unwrap();
        let outside = scratch.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let root = scratch.path().join("mirror");
        let dir = MirrorDir::open_or_create(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::fs::write(root.join("file"), b"x").unwrap();
        for p in ["link/x", "file/x"] {
            let error = land(&dir, p, b"evil", 0).unwrap_err();
            assert_eq!(error.code, "local_path_refused", "{p}: {error}");
            assert_eq!(
                dir.state(&path(p), 4).unwrap_err().code,
                "local_path_refused"
            );
        }
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_final_symlink_is_replaced_and_its_target_untouched() {
        let scratch = tempfile::tempdir().unwrap();
        let target = scratch.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let root = scratch.path().join("mirror");
        let dir = MirrorDir::open_or_create(&root).unwrap();
        std::os::unix::fs::symlink(&target, root.join("f")).unwrap();
        assert_eq!(dir.state(&path("f"), 4).unwrap(), LocalState::Absent);
        land(&dir, "f", b"new", 0).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(root.join("f")).unwrap().is_file());
    }

    #[test]
    fn a_directory_where_the_file_goes_is_refused_and_kept() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("mirror");
        let dir = MirrorDir::open_or_create(&root).unwrap();
        std::fs::create_dir_all(root.join("d/inner")).unwrap();
        assert_eq!(
            dir.state(&path("d"), 1).unwrap_err().code,
            "local_path_refused"
        );
        let error = land(&dir, "d", b"x", 0).unwrap_err();
        assert_eq!(error.code, "local_path_refused");
        assert!(root.join("d/inner").is_dir());
        assert_eq!(
            std::fs::read_dir(&root).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn stale_files_skip_listed_ones_and_symlinked_directories() {
        let scratch = tempfile::tempdir().unwrap();
        let outside = scratch.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("o"), b"o").unwrap();
        let root = scratch.path().join("mirror");
        std::fs::create_dir_all(root.join("sub/deep")).unwrap();
        std::fs::write(root.join("keep"), b"k").unwrap();
        std::fs::write(root.join("sub/deep/stale"), b"s").unwrap();
        std::fs::write(root.join("stale"), b"s").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("o"), root.join("filelink")).unwrap();
        let dir = MirrorDir::open_or_create(&root).unwrap();
        let keep: HashSet<String> = ["keep".to_owned()].into();
        let stale = dir.stale_files(&keep);
        assert_eq!(
            stale.iter().map(|c| display(c)).collect::<Vec<_>>(),
            ["stale", "sub/deep/stale"]
        );
        for file in &stale {
            dir.remove(file).unwrap();
        }
        dir.prune(&stale);
        assert!(!root.join("sub").exists(), "emptied directories go");
        assert!(root.join("keep").exists());
        assert!(outside.join("o").exists());
        assert!(std::fs::symlink_metadata(root.join("link")).is_ok());
    }

    const PART: &str = ".0123456789abcdef0123456789abcdef.pull-part";

    #[test]
    fn temporary_names_are_recognised_exactly() {
        assert!(is_temp_name(PART.as_bytes()));
        let scratch = tempfile::tempdir().unwrap();
        let dir = MirrorDir::open_or_create(scratch.path()).unwrap();
        let temp = dir.begin(&path("f")).unwrap();
        assert!(is_temp_name(temp.temp.as_bytes()), "{}", temp.temp);
        for near in [
            "0123456789abcdef0123456789abcdef.pull-part",
            ".0123456789ABCDEF0123456789abcdef.pull-part",
            ".0123456789abcdef0123456789abcde.pull-part",
            ".0123456789abcdef0123456789abcdef0.pull-part",
            ".0123456789abcdef0123456789abcdeg.pull-part",
            ".0123456789abcdef0123456789abcdef.pull-part.bak",
            ".0123456789abcdef0123456789abcdef.pull-par",
            ".0123456789abcdef0123456789abcdef-pull-part",
            "x.pull-part",
            ".pull-part",
        ] {
            assert!(!is_temp_name(near.as_bytes()), "{near}");
        }
    }

    #[test]
    fn stale_parts_are_only_exact_temporary_names_not_listed() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("mirror");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join(PART), b"p").unwrap();
        std::fs::write(root.join("sub").join(PART), b"p").unwrap();
        let listed_part = ".ffffffffffffffffffffffffffffffff.pull-part";
        std::fs::write(root.join(listed_part), b"listed").unwrap();
        std::fs::write(root.join("x.pull-part"), b"x").unwrap();
        std::fs::create_dir(root.join("sub/.00000000000000000000000000000000.pull-part")).unwrap();
        std::os::unix::fs::symlink(
            root.join("x.pull-part"),
            root.join(".11111111111111111111111111111111.pull-part"),
        )
        .unwrap();
        let dir = MirrorDir::open_or_create(&root).unwrap();
        let keep: HashSet<String> = [listed_part.to_owned()].into();
        let parts: Vec<String> = dir.stale_parts(&keep).iter().map(|c| display(c)).collect();
        assert_eq!(parts, [PART.to_owned(), format!("sub/{PART}")]);
    }

    #[test]
    fn only_one_run_holds_the_directory_alone() {
        let scratch = tempfile::tempdir().unwrap();
        let first = MirrorDir::open_or_create(scratch.path()).unwrap();
        let second = MirrorDir::open_or_create(scratch.path()).unwrap();
        assert_eq!(first.try_lock_sole(), Ok(true));
        first.lock_shared().unwrap();
        // The first run is under way: the second must not take stale files for its own.
        assert_eq!(second.try_lock_sole(), Ok(false));
        second.lock_shared().unwrap();
        drop(first);
        assert_eq!(
            second.try_lock_sole(),
            Ok(true),
            "the lock ends with its holder"
        );
    }

    #[test]
    fn a_watched_removal_takes_only_a_regular_file() {
        let scratch = tempfile::tempdir().unwrap();
        let outside = scratch.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("x"), b"keep").unwrap();
        let root = scratch.path().join("mirror");
        std::fs::create_dir_all(root.join("d/inner")).unwrap();
        std::fs::write(root.join("f"), b"f").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("x"), root.join("filelink")).unwrap();
        let dir = MirrorDir::open_or_create(&root).unwrap();
        assert_eq!(dir.remove_if_present(&path("f")), Ok(true));
        assert!(!root.join("f").exists());
        assert_eq!(dir.remove_if_present(&path("f")), Ok(false));
        assert_eq!(dir.remove_if_present(&path("missing/deeper")), Ok(false));
        for refused in ["d", "link/x", "filelink"] {
            assert_eq!(
                dir.remove_if_present(&path(refused)).unwrap_err().code,
                "local_path_refused",
                "{refused}"
            );
        }
        assert!(root.join("d/inner").is_dir());
        assert!(outside.join("x").exists());
        assert!(std::fs::symlink_metadata(root.join("filelink")).is_ok());
    }

    #[test]
    fn mirror_directory_checks() {
        let scratch = tempfile::tempdir().unwrap();
        let file = scratch.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(check_usable(scratch.path()).is_ok());
        assert!(check_usable(&scratch.path().join("new")).is_ok());
        assert!(check_usable(&file).is_err());
        assert!(check_usable(&scratch.path().join("no/new")).is_err());
        assert!(check_usable(&file.join("new")).is_err());
        assert!(MirrorDir::open_or_create(&file).is_err());
    }
}
