//! The least HTTP server the read rules *and the project's own rules* allow, for `bench/load.sh`
//! only: the second floor `resource-plane serve`'s CPU per read is measured against.
//!
//! `read_floor` pays only what D-2.4 to D-2.7 make every read pay. This floor adds what the
//! project's own rules make this crate pay on top, each at its least:
//!
//! - the async runtime, with blocking work moved off it (`design.md`, habit 1: "Blocking work is
//!   moved off the async runtime once, at the plane layer"): one single-threaded tokio runtime
//!   accepts, reads the request head and writes the answer on non-blocking sockets, as one
//!   `serve` shard does (the default on two cores), and hands each read of a file larger than
//!   the inline limit (`resource_plane::http::INLINE_READ_LIMIT`, as the router does) to tokio's
//!   blocking pool and back, with the file opened on the async thread;
//! - one trace line per request (D-6), appended by the crate's own `JsonlTraceSink` on the thread
//!   that read the file, as the router writes it;
//! - the headers D-2.7 and D-13 give a 200 read (`content-type`, `etag`, the four `x-murmur-*`,
//!   `date`, `content-length`, `connection`), with the date fixed at start (formatting it costs
//!   nanoseconds).
//!
//! `RULES_FLOOR_WITHOUT=pool` reads on the async thread instead, `RULES_FLOOR_WITHOUT=trace`
//! writes no trace line (or both, comma-separated): what each rule costs is then the difference.
//!
//! And nothing else: no hyper, no router, no byte budget, no stall guard, no request timeouts.
//! Read buffers are kept in a pool, last returned first out, as the byte budget keeps them.
//!
//! ```sh
//! cargo run --release --manifest-path bench/floors/Cargo.toml --bin rules_floor -- \
//!     <root> 127.0.0.1:18083 <trace.jsonl>
//! ```
#![allow(clippy::disallowed_methods)] // a bench floor: it binds its own socket and reads argv

use resource_plane::Code;
use resource_plane::backends::{JsonlTraceSink, OsFilesystem, TraceSink};
use resource_plane::http::INLINE_READ_LIMIT;
use resource_plane::path::strip_query;
use resource_plane::scope::RootPath;
use resource_plane_floors::{
    PREFIX, open, read_opened, read_trace_line, request_target, status_only,
};
use std::io::IoSlice;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What every connection's answer uses.
struct Shared {
    parts: Parts,
    fs: OsFilesystem,
    export: RootPath,
    trace: JsonlTraceSink,
    buffers: Mutex<Vec<Vec<u8>>>,
}

/// Which of the project's own rules the floor pays for: all of them, unless the environment
/// leaves one out (`RULES_FLOOR_WITHOUT=pool,trace`), to measure what each costs.
#[derive(Debug, Clone, Copy)]
struct Parts {
    /// The read on the blocking pool (else on the async thread).
    pool: bool,
    /// The trace line.
    trace: bool,
}

impl Parts {
    fn from_env() -> Self {
        let without = std::env::var("RULES_FLOOR_WITHOUT").unwrap_or_default();
        let left_out = |part: &str| without.split(',').any(|w| w.trim() == part);
        Parts {
            pool: !left_out("pool"),
            trace: !left_out("trace"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, root, addr, trace] = args.as_slice() else {
        eprintln!("usage: rules_floor <root> <addr> <trace.jsonl>");
        std::process::exit(2);
    };
    let shared = Arc::new(Shared {
        parts: Parts::from_env(),
        fs: OsFilesystem::open(Path::new(root)).unwrap_or_else(|e| {
            eprintln!("error: cannot open {root}: {e}");
            std::process::exit(1);
        }),
        export: RootPath::parse(".").expect("`.` is a valid root"),
        trace: JsonlTraceSink::open(Path::new(trace)).unwrap_or_else(|e| {
            eprintln!("error: cannot open {trace}: {e}");
            std::process::exit(1);
        }),
        buffers: Mutex::new(Vec::new()),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let listener = TcpListener::bind(addr.as_str()).await.unwrap_or_else(|e| {
            eprintln!("error: cannot listen on {addr}: {e}");
            std::process::exit(1);
        });
        println!(
            "listening on {} with one async thread and the blocking pool",
            listener.local_addr().expect("bound")
        );
        loop {
            if let Ok((stream, _)) = listener.accept().await {
                // A client that vanished mid-answer is no concern of the floor.
                tokio::spawn(answer(shared.clone(), stream));
            }
        }
    });
}

/// Reads one request head from `stream`, reads the file on the blocking pool, answers and
/// closes the connection.
async fn answer(shared: Arc<Shared>, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let target = loop {
        if stream.read_buf(&mut head).await? == 0 {
            return Ok(());
        }
        match request_target(&head) {
            Ok(None) => {}
            Ok(Some(target)) => break target,
            Err(()) => return stream.write_all(&status_only(400)).await,
        }
    };
    let Some(raw) = target.strip_prefix(PREFIX) else {
        return stream
            .write_all(&status_only(Code::NotFound.status()))
            .await;
    };
    let raw = strip_query(raw).to_owned();
    // Opened here, as the router's inline attempt opens it: a file of at most the inline limit
    // is read here too, a larger one on the blocking pool from the same descriptor.
    let opened = open(&shared.fs, &shared.export, &raw);
    // A refusal is answered here too, as the router answers it.
    let large = matches!(&opened, Ok(file) if file.meta().size > INLINE_READ_LIMIT);
    let reading = shared.clone();
    let work = move || {
        let mut buffer = reading.buffers.lock().unwrap().pop().unwrap_or_default();
        let result = opened.and_then(|file| read_opened(file, &mut buffer));
        let line = match &result {
            Ok((start, sha256, _)) => read_trace_line(&raw, Ok((buffer.len() - start, sha256))),
            Err(refusal) => read_trace_line(&raw, Err(refusal)),
        };
        let traced = if reading.parts.trace {
            reading.trace.append_line(&line)
        } else {
            Ok(())
        };
        (buffer, traced.map(|()| result))
    };
    let (buffer, result) = if shared.parts.pool && large {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(std::io::Error::other)?
    } else {
        work()
    };
    let written = match result? {
        Ok((start, sha256, mtime_ms)) => {
            let body = &buffer[start..];
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n\
                 etag: \"sha256:{sha256}\"\r\nx-murmur-mtime-ms: {mtime_ms}\r\n\
                 x-murmur-generation: 0\r\nx-murmur-containment: advisory\r\n\
                 x-murmur-export-root: out/\r\ndate: Tue, 01 Dec 2026 00:00:00 GMT\r\n\
                 content-length: {}\r\n\r\n",
                body.len()
            );
            write_all_vectored(&mut stream, head.as_bytes(), body).await
        }
        Err(refusal) => stream.write_all(&status_only(refusal.code.status())).await,
    };
    shared.buffers.lock().unwrap().push(buffer);
    written
}

/// Writes `head` then `body`, as few system calls as the socket allows.
async fn write_all_vectored(
    stream: &mut TcpStream,
    head: &[u8],
    body: &[u8],
) -> std::io::Result<()> {
    let mut written = 0;
    let total = head.len() + body.len();
    while written < total {
        let n = if written < head.len() {
            let slices = [IoSlice::new(&head[written..]), IoSlice::new(body)];
            stream.write_vectored(&slices).await?
        } else {
            stream.write(&body[written - head.len()..]).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    Ok(())
}
