//! Races: while one thread swaps parts of the export tree with `renameat2
//! (RENAME_EXCHANGE)`, readers hammer the same path through the router. No sentinel byte from
//! outside the root is ever served and no request hangs. The same harness run against a
//! deliberately naive check-then-open resolver (test-only) catches the leak, which shows the
//! harness can fail.
#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs

use http::Method;
use resource_plane::backends::{FileMeta, Filesystem, FsError, FsErrorKind, OpenFile, RootDir};
use resource_plane::backends::{ManualClock, OsFilesystem, RecordingTraceSink};
use resource_plane::path::RelPath;
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use rustix::fs::{CWD, RenameFlags};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const SENTINEL: &str = "SENTINEL-OUTSIDE";
const INSIDE: &str = "inside-bytes";

/// What a hammering run saw.
#[derive(Debug, Default)]
struct Tally {
    requests: usize,
    ok_inside: usize,
    leaks: usize,
    refused: usize,
    slowest: Duration,
    unexpected: Vec<String>,
}

fn capsule(fs: Arc<dyn Filesystem>, class: Containment) -> Capsule {
    let manifest =
        Manifest::from_yaml("name: racer\nexports: { files: { root: out, mode: read-only } }")
            .unwrap()
            .manifest;
    let config = CapsuleConfig::new("http://127.0.0.1:1")
        .unwrap()
        .containment(class);
    Capsule::launch(
        &manifest,
        config,
        Backends {
            fs,
            clock: Arc::new(ManualClock::new(0)),
            keys: None,
            trace: Arc::new(RecordingTraceSink::new()),
        },
    )
    .unwrap()
}

/// Swaps `a` and `b` (both under `dir`) as fast as possible until `stop`.
fn swapper(
    dir: PathBuf,
    a: &'static str,
    b: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(CWD, dir.join(a), CWD, dir.join(b), RenameFlags::EXCHANGE)
                .expect("renameat2(RENAME_EXCHANGE)");
            swaps += 1;
        }
        swaps
    })
}

/// Reads `path` through the router from `threads` threads for `duration`, or until the first
/// leak when `stop_at_leak`.
fn hammer(
    capsule: &Capsule,
    path: &str,
    threads: usize,
    duration: Duration,
    stop_at_leak: bool,
) -> Tally {
    let router = capsule.router();
    let leaked = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicUsize::new(0));
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let router = router.clone();
                let leaked = leaked.clone();
                let total = total.clone();
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    let deadline = Instant::now() + duration;
                    while Instant::now() < deadline
                        && !(stop_at_leak && leaked.load(Ordering::Relaxed))
                    {
                        let started = Instant::now();
                        let response = router.respond(&Method::GET, path, &[]);
                        tally.slowest = tally.slowest.max(started.elapsed());
                        tally.requests += 1;
                        total.fetch_add(1, Ordering::Relaxed);
                        let body = response.body().bytes();
                        let text = String::from_utf8_lossy(&body);
                        if text.contains(SENTINEL) {
                            tally.leaks += 1;
                            leaked.store(true, Ordering::Relaxed);
                        } else if response.status() == 200 {
                            if text == INSIDE {
                                tally.ok_inside += 1;
                            } else {
                                tally.unexpected.push(format!("200 with {text:?}"));
                            }
                        } else {
                            let code: serde_json::Value = serde_json::from_slice(&body).unwrap();
                            match code["error"].as_str() {
                                Some(
                                    "outside_root" | "symlink_refused" | "not_found"
                                    | "not_a_regular_file",
                                ) => tally.refused += 1,
                                other => tally
                                    .unexpected
                                    .push(format!("{} {other:?}", response.status())),
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    tallies.into_iter().fold(Tally::default(), |mut sum, t| {
        sum.requests += t.requests;
        sum.ok_inside += t.ok_inside;
        sum.leaks += t.leaks;
        sum.refused += t.refused;
        sum.slowest = sum.slowest.max(t.slowest);
        sum.unexpected.extend(t.unexpected);
        sum
    })
}

/// workdir/out/sub/f = INSIDE; workdir/evil/f = SENTINEL; workdir/out/swap -> ../evil.
fn directory_swap_world() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path();
    std::fs::create_dir_all(wd.join("out/sub")).unwrap();
    std::fs::create_dir_all(wd.join("evil")).unwrap();
    std::fs::write(wd.join("out/sub/f"), INSIDE).unwrap();
    std::fs::write(wd.join("evil/f"), SENTINEL).unwrap();
    std::os::unix::fs::symlink("../evil", wd.join("out/swap")).unwrap();
    dir
}

fn run_directory_swap(
    fs: Arc<dyn Filesystem>,
    wd: &Path,
    class: Containment,
    duration: Duration,
    stop_at_leak: bool,
) -> Tally {
    let capsule = capsule(fs, class);
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(wd.join("out"), "sub", "swap", stop.clone());
    let tally = hammer(
        &capsule,
        "/resources/files/sub/f",
        2,
        duration,
        stop_at_leak,
    );
    stop.store(true, Ordering::Relaxed);
    assert!(swaps.join().unwrap() > 0, "the swapper must have run");
    tally
}

#[test]
fn directory_swapped_with_escaping_symlink_never_leaks() {
    for fallback in [false, true] {
        for class in Containment::ALL {
            let world = directory_swap_world();
            let fs: Arc<dyn Filesystem> = Arc::new(if fallback {
                OsFilesystem::open_with_fallback_walk(world.path()).unwrap()
            } else {
                OsFilesystem::open(world.path()).unwrap()
            });
            let tally =
                run_directory_swap(fs, world.path(), class, Duration::from_millis(1500), false);
            let label = format!("fallback={fallback} class={}", class.as_str());
            assert_eq!(tally.leaks, 0, "{label}: sentinel served: {tally:?}");
            assert!(tally.unexpected.is_empty(), "{label}: {tally:?}");
            assert!(
                tally.requests > 100,
                "{label}: too few requests to mean anything: {tally:?}"
            );
            assert!(
                tally.ok_inside > 0,
                "{label}: the inside file must be served sometimes: {tally:?}"
            );
            assert!(
                tally.refused > 0,
                "{label}: the swapped state must be refused sometimes: {tally:?}"
            );
            assert!(
                tally.slowest < Duration::from_secs(2),
                "{label}: a request hung: {tally:?}"
            );
        }
    }
}

#[test]
fn file_swapped_with_fifo_never_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path();
    std::fs::create_dir_all(wd.join("out/sub")).unwrap();
    std::fs::write(wd.join("out/sub/f"), INSIDE).unwrap();
    rustix::fs::mkfifoat(
        CWD,
        wd.join("out/sub/pipe"),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    for class in Containment::ALL {
        let fs: Arc<dyn Filesystem> = Arc::new(OsFilesystem::open(wd).unwrap());
        let capsule = capsule(fs, class);
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = swapper(wd.join("out/sub"), "f", "pipe", stop.clone());
        let tally = hammer(
            &capsule,
            "/resources/files/sub/f",
            2,
            Duration::from_millis(1000),
            false,
        );
        stop.store(true, Ordering::Relaxed);
        swaps.join().unwrap();
        assert!(tally.unexpected.is_empty(), "{}: {tally:?}", class.as_str());
        assert!(
            tally.ok_inside > 0 && tally.refused > 0,
            "{}: both states must be seen: {tally:?}",
            class.as_str()
        );
        assert!(
            tally.slowest < Duration::from_secs(2),
            "{}: a request hung on the FIFO: {tally:?}",
            class.as_str()
        );
    }
}

/// A deliberately naive resolver: canonicalise, check the prefix, then open the path again,
/// following symlinks. It answers correctly when nothing moves, and leaks under a swap.
#[derive(Debug)]
struct NaiveFilesystem {
    workdir: PathBuf,
}

#[derive(Debug)]
struct NaiveRoot {
    root: PathBuf,
}

#[derive(Debug)]
struct NaiveFile {
    bytes: std::io::Cursor<Vec<u8>>,
    size: u64,
}

impl Read for NaiveFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.bytes.read(buf)
    }
}

