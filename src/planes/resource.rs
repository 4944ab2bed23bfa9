//! The operator plane over a [`Filesystem`].

use super::ResourcePlane;
use super::hash_cache::HashCache;
use super::reader::{self, ExportScope, ReadMode, ServedFile};
use super::{Cancel, Listing};
use crate::backends::Clock;
use crate::backends::fs::Filesystem;
use crate::budget::ByteBudget;
use crate::path::decode_request_path;
use crate::refusal::Refusal;
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
    fn read_in(&self, raw_path: &str, mode: ReadMode) -> Option<Result<ServedFile, Refusal>> {
        let target = match decode_request_path(raw_path) {
            Ok(target) => target,
            Err(refusal) => return Some(Err(refusal)),
        };
        reader::read_file(
            self.fs.as_ref(),
            &self.scope,
            &target,
            Some(&self.budget),
            mode,
        )
        .transpose()
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
        self.read_in(raw_path, ReadMode::Blocking)
            .expect("a blocking read always answers")
    }

    fn read_inline(&self, raw_path: &str, limit: u64) -> Option<Result<ServedFile, Refusal>> {
        self.read_in(raw_path, ReadMode::Inline { limit })
    }
}
