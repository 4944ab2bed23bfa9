//! [`ChangeNotifier`] over Linux inotify: one watch on every directory beneath an export root,
//! added as directories appear (D-17.4).
//!
//! Why rustix and no notify crate: rustix is already the crate's system-call layer (every open
//! beneath a root goes through it), its `inotify` module is a safe API over the three calls
//! and the event reader, and the descriptor it gives is waited on in tokio's reactor
//! ([`AsyncFd`]), so a watcher holds no thread. The `notify` crate runs a thread of its own
//! per watcher and brings its own event types to translate; the `inotify` crate would add a
//! second binding of the same calls beside rustix. The crate forbids `unsafe` in its own code
//! either way; the unsafety of reading kernel event records stays inside rustix.
//!
//! Each directory is opened beneath the root one component at a time with `O_NOFOLLOW`, and
//! watched through its descriptor's `/proc/self/fd` link, so a symlink never leads a watch out
//! of the root and a rename between the open and the watch cannot swap the directory watched.
//! Notices only trigger a re-list, never a read: a watch in the wrong place could cost a
//! spurious re-list, never a wrong answer.

use super::notify::{ChangeNotifier, Notice};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::unix::AsyncFd;

/// What every directory watch asks to hear about: anything that can change a listing.
fn watch_mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

/// The bytes read from the inotify descriptor at once.
const EVENT_BUFFER: usize = 64 * 1024;

/// Inotify over every directory beneath one root.
pub(crate) struct Inotify {
    /// The inotify descriptor, before it is registered with the reactor (at the first poll,
    /// which runs inside the runtime).
    unregistered: Option<OwnedFd>,
    registered: Option<AsyncFd<OwnedFd>>,
    /// The export root (an `O_PATH` descriptor).
    root: Arc<OwnedFd>,
    /// Each watch's directory, relative to the root (`""`: the root).
    dirs: HashMap<i32, Vec<u8>>,
    root_wd: i32,
    buffer: Box<[MaybeUninit<u8>]>,
}

impl fmt::Debug for Inotify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inotify")
            .field("watches", &self.dirs.len())
            .finish()
    }
}

/// Why watching could not start or go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchError(pub(crate) String);

impl Inotify {
    /// Watches every directory beneath `root`. Blocking: it walks the tree.
    ///
    /// # Errors
    /// [`WatchError`] when inotify is unavailable, the root cannot be watched (no procfs, say)
    /// or the watch limit is reached.
    pub(crate) fn start(root: Arc<OwnedFd>) -> Result<Self, WatchError> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .map_err(|e| WatchError(format!("inotify is unavailable: {e}")))?;
        let mut watcher = Inotify {
            unregistered: Some(fd),
            registered: None,
            root,
            dirs: HashMap::new(),
            root_wd: -1,
            buffer: vec![MaybeUninit::uninit(); EVENT_BUFFER].into_boxed_slice(),
        };
        watcher.scan(Vec::new())?;
        watcher.root_wd = watcher
            .dirs
            .iter()
            .find(|(_, path)| path.is_empty())
            .map(|(wd, _)| *wd)
            .ok_or_else(|| WatchError("the export root could not be watched".into()))?;
        Ok(watcher)
    }

    fn inotify_fd(&self) -> Option<&OwnedFd> {
        self.unregistered
            .as_ref()
            .or_else(|| self.registered.as_ref().map(AsyncFd::get_ref))
    }

    /// Watches `top` and every directory beneath it. A directory that vanished or cannot be
    /// opened is skipped (its parent's watch reports what happens to it).
    ///
    /// # Errors
    /// [`WatchError`] when the watch limit is reached, or the root itself cannot be watched.
    fn scan(&mut self, top: Vec<u8>) -> Result<(), WatchError> {
        let mut stack = vec![top];
        while let Some(path) = stack.pop() {
            let Ok(dir) = open_beneath(&self.root, &path) else {
                if path.is_empty() {
                    return Err(WatchError("the export root cannot be opened".into()));
                }
                continue;
            };
            let Some(inotify_fd) = self.inotify_fd() else {
                return Err(WatchError("the inotify descriptor is gone".into()));
            };
            let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
            match inotify::add_watch(inotify_fd, link.as_str(), watch_mask()) {
                Ok(wd) => {
                    self.dirs.insert(wd, path.clone());
                }
                Err(Errno::NOSPC) => {
                    return Err(WatchError("the inotify watch limit was reached".into()));
                }
                Err(e) if path.is_empty() => {
                    return Err(WatchError(format!(
                        "the export root cannot be watched: {e}"
                    )));
                }
                Err(_) => continue,
            }
            let Ok(mut entries) = Dir::read_from(&dir) else {
                continue;
            };
            while let Some(Ok(entry)) = entries.read() {
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let is_dir = match entry.file_type() {
                    FileType::Directory => true,
                    FileType::Unknown => rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|stat| {
                            FileType::from_raw_mode(stat.st_mode) == FileType::Directory
                        }),
                    _ => false,
                };
                if is_dir {
                    stack.push(child(&path, name));
                }
            }
        }
        Ok(())
    }

    /// Drops the watches on `path` and every directory beneath it (moved out of where the
    /// watches' paths say it is; a move within the root watches it again at its new path).
    fn forget(&mut self, path: &[u8]) {
        let gone: Vec<i32> = self
            .dirs
            .iter()
            .filter(|(_, p)| is_within(p, path))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            self.dirs.remove(&wd);
            if let Some(fd) = self.inotify_fd() {
                // The directory may be gone already, and its watch with it.
                let _ = inotify::remove_watch(fd, wd);
            }
        }
    }

    /// Applies one batch of events to the watches.
    ///
    /// # Errors
    /// [`WatchError`] when the notices can no longer be trusted.
    fn apply(&mut self, events: Vec<(i32, ReadFlags, Vec<u8>)>) -> Result<(), WatchError> {
        for (wd, flags, name) in events {
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                return Err(WatchError("the inotify event queue overflowed".into()));
            }
            if wd == self.root_wd
                && flags.intersects(
                    ReadFlags::DELETE_SELF
                        | ReadFlags::MOVE_SELF
                        | ReadFlags::UNMOUNT
                        | ReadFlags::IGNORED,
                )
            {
                return Err(WatchError("the export root was moved or removed".into()));
            }
            if flags.contains(ReadFlags::IGNORED) {
                self.dirs.remove(&wd);
                continue;
            }
            let Some(parent) = self.dirs.get(&wd) else {
                continue;
            };
            if !flags.contains(ReadFlags::ISDIR) || name.is_empty() {
                continue;
            }
            let path = child(parent, &name);
            if flags.contains(ReadFlags::MOVED_FROM) {
                self.forget(&path);
            }
            if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                self.scan(path)?;
            }
        }
        Ok(())
    }
}

