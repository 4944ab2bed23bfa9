//! The conformance suite of the `Filesystem` backend (D-2.4 to D-2.8, D-1.9, D-3.2, D-10.4),
//! run by `tests/fs_conformance.rs` on the crate's implementations and by every test file that
//! wraps a filesystem on its wrapper.
//!
//! One suite, three implementations: [`MemoryFilesystem`], [`OsFilesystem`] with `openat2`, and
//! [`OsFilesystem`] forced onto the component-by-component fallback walk, each seen through a
//! [`Wrap`] (none for the crate's own; a test's counting or delaying wrapper for its own run).
//! Every case runs under every [`Containment`] class and asserts the exact [`FsErrorKind`] (or
//! the exact bytes) the decisions demand, so the in-memory double, both kernel paths and every
//! wrapper cannot drift apart. Reads go through `OpenFile::read_up_to` and `Read`, walks through
//! `walk`, `walk_each` and `walk_with_meta`, so a wrapper that leaves one of the trait's default
//! methods unforwarded answers differently and fails.
//!
//! A case builds its tree through a [`World`], which drives either the memory builder or a real
//! temporary directory, then hands out the filesystem object under test. Failures are collected
//! and reported together, each naming implementation, wrapper, class, root and case.
#![allow(
    dead_code,
    clippy::disallowed_methods,
    reason = "the suite builds real trees on disk and checks mtimes against the wall clock: \
              it is the ground truth the backends are measured against, not a caller of them"
)]

use resource_plane::backends::{
    FileMeta, Filesystem, FsError, FsErrorKind, MemoryFilesystem, OsFilesystem, RootDir,
};
use resource_plane::path::RelPath;
use resource_plane::scope::{Containment, RootPath};
use std::collections::BTreeSet;
use std::fmt;
use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tempfile::TempDir;

use FsErrorKind::{NotARegularFile, NotFound, OutsideRoot, PathRefused, SymlinkRefused};

/// The modification time every memory file is given.
const MEM_MTIME_MS: i64 = 1_787_577_327_015;
/// How many bytes `open_read` takes through `OpenFile::read_up_to` before reading on.
const READ_UP_TO_FIRST: u64 = 5;
/// How long one open may take before the case counts as blocked (a FIFO must never block).
const DEADLINE: Duration = Duration::from_secs(10);

const SECRET: &[u8] = b"SENTINEL: secret outside the export root\n";
const A: &[u8] = b"alpha: the top-level file\n";
const B: &[u8] = b"bravo: the nested file\n";
const C: &[u8] = b"charlie: the deeper file\n";
const HIDDEN: &[u8] = b"hotel: a hidden file\n";
const CACHED: &[u8] = b"in a hidden directory\n";
const CHAIN: &[u8] = b"the end of a symlink chain\n";
const LONG_NAMED: &[u8] = b"a file whose name is exactly NAME_MAX bytes\n";

fn big() -> Vec<u8> {
    (0..300_000u32).map(|i| (i % 251) as u8).collect()
}

fn long_name(len: usize) -> String {
    "n".repeat(len)
}

// ------------------------------------------------------------------------------------------------
// Wrappers
// ------------------------------------------------------------------------------------------------

/// How a run sees each implementation: `wrap` builds the object under test around the
/// implementation (a fresh one for every `World::fs`).
#[derive(Clone, Copy)]
pub struct Wrap {
    /// The wrapper's name, for failure messages.
    pub name: &'static str,
    /// Builds the wrapper around the implementation.
    pub wrap: fn(Arc<dyn Filesystem>) -> Arc<dyn Filesystem>,
}

impl fmt::Debug for Wrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The implementations themselves.
pub const UNWRAPPED: Wrap = Wrap {
    name: "unwrapped",
    wrap: |fs| fs,
};

/// A filesystem behind an `Arc<dyn Filesystem>` as a `Filesystem` value, forwarding every
/// method: a test wrapper generic over its inner filesystem wraps this to run the suite.
#[derive(Debug, Clone)]
pub struct Shared(pub Arc<dyn Filesystem>);

impl Filesystem for Shared {
    fn open_root(&self, root: &RootPath, class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        self.0.open_root(root, class)
    }

    fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
        self.0.check_root(root)
    }

    fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.0.land(dir, name, bytes)
    }

    fn unland(&self, dir: &str, name: &str) -> Result<(), FsError> {
        self.0.unland(dir, name)
    }
}

/// Every case of the suite, on `wrap`.
pub fn run_all(wrap: Wrap) {
    os_strategies_are_as_requested(wrap);
    resolution_table_conforms_in_every_implementation_and_class(wrap);
    path_max_boundary_conforms(wrap);
    open_root_conforms(wrap);
    root_replaced_after_construction_is_outside_root(wrap);
    check_root_conforms(wrap);
    walk_returns_files_and_symlinks_without_descending_links(wrap);
    walk_survives_a_tree_deeper_than_any_stack(wrap);
    listing_decided_by_open_file_agrees_across_implementations(wrap);
    land_conforms(wrap);
    canonical_paths_name_the_file_itself(wrap);
    unland_conforms(wrap);
}

// ------------------------------------------------------------------------------------------------
// Worlds
// ------------------------------------------------------------------------------------------------

/// The implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Impl {
    Memory,
    Openat2,
    FallbackWalk,
}

const IMPLS: [Impl; 3] = [Impl::Memory, Impl::Openat2, Impl::FallbackWalk];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Special,
}

enum Backend {
    Memory(Arc<MemoryFilesystem>),
    Os {
        dir: TempDir,
        fs: Arc<OsFilesystem>,
        /// Bound sockets stay alive as long as the world.
        sockets: Vec<UnixListener>,
    },
}

/// A workdir under construction plus the filesystem object that serves it. The filesystem is
/// built first, so every later change is one made "after construction".
struct World {
    imp: Impl,
    wrap: Wrap,
    backend: Backend,
    /// Every entry the builder created, by workdir-relative path.
    created: Vec<(String, Kind)>,
}

impl World {
    fn new(imp: Impl, wrap: Wrap) -> World {
        let backend = match imp {
            Impl::Memory => Backend::Memory(Arc::new(MemoryFilesystem::new())),
            Impl::Openat2 | Impl::FallbackWalk => {
                let dir = tempfile::tempdir().expect("tempdir");
                let fs = if imp == Impl::Openat2 {
                    OsFilesystem::open(dir.path())
                } else {
                    OsFilesystem::open_with_fallback_walk(dir.path())
                }
                .expect("open the workdir");
                // `Strategy` is not re-exported from the crate, so it is compared by name.
                let strategy = format!("{:?}", fs.strategy());
                assert_eq!(
                    strategy,
                    format!("{imp:?}"),
                    "{imp:?}: OsFilesystem reports strategy {strategy}"
                );
                Backend::Os {
                    dir,
                    fs: Arc::new(fs),
                    sockets: Vec::new(),
                }
            }
        };
        World {
            imp,
            wrap,
            backend,
            created: Vec::new(),
        }
    }

    /// The filesystem under test: the implementation, seen through the wrapper.
    fn fs(&self) -> Arc<dyn Filesystem> {
        let fs: Arc<dyn Filesystem> = match &self.backend {
            Backend::Memory(m) => m.clone(),
            Backend::Os { fs, .. } => fs.clone(),
        };
        (self.wrap.wrap)(fs)
    }

    fn host(&self, path: &str) -> PathBuf {
        match &self.backend {
            Backend::Os { dir, .. } => dir.path().join(path),
            Backend::Memory(_) => unreachable!("no host path in memory"),
        }
    }

    fn host_parent(&self, path: &str) -> PathBuf {
        let full = self.host(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("create parent directories");
        }
        full
    }

    /// The workdir's own name (the last component of its host path).
    fn workdir_name(&self) -> String {
        match &self.backend {
            Backend::Memory(_) => "wd".into(),
            Backend::Os { dir, .. } => dir
                .path()
                .file_name()
                .expect("tempdir has a name")
                .to_str()
                .expect("tempdir name is UTF-8")
                .to_owned(),
        }
    }

