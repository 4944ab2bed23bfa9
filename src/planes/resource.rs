//! The operator plane over a [`Filesystem`].

use super::hash_cache::HashCache;
use super::reader::{self, Opened, ReadAnswer, ReadMode, Step};
use super::{Attempt, Cancel, IfNoneMatch, Listing, ReadOutcome, ReadsInline, ResourcePlane};
use crate::backends::Clock;
use crate::backends::fs::Filesystem;
use crate::blocking;
use crate::budget::{BudgetPermit, ByteBudget};
use crate::path::RelPath;
use crate::refusal::Refusal;
use crate::scope::ExportScope;
use std::sync::Arc;

/// `exports.files` served from a filesystem backend.
#[derive(Debug, Clone)]
pub struct OperatorPlane {
    fs: Arc<dyn Filesystem>,
    clock: Arc<dyn Clock>,
    scope: ExportScope,
    budget: ByteBudget,
    hashes: Arc<HashCache>,
}

impl OperatorPlane {
    /// A plane serving `scope` from `fs`, holding read bodies against `budget`; `clock` dates
    /// the listing's hash cache entries (D-3.6).
    pub fn new(
        fs: Arc<dyn Filesystem>,
        clock: Arc<dyn Clock>,
        scope: ExportScope,
        budget: ByteBudget,
    ) -> Self {
        OperatorPlane {
            fs,
            clock,
            scope,
            budget,
            hashes: Arc::new(HashCache::new()),
        }
    }

    /// One read under `condition`: refusals first, a 304 from the cache without reading when
    /// it can, else the read, whose hash is cached when D-3.6's rules allow (D-13.3). Goes on
    /// from `opened` when an inline read opened the file already; [`Step::Resume`] only in
    /// [`ReadMode::Inline`], when the read should move to the blocking pool.
    fn read_in(
        &self,
        path: &RelPath,
        condition: &IfNoneMatch,
        mode: ReadMode,
        resumed: Resumed<'_>,
    ) -> Result<Step<ReadOutcome>, Refusal> {
        let read = reader::OneRead {
            fs: self.fs.as_ref(),
            scope: &self.scope,
            target: path,
            budget: Some(&self.budget),
            condition,
            cache: Some(self.hashes.as_ref()),
            cancel: resumed.cancel,
        };
        let answer = reader::read_file_if(&read, mode, resumed.opened, resumed.prepaid)?;
        Ok(match answer {
            Step::Resume(opened) => Step::Resume(opened),
            Step::Done(ReadAnswer::NotModified { sha256, mtime_ms }) => {
                Step::Done(ReadOutcome::NotModified { sha256, mtime_ms })
            }
            Step::Done(ReadAnswer::File { served, cacheable }) => {
                if let Some((meta, sha256)) = cacheable {
                    let now_ns = i128::from(self.clock.now_ms()) * 1_000_000;
                    self.hashes.insert(&meta, &sha256, now_ns);
                }
                Step::Done(ReadOutcome::compare(served, condition))
            }
        })
    }
}

/// Where a read goes on from: the file an inline attempt opened and the bytes borrowed for it
/// on the async side, if any, and the flag raised when its client leaves.
struct Resumed<'a> {
    opened: Option<Opened>,
    prepaid: Option<BudgetPermit>,
    cancel: &'a Cancel,
}

impl Resumed<'_> {
    /// A read from a fresh open, whose caller always waits.
    fn fresh() -> Self {
        Resumed {
            opened: None,
            prepaid: None,
            cancel: &NEVER,
        }
    }
}

/// The flag of reads whose caller always waits.
static NEVER: Cancel = Cancel::never();

impl OperatorPlane {
    /// [`ResourcePlane::list`] on the caller's thread, blocking while it walks the root: for a
    /// caller already off the async runtime (a bench, a blocking task of its own).
    ///
    /// # Errors
    /// As [`ResourcePlane::list`]: `outside_root`, `io_error` (cancelled included).
    pub fn list_blocking(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
        reader::list_files(
            self.fs.as_ref(),
            &self.scope,
            &self.hashes,
            self.clock.now_ms(),
            Some(&self.budget),
            cancel,
        )
    }

    /// [`ResourcePlane::read`] on the caller's thread, blocking while it reads.
    ///
    /// # Errors
    /// As [`ResourcePlane::read`]: `outside_root`, `not_found`, `symlink_refused`,
    /// `not_a_regular_file`, `too_large`, `io_error`.
    pub fn read_blocking(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
    ) -> Result<ReadOutcome, Refusal> {
        match self.read_in(path, if_none_match, ReadMode::Blocking, Resumed::fresh())? {
            Step::Done(outcome) => Ok(outcome),
            Step::Resume(_) => unreachable!("a blocking read always answers"),
        }
    }
}

/// Awaited directly (a runtime's decorator around the crate's plane, mounted as its own), each
/// call runs whole on tokio's blocking pool when the caller is in a tokio runtime, else on the
/// caller's thread: the file work blocks. The router never awaits
/// these: it calls the crate's plane inline or on the blocking pool itself.
#[async_trait::async_trait]
impl ResourcePlane for OperatorPlane {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    async fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
        let (plane, cancel) = (self.clone(), cancel.clone());
        blocking::off_worker(move || plane.list_blocking(&cancel))
            .await
            .unwrap_or_else(Err)
    }

    async fn read(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
    ) -> Result<ReadOutcome, Refusal> {
        let (plane, path, condition) = (self.clone(), path.clone(), if_none_match.clone());
        blocking::off_worker(move || plane.read_blocking(&path, &condition))
            .await
            .unwrap_or_else(Err)
    }
}

/// A read of at most `limit` bytes whose bytes the budget lends at once answers on the async
/// worker; anything else stops before reading a byte and goes on on the blocking pool from the
/// file as opened.
impl ReadsInline for OperatorPlane {
    fn list_blocking(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
        OperatorPlane::list_blocking(self, cancel)
    }

    fn read_blocking(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
    ) -> Result<ReadOutcome, Refusal> {
        OperatorPlane::read_blocking(self, path, if_none_match)
    }

    fn read_inline(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
        limit: u64,
    ) -> Attempt<Result<ReadOutcome, Refusal>, Opened> {
        match self.read_in(
            path,
            if_none_match,
            ReadMode::Inline { limit },
            Resumed::fresh(),
        ) {
            Ok(Step::Done(outcome)) => Attempt::Answered(Ok(outcome)),
            Ok(Step::Resume(opened)) => Attempt::Resume(opened),
            Err(refusal) => Attempt::Answered(Err(refusal)),
        }
    }

    fn first_borrow(&self, opened: &Opened) -> Option<(&ByteBudget, u64)> {
        Some((&self.budget, opened.first_borrow(self.scope.max_bytes)))
    }

    fn read_resumed(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
        opened: Opened,
        prepaid: Option<BudgetPermit>,
        cancel: &Cancel,
    ) -> Result<ReadOutcome, Refusal> {
        let resumed = Resumed {
            opened: Some(opened),
            prepaid,
            cancel,
        };
        match self.read_in(path, if_none_match, ReadMode::Blocking, resumed)? {
            Step::Done(outcome) => Ok(outcome),
            Step::Resume(_) => unreachable!("a blocking read always answers"),
        }
    }
}
