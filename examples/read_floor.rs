//! The least HTTP server the read rules allow, for `bench/load.sh` only: the floor that
//! `resource-plane serve`'s CPU per read is measured against in the same run.
//!
//! The rules fix what a conforming read must cost. D-2.4 opens the export root beneath the
//! held directory on every request and the target beneath it with `openat2`; D-2.6 probes the
//! target with `O_PATH`, types it with `fstat` and reopens that inode for reading; D-2.7 makes
//! the body the very buffer the etag was hashed over, so the file is read into the server's own
//! memory, hashed with sha256 and written to the socket from there (no `sendfile`). This server
//! does exactly that through the crate's own [`OsFilesystem`] (the same opening, the same
//! page-aligned read buffer, the same `sha2`) and nothing else: no trace, no byte budget, no
//! router, no async runtime, no headers beyond `content-length`, `etag` and `connection`.
//!
//! One blocking thread per core (or `[workers]` of them) accepts on the shared socket, reads one
//! request head, answers and closes. More threads than cores only add context switches: on the
//! 2-core machine the bench runs on, 4, 8 and 32 workers cost as much or more CPU per 1 MiB
//! read as 2 did, so the default is the cheapest. Paths go through the crate's lexical decoding
//! (D-2.1 to D-2.3); a refusal is answered with its status and an empty body, and anything but a
//! `GET` head of at most 16 KiB with 400, all of which the bench counts as a failed run. Files
//! over 10 MiB (the manifest's default `max_bytes`) are refused with 413.
//!
//! ```sh
//! cargo run --release --example read_floor -- <root> 127.0.0.1:18082 [workers]
//! ```
#![allow(clippy::disallowed_methods)] // a bench floor: it binds its own socket and reads argv

use resource_plane::backends::{Filesystem, OsFilesystem};
use resource_plane::page_aligned;
use resource_plane::path::{decode_request_path, strip_query};
use resource_plane::scope::{Containment, RootPath};
use resource_plane::{Code, Refusal};
use sha2::{Digest, Sha256};
use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

/// The longest request head read (D-4.6).
const MAX_HEAD: usize = 16 * 1024;
/// The manifest's default `max_bytes` (D-1.4).
const MAX_BYTES: u64 = 10 << 20;
const PREFIX: &str = "/resources/files/";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (root, addr, workers) = match args.as_slice() {
        [_, root, addr] => (root, addr, None),
        [_, root, addr, workers] => (root, addr, Some(workers)),
        _ => usage(),
    };
    let workers = match workers {
        None => std::thread::available_parallelism().map_or(2, usize::from),
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| usage()),
    };
    let fs = OsFilesystem::open(Path::new(root)).unwrap_or_else(|e| {
        eprintln!("error: cannot open {root}: {e}");
        std::process::exit(1);
    });
    let listener = TcpListener::bind(addr).unwrap_or_else(|e| {
        eprintln!("error: cannot listen on {addr}: {e}");
        std::process::exit(1);
    });
    let export = RootPath::parse(".").expect("`.` is a valid root");
    println!(
        "listening on {} with {workers} workers",
        listener.local_addr().expect("bound")
    );
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                // Each worker reads every body into its one buffer, as the planes read into
                // buffers their budget recycles: a buffer is zeroed once, not per request.
                let mut buffer = Vec::new();
                loop {
                    if let Ok((stream, _)) = listener.accept() {
                        // A client that vanished mid-answer is no concern of the floor.
                        let _ = answer(&fs, &export, stream, &mut buffer);
                    }
                }
            });
        }
    });
}

fn usage() -> ! {
    eprintln!("usage: read_floor <root> <addr> [workers]");
    std::process::exit(2);
}

/// Reads one request head from `stream`, answers it (reading the body into `buffer`) and closes
/// the connection.
fn answer(
    fs: &OsFilesystem,
    export: &RootPath,
    mut stream: TcpStream,
    buffer: &mut Vec<u8>,
) -> std::io::Result<()> {
    let Some(target) = request_target(&mut stream)? else {
        return stream.write_all(&status_only(400));
    };
    let Some(raw) = target.strip_prefix(PREFIX) else {
        return stream.write_all(&status_only(Code::NotFound.status()));
    };
    match read(fs, export, strip_query(raw), buffer) {
        Ok((start, etag)) => {
            let body = &buffer[start..];
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\netag: \"{etag}\"\r\nconnection: close\r\n\r\n",
                body.len()
            );
            write_all_vectored(
                &mut stream,
                &mut [IoSlice::new(head.as_bytes()), IoSlice::new(body)],
            )
        }
        Err(refusal) => stream.write_all(&status_only(refusal.code.status())),
    }
}

/// The target of a `GET` request line, once the whole head is in; `None` for anything else
/// (another method, a head over [`MAX_HEAD`], a connection closed early).
fn request_target(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk)?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    Ok(match (parts.next(), parts.next()) {
        (Some(b"GET"), Some(target)) => std::str::from_utf8(target).ok().map(str::to_owned),
        _ => None,
    })
}

/// Opens `raw` beneath the export root as every conforming read must (D-2.4 to D-2.6), reads
/// it whole into `buffer` from a page boundary and hashes it (D-2.7): where the body starts in
/// `buffer`, and the body's sha256 in hex.
///
/// # Errors
/// `outside_root`, `not_found`, `symlink_refused`, `not_a_regular_file` from the path and the
/// opening; `too_large` over [`MAX_BYTES`]; `io_error` when the read fails.
fn read(
    fs: &OsFilesystem,
    export: &RootPath,
    raw: &str,
    buffer: &mut Vec<u8>,
) -> Result<(usize, String), Refusal> {
    let target = decode_request_path(raw)?;
    let mut file = fs
        .open_root(export, Containment::Advisory)?
        .open_file(&target)?;
    let size = file.meta().size;
    if size > MAX_BYTES {
        return Err(Refusal::new(Code::TooLarge, "over max_bytes"));
    }
    // One byte past the size, to see a file that grew, read as the planes read: straight into
    // the buffer, one `read(2)` for a file in the page cache.
    let start = page_aligned::read_into(&mut file, buffer, size, size + 1)
        .map_err(|e| Refusal::new(Code::IoError, format!("read failed: {e}")))?;
    if (buffer.len() - start) as u64 > MAX_BYTES {
        return Err(Refusal::new(Code::TooLarge, "grew past max_bytes"));
    }
    let digest = Sha256::digest(&buffer[start..]);
    Ok((start, resource_plane::hex::encode(&digest)))
}

/// A response of `status` with no body.
fn status_only(status: u16) -> Vec<u8> {
    format!("HTTP/1.1 {status} \r\ncontent-length: 0\r\nconnection: close\r\n\r\n").into_bytes()
}

/// Writes every slice in order, as few system calls as the socket allows.
fn write_all_vectored(
    stream: &mut TcpStream,
    mut slices: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    while !slices.is_empty() {
        match stream.write_vectored(slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