    /// An absolute spelling of a workdir-relative path: the real host path for OS worlds, any
    /// `/...` text for memory.
    /// `""` names the workdir itself (`/` in memory).
    fn abs(&self, path: &str) -> String {
        match &self.backend {
            Backend::Memory(_) => format!("/{path}"),
            Backend::Os { dir, .. } => {
                let full = if path.is_empty() {
                    dir.path().to_path_buf()
                } else {
                    dir.path().join(path)
                };
                full.to_str().expect("UTF-8 tempdir").to_owned()
            }
        }
    }

    fn file(&mut self, path: &str, bytes: &[u8]) {
        match &self.backend {
            Backend::Memory(m) => m.add_file(path, bytes.to_vec(), MEM_MTIME_MS),
            Backend::Os { .. } => {
                std::fs::write(self.host_parent(path), bytes).expect("write file");
            }
        }
        self.created.push((path.into(), Kind::File));
    }

    /// Creates a regular file whose path may exceed `PATH_MAX` once joined to the host
    /// tempdir: the OS world walks down with `mkdirat`/`openat`, one component at a time.
    fn deep_file(&mut self, path: &str, bytes: &[u8]) {
        use rustix::fs::{Mode, OFlags};
        match &self.backend {
            Backend::Memory(m) => m.add_file(path, bytes.to_vec(), MEM_MTIME_MS),
            Backend::Os { dir, .. } => {
                let mut fd = rustix::fs::open(
                    dir.path(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .expect("open tempdir");
                let mut parts: Vec<&str> = path.split('/').collect();
                let name = parts.pop().expect("a file name");
                for part in parts {
                    match rustix::fs::mkdirat(&fd, part, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => panic!("mkdirat {part}: {e}"),
                    }
                    fd = rustix::fs::openat(
                        &fd,
                        part,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .expect("descend");
                }
                let file = rustix::fs::openat(
                    &fd,
                    name,
                    OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o644),
                )
                .expect("create deep file");
                std::io::Write::write_all(&mut std::fs::File::from(file), bytes)
                    .expect("write deep file");
            }
        }
        self.created.push((path.into(), Kind::File));
    }

    fn dir(&mut self, path: &str) {
        match &self.backend {
            Backend::Memory(m) => m.add_dir(path),
            Backend::Os { .. } => std::fs::create_dir_all(self.host(path)).expect("mkdir"),
        }
        self.created.push((path.into(), Kind::Dir));
    }

    fn symlink(&mut self, path: &str, target: &str) {
        match &self.backend {
            Backend::Memory(m) => m.add_symlink(path, target),
            Backend::Os { .. } => {
                std::os::unix::fs::symlink(target, self.host_parent(path)).expect("symlink");
            }
        }
        self.created.push((path.into(), Kind::Symlink));
    }

    fn fifo(&mut self, path: &str) {
        match &self.backend {
            Backend::Memory(m) => m.add_fifo(path),
            Backend::Os { .. } => rustix::fs::mkfifoat(
                rustix::fs::CWD,
                self.host_parent(path).as_path(),
                rustix::fs::Mode::from_raw_mode(0o644),
            )
            .expect("mkfifo"),
        }
        self.created.push((path.into(), Kind::Special));
    }

    fn socket(&mut self, path: &str) {
        match &mut self.backend {
            Backend::Memory(m) => m.add_socket(path),
            Backend::Os { dir, sockets, .. } => {
                let full = dir.path().join(path);
                sockets.push(UnixListener::bind(full).expect("bind a unix socket"));
            }
        }
        self.created.push((path.into(), Kind::Special));
    }

    /// A `/dev/null`-like character device (1, 3). `false` when the OS refuses `mknod`.
    fn char_device(&mut self, path: &str) -> bool {
        match &self.backend {
            Backend::Memory(m) => m.add_char_device(path),
            Backend::Os { .. } => {
                let made = rustix::fs::mknodat(
                    rustix::fs::CWD,
                    self.host_parent(path).as_path(),
                    rustix::fs::FileType::CharacterDevice,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    rustix::fs::makedev(1, 3),
                );
                match made {
                    Ok(()) => {}
                    Err(rustix::io::Errno::PERM) => {
                        println!("skipping device case: mknod not permitted");
                        return false;
                    }
                    Err(e) => {
                        println!("skipping device case: mknod failed: {e}");
                        return false;
                    }
                }
            }
        }
        self.created.push((path.into(), Kind::Special));
        true
    }

    /// Removes whatever `path` names, without following it.
    fn remove(&mut self, path: &str) {
        match &self.backend {
            Backend::Memory(m) => m.remove(path),
            Backend::Os { .. } => {
                let full = self.host(path);
                let meta = std::fs::symlink_metadata(&full).expect("stat before remove");
                if meta.is_dir() {
                    std::fs::remove_dir_all(&full).expect("remove dir");
                } else {
                    std::fs::remove_file(&full).expect("remove file");
                }
            }
        }
    }

    /// Moves `path` out of the way (OS: renamed to `<path>.old`, so open descriptors stay
    /// valid; memory: unlinked, which equally keeps held handles valid).
    fn move_aside(&mut self, path: &str) {
        match &self.backend {
            Backend::Memory(m) => m.remove(path),
            Backend::Os { .. } => {
                std::fs::rename(self.host(path), self.host(&format!("{path}.old")))
                    .expect("rename aside");
            }
        }
    }

    /// The bytes of the regular file at `path`, following nothing.
    fn read_back(&self, path: &str) -> Option<Vec<u8>> {
        match &self.backend {
            Backend::Memory(m) => m.file_bytes(path),
            Backend::Os { .. } => {
                let full = self.host(path);
                match std::fs::symlink_metadata(&full) {
                    Ok(meta) if meta.file_type().is_file() => std::fs::read(&full).ok(),
                    _ => None,
                }
            }
        }
    }

    /// The sorted names in the directory at `path` (`""` is the workdir), following nothing.
    fn names(&self, path: &str) -> Vec<String> {
        match &self.backend {
            Backend::Memory(m) => m.dir_names(path),
            Backend::Os { dir, .. } => {
                let full = if path.is_empty() {
                    dir.path().to_path_buf()
                } else {
                    self.host(path)
                };
                match std::fs::symlink_metadata(&full) {
                    Ok(meta) if meta.is_dir() => {}
                    _ => return Vec::new(),
                }
                let mut names: Vec<String> = std::fs::read_dir(&full)
                    .expect("read_dir")
                    .map(|e| {
                        e.expect("dirent")
                            .file_name()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect();
                names.sort();
                names
            }
        }
    }

    /// Regular files and symlinks the builder created beneath `prefix` (`""` for the workdir),
    /// relative to it: what `walk()` must return.
    fn created_candidates(&self, prefix: &str) -> BTreeSet<String> {
        self.created_of(prefix, &[Kind::File, Kind::Symlink])
    }

    fn created_of(&self, prefix: &str, kinds: &[Kind]) -> BTreeSet<String> {
        self.created
            .iter()
            .filter(|(_, k)| kinds.contains(k))
            .filter_map(|(p, _)| {
                if prefix.is_empty() {
                    Some(p.clone())
                } else {
                    p.strip_prefix(&format!("{prefix}/")).map(str::to_owned)
                }
            })
            .collect()
    }
}

// ------------------------------------------------------------------------------------------------
// Running one open
// ------------------------------------------------------------------------------------------------

/// What one `open_root` + `open_file` + read produced.
enum Got {
    Read(Vec<u8>, FileMeta),
    Refused(FsError),
    Blocked,
    Panicked,
}

impl fmt::Display for Got {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Got::Read(bytes, meta) => write!(
                f,
                "Ok({} bytes {:?}, meta.size {})",
                bytes.len(),
                preview(bytes),
                meta.size
            ),
            Got::Refused(e) => write!(f, "Err({:?}: {})", e.kind, e.detail),
            Got::Blocked => write!(f, "BLOCKED for {DEADLINE:?}"),
            Got::Panicked => write!(f, "the open panicked"),
        }
    }
}

fn preview(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(48)];
    let text = String::from_utf8_lossy(shown).into_owned();
    if bytes.len() > shown.len() {
        format!("{text}...")
    } else {
        text
    }
}

fn shorten(path: &str) -> String {
    if path.len() > 80 {
        format!("{}...({} bytes)", &path[..60], path.len())
    } else {
        path.to_owned()
    }
}

fn open_read(
    fs: &dyn Filesystem,
    root: &str,
    class: Containment,
    path: &str,
) -> Result<(Vec<u8>, FileMeta), FsError> {
    let root = RootPath::parse(root).expect("a valid declared root");
    let rel = RelPath::parse_canonical(path).expect("a lexically valid request path");
    let dir = fs.open_root(&root, class)?;
    let mut file = dir.open_file(&rel)?;
    // The first bytes through `read_up_to`, the rest through `Read`: both read one descriptor.
    let mut bytes = Vec::new();
    file.read_up_to(READ_UP_TO_FIRST, &mut bytes)
        .map_err(|e| FsError::new(FsErrorKind::Io, format!("read_up_to: {e}")))?;
    let first = bytes.len();
    file.read_to_end(&mut bytes)
        .map_err(|e| FsError::new(FsErrorKind::Io, format!("read: {e}")))?;
    if first as u64 != READ_UP_TO_FIRST.min(bytes.len() as u64) {
        return Err(FsError::new(
            FsErrorKind::Io,
            format!(
                "read_up_to({READ_UP_TO_FIRST}) gave {first} bytes of a {}-byte file",
                bytes.len()
            ),
        ));
    }
    Ok((bytes, file.meta()))
}

/// Opens and reads on a thread with a deadline, so a blocking open (a FIFO) fails the case
/// instead of hanging the suite.
fn open_guarded(fs: &Arc<dyn Filesystem>, root: &str, class: Containment, path: &str) -> Got {
    let (tx, rx) = mpsc::channel();
    let fs = Arc::clone(fs);
    let (root, path) = (root.to_owned(), path.to_owned());
    std::thread::spawn(move || {
        let _ = tx.send(open_read(fs.as_ref(), &root, class, &path));
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(Ok((bytes, meta))) => Got::Read(bytes, meta),
        Ok(Err(e)) => Got::Refused(e),
        Err(mpsc::RecvTimeoutError::Timeout) => Got::Blocked,
        Err(mpsc::RecvTimeoutError::Disconnected) => Got::Panicked,
    }
}

fn now_ms() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(now.as_millis()).expect("fits")
}

/// The expected answer of one open.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Bytes(Vec<u8>),
    Err(FsErrorKind),
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Bytes(b) => write!(f, "Ok({} bytes {:?})", b.len(), preview(b)),
            Expect::Err(k) => write!(f, "Err({k:?})"),
        }
    }
}

