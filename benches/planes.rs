//! Criterion benches, each beside its floor in the same run; the end of the run
//! prints the ratios (`cargo bench --bench planes`).
//!
//! | Group | Plane | Floor |
//! |---|---|---|
//! | `read/<size>` | a read through the operator plane (resolve, type-check, read, sha256) | `std::fs::File::open` + `read_to_end` + sha256 of the same file |
//! | `redeem/4k` | a redeem of a valid handle for a 4 KiB file | a plain read of the same file |
//! | `redeem_proof/4k` | `proof`: a redeem of a handle minted for a keyed audience, with a fresh `x-murmur-proof` (D-14.4: MAC over the keyed audience, header parse, Ed25519 verify, freshness, replay memory) | `plain`: the same redeem of a plain handle, no proof (D-14.5 allows at most 60 µs more) |
//! | `resolve` | decode + kernel-contained open of `sub/deep/f` (no read) | one `openat` of the same path |
//! | `etag/<size>` | the etag (sha256 → lowercase hex) | sha256 alone |
//! | `mac` | verifying a token's MAC through the `KeyStore` | HMAC-SHA256 of the same bytes with a prepared key |
//! | `not_modified/<file>` | a 304 for a cached 4 KiB and a cached 1 GiB file (D-13.3: the same cost) | `read_4k`: a 200 of the 4 KiB file |
//! | `list/<n>` | a listing of `n` files (cold: fresh cache; warm: repeat) | walk + open + read + sha256 of every file |
//! | `router/read_4k`, `router/redeem_4k` | a read and a redeem of the 4 KiB file through a capsule's router, in process (routing, decoding, the inline plane call, the response and its trace line) | the plane's read alone |
#![allow(clippy::disallowed_methods)] // benches build their own worlds with std::fs

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use resource_plane::backends::{
    Clock, FixedIdentityKey, FixedKeyStore, IdentityKey, KeyStore, OsFilesystem, SystemClock,
};
use resource_plane::budget::ByteBudget;
use resource_plane::page_aligned;
use resource_plane::path::decode_request_path;
use resource_plane::planes::{
    ExportScope, HmacPeerPlane, IfNoneMatch, OperatorPlane, Origin, PeerPlane, ReadOutcome,
    RedeemRequest, ServedFile, proof,
};
use resource_plane::scope::{Containment, RootPath};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

const SIZES: [(&str, usize); 3] = [("4k", 4096), ("1m", 1 << 20), ("10m", 10 << 20)];

struct World {
    _dir: tempfile::TempDir,
    workdir: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().to_path_buf();
    std::fs::create_dir_all(workdir.join("out/sub/deep")).unwrap();
    for (name, size) in SIZES {
        std::fs::write(workdir.join(format!("out/{name}.bin")), vec![0x5a; size]).unwrap();
    }
    std::fs::write(workdir.join("out/sub/deep/f"), b"deep").unwrap();
    World { _dir: dir, workdir }
}

fn scope(root: &str) -> ExportScope {
    ExportScope {
        root: RootPath::parse(root).unwrap(),
        max_bytes: 64 << 20,
        containment: Containment::Sealed,
    }
}

fn operator(workdir: &Path, root: &str) -> OperatorPlane {
    OperatorPlane::new(
        Arc::new(OsFilesystem::open(workdir).unwrap()),
        Arc::new(SystemClock),
        scope(root),
        ByteBudget::new(1 << 30),
    )
}

/// The floor reads into a page-aligned buffer too, so it is the best a plain read can do on
/// this machine (a misaligned destination makes the kernel's copy up to ten times slower; see
/// `resource_plane::page_aligned`).
fn floor_read(path: &Path) -> String {
    let mut file = std::fs::File::open(path).unwrap();
    let size = file.metadata().unwrap().len() as usize;
    let mut buf = Vec::with_capacity(size + 1 + page_aligned::SLACK);
    let start = page_aligned::pad_to_page(&mut buf);
    file.read_to_end(&mut buf).unwrap();
    resource_plane::hex::encode(&Sha256::digest(&buf[start..]))
}

