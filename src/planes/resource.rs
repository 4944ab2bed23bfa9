//! The operator plane over a [`Filesystem`].

use super::hash_cache::HashCache;
use super::reader::{self, ReadAnswer, ReadMode};
use super::{AnswersInline, Cancel, IfNoneMatch, Listing, ReadOutcome, ResourcePlane};
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
    /// it can, else the read, whose hash is cached when D-3.6's rules allow (D-13.3). `None`
    /// only in [`ReadMode::Inline`], when the read should move to the blocking pool.
    fn read_in(
        &self,
        path: &RelPath,
        condition: &IfNoneMatch,
        mode: ReadMode,
    ) -> Option<Result<ReadOutcome, Refusal>> {
        let answer = reader::read_file_if(
            self.fs.as_ref(),
            &self.scope,
            path,
            Some(&self.budget),
            mode,
            condition,
            Some(&self.hashes),
        );
        Some(answer.transpose()?.map(|answer| match answer {
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
        self.read_in(path, if_none_match, ReadMode::Blocking)
            .expect("a blocking read always answers")
    }
}

/// A read of at most `limit` bytes whose bytes the budget lends at once answers on the async
/// worker; anything else defers, having read no byte.
impl AnswersInline for OperatorPlane {
    fn read_inline(
        &self,
        path: &RelPath,
        if_none_match: &IfNoneMatch,
        limit: u64,
    ) -> Option<Result<ReadOutcome, Refusal>> {
        self.read_in(path, if_none_match, ReadMode::Inline { limit })
    }
}
