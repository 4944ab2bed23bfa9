//! The one reader both planes call (spec: "a peer redeem calls the same reader"): resolve,
//! type-check, size-check and read one file from one descriptor, and walk a root for a listing.

use crate::backends::fs::{Containment, Filesystem, OpenFile, RootPath};
use crate::budget::{BudgetPermit, ByteBudget};
use crate::path::RelPath;
use crate::refusal::{Code, Refusal};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::io::Read;

/// One file's bytes as served, with the validator computed over exactly those bytes (D-2.7).
#[derive(Debug)]
pub struct ServedFile {
    /// The body.
    pub bytes: Bytes,
    /// Lowercase hex sha256 of `bytes`: the etag and the trace's `sha256`.
    pub sha256: String,
    /// `x-murmur-mtime-ms`, from the same descriptor.
    pub mtime_ms: i64,
    /// The in-flight budget this body holds until it is dropped.
    pub permit: Option<BudgetPermit>,
}

/// One listing entry (D-3.3, D-3.5).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ListingEntry {
    /// Path relative to the export root, `/`-separated.
    pub path: String,
    /// The bytes hashed.
    pub size_bytes: u64,
    /// Modification time from the same descriptor.
    pub mtime_ms: i64,
    /// Lowercase hex sha256 of the bytes hashed.
    pub sha256: String,
}

/// Where one plane's files live and how they are contained.
#[derive(Debug, Clone)]
pub struct ExportScope {
    /// The export root.
    pub root: RootPath,
    /// The largest file served.
    pub max_bytes: u64,
    /// The achieved containment class.
    pub containment: Containment,
}

fn open(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
) -> Result<Box<dyn OpenFile>, Refusal> {
    let root = fs.open_root(&scope.root, scope.containment)?;
    Ok(root.open_file(target)?)
}

/// Checks that `target` resolves to a regular file under the scope, reading nothing (D-9.2).
///
/// # Errors
/// `not_found`, `outside_root`, `symlink_refused`, `not_a_regular_file`, `io_error`.
pub fn probe_file(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
) -> Result<(), Refusal> {
    open(fs, scope, target).map(drop)
}

/// Reads `target` under the scope (D-2.4 to D-2.7): size from the descriptor first (`too_large`
/// before any byte is read), then at most `max_bytes + 1` bytes, so a file that grew during the
/// read is `too_large` too. Borrows the body's size from `budget` before reading.
///
/// # Errors
/// `not_found`, `outside_root`, `symlink_refused`, `not_a_regular_file`, `too_large`,
/// `io_error`.
pub fn read_file(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
    budget: Option<&ByteBudget>,
) -> Result<ServedFile, Refusal> {
    let file = open(fs, scope, target)?;
    let meta = file.meta();
    if meta.size > scope.max_bytes {
        return Err(Refusal::new(
            Code::TooLarge,
            format!("{} bytes exceeds max_bytes {}", meta.size, scope.max_bytes),
        ));
    }
    let limit = scope.max_bytes.saturating_add(1);
    let permit = budget.map(|b| b.acquire_blocking(meta.size.saturating_add(1).min(limit)));
    let mut buffer =
        Vec::with_capacity(usize::try_from(meta.size.saturating_add(1).min(limit)).unwrap_or(0));
    file.take(limit)
        .read_to_end(&mut buffer)
        .map_err(|e| Refusal::new(Code::IoError, format!("read failed: {e}")))?;
    if buffer.len() as u64 > scope.max_bytes {
        return Err(Refusal::new(
            Code::TooLarge,
            format!(
                "the file grew past max_bytes {} during the read",
                scope.max_bytes
            ),
        ));
    }
    let sha256 = crate::hex::encode(&Sha256::digest(&buffer));
    Ok(ServedFile {
        bytes: Bytes::from(buffer),
        sha256,
        mtime_ms: meta.mtime_ms,
        permit,
    })
}

/// Lists every regular file under the scope (D-3): sorted byte-lexicographically, each entry
/// from one open with its hash streamed (memory stays bounded), symlinks decided by the class,
/// vanished or failing entries omitted. A missing root, or one that is not a directory, lists
/// as empty.
///
/// # Errors
/// `outside_root` when the root escapes the workdir, `io_error` when it cannot be read.
pub fn list_files(fs: &dyn Filesystem, scope: &ExportScope) -> Result<Vec<ListingEntry>, Refusal> {
    let root = match fs.open_root(&scope.root, scope.containment) {
        Ok(root) => root,
        Err(e) if e.kind == crate::backends::fs::FsErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut candidates = root.walk()?;
    candidates.sort_unstable_by(|a, b| a.as_str().as_bytes().cmp(b.as_str().as_bytes()));
    let mut entries = Vec::with_capacity(candidates.len());
    let mut buffer = vec![0u8; 64 * 1024];
    for path in candidates {
        let Ok(mut file) = root.open_file(&path) else {
            continue;
        };
        let mtime_ms = file.meta().mtime_ms;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let complete = loop {
            match file.read(&mut buffer) {
                Ok(0) => break true,
                Ok(n) => {
                    hasher.update(&buffer[..n]);
                    size += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break false,
            }
        };
        if complete {
            entries.push(ListingEntry {
                path: path.as_str().to_owned(),
                size_bytes: size,
                mtime_ms,
                sha256: crate::hex::encode(&hasher.finalize()),
            });
        }
    }
    Ok(entries)
}
