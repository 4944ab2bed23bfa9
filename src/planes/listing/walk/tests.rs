//! The listing as a whole: what it lists from filesystems that misbehave, what it costs the
//! budget and the threads, and how listings share the hash cache.

use super::*;
use crate::backends::fs::{FileMeta, FsError, MemoryFilesystem, OpenFile, RootDir};
use crate::path::RelPath;
use crate::planes::ListingEntry;
use crate::planes::listing::pool::{LISTING_CHUNK, LISTING_PARALLEL_FROM};
use crate::planes::test_fs::{ColdDisk, StaleSizes, scope};
use crate::refusal::Code;
use crate::scope::{Containment, RootPath};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The entries of one listing of `fs` under an export of `max_bytes`, its hash cache cold,
/// charged to no budget, never cancelled.
fn list_cold(fs: &dyn Filesystem, max_bytes: u64) -> Vec<ListingEntry> {
    list_files(
        fs,
        &scope(max_bytes),
        &HashCache::new(),
        0,
        None,
        &Cancel::default(),
    )
    .expect("listable")
    .iter()
    .collect()
}

/// A cold cache keeps more files in flight than there are cores: with reads
/// that wait on the disk, the listing has more of them waiting at once than the machine
/// has cores, and still lists every file, hashed whole.
#[test]
fn a_cold_listing_keeps_more_reads_in_flight_than_there_are_cores() {
    let cores = crate::budget::DEFAULT_CORES;
    // Enough files for every thread the listing may start, on any machine.
    let files = (LISTING_PARALLEL_FROM * 3).max(cores * 4);
    let disk = ColdDisk::default();
    for n in 0..files {
        disk.files
            .add_file(&format!("out/d{}/f{n}", n % 5), vec![n as u8; 100], 0);
    }
    let listed = list_cold(&disk, 1 << 20);
    assert_eq!(listed.len(), files);
    let digest = crate::hex::encode(&Sha256::digest([7u8; 100]));
    let seven = listed.iter().find(|e| e.path == "d2/f7").expect("listed");
    assert_eq!(
        (seven.size_bytes, seven.sha256.as_str()),
        (100, digest.as_str())
    );
    let most = disk.most.load(Ordering::SeqCst);
    assert!(
        most > cores,
        "{most} reads in flight at most, on {cores} cores"
    );
    assert_eq!(disk.reading.load(Ordering::SeqCst), 0, "every read ended");
}

/// Lists `content` as `out/f` through `StaleSizes(_, stale_size, piece)`.
fn list_through(content: &[u8], stale_size: u64, piece: usize) -> Vec<ListingEntry> {
    let inner = MemoryFilesystem::new();
    inner.add_file("out/f", content.to_vec(), 0);
    let fs = StaleSizes::always(inner, stale_size, piece);
    list_cold(&fs, 1 << 30)
}

#[test]
fn a_listed_hash_covers_the_whole_file_however_its_reads_come_back() {
    let content: Vec<u8> = (0..(LISTING_CHUNK * 2 + 77) as u32)
        .map(|i| (i % 241) as u8)
        .collect();
    let whole = crate::hex::encode(&Sha256::digest(&content));
    let size = content.len() as u64;
    // (size the descriptor reports, most bytes one read returns)
    for (stale_size, piece) in [
        (size, usize::MAX), // the plain case
        (size, 1000),       // short reads long before the end must not end the hash
        (size, 4096),       // short reads of exactly a page
    ] {
        let listed = list_through(&content, stale_size, piece);
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].size_bytes, listed[0].sha256.as_str()),
            (size, whole.as_str()),
            "stale size {stale_size}, reads of at most {piece} bytes"
        );
    }
    // A file that grew past the size its descriptor gave is being written: omitted.
    for (stale_size, piece) in [(100, usize::MAX), (100, 1000), (size - 1, 65_536)] {
        assert!(
            list_through(&content, stale_size, piece).is_empty(),
            "stale size {stale_size}, reads of at most {piece} bytes"
        );
    }
    // The one case that stops early: a short read ending exactly at the size the
    // descriptor gave. The entry then describes those bytes, the file as its fstat saw it.
    let listed = list_through(&content, 131_072, 65_536);
    let prefix = crate::hex::encode(&Sha256::digest(&content[..131_072]));
    assert_eq!(
        (listed[0].size_bytes, listed[0].sha256.as_str()),
        (131_072, prefix.as_str())
    );
}

/// A file truncated while hashed ends before the size its descriptor gave: the bytes
/// hashed are no version of it, and it is omitted (D-3.3.1), however its reads come back;
/// the rest of the listing is unaffected.
#[test]
fn a_file_that_shrank_while_hashed_is_omitted() {
    let content: Vec<u8> = (0..(LISTING_CHUNK * 2 + 77) as u32)
        .map(|i| (i % 239) as u8)
        .collect();
    let size = content.len() as u64;
    for (stale_size, piece) in [
        (size + 1, usize::MAX),
        (size * 3, 1000),
        (size + 4096, 4096),
        (3 << 30, usize::MAX),
    ] {
        assert!(
            list_through(&content, stale_size, piece).is_empty(),
            "descriptor said {stale_size}, the file holds {size}, reads of at most {piece}"
        );
    }
}