fn ok(bytes: &[u8]) -> Expect {
    Expect::Bytes(bytes.to_vec())
}

fn err(kind: FsErrorKind) -> Expect {
    Expect::Err(kind)
}

/// Compares one outcome with its expectation; `None` when it conforms. On success it also
/// checks the metadata from the same descriptor: size = bytes read, and a plausible mtime.
fn verdict(imp: Impl, got: &Got, want: &Expect) -> Option<String> {
    match (got, want) {
        (Got::Read(bytes, meta), Expect::Bytes(expected)) => {
            if bytes != expected {
                return Some(format!("expected {want}, read {got}"));
            }
            if meta.size != bytes.len() as u64 {
                return Some(format!(
                    "meta().size {} but {} bytes were read",
                    meta.size,
                    bytes.len()
                ));
            }
            match imp {
                Impl::Memory if meta.mtime_ms != MEM_MTIME_MS => Some(format!(
                    "meta().mtime_ms {} but the memory file was given {MEM_MTIME_MS}",
                    meta.mtime_ms
                )),
                Impl::Openat2 | Impl::FallbackWalk if (meta.mtime_ms - now_ms()).abs() > 60_000 => {
                    Some(format!(
                        "meta().mtime_ms {} is not within a minute of now ({})",
                        meta.mtime_ms,
                        now_ms()
                    ))
                }
                _ => None,
            }
        }
        (Got::Refused(e), Expect::Err(kind)) if e.kind == *kind => None,
        _ => Some(format!("expected {want}, got {got}")),
    }
}

/// One conformance test's tally: how many checks ran, and a line for each that failed. The
/// test runs every check before it reports, so one run shows every failure at once.
#[derive(Default)]
struct Checks {
    failures: Vec<String>,
    ran: usize,
}

impl Checks {
    /// One check of an open's outcome against its expectation (see [`verdict`]); a failure is
    /// `place()` and why.
    fn outcome(&mut self, imp: Impl, got: &Got, want: &Expect, place: impl FnOnce() -> String) {
        self.ran += 1;
        if let Some(why) = verdict(imp, got, want) {
            self.failures.push(format!("{}: {why}", place()));
        }
    }

    /// One check that holds when `passed`; a failure is `line`.
    fn that(&mut self, passed: bool, line: String) {
        self.ran += 1;
        if !passed {
            self.failures.push(line);
        }
    }