/// A read through the operator plane as the router makes it: the request path decoded, then
/// read with no condition; the file's sha256.
fn read_sha(plane: &OperatorPlane, raw: &str) -> String {
    let path = decode_request_path(raw).unwrap();
    match plane.read_blocking(&path, &IfNoneMatch::absent()).unwrap() {
        ReadOutcome::File(file) => file.sha256,
        ReadOutcome::NotModified { .. } => unreachable!("no condition, so no 304"),
        other => unreachable!("a file whole: {other:?}"),
    }
}

/// A plain redeem of `token` by the bench's reader; the file served.
fn redeem_plain(peer: &HmacPeerPlane, token: &str) -> ServedFile {
    peer.redeem_blocking(RedeemRequest::new(token, &[b"reader@127.0.0.1:1"]))
        .result
        .unwrap()
}

/// A redeem of `token` with the proof `header`; the file served.
fn redeem_proved(peer: &HmacPeerPlane, token: &str, header: &str) -> ServedFile {
    peer.redeem_blocking(
        RedeemRequest::new(token, &[b"reader@127.0.0.1:1"]).with_proof(&[header.as_bytes()]),
    )
    .result
    .unwrap()
}

fn reads(c: &mut Criterion, w: &World) {
    let plane = operator(&w.workdir, "out");
    for (name, size) in SIZES {
        let mut group = c.benchmark_group(format!("read/{name}"));
        group.throughput(Throughput::Bytes(size as u64));
        if size > 1 << 20 {
            group.sample_size(20);
        }
        let path = w.workdir.join(format!("out/{name}.bin"));
        let rel = format!("{name}.bin");
        group.bench_function("plane", |b| b.iter(|| read_sha(&plane, &rel)));
        group.bench_function("floor", |b| b.iter(|| floor_read(&path)));
        group.finish();
    }
}

/// The origin the bench's peer plane is reached at, and its proofs name.
fn origin() -> Origin {
    Origin::of_url("http://127.0.0.1:1").unwrap()
}

/// A peer plane over the bench world and a valid handle for `4k.bin`.
fn peer_with_token(w: &World) -> (HmacPeerPlane, String) {
    peer_on_clock(w, Arc::new(SystemClock))
}

/// A clock that moves [`STEP_MS`](SteppingClock::STEP_MS) forward at every reading, from the
/// system's time when it was made. A minter remembers each accepted proof for 120 s of its
/// clock and lets one key hold at most 16,384 of them (D-14.4.1); on this clock a loop
/// signing and redeeming proofs with one key as fast as it can holds at most 6,000, as a peer
/// redeeming at a steady 50 a second would.
#[derive(Debug)]
struct SteppingClock(AtomicI64);

impl SteppingClock {
    const STEP_MS: i64 = 10;

    fn new() -> Self {
        SteppingClock(AtomicI64::new(SystemClock.now_ms()))
    }
}

impl Clock for SteppingClock {
    fn now_ms(&self) -> i64 {
        self.0.fetch_add(Self::STEP_MS, Ordering::Relaxed)
    }
}

/// A peer plane over the bench world on `clock` and a valid handle for `4k.bin`, both living
/// for a year of that clock.
fn peer_on_clock(w: &World, clock: Arc<dyn Clock>) -> (HmacPeerPlane, String) {
    let peer = HmacPeerPlane::new(
        Arc::new(OsFilesystem::open(&w.workdir).unwrap()),
        clock,
        Arc::new(FixedKeyStore::new([9; 32])),
        scope("out"),
        "ses_bench".into(),
        ByteBudget::new(1 << 30),
        origin(),
    );
    let target = peer.resolve_for_mint("4k.bin").unwrap();
    let token = peer
        .mint(&target, "reader@127.0.0.1:1", YEAR_SECS)
        .unwrap()
        .token;
    (peer, token)
}

fn redeem(c: &mut Criterion, w: &World) {
    let (peer, token) = peer_with_token(w);
    let plane = operator(&w.workdir, "out");
    let mut group = c.benchmark_group("redeem/4k");
    group.bench_function("plane", |b| b.iter(|| redeem_plain(&peer, &token).sha256));
    group.bench_function("floor", |b| b.iter(|| read_sha(&plane, "4k.bin")));
    group.finish();
}