/// A file whose every read returns more (a sparse file grown by `ftruncate` faster than it
/// can be read): its descriptor said 1,000 bytes, so at most 1,001 are read, and it is
/// omitted; the rest of the listing is unaffected.
#[test]
fn an_endlessly_growing_file_is_read_to_its_size_plus_one_and_omitted() {
    #[derive(Debug)]
    struct Endless(Arc<AtomicUsize>);
    impl std::io::Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.fetch_add(buf.len(), Ordering::SeqCst);
            buf.fill(7);
            Ok(buf.len())
        }
    }
    impl OpenFile for Endless {
        fn meta(&self) -> FileMeta {
            FileMeta {
                size: 1_000,
                mtime_ms: 0,
                dev: 1,
                ino: 99,
                mtime_ns: 0,
                ctime_ns: 0,
            }
        }
    }
    #[derive(Debug)]
    struct Root(Box<dyn RootDir>, Arc<AtomicUsize>);
    impl RootDir for Root {
        fn open_file(&self, target: &RelPath) -> Result<Box<dyn OpenFile>, FsError> {
            if target.as_str() == "growing" {
                return Ok(Box::new(Endless(self.1.clone())));
            }
            self.0.open_file(target)
        }
        fn walk(&self) -> Result<Vec<RelPath>, FsError> {
            self.0.walk()
        }
    }
    #[derive(Debug)]
    struct Growing(MemoryFilesystem, Arc<AtomicUsize>);
    impl Filesystem for Growing {
        fn open_root(
            &self,
            root: &RootPath,
            class: Containment,
        ) -> Result<Box<dyn RootDir>, FsError> {
            Ok(Box::new(Root(
                self.0.open_root(root, class)?,
                self.1.clone(),
            )))
        }
        fn check_root(&self, root: &RootPath) -> Result<(), FsError> {
            self.0.check_root(root)
        }
        fn land(&self, dir: &str, name: &str, bytes: &[u8]) -> Result<(), FsError> {
            self.0.land(dir, name, bytes)
        }
    }
    let fs = Growing(MemoryFilesystem::new(), Arc::new(AtomicUsize::new(0)));
    fs.0.add_file("out/growing", vec![0u8; 10], 0);
    fs.0.add_file("out/still", b"still".to_vec(), 0);
    let listed = list_cold(&fs, 1 << 40);
    assert_eq!(
        listed.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
        ["still"]
    );
    assert_eq!(
        fs.1.load(Ordering::SeqCst),
        1_001,
        "bytes asked of the growing file"
    );
}

/// A listing whose caller went away stops between files: raised mid-way through a slow
/// tree, the listing ends `io_error` long before it could have read every file, and no
/// read is left running.
#[test]
fn a_cancelled_listing_stops_soon() {
    let disk = ColdDisk::default();
    for n in 0..2_000 {
        disk.files.add_file(&format!("out/f{n}"), vec![1u8; 10], 0);
    }
    let cancel = Cancel::default();
    let started = std::time::Instant::now();
    let listing = std::thread::scope(|threads| {
        let listing = threads
            .spawn(|| list_files(&disk, &scope(1 << 20), &HashCache::new(), 0, None, &cancel));
        std::thread::sleep(std::time::Duration::from_millis(30));
        cancel.cancel();
        listing.join().expect("no panic")
    });
    // 2,000 reads of 3 ms on 2 x cores threads would take over a second on any machine
    // this runs on with fewer than 500 cores.
    let took = started.elapsed();
    assert_eq!(listing.expect_err("cancelled").code, Code::IoError);
    assert!(took < std::time::Duration::from_millis(500), "{took:?}");
    assert_eq!(
        disk.reading.load(Ordering::SeqCst),
        0,
        "no read left running"
    );
}