    /// Prints the count when every check conformed; panics listing the failures otherwise.
    fn report(self, what: &str) {
        let (failures, ran) = (self.failures, self.ran);
        if failures.is_empty() {
            println!("{what}: {ran} checks, all conform");
            return;
        }
        panic!(
            "{what}: {} of {ran} checks failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        );
    }
}

// ------------------------------------------------------------------------------------------------
// The standard tree and the resolution table (D-2.4 to D-2.8)
// ------------------------------------------------------------------------------------------------

/// Builds the shared tree: `secret.txt` outside the export root `out/`, every D-2.5 shape
/// beneath it, and `out2 -> out` as a root reached through a link. Returns whether a device node
/// could be created.
fn build_standard(w: &mut World) -> bool {
    w.file("secret.txt", SECRET);
    w.file("out/a.txt", A);
    w.file("out/sub/b.txt", B);
    w.file("out/sub/deep/c.txt", C);
    w.file("out/.hidden", HIDDEN);
    w.file("out/.cache/x.txt", CACHED);
    w.file("out/empty.txt", b"");
    w.file("out/big.bin", &big());
    w.file(&format!("out/{}", long_name(255)), LONG_NAMED);

    // Relative links staying beneath the root.
    w.symlink("out/l", "a.txt");
    w.symlink("out/sub/l", "../a.txt");
    w.symlink("out/ll", "l");
    w.symlink("out/ld", "sub");
    // Links whose resolution climbs above the root, even to come back.
    w.symlink("out/x", "../out/a.txt");
    w.symlink("out/s", "../secret.txt");
    w.symlink("out/sub/up", "../../secret.txt");
    w.symlink("out/ld2", "../out/sub");
    // Absolute links, even ones naming a path inside the root.
    let abs_a = w.abs("out/a.txt");
    w.symlink("out/abs", &abs_a);
    let abs_sub = w.abs("out/sub");
    w.symlink("out/absdir", &abs_sub);
    w.symlink("out/dangabs", "/nonexistent/conformance/target");
    // Dangling, looping, long chains.
    w.symlink("out/dang", "nothere");
    w.symlink("out/ts", "a.txt/");
    w.symlink("out/loop1", "loop2");
    w.symlink("out/loop2", "loop1");
    for (dir, len) in [("chain40", 40), ("chain41", 41)] {
        w.file(&format!("out/{dir}/f.txt"), CHAIN);
        for i in 1..=len {
            let next = if i == len {
                "f.txt".to_owned()
            } else {
                format!("l{:02}", i + 1)
            };
            w.symlink(&format!("out/{dir}/l{i:02}"), &next);
        }
    }
    // Links to directories, including the root itself.
    w.symlink("out/dl", "sub");
    w.symlink("out/dl2", "sub/");
    w.symlink("out/self", ".");
    // Things that are not regular files.
    w.dir("out/emptydir");
    w.fifo("out/fifo");
    w.socket("out/sock");
    w.symlink("out/lf", "fifo");
    let device = w.char_device("out/dev");

    // The root reached through a relative link inside the workdir.
    w.symlink("out2", "out");
    device
}

/// One row: a request path relative to `out/`, the answer under `scoped`, the answer under the
/// follow classes (`advisory`, `sealed`), and, where it differs, the follow answer when the root
/// is the whole workdir (`.`) and the request is prefixed with `out/`.
struct Case {
    name: &'static str,
    path: String,
    scoped: Expect,
    follow: Expect,
    follow_from_workdir: Option<Expect>,
}

fn case(name: &'static str, path: &str, scoped: Expect, follow: Expect) -> Case {
    Case {
        name,
        path: path.to_owned(),
        scoped,
        follow,
        follow_from_workdir: None,
    }
}

fn same(name: &'static str, path: &str, both: Expect) -> Case {
    case(name, path, both.clone(), both)
}

impl Case {
    fn when_root_is_workdir(mut self, follow: Expect) -> Case {
        self.follow_from_workdir = Some(follow);
        self
    }
}

fn resolution_cases(device: bool) -> Vec<Case> {
    let sr = || err(SymlinkRefused);
    let mut cases = vec![
        // Regular files.
        same("regular file at top", "a.txt", ok(A)),
        same("regular file nested", "sub/b.txt", ok(B)),
        same("regular file two levels down", "sub/deep/c.txt", ok(C)),
        same("hidden file", ".hidden", ok(HIDDEN)),
        same("file in a hidden directory", ".cache/x.txt", ok(CACHED)),
        same("empty file", "empty.txt", ok(b"")),
        same("300 kB file read in full", "big.bin", ok(&big())),
        same(
            "component of exactly 255 bytes",
            &long_name(255),
            ok(LONG_NAMED),
        ),
        // D-2.5: relative links staying beneath the root.
        case("link to a sibling file (l -> a.txt)", "l", sr(), ok(A)),
        case(
            "link climbing within the root (sub/l -> ../a.txt)",
            "sub/l",
            sr(),
            ok(A),
        ),
        case("link to a link (ll -> l -> a.txt)", "ll", sr(), ok(A)),
        case(
            "intermediate symlinked dir (ld -> sub)",
            "ld/b.txt",
            sr(),
            ok(B),
        ),
        case(
            "intermediate link to the root (self -> .)",
            "self/a.txt",
            sr(),
            ok(A),
        ),
        case("chain of exactly 40 links", "chain40/l01", sr(), ok(CHAIN)),
        // D-2.5: resolution goes above the root at some step.
        case(
            "link above the root and back (x -> ../out/a.txt)",
            "x",
            sr(),
            err(OutsideRoot),
        )
        .when_root_is_workdir(ok(A)),
        case(
            "link to outside (s -> ../secret.txt)",
            "s",
            sr(),
            err(OutsideRoot),
        )
        .when_root_is_workdir(ok(SECRET)),
        case(
            "nested link to outside (sub/up -> ../../secret.txt)",
            "sub/up",
            sr(),
            err(OutsideRoot),
        )
        .when_root_is_workdir(ok(SECRET)),
        case(
            "intermediate dir link above the root (ld2 -> ../out/sub)",
            "ld2/b.txt",
            sr(),
            err(OutsideRoot),
        )
        .when_root_is_workdir(ok(B)),
        // D-2.5: absolute links, even naming a path inside the root.
        case(
            "absolute link to a file inside the root",
            "abs",
            sr(),
            err(OutsideRoot),
        ),
        case(
            "absolute intermediate dir link",
            "absdir/b.txt",
            sr(),
            err(OutsideRoot),
        ),
        case("dangling absolute link", "dangabs", sr(), err(OutsideRoot)),
        // D-2.5: dangling, loops, too many hops.
        case("dangling link inside the root", "dang", sr(), err(NotFound)),
        case(
            "link to a file with a trailing slash (ts -> a.txt/)",
            "ts",
            sr(),
            err(NotFound),
        ),
        case(
            "loop (loop1 -> loop2 -> loop1)",
            "loop1",
            sr(),
            err(NotFound),
        ),
        case("chain of 41 links", "chain41/l01", sr(), err(NotFound)),
        // D-2.5: links to directories, including the root itself.
        case(
            "link to a directory (dl -> sub)",
            "dl",
            sr(),
            err(NotARegularFile),
        ),
        case(
            "link to a directory with trailing slash (dl2 -> sub/)",
            "dl2",
            sr(),
            err(NotARegularFile),
        ),
        case(
            "link to the root itself (self -> .)",
            "self",
            sr(),
            err(NotARegularFile),
        ),
        // D-2.6: not regular files.
        same("directory", "sub", err(NotARegularFile)),
        same("empty directory", "emptydir", err(NotARegularFile)),
        same("FIFO (must not block)", "fifo", err(NotARegularFile)),
        same("unix socket", "sock", err(NotARegularFile)),
        case(
            "link to a FIFO (lf -> fifo)",
            "lf",
            sr(),
            err(NotARegularFile),
        ),
        // D-2.8: ENOENT, ENOTDIR, ENAMETOOLONG.
        same("missing file", "missing.txt", err(NotFound)),
        same(
            "missing intermediate directory",
            "nodir/x.txt",
            err(NotFound),
        ),
        same(
            "file used as a directory (a.txt/x)",
            "a.txt/x",
            err(NotFound),
        ),
        same("component of 256 bytes", &long_name(256), err(NotFound)),
        same(
            "path longer than PATH_MAX",
            "x/".repeat(2100).trim_end_matches('/'),
            err(NotFound),
        ),
    ];
    if device {
        cases.push(same("character device (1,3)", "dev", err(NotARegularFile)));
    }
    cases
}

/// The roots the table runs under: declared root, prefix added to each request, and whether
/// the root is the workdir itself (so links climbing out of `out/` stay beneath it).
const TABLE_ROOTS: [(&str, &str, bool); 5] = [
    ("out", "", false),
    ("./out", "", false),
    ("out/", "", false),
    ("out2", "", false),
    (".", "out/", true),
];

pub fn os_strategies_are_as_requested(wrap: Wrap) {
    // World::new asserts `.strategy()` for both OS flavours.
    for imp in [Impl::Openat2, Impl::FallbackWalk] {
        let w = World::new(imp, wrap);
        assert_eq!(w.imp, imp);
    }
}

pub fn resolution_table_conforms_in_every_implementation_and_class(wrap: Wrap) {
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        let device = build_standard(&mut w);
        let fs = w.fs();
        let cases = resolution_cases(device);
        for (root, prefix, is_workdir) in TABLE_ROOTS {
            for class in Containment::ALL {
                for c in &cases {
                    let path = format!("{prefix}{}", c.path);
                    let want = match (class.follows_symlinks(), is_workdir) {
                        (false, _) => &c.scoped,
                        (true, true) => c.follow_from_workdir.as_ref().unwrap_or(&c.follow),
                        (true, false) => &c.follow,
                    };
                    let got = open_guarded(&fs, root, class, &path);
                    checks.outcome(imp, &got, want, || {
                        format!(
                            "[{imp:?} / {} / root {root:?}] {} (request {:?})",
                            class.as_str(),
                            c.name,
                            shorten(&path)
                        )
                    });
                }
            }
        }
        // Beneath the whole workdir, the secret itself is an ordinary file.
        for class in Containment::ALL {
            let got = open_guarded(&fs, ".", class, "secret.txt");
            checks.outcome(imp, &got, &ok(SECRET), || {
                format!("[{imp:?} / {} / root \".\"] secret.txt", class.as_str())
            });
        }
        // A FIFO is probed, never opened for reading: the writer side still sees no reader.
        if let Backend::Os { .. } = w.backend {
            let fifo = w.host("out/fifo");
            let writer = rustix::fs::open(
                fifo.as_path(),
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK,
                rustix::fs::Mode::empty(),
            );
            checks.ran += 1;
            if !matches!(writer, Err(rustix::io::Errno::NXIO)) {
                checks.failures.push(format!(
                    "[{imp:?}] a FIFO reader was left open after the refusals: writer open gave {writer:?}"
                ));
            }
        }
    }
    checks.report("resolution table");
}

