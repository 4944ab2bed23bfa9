//! The least a cold listing costs, with and without the Landlock wall, for
//! `bench/confined_cold_listing.py` only: the floor a confined `serve`'s first listing is
//! measured against in the same run.
//!
//! A cold listing (a fresh process, an empty hash cache) walks the export root and then opens,
//! reads and hashes every regular file under it. This program does that file work and nothing
//! else, through the crate's own [`OsFilesystem`], so the system calls are the listing's own:
//! the walk's directory opens and `getdents64`; per file an `openat2` probe with `O_PATH` and
//! `RESOLVE_BENEATH`, its `fstat`, the reopen through `/proc/self/fd` (D-2.6), one `read(2)` of
//! the size plus one byte into a page-aligned buffer, and two `close`s. The files are hashed with
//! sha256 by twice as many threads as there are cores, taking them in turn, as the listing's
//! hashing slots do. No HTTP, no hash cache, no sort, no JSON body.
//!
//! The wall is put up after the filesystem is opened and before anything is timed, as `serve`
//! does it, and the time printed starts after it. `<wall>` names it:
//!
//! - `none`: no Landlock;
//! - `serve`: the crate's own [`Confinement`] for the manifest and workdir, the very call
//!   `serve` makes (so the very ruleset);
//! - `one-rule`: the same handled rights, network rules and scopes, but one rule only (read
//!   beneath the workdir), to see whether the number of rules matters;
//! - `no-truncate-ioctl`: one read rule, with neither `truncate` nor `ioctl_dev` handled (the
//!   rights of Landlock ABI 2). Not a wall `serve` could use (an unhandled `truncate` lets the
//!   process truncate any file its user may write); it shows what the kernel's check costs when
//!   it can stop at the rule instead of climbing to `/` for the rights no rule grants.
//!
//! Prints one JSON line: the wall, the files hashed, the wall-clock milliseconds and the process's
//! CPU milliseconds (user and kernel) of the timed part.
//!
//! ```sh
//! cargo run --release --manifest-path bench/floors/Cargo.toml --bin listing_floor -- \
//!     /tmp/cl/wd /tmp/cl/m.yaml serve
//! ```
#![allow(clippy::disallowed_methods)] // a bench floor: it reads argv and the manifest file

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use resource_plane::Manifest;
use resource_plane::backends::{Filesystem, OsFilesystem, RootDir};
use resource_plane::confine::Confinement;
use resource_plane::page_aligned;
use resource_plane::path::RelPath;
use resource_plane::scope::{Containment, RootPath};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The listing's read buffer (`LISTING_CHUNK` in the planes).
const CHUNK: usize = 256 * 1024;

/// The newest ABI whose rights the walls here name, as `serve`'s wall does.
const WALL_ABI: ABI = ABI::V8;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, workdir, manifest, wall] = args.as_slice() else {
        usage();
    };
    let manifest = std::fs::read_to_string(manifest)
        .map_err(|e| e.to_string())
        .and_then(|text| Manifest::from_yaml(&text).map_err(|e| e.to_string()))
        .unwrap_or_else(|e| fail(&format!("manifest {manifest}: {e}")))
        .manifest;
    let export = manifest
        .files
        .as_ref()
        .unwrap_or_else(|| fail("the manifest exports no files"))
        .root
        .clone();
    let fs = OsFilesystem::open(Path::new(workdir))
        .unwrap_or_else(|e| fail(&format!("workdir {workdir}: {e}")));
    match wall.as_str() {
        "none" => {}
        "serve" => {
            Confinement::new(&manifest, workdir)
                .apply()
                .unwrap_or_else(|e| fail(&format!("confinement: {e}")));
        }
        "one-rule" => one_read_rule(workdir, AccessFs::from_all(WALL_ABI), true),
        "no-truncate-ioctl" => one_read_rule(workdir, AccessFs::from_all(ABI::V2), false),
        _ => usage(),
    }

    let cpu_before = cpu_time();
    let started = Instant::now();
    let hashed = list(&fs, &export);
    let elapsed = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_before);
    println!(
        r#"{{"wall":"{wall}","files":{hashed},"ms":{:.3},"cpu_ms":{:.3}}}"#,
        elapsed.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3,
    );
}

/// Walks `export` as the listing does, then hashes every file found on twice as many threads as
/// cores; how many files were hashed.
fn list(fs: &OsFilesystem, export: &RootPath) -> usize {
    let root = fs
        .open_root(export, Containment::Advisory)
        .unwrap_or_else(|e| fail(&format!("export root: {e}")));
    let mut paths: Vec<RelPath> = Vec::new();
    root.walk_each(&mut |path| paths.push(path))
        .unwrap_or_else(|e| fail(&format!("walk: {e}")));
    let threads = 2 * std::thread::available_parallelism().map_or(1, usize::from);
    let next = AtomicUsize::new(0);
    let hashed = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let (mut storage, start) = page_aligned::zeroed(CHUNK);
                let buffer = &mut storage[start..];
                while let Some(path) = paths.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if hash_one(root.as_ref(), path, buffer).is_some() {
                        hashed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    hashed.into_inner()
}

/// Opens `path` as the listing does (probe, `fstat`, reopen) and hashes it to its size, reading
/// no further than a short read at that size; `None` when it cannot be opened or read.
fn hash_one(root: &dyn RootDir, path: &RelPath, buffer: &mut [u8]) -> Option<[u8; 32]> {
    let mut file = root.open_file(path).ok()?;
    let size = file.meta().size;
    let limit = size.saturating_add(1);
    let mut hasher = Sha256::new();
    let mut read = 0u64;
    while read < limit {
        let want = usize::try_from(limit - read)
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        match file.read(&mut buffer[..want]) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                read += n as u64;
                if n < want && read == size {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    (read == size).then(|| hasher.finalize().into())
}

/// Confines the process with `handled` filesystem rights, one rule granting reading files and
/// directories beneath `workdir`, and (`with_net_and_scopes`) `serve`'s network rights and
/// scopes with no port allowed.
fn one_read_rule(workdir: &str, handled: landlock::BitFlags<AccessFs>, with_net_and_scopes: bool) {
    let kernel = |e: &dyn std::fmt::Display| -> ! { fail(&format!("landlock: {e}")) };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .unwrap_or_else(|e| kernel(&e));
    if with_net_and_scopes {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .unwrap_or_else(|e| kernel(&e))
            .scope(Scope::from_all(WALL_ABI))
            .unwrap_or_else(|e| kernel(&e));
    }
    let workdir = PathFd::new(workdir).unwrap_or_else(|e| kernel(&e));
    ruleset
        .create()
        .unwrap_or_else(|e| kernel(&e))
        .add_rule(PathBeneath::new(
            workdir,
            AccessFs::ReadFile | AccessFs::ReadDir,
        ))
        .unwrap_or_else(|e| kernel(&e))
        .restrict_self()
        .unwrap_or_else(|e| kernel(&e));
}

/// The process's CPU time so far, user and kernel, all threads (joined ones included).
fn cpu_time() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}

fn usage() -> ! {
    eprintln!(
        "usage: listing_floor <workdir> <manifest.yaml> none|serve|one-rule|no-truncate-ioctl"
    );
    std::process::exit(2);
}