impl ChangeNotifier for Inotify {
    fn poll_notice(&mut self, cx: &mut Context<'_>) -> Poll<Notice> {
        if let Some(fd) = self.unregistered.take() {
            // `AsyncFd::new` is deprecated for types whose `as_raw_fd` might change or close
            // under it; an `OwnedFd` moved into the `AsyncFd` cannot, which is the condition
            // its `unsafe` replacement states (and the crate forbids writing `unsafe`).
            #[allow(deprecated)]
            let registered = AsyncFd::new(fd);
            match registered {
                Ok(fd) => self.registered = Some(fd),
                Err(e) => {
                    return Poll::Ready(Notice::Degraded(format!(
                        "the inotify descriptor cannot be polled: {e}"
                    )));
                }
            }
        }
        loop {
            let Some(fd) = &self.registered else {
                return Poll::Ready(Notice::Degraded("the inotify descriptor is gone".into()));
            };
            let mut guard = match fd.poll_read_ready(cx) {
                Poll::Ready(Ok(guard)) => guard,
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Notice::Degraded(format!("inotify failed: {e}")));
                }
                Poll::Pending => return Poll::Pending,
            };
            let mut events = Vec::new();
            // Reads until the queue is empty; only then is the readiness cleared.
            match drain(fd.get_ref(), &mut self.buffer, &mut events) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                Err(e) => return Poll::Ready(Notice::Degraded(format!("inotify failed: {e}"))),
                Ok(()) => {}
            }
            drop(guard);
            if events.is_empty() {
                continue;
            }
            return Poll::Ready(match self.apply(events) {
                Ok(()) => Notice::Changed,
                Err(WatchError(why)) => Notice::Degraded(why),
            });
        }
    }
}

/// Reads every event queued on `fd` into `events`, until the queue is empty (`WouldBlock`).
///
/// # Errors
/// `WouldBlock` once the queue is empty (the normal end); any other read error.
fn drain(
    fd: &OwnedFd,
    buffer: &mut [MaybeUninit<u8>],
    events: &mut Vec<(i32, ReadFlags, Vec<u8>)>,
) -> io::Result<()> {
    let mut reader = inotify::Reader::new(fd, buffer);
    loop {
        match reader.next() {
            Ok(event) => events.push((
                event.wd(),
                event.events(),
                event
                    .file_name()
                    .map(|n| n.to_bytes().to_vec())
                    .unwrap_or_default(),
            )),
            Err(Errno::WOULDBLOCK) => return Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// `parent/name` (`name` alone beneath the root).
fn child(parent: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(parent.len() + 1 + name.len());
    if !parent.is_empty() {
        path.extend_from_slice(parent);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// Whether `path` is `top` or beneath it.
fn is_within(path: &[u8], top: &[u8]) -> bool {
    path == top || (path.starts_with(top) && path.get(top.len()) == Some(&b'/'))
}

/// Opens the directory `path` (relative, `/`-separated; empty: the root itself) beneath
/// `root`, one component at a time, following no symlink.
fn open_beneath(root: &OwnedFd, path: &[u8]) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::openat(root, ".", flags, Mode::empty())?;
    if path.is_empty() {
        return Ok(dir);
    }
    for component in path.split(|b| *b == b'/') {
        dir = rustix::fs::openat(&dir, component, flags, Mode::empty())?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_beneath_a_directory_are_recognised_by_whole_components() {
        assert_eq!(child(b"", b"a"), b"a");
        assert_eq!(child(b"a/b", b"c"), b"a/b/c");
        assert!(is_within(b"a", b"a"));
        assert!(is_within(b"a/b", b"a"));
        assert!(!is_within(b"ab", b"a"));
        assert!(!is_within(b"b/a", b"a"));
    }
}