/// D-2.8 `ENAMETOOLONG`: a request of exactly `PATH_MAX - 1` (4095) bytes naming a real file
/// is served; one of 4096 bytes naming a real file is `not_found`, in every implementation.
pub fn path_max_boundary_conforms(wrap: Wrap) {
    let dirs = vec![long_name(255); 15].join("/");
    let at_limit = format!("{dirs}/{}", "f".repeat(255));
    let over_limit = format!("{dirs}/x/{}", "g".repeat(254));
    assert_eq!(at_limit.len(), 4095);
    assert_eq!(over_limit.len(), 4096);
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        w.deep_file(&format!("out/{at_limit}"), A);
        w.deep_file(&format!("out/{over_limit}"), B);
        let fs = w.fs();
        for class in Containment::ALL {
            for (name, path, want) in [
                ("4095-byte path", &at_limit, ok(A)),
                ("4096-byte path", &over_limit, err(NotFound)),
            ] {
                let got = open_guarded(&fs, "out", class, path);
                checks.outcome(imp, &got, &want, || {
                    format!("[{imp:?} / {}] {name}", class.as_str())
                });
            }
        }
    }
    checks.report("PATH_MAX boundary");
}

// ------------------------------------------------------------------------------------------------
// open_root (D-2.4, D-2.5 for the root's own path)
// ------------------------------------------------------------------------------------------------

fn build_roots(w: &mut World) {
    w.file("secret.txt", SECRET);
    w.file("out/a.txt", A);
    w.file("afile", b"a regular file where a root could be\n");
    w.fifo("rootfifo");
    w.symlink("out2", "out");
    w.symlink("nested/r", "../out");
    w.symlink("out3", "../..");
    let abs_workdir = w.abs("");
    w.symlink("out3abs", &abs_workdir);
    let abs_out = w.abs("out");
    w.symlink("out5", &abs_out);
    let climb_back = format!("../{}/out", w.workdir_name());
    w.symlink("out7", &climb_back);
    w.symlink("rootfile", "secret.txt");
    w.symlink("rdang", "nothere");
    w.symlink("rloop1", "rloop2");
    w.symlink("rloop2", "rloop1");
}

fn root_result(fs: &dyn Filesystem, root: &str, class: Containment) -> Result<(), FsErrorKind> {
    let root = RootPath::parse(root).expect("valid declared root");
    fs.open_root(&root, class).map(drop).map_err(|e| e.kind)
}

pub fn open_root_conforms(wrap: Wrap) {
    let rows: [(&str, &str, Result<(), FsErrorKind>); 16] = [
        ("the root exists", "out", Ok(())),
        ("the root spelled ./out", "./out", Ok(())),
        ("the root spelled out/", "out/", Ok(())),
        ("the workdir itself", ".", Ok(())),
        ("root missing", "nothere", Err(NotFound)),
        (
            "root under a missing directory",
            "nothere/deeper",
            Err(NotFound),
        ),
        ("root is a regular file", "afile", Err(NotFound)),
        ("root is a FIFO", "rootfifo", Err(NotFound)),
        ("root is a symlink to a file", "rootfile", Err(NotFound)),
        ("root is a dangling symlink", "rdang", Err(NotFound)),
        ("root is a symlink loop", "rloop1", Err(NotFound)),
        (
            "root symlink to a dir inside the workdir (out2 -> out)",
            "out2",
            Ok(()),
        ),
        (
            "root through a nested relative link (nested/r -> ../out)",
            "nested/r",
            Ok(()),
        ),
        (
            "root symlink escaping the workdir (out3 -> ../..)",
            "out3",
            Err(OutsideRoot),
        ),
        (
            "root symlink to an absolute dir (the workdir)",
            "out3abs",
            Err(OutsideRoot),
        ),
        (
            "root symlink climbing out and back (out7 -> ../<wd>/out)",
            "out7",
            Err(OutsideRoot),
        ),
    ];
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        build_roots(&mut w);
        let fs = w.fs();
        for class in Containment::ALL {
            for (name, root, want) in &rows {
                let got = root_result(fs.as_ref(), root, class);
                checks.ran += 1;
                if got != *want {
                    checks.failures.push(format!(
                        "[{imp:?} / {}] open_root {root:?} ({name}): expected {want:?}, got {got:?}",
                        class.as_str()
                    ));
                }
            }
            // An absolute link naming the root inside the workdir still escapes (D-1.9).
            let got = root_result(fs.as_ref(), "out5", class);
            checks.ran += 1;
            if got != Err(OutsideRoot) {
                checks.failures.push(format!(
                    "[{imp:?} / {}] open_root \"out5\" (absolute link to out): expected Err(OutsideRoot), got {got:?}",
                    class.as_str()
                ));
            }
            // A root reached through a link is followed in every class, scoped included, and
            // reads beneath it as usual.
            for root in ["out2", "nested/r"] {
                let got = open_guarded(&fs, root, class, "a.txt");
                checks.outcome(imp, &got, &ok(A), || {
                    format!(
                        "[{imp:?} / {}] read a.txt beneath root {root:?}",
                        class.as_str()
                    )
                });
            }
        }
    }
    checks.report("open_root");
}

pub fn root_replaced_after_construction_is_outside_root(wrap: Wrap) {
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        w.file("secret.txt", SECRET);
        w.file("out/a.txt", A);
        let fs = w.fs();
        let root = RootPath::parse("out").expect("root");
        // Opened before the swap: keeps the directory it opened.
        let before = fs
            .open_root(&root, Containment::Advisory)
            .expect("root opens before the swap");
        for replacement in ["..", "absolute"] {
            let target = if replacement == ".." {
                // The real directory is renamed away first.
                w.move_aside("out");
                "..".to_owned()
            } else {
                // Then the escaping link is swapped for an absolute one.
                w.remove("out");
                w.abs("")
            };
            w.symlink("out", &target);

            for class in Containment::ALL {
                let got = root_result(fs.as_ref(), "out", class);
                checks.ran += 1;
                if got != Err(OutsideRoot) {
                    checks.failures.push(format!(
                        "[{imp:?} / {}] open_root after `out` became a symlink to {target:?}: expected Err(OutsideRoot), got {got:?}",
                        class.as_str()
                    ));
                }
                let got = open_guarded(&fs, "out", class, "secret.txt");
                checks.outcome(imp, &got, &err(OutsideRoot), || {
                    format!(
                        "[{imp:?} / {}] read secret.txt through the swapped root ({target:?})",
                        class.as_str()
                    )
                });
            }
            let got = fs.check_root(&root).map_err(|e| e.kind);
            checks.ran += 1;
            if got != Err(OutsideRoot) {
                checks.failures.push(format!(
                    "[{imp:?}] check_root after `out` became a symlink to {target:?}: expected Err(OutsideRoot), got {got:?}"
                ));
            }
            let rel = RelPath::parse_canonical("a.txt").expect("path");
            let kept = before.open_file(&rel).map(|mut f| {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map(|_| bytes)
            });
            checks.ran += 1;
            match kept {
                Ok(Ok(bytes)) if bytes == A => {}
                other => checks.failures.push(format!(
                    "[{imp:?}] a root opened before the swap should keep reading its own directory: got {:?}",
                    other.map(|r| r.map(|b| preview(&b)))
                )),
            }
        }
    }
    checks.report("root replaced after construction");
}

// ------------------------------------------------------------------------------------------------
// check_root: the launch check of D-1.9 (E-CAP-007)
// ------------------------------------------------------------------------------------------------

