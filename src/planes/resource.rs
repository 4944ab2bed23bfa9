//! The operator plane over a [`Filesystem`].

use super::ResourcePlane;
use super::hash_cache::HashCache;
use super::reader::{self, ExportScope, ListingEntry, ServedFile};
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

impl ResourcePlane for OperatorPlane {
    fn scope(&self) -> &ExportScope {
        &self.scope
    }

    fn list(&self) -> Result<Vec<ListingEntry>, Refusal> {
        reader::list_files(
            self.fs.as_ref(),
            &self.scope,
            &self.hashes,
            self.clock.now_ms(),
        )
    }

    fn read(&self, raw_path: &str) -> Result<ServedFile, Refusal> {
        let target = decode_request_path(raw_path)?;
        reader::read_file(self.fs.as_ref(), &self.scope, &target, Some(&self.budget))
    }
}
