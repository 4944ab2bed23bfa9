//! The operator plane over a [`Filesystem`].

use super::hash_cache::HashCache;
use super::reader::{self, Opened, ReadAnswer, ReadMode, Step};
use super::{Attempt, Cancel, IfNoneMatch, Listing, ReadOutcome, ReadsInline, ResourcePlane};
use crate::backends::Clock;
use crate::backends::fs::Filesystem;
use crate::budget::ByteBudget;
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
        opened: Option<Opened>,
    ) -> Result<Step<ReadOutcome>, Refusal> {
        let (fs, scope, budget) = (self.fs.as_ref(), &self.scope, Some(&self.budget));
        let cache = Some(self.hashes.as_ref());
        let answer = reader::read_file_if(fs, scope, path, budget, mode, opened, condition, cache)?;
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

impl ResourcePlane for OperatorPlane {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    fn list(&self, cancel: &Cancel) -> Result<Listing, Refusal> {
        reader::list_files(
            self.fs.as_ref(),
            &self.scope,
            &self.hashes,
            self.clock.now_ms(),
            Some(&self.budget),
            cancel,
        )
    }

    fn read(&self, path: &RelPath, if_none_match: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        match self.read_in(path, if_none_match, ReadMode::Blocking, None)? {
            Step::Done(outcome) => Ok(outcome),
            Step::Resume(_) => unreachable!("a blocking read always answers"),
        }
    }
}

/// A read of at most `limit` bytes whose bytes the budget lends at once answers on the async
/// worker; anything else stops before reading a byte and goes on on the blocking pool from the
/// file as opened.
impl ReadsInline for OperatorPlane {
    fn read_inline(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
        limit: u64,
    ) -> Attempt<Result<ReadOutcome, Refusal>, Opened> {
        match self.read_in(path, if_none_match, ReadMode::Inline { limit }, None) {
            Ok(Step::Done(outcome)) => Attempt::Answered(Ok(outcome)),
            Ok(Step::Resume(opened)) => Attempt::Resume(opened),
            Err(refusal) => Attempt::Answered(Err(refusal)),
        }
    }

    fn read_resumed(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
        opened: Opened,
    ) -> Result<ReadOutcome, Refusal> {
        match self.read_in(path, if_none_match, ReadMode::Blocking, Some(opened))? {
            Step::Done(outcome) => Ok(outcome),
            Step::Resume(_) => unreachable!("a blocking read always answers"),
        }
    }
}
