//! The operator plane over a [`Filesystem`].

use super::ResourcePlane;
use super::hash_cache::HashCache;
use super::reader::{self, ReadAnswer, ReadMode, ServedFile};
use super::{Cancel, IfNoneMatch, Listing, ReadOutcome};
use crate::backends::Clock;
use crate::backends::fs::Filesystem;
use crate::budget::ByteBudget;
use crate::path::decode_request_path;
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
}

impl OperatorPlane {
    /// One read under `condition`: refusals first, a 304 from the cache without reading when
    /// it can, else the read, whose hash is cached when D-3.6's rules allow (D-13.3).
    fn read_in(
        &self,
        raw_path: &str,
        condition: &IfNoneMatch,
        mode: ReadMode,
    ) -> Option<Result<ReadOutcome, Refusal>> {
        let target = match decode_request_path(raw_path) {
            Ok(target) => target,
            Err(refusal) => return Some(Err(refusal)),
        };
        let answer = reader::read_file_if(
            self.fs.as_ref(),
            &self.scope,
            &target,
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

/// The file of a read with no condition.
fn file(outcome: ReadOutcome) -> ServedFile {
    match outcome {
        ReadOutcome::File(file) => file,
        ReadOutcome::NotModified { .. } => unreachable!("no condition, so no 304"),
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

    fn read(&self, raw_path: &str) -> Result<ServedFile, Refusal> {
        self.read_if(raw_path, &IfNoneMatch::absent()).map(file)
    }

    fn read_inline(&self, raw_path: &str, limit: u64) -> Option<Result<ServedFile, Refusal>> {
        self.read_inline_if(raw_path, &IfNoneMatch::absent(), limit)
            .map(|read| read.map(file))
    }

    fn read_if(&self, raw_path: &str, if_none_match: &IfNoneMatch) -> Result<ReadOutcome, Refusal> {
        self.read_in(raw_path, if_none_match, ReadMode::Blocking)
            .expect("a blocking read always answers")
    }

    fn read_inline_if(
        &self,
        raw_path: &str,
        if_none_match: &IfNoneMatch,
        limit: u64,
    ) -> Option<Result<ReadOutcome, Refusal>> {
        self.read_in(raw_path, if_none_match, ReadMode::Inline { limit })
    }
}
