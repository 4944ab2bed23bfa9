//! The operator plane over a [`Filesystem`].

use super::hash_cache::HashCache;
use super::inline::{Attempt, FinishRead, ReadRest, ReadsInline};
use super::listing;
use super::reader::{OneRead, Opened, ReadAnswer, Start, Step};
use super::{Cancel, IfNoneMatch, Listing, ReadOutcome, ResourcePlane};
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
    /// it can, else the read, whose hash is cached when D-3.6's rules allow (D-13.3), stopping
    /// once `cancel` is raised. [`Step::Resume`] only from [`Start::Inline`], when the read
    /// should move to the blocking pool.
    fn read_in(
        &self,
        path: &RelPath,
        condition: &IfNoneMatch,
        start: Start,
        cancel: &Cancel,
    ) -> Result<Step<ReadOutcome>, Refusal> {
        let answer = OneRead::new(self.fs.as_ref(), &self.scope, path, Some(&self.budget))
            .under(condition, &self.hashes)
            .cancelled_by(cancel)
            .run(start)?;
        Ok(answer.map(|answer| match answer {
            ReadAnswer::NotModified { sha256, mtime_ms } => {
                ReadOutcome::NotModified { sha256, mtime_ms }
            }
            ReadAnswer::File { served, cacheable } => {
                if let Some((meta, sha256)) = cacheable {
                    let now_ns = i128::from(self.clock.now_ms()) * 1_000_000;
                    self.hashes.insert(&meta, &sha256, now_ns);
                }
                ReadOutcome::compare(served, condition)
            }
        }))
    }
}

/// A read the crate's operator plane started on an async worker and stopped before it would
/// wait: the file as opened and checked, to be read on the blocking pool with the same path and
/// condition.
#[derive(Debug)]
struct PendingRead {
    plane: OperatorPlane,
    path: RelPath,
    condition: IfNoneMatch,
    opened: Opened,
}

impl FinishRead for PendingRead {
    fn first_borrow(&self) -> (&ByteBudget, u64) {
        let bytes = self.opened.first_borrow(self.plane.scope.max_bytes);
        (&self.plane.budget, bytes)
    }

    fn finish(
        self: Box<Self>,
        prepaid: Option<BudgetPermit>,
        cancel: &Cancel,
    ) -> Result<ReadOutcome, Refusal> {
        let PendingRead {
            plane,
            path,
            condition,
            opened,
        } = *self;
        let start = Start::Resumed { opened, prepaid };
        Ok(plane.read_in(&path, &condition, start, cancel)?.answered())
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
        listing::list_files(
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
        Ok(self
            .read_in(path, if_none_match, Start::Blocking, &NEVER)?
            .answered())
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
/// file as opened ([`ReadRest`]).
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
    ) -> Attempt<Result<ReadOutcome, Refusal>, ReadRest> {
        match self.read_in(path, if_none_match, Start::Inline { limit }, &NEVER) {
            Ok(Step::Done(outcome)) => Attempt::Answered(Ok(outcome)),
            Ok(Step::Resume(opened)) => Attempt::Resume(ReadRest::new(PendingRead {
                plane: self.clone(),
                path: path.clone(),
                condition: if_none_match.clone(),
                opened,
            })),
            Err(refusal) => Attempt::Answered(Err(refusal)),
        }
    }
}
