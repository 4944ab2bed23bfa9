//! Landing a fetched file in the workdir (D-10.4), and removing one: written whole and synced
//! under a temporary name, then renamed into place, following no symlink on the way.

use crate::backends::fs::{FsError, FsErrorKind, check_landing_names};
use crate::backends::random::{OsRandom, Random};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// Removes `dir/name` beneath the workdir, following no symlink to the directory.
///
/// # Errors
/// `PathRefused` when the directory is not one (a symlink, a file); `Io` otherwise.
pub(super) fn unland_from(workdir: BorrowedFd<'_>, dir: &str, name: &str) -> Result<(), FsError> {
    check_landing_names(dir, name)?;
    let dir_fd = open_landing_dir(workdir, dir)?;
    rustix::fs::unlinkat(&dir_fd, name, AtFlags::empty())
        .map_err(|e| land_error(e, "remove the landed file"))
}

/// The landing directory `dir` beneath the workdir, opened following no symlink to it.
fn open_landing_dir(workdir: BorrowedFd<'_>, dir: &str) -> Result<OwnedFd, FsError> {
    rustix::fs::openat(
        workdir,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| land_error(e, "open landing directory"))
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
pub(super) fn land_in(
    workdir: BorrowedFd<'_>,
    proc_fds: Option<&OwnedFd>,
    dir: &str,
    name: &str,
    bytes: &[u8],
) -> Result<(), FsError> {
    check_landing_names(dir, name)?;
    match rustix::fs::mkdirat(workdir, dir, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(land_error(e, "create landing directory")),
    }
    let dir_fd = open_landing_dir(workdir, dir)?;
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