/// A listing's entries and body are charged to the in-flight budget until the listing is
/// dropped (D-4.6); one larger than the whole budget waits until it can run alone, and is
/// then served, not refused.
#[test]
fn a_listing_is_charged_to_the_budget_and_one_larger_than_it_waits_to_run_alone() {
    let fs = MemoryFilesystem::new();
    for n in 0..300 {
        fs.add_file(&format!("out/d{}/file-{n}", n % 3), vec![n as u8; 20], 0);
    }
    let cache = HashCache::new();
    let budget = ByteBudget::new(64 << 20);
    let listing = list_files(
        &fs,
        &scope(1 << 20),
        &cache,
        0,
        Some(&budget),
        &Cancel::default(),
    )
    .expect("listable");
    let charged = (64 << 20) - budget.available();
    assert!(
        charged >= 300 * ENTRY_BYTES,
        "{charged} bytes charged for 300 entries"
    );
    drop(listing);
    assert_eq!(budget.available(), 64 << 20, "all of it comes back");

    let small = ByteBudget::new(4096);
    let held = small.acquire_blocking(1);
    std::thread::scope(|threads| {
        let listing = threads.spawn(|| {
            list_files(
                &fs,
                &scope(1 << 20),
                &cache,
                0,
                Some(&small),
                &Cancel::default(),
            )
            .map(|listing| listing.len())
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!listing.is_finished(), "waits for the whole budget");
        drop(held);
        assert_eq!(listing.join().expect("no panic").expect("listable"), 300);
    });
    assert_eq!(small.available(), 4096);
}

/// Listings share one cache: each holds one read of it while its workers run and writes
/// its new hashes after. Concurrent listings neither deadlock nor disagree.
#[test]
fn concurrent_listings_share_the_cache_without_waiting_on_each_other() {
    let fs = MemoryFilesystem::new();
    for n in 0..200 {
        fs.add_file(&format!("out/d{}/f{n}", n % 7), vec![n as u8; 300], 0);
    }
    let cache = HashCache::new();
    let scope = scope(1 << 20);
    let first = list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default())
        .expect("listable")
        .iter()
        .collect::<Vec<_>>();
    assert_eq!(first.len(), 200);
    assert_eq!(
        cache.len(),
        200,
        "hashed long after the files changed: all cached"
    );
    std::thread::scope(|threads| {
        let listings: Vec<_> = (0..4)
            .map(|_| {
                threads.spawn(|| list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default()))
            })
            .collect();
        for listing in listings {
            assert_eq!(
                listing
                    .join()
                    .expect("no panic")
                    .expect("listable")
                    .iter()
                    .collect::<Vec<_>>(),
                first
            );
        }
    });
    assert_eq!(cache.len(), 200);
}

/// Pollers whose listings always overlap (another one is in progress whenever one ends,
/// as with two pollers 250 ms apart over a slow tree) still fill the cache: each listing's
/// update lands while the others run, and the next listing reads nothing.
#[test]
fn overlapping_listings_fill_the_cache() {
    let disk = ColdDisk::default();
    for n in 0..40 {
        disk.files
            .add_file(&format!("out/f{n}"), vec![n as u8; 64], 0);
    }
    let cache = HashCache::new();
    let scope = scope(1 << 20);
    // A listing in progress throughout: its view is open.
    let in_progress = cache.view();
    std::thread::scope(|threads| {
        let first =
            threads.spawn(|| list_files(&disk, &scope, &cache, 10_000, None, &Cancel::default()));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = list_files(&disk, &scope, &cache, 10_000, None, &Cancel::default())
            .expect("listable")
            .iter()
            .collect::<Vec<_>>();
        assert_eq!(second.len(), 40);
        assert_eq!(
            first
                .join()
                .expect("no panic")
                .expect("listable")
                .iter()
                .collect::<Vec<_>>(),
            second
        );
    });
    assert_eq!(cache.len(), 40, "every hash reached the cache");
    disk.most.store(0, Ordering::SeqCst);
    let third = list_files(&disk, &scope, &cache, 10_000, None, &Cancel::default())
        .expect("listable")
        .iter()
        .collect::<Vec<_>>();
    assert_eq!(third.len(), 40);
    assert_eq!(
        disk.most.load(Ordering::SeqCst),
        0,
        "all hits: nothing read"
    );
    assert!(in_progress.listing() < cache.view().listing());
}

/// After each listing the cache holds exactly the files it listed with a cacheable hash: a
/// file gone is forgotten, and one rewritten inside the racy window is listed with its new
/// hash but not cached (its old entry is forgotten too) until a listing out of the window.
#[test]
fn listing_prunes_gone_and_changed_files_and_keeps_listed_ones() {
    let fs = MemoryFilesystem::new();
    for name in ["keep", "gone", "racy"] {
        fs.add_file(&format!("out/{name}"), name.as_bytes().to_vec(), 0);
    }
    let cache = HashCache::new();
    let scope = scope(1 << 20);
    assert_eq!(
        list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default())
            .expect("listable")
            .iter()
            .collect::<Vec<_>>()
            .len(),
        3
    );
    assert_eq!(cache.len(), 3);
    fs.remove("out/gone");
    fs.write_in_place("out/racy", b"r2".to_vec(), 9_000); // within 2 s of the listing
    let listed = list_files(&fs, &scope, &cache, 10_000, None, &Cancel::default())
        .expect("listable")
        .iter()
        .collect::<Vec<_>>();
    assert_eq!(listed.len(), 2);
    let racy = listed.iter().find(|e| e.path == "racy").expect("listed");
    assert_eq!(racy.sha256, crate::hex::encode(&Sha256::digest(b"r2")));
    assert_eq!(
        cache.len(),
        1,
        "gone vanished; racy changed and is not admitted"
    );
    list_files(&fs, &scope, &cache, 20_000, None, &Cancel::default()).expect("listable");
    assert_eq!(cache.len(), 2, "racy cached once out of the window");
}
