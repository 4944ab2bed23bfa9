//! The listing lent whole to a caller that serves it in parts of its own: the MCP face pages a
//! listing 1,000 resources at a time (D-18.2). The first page lists the export as
//! `GET /resources/files` does (same lanes, same refusals, same `resource_list` line); a later
//! page may be cut from that listing again while the export's watcher (D-17.4) holds a listing
//! with the same etag, and leaves its own line too.

use super::mount::Router;
use super::render::Line;
use crate::planes::Listing;
use crate::refusal::{Code, Refusal};
use std::sync::Arc;

/// A listing lent out: its entries, the etag of its body and the generation it was listed at.
#[derive(Debug)]
pub(crate) struct LentListing {
    pub(crate) listing: Listing,
    /// `sha256:<hex>` of the listing's body, as its `ETag` names it.
    pub(crate) etag: String,
    pub(crate) generation: u64,
}

impl Router {
    /// Lists the export now, as a `GET /resources/files` would, and writes its line.
    ///
    /// # Errors
    /// `no_resource_plane` without an operator plane; the listing's own refusal (its line
    /// written as for HTTP); `io_error` when the line cannot be written (D-6.4).
    pub(crate) async fn lend_listing(&self) -> Result<Arc<LentListing>, Refusal> {
        let Some(files) = self.mounted.files.clone() else {
            return Err(Refusal::new(
                Code::NoResourcePlane,
                Code::NoResourcePlane.message(),
            ));
        };
        let generation = self.mounted.generation.current();
        let listed = self.list_in_lane(&files, generation).await;
        let lent = listed.map(|listed| {
            let mut listing = listed.body.into_listing();
            // Kept while pages are cut from it, like the watcher's own listing.
            listing.release_budget();
            LentListing {
                listing,
                etag: listed.etag,
                generation,
            }
        });
        let (counts, outcome, reason) = match &lent {
            Ok(lent) => (
                Some((lent.listing.len() as u64, lent.listing.total_bytes())),
                "ok",
                None,
            ),
            Err(refusal) => (None, refusal.code.as_str(), Some(refusal.reason.clone())),
        };
        self.trace_listing(counts, generation, outcome, reason)?;
        lent.map(Arc::new)
    }

    /// Writes the line of a listing served again from `lent`: the line its first answer
    /// wrote, at the current generation.
    ///
    /// # Errors
    /// `io_error` when the line cannot be written (D-6.4).
    pub(crate) fn trace_relent(&self, lent: &LentListing) -> Result<(), Refusal> {
        let counts = (lent.listing.len() as u64, lent.listing.total_bytes());
        let generation = self.mounted.generation.current();
        self.trace_listing(Some(counts), generation, "ok", None)
    }

    /// The etag of the listing the export's watcher holds now; `None` while no watcher runs,
    /// before its first listing, or when that listing failed.
    pub(crate) fn watched_etag(&self) -> Option<String> {
        self.mounted.watch.as_ref()?.current_etag()
    }

    fn trace_listing(
        &self,
        counts: Option<(u64, u64)>,
        generation: u64,
        outcome: &'static str,
        reason: Option<String>,
    ) -> Result<(), Refusal> {
        let line = Line::List(self.list_event(counts, generation, outcome, reason));
        line.emit(&self.mounted.tracer).map_err(|e| {
            tracing::error!("trace write failed, refusing the listing: {e}");
            Refusal::new(Code::IoError, "the trace line could not be written")
        })
    }
}