/// A handle for `4k.bin` on `peer` minted for the keyed audience of `identity` (D-14.2).
fn keyed_token(peer: &HmacPeerPlane, identity: &FixedIdentityKey) -> String {
    let key = resource_plane::audience::encode_key(&identity.public_key());
    let audience = resource_plane::audience::keyed("reader@127.0.0.1:1", &key);
    let target = peer.resolve_for_mint("4k.bin").unwrap();
    peer.mint(&target, &audience, YEAR_SECS).unwrap().token
}

/// A handle's lifetime in the benches: a year, long past any run on any of their clocks.
const YEAR_SECS: u64 = 365 * 24 * 3600;

/// A fresh proof for `token` at `clock`'s time: a new nonce per call, so none is a replay.
fn fresh_proof(
    identity: &FixedIdentityKey,
    clock: &dyn Clock,
    token: &str,
    counter: &mut u128,
) -> String {
    *counter += 1;
    let id = resource_plane::hex::handle_id(token);
    proof::header_value(
        identity,
        &origin(),
        &id,
        clock.now_ms(),
        &counter.to_le_bytes(),
    )
    .unwrap()
}

/// D-14.5's bound, in one run: a proof-checked redeem beside a plain redeem of the same 4 KiB
/// file. Each proof is signed in the batch setup, outside the measured time.
fn redeem_proof(c: &mut Criterion, w: &World) {
    let clock = Arc::new(SteppingClock::new());
    let (peer, plain) = peer_on_clock(w, clock.clone());
    let identity = FixedIdentityKey::new([5; 32]);
    let keyed = keyed_token(&peer, &identity);
    let mut counter = 0u128;
    let mut group = c.benchmark_group("redeem_proof/4k");
    group.bench_function("plain", |b| b.iter(|| redeem_plain(&peer, &plain).sha256));
    group.bench_function("proof", |b| {
        b.iter_batched(
            || fresh_proof(&identity, clock.as_ref(), &keyed, &mut counter),
            |header| redeem_proved(&peer, &keyed, &header).sha256,
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// The proof's extra cost without drift between groups: proof-checked and plain redeems of the
/// same file alternate in one loop, and their medians are compared.
fn proof_overhead_interleaved(w: &World) {
    let clock = Arc::new(SteppingClock::new());
    let (peer, plain) = peer_on_clock(w, clock.clone());
    let identity = FixedIdentityKey::new([5; 32]);
    let keyed = keyed_token(&peer, &identity);
    let mut counter = 0u128;
    let (mut proved, mut plains) = (Vec::new(), Vec::new());
    for i in 0..10_000 {
        let header = fresh_proof(&identity, clock.as_ref(), &keyed, &mut counter);
        let mut time_proved = || {
            let start = std::time::Instant::now();
            std::hint::black_box(redeem_proved(&peer, &keyed, &header));
            proved.push(start.elapsed());
        };
        let mut time_plain = || {
            let start = std::time::Instant::now();
            std::hint::black_box(redeem_plain(&peer, &plain));
            plains.push(start.elapsed());
        };
        // Alternate which goes first, so neither always meets the warmer cache.
        if i % 2 == 0 {
            time_proved();
            time_plain();
        } else {
            time_plain();
            time_proved();
        }
    }
    proved.sort();
    plains.sort();
    let (p, q) = (proved[proved.len() / 2], plains[plains.len() / 2]);
    println!(
        "proof-checked vs plain redeem, interleaved medians: {:.2} µs vs {:.2} µs; proof adds {:.2} µs (D-14.5: at most 60 µs)",
        p.as_secs_f64() * 1e6,
        q.as_secs_f64() * 1e6,
        (p.as_secs_f64() - q.as_secs_f64()) * 1e6
    );
}

/// The redeem's extra cost measured without drift between groups: redeem and plain read of the
/// same file alternate in one loop, and the medians of each are compared.
fn redeem_overhead_interleaved(w: &World) {
    let (peer, token) = peer_with_token(w);
    let plane = operator(&w.workdir, "out");
    let (mut redeems, mut reads) = (Vec::new(), Vec::new());
    for i in 0..40_000 {
        let (first_redeem, start) = (i % 2 == 0, std::time::Instant::now());
        if first_redeem {
            std::hint::black_box(redeem_plain(&peer, &token));
            redeems.push(start.elapsed());
            let start = std::time::Instant::now();
            std::hint::black_box(read_sha(&plane, "4k.bin"));
            reads.push(start.elapsed());
        } else {
            std::hint::black_box(read_sha(&plane, "4k.bin"));
            reads.push(start.elapsed());
            let start = std::time::Instant::now();
            std::hint::black_box(redeem_plain(&peer, &token));
            redeems.push(start.elapsed());
        }
    }
    redeems.sort();
    reads.sort();
    let (r, p) = (redeems[redeems.len() / 2], reads[reads.len() / 2]);
    println!(
        "redeem vs plain read, interleaved medians: {:.2} µs vs {:.2} µs; overhead {:.2} µs (target <= 3 µs)",
        r.as_secs_f64() * 1e6,
        p.as_secs_f64() * 1e6,
        (r.as_secs_f64() - p.as_secs_f64()) * 1e6
    );
}

fn resolve(c: &mut Criterion, w: &World) {
    let fs = OsFilesystem::open(&w.workdir).unwrap();
    let root = RootPath::parse("out").unwrap();
    let target = resource_plane::path::decode_request_path("sub/deep/f").unwrap();
    let dir = std::fs::File::open(w.workdir.join("out")).unwrap();
    let mut group = c.benchmark_group("resolve");
    group.bench_function("plane", |b| {
        b.iter(|| {
            use resource_plane::backends::Filesystem;
            let target = resource_plane::path::decode_request_path("sub/deep/f").unwrap();
            fs.open_root(&root, Containment::Sealed)
                .unwrap()
                .open_file(&target)
                .unwrap()
                .meta()
                .size
        })
    });
    group.bench_function("floor", |b| {
        b.iter(|| {
            let fd = rustix::fs::openat(
                &dir,
                target.as_str(),
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            rustix::fs::fstat(&fd).unwrap().st_size
        })
    });
    group.finish();
}

fn etag(c: &mut Criterion) {
    for (name, size) in SIZES {
        let data = vec![0xa5u8; size];
        let mut group = c.benchmark_group(format!("etag/{name}"));
        group.throughput(Throughput::Bytes(size as u64));
        if size > 1 << 20 {
            group.sample_size(20);
        }
        group.bench_function("plane", |b| {
            b.iter(|| resource_plane::hex::sha256_hex(&data))
        });
        group.bench_function("floor", |b| b.iter(|| Sha256::digest(&data)));
        group.finish();
    }
}

fn mac(c: &mut Criterion) {
    use hmac::{KeyInit, Mac};
    let store = FixedKeyStore::new([3; 32]);
    let parts: [&[u8]; 5] = [
        b"murmur-peer-handle-v1",
        &[0x1f],
        &[b'x'; 120],
        &[0x1f],
        b"reader@127.0.0.1:1",
    ];
    let tag = store.sign(&parts).unwrap();
    let prepared = hmac::Hmac::<Sha256>::new_from_slice(&[3; 32]).unwrap();
    let mut group = c.benchmark_group("mac");
    group.bench_function("plane", |b| b.iter(|| store.verify(&parts, &tag)));
    group.bench_function("floor", |b| {
        b.iter(|| {
            let mut m = prepared.clone();
            for p in parts {
                m.update(p);
            }
            m.verify_slice(&tag).is_ok()
        })
    });
    group.finish();
}

fn listing(c: &mut Criterion) {
    for files in [100usize, 1000] {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..files {
            let sub = dir.path().join(format!("out/d{}", i % 10));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{i}")), vec![i as u8; 16 * 1024]).unwrap();
        }
        // Let the racy-git window pass so the warm plane may cache.
        std::thread::sleep(Duration::from_millis(2100));
        let warm = operator(dir.path(), "out");
        warm.list_blocking(&resource_plane::planes::Cancel::default())
            .unwrap();
        let mut group = c.benchmark_group(format!("list/{files}"));
        group.sample_size(20);
        group.throughput(Throughput::Elements(files as u64));
        group.bench_function(BenchmarkId::new("plane", "cold"), |b| {
            b.iter(|| {
                operator(dir.path(), "out")
                    .list_blocking(&resource_plane::planes::Cancel::default())
                    .unwrap()
                    .len()
            })
        });
        group.bench_function(BenchmarkId::new("plane", "warm"), |b| {
            b.iter(|| {
                warm.list_blocking(&resource_plane::planes::Cancel::default())
                    .unwrap()
                    .len()
            })
        });
        group.bench_function("floor", |b| b.iter(|| floor_walk(&dir.path().join("out"))));
        group.finish();
    }
}

/// Walk + open + read + sha256, single-threaded, sorted: the floor a listing is compared to.
/// D-13.3: a 304 for a file whose key the hash cache holds costs an open and an `fstat`,
/// whatever the file's size: a cached 1 GiB file (sparse) beside a cached 4 KiB one, with a
/// plain 4 KiB read for scale.
fn conditional(c: &mut Criterion) {
    use resource_plane::planes::{IfNoneMatch, ReadOutcome};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    std::fs::write(dir.path().join("out/4k.bin"), vec![0x5a; 4096]).unwrap();
    std::fs::File::create(dir.path().join("out/1g.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::thread::sleep(Duration::from_millis(2100)); // out of the racy window
    let plane = OperatorPlane::new(
        Arc::new(OsFilesystem::open(dir.path()).unwrap()),
        Arc::new(SystemClock),
        ExportScope {
            root: RootPath::parse("out").unwrap(),
            max_bytes: 2 << 30,
            containment: Containment::Sealed,
        },
        ByteBudget::new(1 << 30),
    );
    plane
        .list_blocking(&resource_plane::planes::Cancel::default())
        .unwrap();
    let mut group = c.benchmark_group("not_modified");
    for name in ["4k.bin", "1g.bin"] {
        let any = IfNoneMatch::parse(&[b"*"]);
        group.bench_function(name, |b| {
            b.iter(|| {
                match plane
                    .read_blocking(&decode_request_path(name).unwrap(), &any)
                    .unwrap()
                {
                    ReadOutcome::NotModified { sha256, .. } => sha256,
                    ReadOutcome::File(_) => panic!("a cached file is a 304"),
                    other => panic!("a cached file is a 304: {other:?}"),
                }
            })
        });
    }
    group.bench_function("read_4k", |b| b.iter(|| read_sha(&plane, "4k.bin")));
    group.finish();
}

/// A trace sink that keeps nothing, so a router bench measures the line's building, not a
/// growing buffer.
#[derive(Debug)]
struct Discard;

impl resource_plane::backends::TraceSink for Discard {
    fn append_line(&self, line: &[u8]) -> std::io::Result<()> {
        std::hint::black_box(line);
        Ok(())
    }
}

/// Requests answered through a capsule's router, in process, on a current-thread runtime: the
/// routing, the path decoding, the plane call (inline on the async worker for these small
/// files), the response and its trace line. The floor is the plane call alone.
fn router(c: &mut Criterion, w: &World) {
    let manifest = resource_plane::Manifest::from_yaml(
        "name: bench\nexports:\n  files: { root: out, mode: read-only }\n  peer_files: { root: out, max_ttl: 1h }\n",
    )
    .unwrap()
    .manifest;
    let capsule = resource_plane::Capsule::builder(&manifest)
        .filesystem(Arc::new(OsFilesystem::open(&w.workdir).unwrap()))
        .keys(Arc::new(FixedKeyStore::new([9; 32])))
        .trace(Arc::new(Discard))
        .advertised_url("http://127.0.0.1:1")
        .containment(Containment::Sealed)
        .launch()
        .unwrap();
    let router = capsule.router();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let peer = capsule.peer_plane().unwrap();
    let target = peer.resolve_for_mint("4k.bin").unwrap();
    let token = peer
        .mint(&target, "reader@127.0.0.1:1", 3600)
        .unwrap()
        .token;
    let redeem_path = format!("/resources/peer/{token}");
    let plane = operator(&w.workdir, "out");

    let mut group = c.benchmark_group("router/read_4k");
    group.bench_function("plane", |b| {
        b.iter(|| {
            let request = http::Request::get("/resources/files/4k.bin")
                .body(())
                .unwrap();
            let response = runtime.block_on(router.handle(request));
            assert_eq!(response.status(), 200);
            response
        })
    });
    group.bench_function("floor", |b| b.iter(|| read_sha(&plane, "4k.bin")));
    group.finish();

    let mut group = c.benchmark_group("router/redeem_4k");
    group.bench_function("plane", |b| {
        b.iter(|| {
            let request = http::Request::get(redeem_path.as_str())
                .header("x-murmur-audience", "reader@127.0.0.1:1")
                .body(())
                .unwrap();
            let response = runtime.block_on(router.handle(request));
            assert_eq!(response.status(), 200);
            response
        })
    });
    group.bench_function("floor", |b| b.iter(|| read_sha(&plane, "4k.bin")));
    group.finish();
}

fn floor_walk(root: &Path) -> usize {
    let mut stack = vec![root.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    let hashes: Vec<String> = files.iter().map(|p| floor_read(p)).collect();
    hashes.len()
}

fn ratio_report() {
    let base = Path::new("target/criterion");
    let mean = |group: &str, id: &str| -> Option<f64> {
        let path = base
            .join(group.replace('/', "_"))
            .join(id)
            .join("new/estimates.json");
        let text = std::fs::read_to_string(path).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        value["mean"]["point_estimate"].as_f64()
    };
    println!(
        "\n{:<14} {:>14} {:>14} {:>8}",
        "group", "plane", "floor", "ratio"
    );
    let mut rows: Vec<(String, String)> = Vec::new();
    for (name, _) in SIZES {
        rows.push((format!("read/{name}"), "plane".into()));
        rows.push((format!("etag/{name}"), "plane".into()));
    }
    rows.push(("redeem/4k".into(), "plane".into()));
    rows.push(("router/read_4k".into(), "plane".into()));
    rows.push(("router/redeem_4k".into(), "plane".into()));
    rows.push(("resolve".into(), "plane".into()));
    rows.push(("mac".into(), "plane".into()));
    for files in [100, 1000] {
        rows.push((format!("list/{files}"), "plane/cold".into()));
        rows.push((format!("list/{files}"), "plane/warm".into()));
    }
    for (group, id) in rows {
        if let (Some(p), Some(f)) = (mean(&group, &id), mean(&group, "floor")) {
            println!(
                "{:<14} {:>11.2} µs {:>11.2} µs {:>7.2}x   {id}",
                group,
                p / 1e3,
                f / 1e3,
                p / f
            );
        }
    }
    if let (Some(r), Some(p)) = (mean("redeem/4k", "plane"), mean("redeem/4k", "floor")) {
        println!("redeem overhead over a plain read: {:.2} µs", (r - p) / 1e3);
    }
    if let (Some(proved), Some(plain)) = (
        mean("redeem_proof/4k", "proof"),
        mean("redeem_proof/4k", "plain"),
    ) {
        println!(
            "redeem_proof/4k: proof {:.2} µs, plain {:.2} µs; the proof adds {:.2} µs (D-14.5: at most 60 µs)",
            proved / 1e3,
            plain / 1e3,
            (proved - plain) / 1e3
        );
    }
}

fn main() {
    let w = world();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    reads(&mut c, &w);
    redeem(&mut c, &w);
    redeem_proof(&mut c, &w);
    resolve(&mut c, &w);
    etag(&mut c);
    mac(&mut c);
    listing(&mut c);
    conditional(&mut c);
    router(&mut c, &w);
    c.final_summary();
    ratio_report();
    redeem_overhead_interleaved(&w);
    proof_overhead_interleaved(&w);
}
