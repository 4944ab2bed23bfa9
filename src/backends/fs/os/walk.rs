//! Walking an export root: every directory beneath it opened by name, one at a time, and read
//! by [`list_dir`]; when the walk takes each file's stat, several threads share the
//! directories and hand their finds to the calling thread in batches.

use super::listing::list_dir;
use super::{OsRootDir, Strategy, fs_error, openat2_retrying};
use crate::backends::fs::{FileMeta, FsError};
use crate::path::RelPath;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::os::fd::{AsFd, OwnedFd};

impl OsRootDir {
    /// Every candidate beneath the root, depth first, with each regular file's stat when
    /// `with_meta` asks (then on [`stat_threads`] threads when it can): the body of
    /// [`RootDir::walk_with_meta`](crate::backends::fs::RootDir::walk_with_meta).
    ///
    /// # Errors
    /// When the root itself cannot be opened or read; a subdirectory that cannot be is left
    /// out (D-3.3).
    pub(super) fn walk_tree(
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

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)]
    use super::super::listing::NAME_RUN;
    use super::*;
    use crate::backends::fs::{Filesystem, OsFilesystem, RootDir};
    use crate::scope::{Containment, RootPath};

    /// What the plain walk (no stats, one thread) finds, sorted.
    fn plain_walk(root: &dyn RootDir) -> Vec<String> {
        let mut plain: Vec<String> = root
            .walk()
            .expect("walk")
            .into_iter()
            .map(RelPath::into_string)
            .collect();
        plain.sort();
        plain
    }

    /// The stat a walk gave `path` is what opening it tells, whole.
    fn assert_stat_is_the_opens(root: &dyn RootDir, path: &RelPath, meta: FileMeta) {
        let opened = root.open_file(path).expect("a regular file").meta();
        assert_eq!(
            meta, opened,
            "{path}: the stat is the open's metadata, whole"
        );
    }

    /// Directories larger than a batch (sent in pieces, the directory named again in each) or
    /// than a run of names read at once, and many small ones (several to a batch): the walk
    /// that stats names each file under its own directory, once, with its own stat, as the
    /// plain walk and an open do, and hands out a directory's names in byte order.
    #[test]
    fn the_shared_walk_names_each_file_under_its_own_directory_across_batches() {
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
        assert_eq!(plain_walk(&*root), expected, "the plain walk agrees");
        for (path, meta) in &found {
            let meta = meta.unwrap_or_else(|| panic!("{path}: a regular file has its stat"));
            let path = RelPath::parse_canonical(path).expect("a walked path");
            assert_stat_is_the_opens(&*root, &path, meta);
        }
    }

    /// The walk that stats (threads sharing the directories) finds exactly what the plain
    /// walk finds, in any order, with the stat of each regular file as its open sees it and
    /// none for a symlink; FIFOs and directory symlinks are never candidates.
    #[test]
    fn the_shared_walk_finds_what_the_plain_walk_finds_with_each_files_stat() {
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
        let plain = plain_walk(&*root);
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
                Some(meta) => assert_stat_is_the_opens(&*root, path, *meta),
            }
        }
    }
}