impl OpenFile for NaiveFile {
    fn meta(&self) -> FileMeta {
        FileMeta {
            size: self.size,
            mtime_ms: 0,
            dev: 0,
            ino: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        }
    }
}

fn naive_error(kind: FsErrorKind) -> FsError {
    FsError::new(kind, "naive")
}

impl Filesystem for NaiveFilesystem {
    fn open_root(&self, root: &RootPath, _class: Containment) -> Result<Box<dyn RootDir>, FsError> {
        let root = std::fs::canonicalize(self.workdir.join(root.relative()))
            .map_err(|_| naive_error(FsErrorKind::NotFound))?;
        Ok(Box::new(NaiveRoot { root }))
    }
    fn check_root(&self, _root: &RootPath) -> Result<(), FsError> {
        Ok(())
    }
    fn land(&self, _dir: &str, _name: &str, _bytes: &[u8]) -> Result<(), FsError> {
        Err(naive_error(FsErrorKind::Io))
    }
}

impl RootDir for NaiveRoot {
    fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
        let path = self.root.join(target.as_str());
        let resolved =
            std::fs::canonicalize(&path).map_err(|_| naive_error(FsErrorKind::NotFound))?;
        if !resolved.starts_with(&self.root) {
            return Err(naive_error(FsErrorKind::OutsideRoot));
        }
        // The race window: the check above and this open see different trees.
        let bytes = std::fs::read(&path).map_err(|_| naive_error(FsErrorKind::NotFound))?;
        Ok(Box::new(NaiveFile {
            size: bytes.len() as u64,
            bytes: std::io::Cursor::new(bytes),
        }))
    }
    fn walk(&self) -> Result<Vec<RelPath>, FsError> {
        Ok(Vec::new())
    }
}

#[test]
fn the_harness_catches_a_naive_resolver() {
    let world = directory_swap_world();
    let fs: Arc<dyn Filesystem> = Arc::new(NaiveFilesystem {
        workdir: world.path().to_path_buf(),
    });
    // Without a swap the naive resolver is right: it refuses the escaping link.
    let quiet = capsule(fs.clone(), Containment::Advisory);
    let refused = quiet
        .router()
        .respond(&Method::GET, "/resources/files/swap/f", &[]);
    assert_eq!(refused.status(), 403);
    let tally = run_directory_swap(
        fs,
        world.path(),
        Containment::Advisory,
        Duration::from_secs(10),
        true,
    );
    assert!(
        tally.leaks > 0,
        "the race harness failed to catch a check-then-open resolver: {tally:?}"
    );
}