pub fn check_root_conforms(wrap: Wrap) {
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        w.file("secret.txt", SECRET);
        w.file("out/a.txt", A);
        w.dir("out/sub");
        w.file("afile", b"not a directory\n");
        w.symlink("out2", "out");
        w.symlink("nested/r", "../out");
        w.symlink("nested/up", "../../x");
        w.symlink("out3", "..");
        w.symlink("out4", "../nonexistent/dir");
        let abs_out = w.abs("out");
        w.symlink("out5", &abs_out);
        w.symlink("out6", "/nonexistent/absolute/dir");
        let climb_back = format!("../{}/out", w.workdir_name());
        w.symlink("out7", &climb_back);
        w.symlink("out8", "nothere");
        w.symlink("out9", "out/../..");
        let fs = w.fs();
        let rows: [(&str, &str, Result<(), FsErrorKind>); 19] = [
            ("root missing", "nothere", Ok(())),
            ("root under a missing directory", "nothere/deeper", Ok(())),
            ("root exists", "out", Ok(())),
            ("root spelled ./out", "./out", Ok(())),
            ("root is the workdir", ".", Ok(())),
            ("root is a regular file", "afile", Ok(())),
            ("inside relative link (out2 -> out)", "out2", Ok(())),
            ("path through an inside link", "out2/sub", Ok(())),
            (
                "nested inside relative link (nested/r -> ../out)",
                "nested/r",
                Ok(()),
            ),
            (
                "dangling link inside the workdir (out8 -> nothere)",
                "out8",
                Ok(()),
            ),
            (
                "relative link out, existing target (out3 -> ..)",
                "out3",
                Err(OutsideRoot),
            ),
            (
                "DANGLING relative link out (out4 -> ../nonexistent/dir)",
                "out4",
                Err(OutsideRoot),
            ),
            (
                "path through a dangling link out",
                "out4/x",
                Err(OutsideRoot),
            ),
            (
                "nested dangling link out (nested/up -> ../../x)",
                "nested/up",
                Err(OutsideRoot),
            ),
            (
                "absolute link pointing inside the workdir",
                "out5",
                Err(OutsideRoot),
            ),
            ("dangling absolute link", "out6", Err(OutsideRoot)),
            (
                "link out and back (out7 -> ../<wd>/out)",
                "out7",
                Err(OutsideRoot),
            ),
            (
                "link out via a real dir (out9 -> out/../..)",
                "out9",
                Err(OutsideRoot),
            ),
            (
                "path through an absolute link",
                "out5/sub",
                Err(OutsideRoot),
            ),
        ];
        for (name, root, want) in rows {
            let parsed = RootPath::parse(root).expect("valid declared root");
            let got = fs.check_root(&parsed).map_err(|e| e.kind);
            checks.ran += 1;
            if got != want {
                checks.failures.push(format!(
                    "[{imp:?}] check_root {root:?} ({name}): expected {want:?}, got {got:?}"
                ));
            }
        }
    }
    checks.report("check_root");
}

// ------------------------------------------------------------------------------------------------
// walk(): listing candidates (D-3.2, D-3.4)
// ------------------------------------------------------------------------------------------------

fn walk_set(
    fs: &dyn Filesystem,
    root: &str,
    class: Containment,
) -> Result<BTreeSet<String>, FsError> {
    let root = RootPath::parse(root).expect("valid declared root");
    let dir = fs.open_root(&root, class)?;
    let paths = dir.walk()?;
    let count = paths.len();
    let set: BTreeSet<String> = paths.iter().map(|p| p.as_str().to_owned()).collect();
    assert_eq!(set.len(), count, "walk() returned a path twice");
    // `walk_each` and `walk_with_meta` find the same candidates, each once.
    let mut each = Vec::new();
    dir.walk_each(&mut |p| each.push(p.as_str().to_owned()))?;
    each.sort();
    assert_eq!(
        each,
        set.iter().cloned().collect::<Vec<_>>(),
        "walk_each() and walk() disagree under {root:?}"
    );
    for with_meta in [false, true] {
        let mut found = Vec::new();
        dir.walk_with_meta(with_meta, &mut |p, meta| found.push((p.clone(), meta)))?;
        let mut names: Vec<String> = found.iter().map(|(p, _)| p.as_str().to_owned()).collect();
        names.sort();
        assert_eq!(
            names,
            set.iter().cloned().collect::<Vec<_>>(),
            "walk_with_meta({with_meta}) and walk() disagree under {root:?}"
        );
        // Metadata, when given, is the file's own: what opening it reports.
        for (path, meta) in found {
            let Some(meta) = meta else { continue };
            assert!(
                with_meta,
                "walk_with_meta(false) gave metadata for {path:?}"
            );
            if let Ok(file) = dir.open_file(&path) {
                let opened = file.meta();
                assert_eq!(
                    (meta.size, meta.dev, meta.ino, meta.mtime_ns),
                    (opened.size, opened.dev, opened.ino, opened.mtime_ns),
                    "walk_with_meta's metadata of {path:?} is not the file's"
                );
            }
        }
    }
    Ok(set)
}

fn diff(expected: &BTreeSet<String>, got: &BTreeSet<String>) -> String {
    let missing: Vec<_> = expected.difference(got).map(|s| shorten(s)).collect();
    let extra: Vec<_> = got.difference(expected).map(|s| shorten(s)).collect();
    format!("missing {missing:?}, unexpected {extra:?}")
}

pub fn walk_returns_files_and_symlinks_without_descending_links(wrap: Wrap) {
    let mut checks = Checks::default();
    let mut seen: Vec<(Impl, &str, BTreeSet<String>)> = Vec::new();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        build_standard(&mut w);
        if let Backend::Os { dir, .. } = &w.backend {
            // D-3.4: names that are not UTF-8 are omitted, and so is everything beneath them.
            use std::os::unix::ffi::OsStrExt;
            let out = dir.path().join("out");
            std::fs::write(out.join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")), b"x")
                .expect("non-UTF-8 file");
            let bad_dir = out.join(std::ffi::OsStr::from_bytes(b"dir\xfe"));
            std::fs::create_dir(&bad_dir).expect("non-UTF-8 dir");
            std::fs::write(bad_dir.join("ok.txt"), b"x").expect("file in non-UTF-8 dir");
        }
        let fs = w.fs();
        for (root, prefix) in [("out", "out"), ("./out", "out"), ("out2", "out"), (".", "")] {
            let expected = w.created_candidates(prefix);
            // Sanity of the expectation itself: links listed, their insides and specials not.
            let under = |p: &str| {
                if prefix.is_empty() {
                    format!("out/{p}")
                } else {
                    p.to_owned()
                }
            };
            for must in [
                "a.txt",
                ".hidden",
                ".cache/x.txt",
                "l",
                "ld",
                "dl",
                "self",
                "dang",
                "loop1",
            ] {
                assert!(expected.contains(&under(must)), "expectation lacks {must}");
            }
            for never in [
                "ld/b.txt",
                "self/a.txt",
                "fifo",
                "sock",
                "dev",
                "sub",
                "emptydir",
            ] {
                assert!(!expected.contains(&under(never)), "expectation has {never}");
            }
            for class in Containment::ALL {
                checks.ran += 1;
                match walk_set(fs.as_ref(), root, class) {
                    Ok(got) if got == expected => {
                        if class == Containment::Advisory {
                            seen.push((imp, root, got));
                        }
                    }
                    Ok(got) => checks.failures.push(format!(
                        "[{imp:?} / {} / root {root:?}] walk(): {}",
                        class.as_str(),
                        diff(&expected, &got)
                    )),
                    Err(e) => checks.failures.push(format!(
                        "[{imp:?} / {} / root {root:?}] walk() failed: {e}",
                        class.as_str()
                    )),
                }
            }
        }
        // An empty root walks to nothing.
        let mut empty = World::new(imp, wrap);
        empty.dir("out");
        checks.ran += 1;
        match walk_set(empty.fs().as_ref(), "out", Containment::Advisory) {
            Ok(got) if got.is_empty() => {}
            other => checks
                .failures
                .push(format!("[{imp:?}] walk() of an empty root: {other:?}")),
        }
    }
    // Across implementations, the same sets.
    for (imp, root, set) in &seen {
        for (imp2, root2, set2) in &seen {
            if root == root2 && set != set2 {
                checks.failures.push(format!(
                    "walk() of root {root:?} differs between {imp:?} and {imp2:?}: {}",
                    diff(set, set2)
                ));
            }
        }
    }
    checks.report("walk");
}

