//! `serve --listen unix:PATH` (D-20.1): the socket file, bound at launch and removed at the end.
//!
//! What is already at the path decides:
//!
//! * nothing: the socket is bound there;
//! * a socket nobody listens on (a connect is refused: the file a crashed session left): it is
//!   removed and the socket bound in its place;
//! * a socket something listens on, or any other kind of file: refused, and left as it is.
//!
//! The file is removed when the [`SocketFile`] drops (the session's end, or a launch refused
//! after the bind), unless something else has taken its place by then.

#![allow(clippy::disallowed_methods)] // the binary's own socket file, named by the operator

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// A bound socket file, removed on drop if it is still the one bound.
#[derive(Debug)]
pub(crate) struct SocketFile {
    path: PathBuf,
    /// The bound file's device and inode, so that the drop removes only that file.
    identity: (u64, u64),
}

impl SocketFile {
    /// Binds a socket at `path` (see the module docs for a file already there) and returns it
    /// with `count` handles to it, non-blocking, one per shard.
    ///
    /// # Errors
    /// `AddrInUse` when a live socket is at `path`, `AlreadyExists` when another kind of file
    /// is, or the OS error of the check, the removal or the bind.
    pub(crate) fn bind(path: &Path, count: usize) -> io::Result<(Self, Vec<UnixListener>)> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
            Ok(found) if !found.file_type().is_socket() => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "a file that is not a socket is there; it is left alone",
                ));
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        "another process listens on that socket",
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path)?;
                }
                Err(e) => return Err(e),
            },
        }
        let first = UnixListener::bind(path)?;
        let bound = std::fs::symlink_metadata(path)?;
        let file = SocketFile {
            path: path.to_owned(),
            identity: (bound.dev(), bound.ino()),
        };
        first.set_nonblocking(true)?;
        let mut listeners = Vec::with_capacity(count.max(1));
        for _ in 1..count.max(1) {
            listeners.push(first.try_clone()?);
        }
        listeners.insert(0, first);
        Ok((file, listeners))
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let still_ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|now| (now.dev(), now.ino()) == self.identity);
        if still_ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!("could not remove {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SocketFile;
    use std::io;

    #[test]
    fn a_stale_socket_is_replaced_a_live_one_and_other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");

        // A socket file whose listener is gone: replaced, and removed at the end.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (file, listeners) = SocketFile::bind(&path, 2).unwrap();
        assert_eq!(listeners.len(), 2);

        // While it is bound, a second bind is refused and takes nothing away.
        let refused = SocketFile::bind(&path, 1).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse, "{refused}");
        assert!(path.exists());
        drop(listeners);
        drop(file);
        assert!(!path.exists(), "the socket file is removed at the end");

        // A regular file is never removed.
        std::fs::write(&path, b"keep me").unwrap();
        let refused = SocketFile::bind(&path, 1).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists, "{refused}");
        assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
    }

    #[test]
    fn a_file_put_in_the_sockets_place_survives_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let (file, _listeners) = SocketFile::bind(&path, 1).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"another's").unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"another's");
    }
}
