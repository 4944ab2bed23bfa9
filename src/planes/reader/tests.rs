//! The read: what it serves, what it borrows from the budget, and how it meets a file that
//! grows while it is read.

use super::*;
use crate::backends::fs::MemoryFilesystem;
use crate::planes::test_fs::{StaleSizes, scope};
use std::sync::Arc;

/// A read of `target` without a condition, from `start`: the file as served.
fn read(
    fs: &dyn Filesystem,
    scope: &ExportScope,
    target: &RelPath,
    budget: Option<&ByteBudget>,
    start: Start,
) -> Result<Step<ServedFile>, Refusal> {
    let step = OneRead::new(fs, scope, target, budget).run(start)?;
    Ok(step.map(ReadAnswer::served))
}

#[test]
fn served_bytes_start_on_a_page_and_match_the_file() {
    let fs = MemoryFilesystem::new();
    let budget = ByteBudget::new(64 << 20);
    for size in [1usize, 4096, 70_000, 1 << 20] {
        let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        fs.add_file("out/f", content.clone(), 0);
        let target = RelPath::parse_canonical("f").expect("a valid path");
        for budget in [None, Some(&budget)] {
            let served = read(&fs, &scope(2 << 20), &target, budget, Start::Blocking)
                .expect("readable")
                .answered();
            assert_eq!(served.bytes.as_ref(), content.as_slice(), "size {size}");
            assert_eq!(
                served.sha256,
                crate::hex::encode(&Sha256::digest(&content)),
                "the etag describes the bytes served, not the padding"
            );
            assert_eq!(
                served.bytes.as_ptr().addr() % page_aligned::PAGE,
                0,
                "size {size}: a misaligned buffer makes the kernel's copy ten times slower"
            );
        }
    }
    assert_eq!(budget.available(), 64 << 20, "every byte went back");
}

fn log_of(len: u32) -> (MemoryFilesystem, Vec<u8>) {
    let fs = MemoryFilesystem::new();
    let content: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    fs.add_file("out/log", content.clone(), 0);
    (fs, content)
}

fn read_log(fs: &StaleSizes, max_bytes: u64, budget: &ByteBudget) -> Result<ServedFile, Refusal> {
    let target = RelPath::parse_canonical("log").expect("a valid path");
    read(
        fs,
        &scope(max_bytes),
        &target,
        Some(budget),
        Start::Blocking,
    )
    .map(Step::answered)
}

/// Compares bodies by length and hash: a failure prints two lines, not megabytes.
fn digest(bytes: &[u8]) -> (usize, String) {
    (bytes.len(), crate::hex::encode(&Sha256::digest(bytes)))
}

#[test]
fn a_file_that_grew_after_the_fstat_is_read_again_whole_with_every_byte_borrowed() {
    let (inner, content) = log_of(3 << 20);
    let fs = StaleSizes::first(inner, 100, 1);
    let capacity = 64 << 20;
    let budget = ByteBudget::new(capacity);
    let served = read_log(&fs, 10 << 20, &budget).expect("readable");
    assert_eq!(
        digest(&served.bytes),
        digest(&content),
        "the file as it is now"
    );
    assert_eq!(served.sha256, digest(&content).1);
    assert!(
        budget.available() <= capacity - content.len() as u64,
        "every byte held is borrowed: {} of {capacity} still free",
        budget.available()
    );
    drop(served);
    assert_eq!(budget.available(), capacity, "and all of them come back");

    // Grown past max_bytes: the fresh fstat says so; nothing stays borrowed.
    let fs = StaleSizes::first(log_of(3 << 20).0, 100, 1);
    let refused = read_log(&fs, 1 << 20, &budget).expect_err("too large");
    assert_eq!(refused.code, Code::TooLarge);
    assert_eq!(budget.available(), capacity);
}

#[test]
fn a_file_that_keeps_growing_is_read_to_its_end_on_the_last_attempt() {
    let (inner, content) = log_of(3 << 20);
    let fs = StaleSizes::always(inner, 100, usize::MAX);
    let capacity = 64 << 20;
    let budget = ByteBudget::new(capacity);
    let served = read_log(&fs, 10 << 20, &budget).expect("readable");
    assert_eq!(digest(&served.bytes), digest(&content));
    assert_eq!(served.sha256, digest(&content).1);
    assert!(
        budget.available() <= capacity - (10 << 20),
        "the last attempt borrowed its whole limit: {} still free",
        budget.available()
    );
    drop(served);
    assert_eq!(budget.available(), capacity);
    // Past max_bytes by then: too_large, and nothing stays borrowed.
    let fs = StaleSizes::always(log_of(3 << 20).0, 100, usize::MAX);
    let refused = read_log(&fs, 1 << 20, &budget).expect_err("too large");
    assert_eq!(refused.code, Code::TooLarge);
    assert_eq!(budget.available(), capacity);
}

/// With `max_bytes` above the budget, a read that saw growth must not borrow "the rest, up to
/// max_bytes" (capped at the whole budget) while still holding its first bytes: it would wait
/// for ever, and every large read queued behind it.
#[test]
fn growth_never_waits_for_bytes_while_holding_some() {
    let (inner, content) = log_of(300_000);
    let fs = Arc::new(StaleSizes::first(inner, 1_000, 1));
    let budget = Arc::new(ByteBudget::new(1 << 20));
    let (done, finished) = std::sync::mpsc::channel();
    {
        let (fs, budget) = (fs.clone(), budget.clone());
        std::thread::spawn(move || {
            let served = read_log(&fs, 1 << 30, &budget).map(|s| s.bytes.len());
            let _ = done.send(served);
        });
    }
    let served = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the read finished instead of waiting for ever");
    assert_eq!(served.expect("readable"), content.len());
    assert_eq!(budget.available(), 1 << 20, "nothing stays borrowed");
}

/// The last attempt never allocates `max_bytes + 1` up front, which with a generous
/// `max_bytes` (1 TiB here) would abort the process: the buffer starts at what the
/// descriptor said and grows with the file.
#[test]
fn the_last_attempt_allocates_for_the_file_not_for_max_bytes() {
    let (inner, content) = log_of(300_000);
    let fs = StaleSizes::always(inner, 1_000, usize::MAX);
    let budget = ByteBudget::new(64 << 20);
    let served = read_log(&fs, 1 << 40, &budget).expect("readable");
    assert_eq!(digest(&served.bytes), digest(&content));
}

/// Inline (on an async worker), a file that keeps growing moves to the blocking path
/// instead of being read to its end there.
#[test]
fn an_inline_read_of_a_growing_file_moves_to_the_blocking_path() {
    let (inner, _) = log_of(3 << 20);
    let fs = StaleSizes::always(inner, 100, usize::MAX);
    let budget = ByteBudget::new(64 << 20);
    let target = RelPath::parse_canonical("log").expect("a valid path");
    let inline = Start::Inline { limit: 64 * 1024 };
    let answer = read(&fs, &scope(10 << 20), &target, Some(&budget), inline).expect("no refusal");
    assert!(
        matches!(answer, Step::Resume(_)),
        "handed to a blocking thread"
    );
    assert_eq!(budget.available(), 64 << 20, "nothing stays borrowed");
}