/// A tree far deeper than any stack, built by an agent to crash or starve the listener: the
/// walk survives it on a small stack, lists every path a read could reach (up to `PATH_MAX`
/// bytes exactly) and leaves out the rest, identically in every implementation.
pub fn walk_survives_a_tree_deeper_than_any_stack(wrap: Wrap) {
    let chain = |depth: usize| "d/".repeat(depth);
    let bottom = format!("{}bottom.txt", chain(3000));
    let longest = format!("{}z", chain(2047)); // exactly PATH_MAX (4095) bytes
    let fits = format!("{}x", chain(2046));
    let over = format!("{}yy", chain(2047)); // one byte over
    assert_eq!(longest.len(), 4095);
    assert_eq!(over.len(), 4096);
    let expected: BTreeSet<String> = ["top.txt".to_owned(), fits.clone(), longest.clone()].into();
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        w.file("out/top.txt", A);
        for path in [&bottom, &longest, &fits, &over] {
            w.deep_file(&format!("out/{path}"), B);
        }
        let fs = w.fs();
        for class in Containment::ALL {
            checks.ran += 1;
            // A quarter of a default thread stack: a walk that recursed per level would
            // overflow it within a few hundred levels and abort the whole test binary.
            let walked = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .stack_size(512 * 1024)
                    .spawn_scoped(s, || walk_set(fs.as_ref(), "out", class))
                    .expect("spawn walker")
                    .join()
                    .expect("the walk does not panic")
            });
            match walked {
                Ok(got) if got == expected => {}
                Ok(got) => checks.failures.push(format!(
                    "[{imp:?} / {}] deep walk(): {}",
                    class.as_str(),
                    diff(&expected, &got)
                )),
                Err(e) => checks.failures.push(format!(
                    "[{imp:?} / {}] deep walk() failed: {e}",
                    class.as_str()
                )),
            }
        }
    }
    checks.report("deep walk");
}

/// Listed paths with the bytes `open_file` served for each.
type Listing = Vec<(String, Vec<u8>)>;

/// The listing a plane builds: each walk candidate decided by `open_file` (D-3.2). Under
/// `scoped` exactly the regular files; under the follow classes also every link that resolves to
/// a regular file beneath the root; and the same answer from every implementation.
pub fn listing_decided_by_open_file_agrees_across_implementations(wrap: Wrap) {
    let mut checks = Checks::default();
    let mut listings: Vec<(Impl, &str, Containment, Listing)> = Vec::new();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        build_standard(&mut w);
        let fs = w.fs();
        for (root, prefix) in [("out", "out"), (".", "")] {
            for class in Containment::ALL {
                let set = match walk_set(fs.as_ref(), root, class) {
                    Ok(set) => set,
                    Err(e) => {
                        checks
                            .failures
                            .push(format!("[{imp:?}] walk() of {root:?} failed: {e}"));
                        continue;
                    }
                };
                let mut listing = Vec::new();
                for path in &set {
                    checks.ran += 1;
                    match open_guarded(&fs, root, class, path) {
                        Got::Read(bytes, _) => listing.push((path.clone(), bytes)),
                        Got::Refused(_) => {}
                        other => checks.failures.push(format!(
                            "[{imp:?} / {} / root {root:?}] candidate {}: {other}",
                            class.as_str(),
                            shorten(path)
                        )),
                    }
                }
                let listed: BTreeSet<String> = listing.iter().map(|(p, _)| p.clone()).collect();
                let files = w.created_of(prefix, &[Kind::File]);
                if !class.follows_symlinks() && listed != files {
                    checks.failures.push(format!(
                        "[{imp:?} / scoped / root {root:?}] listing should be exactly the regular files: {}",
                        diff(&files, &listed)
                    ));
                }
                if class.follows_symlinks() {
                    let mut want = files.clone();
                    let links = ["l", "ll", "sub/l"];
                    want.extend(
                        links
                            .iter()
                            .map(|l| format!("{}{l}", if prefix.is_empty() { "out/" } else { "" })),
                    );
                    if prefix.is_empty() {
                        // Beneath the whole workdir, links out of `out/` stay beneath the root.
                        want.extend(["out/x", "out/s", "out/sub/up"].map(str::to_owned));
                    }
                    let chains: BTreeSet<String> = listed
                        .iter()
                        .filter(|p| p.contains("chain4") && !p.ends_with("f.txt"))
                        .cloned()
                        .collect();
                    let expected_chains: BTreeSet<String> = (1..=40)
                        .map(|i| {
                            format!(
                                "{}chain40/l{i:02}",
                                if prefix.is_empty() { "out/" } else { "" }
                            )
                        })
                        .chain((2..=41).map(|i| {
                            format!(
                                "{}chain41/l{i:02}",
                                if prefix.is_empty() { "out/" } else { "" }
                            )
                        }))
                        .collect();
                    if chains != expected_chains {
                        checks.failures.push(format!(
                            "[{imp:?} / {} / root {root:?}] chain links listed: {}",
                            class.as_str(),
                            diff(&expected_chains, &chains)
                        ));
                    }
                    want.extend(expected_chains);
                    if listed != want {
                        checks.failures.push(format!(
                            "[{imp:?} / {} / root {root:?}] listing: {}",
                            class.as_str(),
                            diff(&want, &listed)
                        ));
                    }
                }
                listings.push((imp, root, class, listing));
            }
        }
    }
    for (imp, root, class, listing) in &listings {
        for (imp2, root2, class2, listing2) in &listings {
            if root == root2 && class == class2 && listing != listing2 {
                checks.failures.push(format!(
                    "listing of root {root:?} under {} differs between {imp:?} and {imp2:?}",
                    class.as_str()
                ));
            }
        }
    }
    checks.report("listing");
}

// ------------------------------------------------------------------------------------------------
// land(): D-10.4
// ------------------------------------------------------------------------------------------------

fn no_part_files(w: &World, dir: &str, imp: Impl, when: &str, checks: &mut Checks) {
    let parts: Vec<String> = w
        .names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".part"))
        .collect();
    if !parts.is_empty() {
        checks.failures.push(format!(
            "[{imp:?}] {when}: temp files remain in {dir:?}: {parts:?}"
        ));
    }
}

