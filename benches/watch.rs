//! Watching an export (D-17.5), for 10,000 and 100,000-file exports (`WATCH_FILES=10000,100000`
//! by default; `cargo bench --bench watch`):
//!
//! 1. write-to-wake latency: a file written and closed, until a watch stream delivers its
//!    change and until a held long-poll answers (median, p99);
//! 2. the cost of 1,000 idle watch streams and of 1,000 idle long-polls, held in process
//!    through the router: resident memory and threads added, CPU used over 5 idle seconds
//!    (`WATCH_IDLE` sets the count; long-polls at the smallest size only, since each one lists
//!    the export once before it waits);
//! 3. a re-list per change (a listing with the hash cache warm, etag included) against a full
//!    cold listing.
//!
//! Connections are not involved: hyper's per-connection buffers and the kernel's socket
//! buffers come on top of the idle costs measured here.
#![allow(clippy::disallowed_methods)] // benches build their own worlds with std::fs

use futures_core::Stream;
use http_body_util::BodyExt;
use resource_plane::backends::{OsFilesystem, RecordingTraceSink};
use resource_plane::planes::watch::{ChangeStream, WatchEvent};
use resource_plane::{Capsule, Manifest};
use std::future::poll_fn;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn sizes() -> Vec<usize> {
    std::env::var("WATCH_FILES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000])
}

fn idle_count() -> usize {
    std::env::var("WATCH_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// `files` files of 64 bytes in 100 directories under `root/out`.
fn make_tree(root: &Path, files: usize) {
    for d in 0..100 {
        std::fs::create_dir_all(root.join(format!("out/d{d:02}"))).unwrap();
    }
    for i in 0..files {
        let path = root.join(format!("out/d{:02}/f{i:07}.txt", i % 100));
        std::fs::write(path, format!("{i:064}")).unwrap();
    }
}

fn capsule(root: &Path) -> Capsule {
    let manifest =
        Manifest::from_yaml("name: b\nexports: { files: { root: out/, mode: read-only } }")
            .unwrap()
            .manifest;
    Capsule::builder(&manifest)
        .filesystem(Arc::new(OsFilesystem::open(root).unwrap()))
        .trace(Arc::new(RecordingTraceSink::new()))
        .advertised_url("http://127.0.0.1:41234")
        .inflight_budget_bytes(1 << 30)
        .launch()
        .unwrap()
}

/// `VmRSS` in KiB and `Threads` of this process.
fn rss_and_threads() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("Threads:"))
}

/// User plus system CPU of this process, in clock ticks (1/100 s).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

async fn next(stream: &mut ChangeStream) -> Option<WatchEvent> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}

