//! Opening a file once resolved: the `O_PATH` probe is typed with `fstat`, and only a regular
//! file is reopened for reading, through its own descriptor, on its first read (D-2.6).

use super::{fs_error, special_kind};
use crate::backends::fs::{FileMeta, FsError, FsErrorKind, OpenFile};
use crate::scope::Containment;
use rustix::fs::{FileType, Mode, OFlags};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

pub(super) fn meta_of(stat: &rustix::fs::Stat) -> FileMeta {
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
pub(super) fn accept_regular(
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