fn land_kind(w: &World, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsErrorKind> {
    w.fs().land(dir, name, bytes).map_err(|e| e.kind)
}

pub fn land_conforms(wrap: Wrap) {
    let mut checks = Checks::default();
    for imp in IMPLS {
        // Creates the directory and the file; overwrites; empty content.
        let mut w = World::new(imp, wrap);
        let got = land_kind(&w, "peer-in", "f.txt", b"one");
        checks.that(got == Ok(()), format!("[{imp:?}] first land: {got:?}"));
        checks.that(
            w.read_back("peer-in/f.txt").as_deref() == Some(b"one".as_slice()),
            format!(
                "[{imp:?}] first land content: {:?}",
                w.read_back("peer-in/f.txt")
            ),
        );
        checks.that(
            w.names("peer-in") == ["f.txt"],
            format!(
                "[{imp:?}] after first land peer-in holds {:?}",
                w.names("peer-in")
            ),
        );
        let got = land_kind(&w, "peer-in", "f.txt", b"two, longer than one");
        checks.that(got == Ok(()), format!("[{imp:?}] overwrite: {got:?}"));
        checks.that(
            w.read_back("peer-in/f.txt").as_deref() == Some(b"two, longer than one".as_slice()),
            format!(
                "[{imp:?}] overwrite content: {:?}",
                w.read_back("peer-in/f.txt")
            ),
        );
        let got = land_kind(&w, "peer-in", "g.txt", b"");
        checks.that(got == Ok(()), format!("[{imp:?}] empty land: {got:?}"));
        checks.that(
            w.read_back("peer-in/g.txt").as_deref() == Some(b"".as_slice()),
            format!(
                "[{imp:?}] empty land content: {:?}",
                w.read_back("peer-in/g.txt")
            ),
        );
        no_part_files(&w, "peer-in", imp, "after successful lands", &mut checks);

        // The name is an existing directory.
        w.dir("peer-in/d");
        let got = land_kind(&w, "peer-in", "d", b"x");
        checks.that(
            got == Err(PathRefused),
            format!("[{imp:?}] land over a directory: expected Err(PathRefused), got {got:?}"),
        );
        checks.that(
            w.read_back("peer-in/d").is_none(),
            format!("[{imp:?}] the directory was replaced by a file"),
        );
        no_part_files(
            &w,
            "peer-in",
            imp,
            "after landing over a directory",
            &mut checks,
        );

        // The name is a symlink: it is replaced, never followed.
        w.file("elsewhere.txt", b"untouched");
        w.symlink("peer-in/ln", "../elsewhere.txt");
        let got = land_kind(&w, "peer-in", "ln", b"landed");
        checks.that(
            got == Ok(()),
            format!("[{imp:?}] land over a symlink name: expected Ok (link replaced), got {got:?}"),
        );
        checks.that(
            w.read_back("elsewhere.txt").as_deref() == Some(b"untouched".as_slice()),
            format!(
                "[{imp:?}] land followed the name's symlink: elsewhere.txt = {:?}",
                w.read_back("elsewhere.txt")
            ),
        );
        checks.that(
            w.read_back("peer-in/ln").as_deref() == Some(b"landed".as_slice()),
            format!(
                "[{imp:?}] peer-in/ln is not the landed regular file: {:?}",
                w.read_back("peer-in/ln")
            ),
        );
        no_part_files(
            &w,
            "peer-in",
            imp,
            "after landing over a symlink",
            &mut checks,
        );

        // peer-in is a symlink to a directory (relative and absolute), or dangling.
        for (label, absolute) in [("relative", false), ("absolute", true)] {
            let mut w = World::new(imp, wrap);
            w.dir("target-dir");
            let target = if absolute {
                w.abs("target-dir")
            } else {
                "target-dir".into()
            };
            w.symlink("peer-in", &target);
            let got = land_kind(&w, "peer-in", "f.txt", b"must not land");
            checks.that(
                got == Err(PathRefused),
                format!(
                    "[{imp:?}] peer-in is a {label} symlink to a dir: expected Err(PathRefused), got {got:?}"
                ),
            );
            checks.that(
                w.names("target-dir").is_empty(),
                format!(
                    "[{imp:?}] bytes landed in the {label} link's target: {:?}",
                    w.names("target-dir")
                ),
            );
        }
        let mut w = World::new(imp, wrap);
        w.symlink("peer-in", "nowhere");
        let got = land_kind(&w, "peer-in", "f.txt", b"must not land");
        checks.that(
            got == Err(PathRefused),
            format!(
                "[{imp:?}] peer-in is a dangling symlink: expected Err(PathRefused), got {got:?}"
            ),
        );
        checks.that(
            w.names("") == ["peer-in"],
            format!(
                "[{imp:?}] a dangling peer-in link created something: workdir holds {:?}",
                w.names("")
            ),
        );

        // peer-in is a regular file.
        let mut w = World::new(imp, wrap);
        w.file("peer-in", b"a file, not a dir");
        let got = land_kind(&w, "peer-in", "f.txt", b"must not land");
        checks.that(
            got == Err(PathRefused),
            format!("[{imp:?}] peer-in is a regular file: expected Err(PathRefused), got {got:?}"),
        );
        checks.that(
            w.read_back("peer-in").as_deref() == Some(b"a file, not a dir".as_slice()),
            format!(
                "[{imp:?}] the peer-in file changed: {:?}",
                w.read_back("peer-in")
            ),
        );
        checks.that(
            w.names("") == ["peer-in"],
            format!("[{imp:?}] workdir holds {:?} after refusing", w.names("")),
        );
    }
    checks.report("land");
}

/// A handle's `p` is "canonicalised at mint time" (spec, §The handle): `canonical_path` names
/// the file a path reaches, each symlink replaced by where it led, with `open_file`'s answers
/// for everything else, identically in every implementation and class.
pub fn canonical_paths_name_the_file_itself(wrap: Wrap) {
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        w.file("out/report.md", b"r");
        w.file("out/real/x.txt", b"x");
        w.file("out/b.txt", b"b");
        w.symlink("out/alias", "report.md");
        w.symlink("out/via", "real");
        w.symlink("out/real/up", "../b.txt");
        w.symlink("out/chain", "alias");
        w.symlink("out/todir", "real");
        w.symlink("out/out", "../out/report.md");
        let fs = w.fs();
        for class in Containment::ALL {
            let follow = class.follows_symlinks();
            let root = fs
                .open_root(&RootPath::parse("out").expect("root"), class)
                .expect("open the root");
            for (path, followed, scoped) in [
                ("report.md", Ok("report.md"), Ok("report.md")),
                ("real/x.txt", Ok("real/x.txt"), Ok("real/x.txt")),
                ("alias", Ok("report.md"), Err(FsErrorKind::SymlinkRefused)),
                ("chain", Ok("report.md"), Err(FsErrorKind::SymlinkRefused)),
                (
                    "via/x.txt",
                    Ok("real/x.txt"),
                    Err(FsErrorKind::SymlinkRefused),
                ),
                ("real/up", Ok("b.txt"), Err(FsErrorKind::SymlinkRefused)),
                (
                    "todir",
                    Err(FsErrorKind::NotARegularFile),
                    Err(FsErrorKind::SymlinkRefused),
                ),
                (
                    "out",
                    Err(FsErrorKind::OutsideRoot),
                    Err(FsErrorKind::SymlinkRefused),
                ),
                (
                    "missing",
                    Err(FsErrorKind::NotFound),
                    Err(FsErrorKind::NotFound),
                ),
            ] {
                checks.ran += 1;
                let want = if follow { followed } else { scoped };
                let target = RelPath::parse_canonical(path).expect("a path");
                let got = root
                    .canonical_path(&target)
                    .map(|p| p.as_str().to_owned())
                    .map_err(|e| e.kind);
                if got.as_ref().map(String::as_str) != want.as_ref().map(|s| *s) {
                    checks.failures.push(format!(
                        "[{imp:?} / {}] canonical_path({path}): {got:?}, expected {want:?}",
                        class.as_str()
                    ));
                }
            }
        }
    }
    checks.report("canonical_path");
}

/// `unland` removes exactly what `land` put at `<dir>/<name>` and nothing through a symlink,
/// identically in every implementation (a fetch whose trace line fails removes its file, D-6.4).
pub fn unland_conforms(wrap: Wrap) {
    let mut checks = Checks::default();
    for imp in IMPLS {
        let mut w = World::new(imp, wrap);
        let fs = w.fs();
        fs.land("peer-in", "f.txt", b"one").expect("land");
        fs.land("peer-in", "g.txt", b"two").expect("land");
        checks.that(
            fs.unland("peer-in", "f.txt").is_ok(),
            format!("[{imp:?}] {}", "unland of a landed file"),
        );
        checks.that(
            w.read_back("peer-in/f.txt").is_none(),
            format!("[{imp:?}] {}", "the file is gone"),
        );
        checks.that(
            w.read_back("peer-in/g.txt").as_deref() == Some(b"two".as_slice()),
            format!("[{imp:?}] {}", "its neighbour stays"),
        );
        checks.that(
            fs.unland("peer-in", "f.txt").is_err(),
            format!("[{imp:?}] {}", "unland of a missing file fails"),
        );
        checks.that(
            fs.unland("peer-in", "../g.txt").map_err(|e| e.kind) == Err(FsErrorKind::PathRefused),
            format!(
                "[{imp:?}] {}",
                "a name that is not one plain component is refused"
            ),
        );
        w.file("elsewhere/h.txt", b"h");
        w.symlink("linked", "elsewhere");
        checks.that(
            fs.unland("linked", "h.txt").map_err(|e| e.kind) == Err(FsErrorKind::PathRefused),
            format!("[{imp:?}] {}", "a symlinked landing directory is refused"),
        );
        checks.that(
            w.read_back("elsewhere/h.txt").as_deref() == Some(b"h".as_slice()),
            format!("[{imp:?}] {}", "and what it points at stays"),
        );
    }
    checks.report("unland");
}
