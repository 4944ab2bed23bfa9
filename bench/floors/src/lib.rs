//! What the read floors share: the request head they accept, the read every conforming server
//! makes, its trace line, and the answers they write. See `src/bin/read_floor.rs` (the read
//! rules alone), `src/bin/rules_floor.rs` (the read rules and the project's own) and
//! `src/bin/mcp_floor.rs` (the least MCP server D-18 allows for a read) for what each floor is.
#![allow(clippy::disallowed_methods)] // bench floors: they bind sockets and read argv

use resource_plane::backends::{Filesystem, OpenFile, OsFilesystem};
use resource_plane::page_aligned;
use resource_plane::path::decode_request_path;
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Code, Refusal};
use sha2::{Digest, Sha256};

/// The longest request head read (D-4.6).
pub const MAX_HEAD: usize = 16 * 1024;
/// The manifest's default `max_bytes` (D-1.4).
pub const MAX_BYTES: u64 = 10 << 20;
/// Where reads are routed (D-4.2).
pub const PREFIX: &str = "/resources/files/";

/// The target of a `GET` request line in `head`, once the whole head is in it: `Ok(None)` while
/// more is needed, `Err(())` for anything else (another method, a head over [`MAX_HEAD`]).
#[allow(clippy::result_unit_err)] // the one failure is "answer 400"
pub fn request_target(head: &[u8]) -> Result<Option<String>, ()> {
    if head.len() > MAX_HEAD {
        return Err(());
    }
    if !head.windows(4).any(|w| w == b"\r\n\r\n") {
        return Ok(None);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    match (parts.next(), parts.next()) {
        (Some(b"GET"), Some(target)) => std::str::from_utf8(target)
            .map(|target| Some(target.to_owned()))
            .map_err(drop),
        _ => Err(()),
    }
}

/// Opens `raw` beneath the export root as every conforming read must (D-2.4 to D-2.6), reads
/// it whole into `buffer` from a page boundary and hashes it (D-2.7): where the body starts in
/// `buffer`, the body's sha256 in hex, and its modification time.
///
/// # Errors
/// `outside_root`, `not_found`, `symlink_refused`, `not_a_regular_file` from the path and the
/// opening; `too_large` over [`MAX_BYTES`]; `io_error` when the read fails.
pub fn read(
    fs: &OsFilesystem,
    export: &RootPath,
    raw: &str,
    buffer: &mut Vec<u8>,
) -> Result<(usize, String, i64), Refusal> {
    read_opened(open(fs, export, raw)?, buffer)
}

/// Opens `raw` beneath the export root as every conforming read must (D-2.4 to D-2.6), reading
/// nothing: the file, typed and sized from its descriptor.
///
/// # Errors
/// `outside_root`, `not_found`, `symlink_refused`, `not_a_regular_file` from the path and the
/// opening; `too_large` over [`MAX_BYTES`].
pub fn open(fs: &OsFilesystem, export: &RootPath, raw: &str) -> Result<Box<dyn OpenFile>, Refusal> {
    let target = decode_request_path(raw)?;
    let file = fs
        .open_root(export, Containment::Advisory)?
        .open_file(&target)?;
    if file.meta().size > MAX_BYTES {
        return Err(Refusal::new(Code::TooLarge, "over max_bytes"));
    }
    Ok(file)
}

/// Reads `file` whole into `buffer` from a page boundary and hashes it (D-2.7): where the body
/// starts in `buffer`, the body's sha256 in hex, and its modification time.
///
/// # Errors
/// `too_large` when the file grew past [`MAX_BYTES`]; `io_error` when the read fails.
pub fn read_opened(
    mut file: Box<dyn OpenFile>,
    buffer: &mut Vec<u8>,
) -> Result<(usize, String, i64), Refusal> {
    let meta = file.meta();
    // One byte past the size, to see a file that grew, read as the planes read: straight into
    // the buffer, one `read(2)` for a file in the page cache.
    let start = page_aligned::read_into(&mut file, buffer, meta.size, meta.size + 1)
        .map_err(|e| Refusal::new(Code::IoError, format!("read failed: {e}")))?;
    if (buffer.len() - start) as u64 > MAX_BYTES {
        return Err(Refusal::new(Code::TooLarge, "grew past max_bytes"));
    }
    let digest = Sha256::digest(&buffer[start..]);
    Ok((start, resource_plane::hex::encode(&digest), meta.mtime_ms))
}

/// The trace line of one read (D-6), at its least: the event, the path and the outcome, from
/// the bytes read and their sha256, or the refusal.
pub fn read_trace_line(raw: &str, outcome: Result<(usize, &str), &Refusal>) -> Vec<u8> {
    let (outcome, bytes, sha256) = match outcome {
        Ok((bytes, sha256)) => ("ok", bytes, Some(sha256)),
        Err(refusal) => (refusal.code.as_str(), 0, None),
    };
    let mut line = serde_json::to_vec(&serde_json::json!({
        "event_type": "resource_read",
        "path": raw,
        "outcome": outcome,
        "bytes": bytes,
        "sha256": sha256,
        "reason": null,
    }))
    .expect("a JSON value serialises");
    line.push(b'\n');
    line
}

/// A response of `status` with no body.
pub fn status_only(status: u16) -> Vec<u8> {
    format!("HTTP/1.1 {status} \r\ncontent-length: 0\r\nconnection: close\r\n\r\n").into_bytes()
}
