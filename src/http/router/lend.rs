//! The operator plane's answers lent to the MCP face, which serves them in a shape of its own
//! (D-18.2).
//!
//! A listing is lent whole, for the face to page 1,000 resources at a time. The first page
//! lists the export as `GET /resources/files` does (same lanes, same refusals, same
//! `resource_list` line); a later page may be cut from that listing again while the export's
//! watcher (D-17.4) holds a listing with the same etag, and leaves its own line too.
//!
//! A read is answered as the `GET` of the same path is (the same route, method and plane
//! checks, budget, lanes and `resource_read` line) and handed over as the file's bytes and
//! sha256, or the refusal's code. When the crate's own plane answers at once (a file up to
//! [`INLINE_READ_LIMIT`](super::INLINE_READ_LIMIT), or a refusal) no HTTP response is built;
//! any other answer is the `GET`'s response, its body read whole.

use super::answer::AtOnce;
use super::call::Headers;
use super::mount::Router;
use super::render::Line;
use crate::http::body::PlaneBody;
use crate::planes::{IfNoneMatch, Listing};
use crate::refusal::{Code, Refusal};
use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{Method, Response};
use http_body::Body as _;
use http_body_util::BodyExt;
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
    /// Lists the export now, as a `GET /resources/files` would, writes its line and counts it
    /// among the requests answered.
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
        let status = lent
            .as_ref()
            .map_or_else(|refusal| refusal.code.status(), |_| 200);
        self.count_answered(&Method::GET, crate::wire::route::LISTING, status);
        lent.map(Arc::new)
    }

    /// Writes the line of a listing served again from `lent` (the line its first answer
    /// wrote, at the current generation), and counts it among the requests answered.
    ///
    /// # Errors
    /// `io_error` when the line cannot be written (D-6.4).
    pub(crate) fn trace_relent(&self, lent: &LentListing) -> Result<(), Refusal> {
        let counts = (lent.listing.len() as u64, lent.listing.total_bytes());
        let generation = self.mounted.generation.current();
        self.trace_listing(Some(counts), generation, "ok", None)?;
        self.count_answered(&Method::GET, crate::wire::route::LISTING, 200);
        Ok(())
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

/// A file read for the MCP face: its bytes and their sha256.
#[derive(Debug)]
pub(crate) struct LentFile {
    pub(crate) bytes: Bytes,
    /// Lowercase hex sha256 of `bytes`, as the `GET`'s etag names it.
    pub(crate) sha256: String,
}

/// A read answered for the MCP face: at once, or as the `GET`'s response.
pub(super) enum Lent {
    /// The file or the refusal's code, its line written.
    Read(Result<LentFile, Code>),
    /// The `GET`'s response, its line written, its body still to read.
    Rendered(Response<PlaneBody>),
}

impl Router {
    /// Reads `target`, a path (and query) under the router's mount as a `GET` would send it,
    /// as that `GET` would be answered, and hands over the file.
    ///
    /// # Errors
    /// The code the `GET`'s refusal would carry (its line written as for HTTP); `io_error`
    /// when the line cannot be written, or a streamed file ends short of the size its plane
    /// vouched for.
    pub(crate) async fn lend_read(&self, target: &PathAndQuery) -> Result<LentFile, Code> {
        let raw = target.path();
        let path = self.local_path(raw);
        let headers = Headers {
            audience: Vec::new(),
            proof: Vec::new(),
            if_none_match: IfNoneMatch::absent(),
            last_event_id: None,
        };
        let generation = self.mounted.generation.current();
        let call = self.call_for(
            &Method::GET,
            path,
            self.is_rpc_endpoint(raw),
            target.query(),
            headers,
        );
        let lent = match self.settle_at_once(call, |outcome| self.render_lent(outcome, generation))
        {
            AtOnce::Answered(lent) => {
                let status = match &lent {
                    Lent::Read(Ok(_)) => 200,
                    Lent::Read(Err(code)) => code.status(),
                    Lent::Rendered(response) => response.status().as_u16(),
                };
                self.count_answered(&Method::GET, path, status);
                lent
            }
            AtOnce::Deferred(call) => Lent::Rendered(
                self.run(call, generation, Method::GET, path.to_owned())
                    .await,
            ),
        };
        match lent {
            Lent::Read(read) => read,
            Lent::Rendered(response) => {
                let max_bytes = self
                    .mounted
                    .files
                    .as_ref()
                    .map(|f| f.plane.scope().max_bytes);
                file_of(response, max_bytes.unwrap_or(0)).await
            }
        }
    }
}

/// The file a `GET`'s response carries, its body read whole, or its refusal's code. A file a
/// runtime's plane streams is held whole here (the HTTP route passes it through), so it is
/// refused when the plane vouches for more than the export's `max_bytes`, and its bytes are
/// hashed against the etag the plane vouched for: the face promises the sha256 of the bytes it
/// sends. Its trace line, written before the body was read, says what the plane vouched for, as
/// over HTTP.
///
/// # Errors
/// The code the refusal's body names (`io_error` when it names none); `too_large` for a
/// streamed file vouched larger than `max_bytes`; `io_error` when a `200` lacks its etag, its
/// body ends short of its size, or a streamed body's sha256 is not its etag's.
async fn file_of(response: Response<PlaneBody>, max_bytes: u64) -> Result<LentFile, Code> {
    let (head, body) = response.into_parts();
    let streamed = body.is_streamed();
    let size = body.size_hint().exact();
    if head.status == http::StatusCode::OK && streamed && size.is_none_or(|size| size > max_bytes) {
        return Err(Code::TooLarge);
    }
    let Ok(collected) = body.collect().await;
    let bytes = collected.to_bytes();
    if head.status != http::StatusCode::OK {
        return Err(refusal_code(&bytes));
    }
    if size.is_some_and(|size| size != bytes.len() as u64) {
        return Err(Code::IoError);
    }
    let sha256 = head
        .headers
        .get(http::header::ETAG)
        .and_then(|value| value.to_str().ok())
        .and_then(|etag| crate::wire::etag::hex_of(crate::wire::etag::opaque_of(etag)))
        .ok_or(Code::IoError)?;
    if streamed {
        use sha2::{Digest, Sha256};
        if crate::hex::encode(&Sha256::digest(&bytes)) != sha256 {
            return Err(Code::IoError);
        }
    }
    Ok(LentFile {
        sha256: sha256.to_owned(),
        bytes,
    })
}

/// The code a refusal's JSON body names (`{"error":"<code>",…}`, D-4.4); `io_error` for a body
/// that names none.
fn refusal_code(body: &[u8]) -> Code {
    #[derive(serde::Deserialize)]
    struct Refused<'a> {
        #[serde(borrow)]
        error: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Refused<'_>>(body)
        .ok()
        .and_then(|refused| Code::from_wire(&refused.error))
        .unwrap_or(Code::IoError)
}