async fn listing_etag(capsule: &Capsule) -> String {
    let request = http::Request::get("/resources/files").body(()).unwrap();
    let response = capsule.router().handle(request).await;
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let _ = response.into_body().collect().await;
    etag
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let at = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[at]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn measure(files: usize, with_long_polls: bool) {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    make_tree(dir.path(), files);
    println!(
        "\n== {files} files (tree built in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let capsule = capsule(dir.path());

    // 3. Cold and warm listings.
    let started = Instant::now();
    listing_etag(&capsule).await;
    let cold = started.elapsed();
    let mut warm = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        listing_etag(&capsule).await;
        warm.push(started.elapsed());
    }
    let warm = percentile(&mut warm, 0.5);
    println!(
        "re-list per change (warm cache, etag included): {} vs a full cold listing: {} ({:.1}x)",
        ms(warm),
        ms(cold),
        cold.as_secs_f64() / warm.as_secs_f64()
    );

    // 1. Write-to-wake through a stream.
    let mut stream = capsule.watch(None).unwrap();
    next(&mut stream).await;
    let mut stream_wake = Vec::new();
    for i in 0..20 {
        let path = dir.path().join(format!("out/d00/new{i}.txt"));
        let started = Instant::now();
        std::fs::write(&path, "new").unwrap();
        loop {
            let Some(WatchEvent::Change(batch)) = next(&mut stream).await else {
                panic!("a change")
            };
            if batch
                .changes
                .iter()
                .any(|c| c.path.ends_with(&format!("new{i}.txt")))
            {
                break;
            }
        }
        stream_wake.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "write-to-wake, stream:    median {}, p99 {} ({} samples)",
        ms(percentile(&mut stream_wake, 0.5)),
        ms(percentile(&mut stream_wake, 0.99)),
        stream_wake.len()
    );

    // 1. Write-to-wake through a long-poll.
    let mut poll_wake = Vec::new();
    for i in 0..10 {
        let etag = listing_etag(&capsule).await;
        let router = capsule.router();
        let poll = tokio::spawn(async move {
            let request = http::Request::get("/resources/files?wait=30")
                .header("if-none-match", etag)
                .body(())
                .unwrap();
            let response = router.handle(request).await;
            let at = Instant::now();
            let _ = response.into_body().collect().await;
            at
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        std::fs::write(dir.path().join(format!("out/d01/poll{i}.txt")), "p").unwrap();
        let answered = poll.await.unwrap();
        poll_wake.push(answered.saturating_duration_since(started));
    }
    println!(
        "write-to-wake, long-poll: median {}, p99 {} ({} samples)",
        ms(percentile(&mut poll_wake, 0.5)),
        ms(percentile(&mut poll_wake, 0.99)),
        poll_wake.len()
    );

    // 2. Idle streams.
    let count = idle_count();
    settle().await;
    let (rss0, threads0) = rss_and_threads();
    let mut held = Vec::new();
    for _ in 0..count {
        let request = http::Request::get("/resources/files?watch=1")
            .body(())
            .unwrap();
        let mut body = capsule.router().handle(request).await.into_body();
        body.frame().await; // the opening event
        held.push(body);
    }
    idle_report("streams", count, rss0, threads0).await;
    drop(held);

    if !with_long_polls {
        println!("idle long-polls: not measured at this size (each lists the export once)");
        return;
    }
    let etag = listing_etag(&capsule).await;
    settle().await;
    let (rss0, threads0) = rss_and_threads();
    let mut polls = Vec::new();
    for _ in 0..count {
        let router = capsule.router();
        let etag = etag.clone();
        polls.push(tokio::spawn(async move {
            let request = http::Request::get("/resources/files?wait=300")
                .header("if-none-match", etag)
                .body(())
                .unwrap();
            router.handle(request).await.status()
        }));
    }
    // Every long-poll has listed once and is waiting once the process is quiet.
    settle().await;
    assert!(
        !polls.iter().any(|p| p.is_finished()),
        "a long-poll answered while nothing changed"
    );
    idle_report("long-polls", count, rss0, threads0).await;
    capsule.router().shut_down_watches();
    for poll in polls {
        assert_eq!(poll.await.unwrap(), 304);
    }
}

/// Waits until a second passes with under 5% of a core used (at most two minutes).
async fn settle() {
    for _ in 0..120 {
        let before = cpu_ticks();
        tokio::time::sleep(Duration::from_secs(1)).await;
        if cpu_ticks() - before < 5 {
            return;
        }
    }
}

async fn idle_report(what: &str, count: usize, rss0: u64, threads0: u64) {
    settle().await;
    let (rss1, threads1) = rss_and_threads();
    let cpu0 = cpu_ticks();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu = cpu_ticks() - cpu0;
    println!(
        "{count} idle {what}: +{:.1} MiB RSS, +{} threads, {:.2} s CPU over 5 s idle",
        rss1.saturating_sub(rss0) as f64 / 1024.0,
        threads1.saturating_sub(threads0),
        cpu as f64 / 100.0
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sizes = sizes();
    let smallest = sizes.iter().copied().min().unwrap_or(0);
    runtime.block_on(async {
        for files in sizes {
            measure(files, files == smallest).await;
        }
    });
}
