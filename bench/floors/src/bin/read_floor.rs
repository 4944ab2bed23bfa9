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
//! cargo run --release --manifest-path bench/floors/Cargo.toml --bin read_floor -- <root> 127.0.0.1:18082 [workers]
//! ```
#![allow(clippy::disallowed_methods)] // a bench floor: it binds its own socket and reads argv

use resource_plane::Code;
use resource_plane::backends::OsFilesystem;
use resource_plane::path::strip_query;
use resource_plane::scope::RootPath;
use resource_plane_floors::{PREFIX, read, request_target, status_only};
use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

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
    let Some(target) = read_head(&mut stream)? else {
        return stream.write_all(&status_only(400));
    };
    let Some(raw) = target.strip_prefix(PREFIX) else {
        return stream.write_all(&status_only(Code::NotFound.status()));
    };
    match read(fs, export, strip_query(raw), buffer) {
        Ok((start, etag, _)) => {
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
/// (another method, a head over the limit, a connection closed early).
fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
        match request_target(&head) {
            Ok(None) => {}
            Ok(Some(target)) => return Ok(Some(target)),
            Err(()) => return Ok(None),
        }
    }
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
