//! The listing route answered at once: the export listed (blocking), its body built with its
//! etag (D-17.1), and what its trace line adds for a long-poll or a stream.

use super::mount::{FilesMount, Router};
use crate::blocking;
use crate::events::ResourceList;
use crate::http::listing_query::ListingQuery;
use crate::planes::{Cancel, Listing, ListingBody, ListingHead};
use crate::refusal::Refusal;

/// A listing's answer: the listing, or (a long-poll whose time ran out) only what its `304`
/// needs.
pub(super) enum ListAnswer {
    /// The listing: `200`, or `304` when `If-None-Match` holds its etag.
    Full(Listed),
    /// Known unchanged: `304`.
    Unchanged {
        etag: String,
        entry_count: u64,
        total_bytes: u64,
    },
}

/// A listing with its body built and its etag computed.
pub(super) struct Listed {
    pub(super) body: ListingBody,
    /// `sha256:<hex>` of the body.
    pub(super) etag: String,
}

/// What a listing's trace line adds for a long-poll or a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ListExtra {
    /// `waited_ms`, for a long-poll.
    pub(super) waited_ms: Option<u64>,
    /// A stream.
    pub(super) watch: bool,
}

impl ListExtra {
    /// A listing answered at once: `waited_ms: 0` when it asked to wait.
    pub(super) fn of(query: &ListingQuery) -> ListExtra {
        ListExtra {
            waited_ms: query.wait.map(|_| 0),
            watch: query.watch,
        }
    }
}

impl Router {
    /// Lists the operator plane now (blocking: the crate's plane by its blocking call, a
    /// runtime's by waiting for its future, [`blocking::wait`]) and builds the body at
    /// `generation`, with its etag (D-17.1).
    ///
    /// # Errors
    /// The plane's refusal.
    pub(super) fn list_now(
        &self,
        files: &FilesMount,
        generation: u64,
        cancel: &Cancel,
    ) -> Result<Listed, Refusal> {
        let listing = match &files.inline {
            Some(inline) => inline.list_blocking(cancel)?,
            None => blocking::wait(files.plane.list(cancel))?,
        };
        Ok(self.listed(files, listing, generation))
    }

    /// `listing` as its body at `generation`, with its etag (D-17.1).
    pub(super) fn listed(&self, files: &FilesMount, listing: Listing, generation: u64) -> Listed {
        let scope = files.plane.scope();
        let head = ListingHead {
            root: scope.root.declared(),
            max_bytes: scope.max_bytes,
            generation,
            containment_achieved: self.containment(),
        };
        let body = ListingBody::new(listing, &head);
        let etag = crate::wire::etag::of_digest(&body.sha256());
        Listed { body, etag }
    }
}

impl Router {
    /// The `resource_list` event of this router's export: the listing's counts (`None` when it
    /// was refused or is not known), at `generation`, with its outcome and reason. Every
    /// listing line the router writes (answered, waited, streamed, lent) is built here.
    pub(super) fn list_event(
        &self,
        counts: Option<(u64, u64)>,
        generation: u64,
        outcome: &'static str,
        reason: Option<String>,
    ) -> ResourceList {
        ResourceList {
            root: self.files_root(),
            entry_count: counts.map(|c| c.0),
            total_bytes: counts.map(|c| c.1),
            generation,
            containment_achieved: self.containment(),
            outcome,
            reason,
        }
    }
}
