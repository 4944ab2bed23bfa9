//! A capsule's operator plane as MCP resources (D-18.2). Every list and read is answered by the
//! capsule's own [`Router`] as the HTTP `GET` it stands for would be, and handed over as the
//! listing or the file itself rather than as an HTTP response, so every rule of D-2 and D-3,
//! every refusal code and every trace line is the operator plane's own.

use super::changes::{ChangeNotice, ExportChanges};
use super::cursor::Cursors;
use super::mime;
use crate::http::Router;
use crate::http::router::{LentFile, LentListing};
use crate::planes::listing::RawEntry;
use crate::refusal::Code;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{
    ErrorCode, ErrorData, ListResourceTemplatesResult, ListResourcesResult, MetaObject,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};

/// Resources per `resources/list` page.
pub(crate) const PAGE_SIZE: usize = 1000;

/// What every session of one MCP service shares.
pub(crate) struct Shared {
    pub(crate) router: Router,
    /// `<advertised url>/resources/files/`: every resource's uri starts with it.
    pub(crate) uri_prefix: String,
    /// The router's base path (empty for none): the path of every read asked of the router
    /// starts with it.
    pub(crate) request_prefix: String,
    pub(crate) cursors: Cursors,
    pub(crate) changes: Option<Arc<dyn ExportChanges>>,
    /// The listing the last page was cut from, for the pages after it.
    pub(crate) lent: Mutex<Option<Arc<LentListing>>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("uri_prefix", &self.uri_prefix)
            .field("request_prefix", &self.request_prefix)
            .finish_non_exhaustive()
    }
}

/// One MCP session's resource server: the shared state, and the session's subscriptions.
#[derive(Debug, Clone)]
pub(crate) struct ResourceServer {
    shared: Arc<Shared>,
    session: Arc<Session>,
}

/// A session's subscriptions and the task feeding it change notices.
#[derive(Debug, Default)]
struct Session {
    subscribed: Mutex<BTreeSet<String>>,
    feed: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(feed) = self.feed.lock().ok().and_then(|mut feed| feed.take()) {
            feed.abort();
        }
    }
}

impl ResourceServer {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ResourceServer {
            shared,
            session: Arc::new(Session::default()),
        }
    }

    /// One page of resources after the cursor's path, cut from the listing the last page came
    /// from while the export's watcher (D-17.4) holds a listing with the same etag, else from
    /// a fresh listing. So a page is as fresh as the watcher: a client told
    /// `list_changed` lists afresh on its next page, and a client paging an unchanged export
    /// costs no walk per page. Pages are cut by path, after the cursor's: a file present
    /// throughout is on some page, and no path is on two.
    ///
    /// # Errors
    /// `-32602` for a cursor this service did not issue; the listing's refusal otherwise.
    async fn page(&self, cursor: Option<&str>) -> Result<ListResourcesResult, ErrorData> {
        let after = match cursor {
            Some(cursor) => Some(self.shared.cursors.open(cursor).ok_or_else(|| {
                ErrorData::invalid_params(
                    "the cursor was not issued by this server",
                    Some(json!({"error": Code::InvalidRequest.as_str()})),
                )
            })?),
            None => None,
        };
        let lent = self.listing().await?;
        let listing = &lent.listing;
        // Sorted by path, byte order (D-3.5): from the first path after the cursor's.
        let mut rest = listing.raw_entries_after(after.as_deref()).peekable();
        let mut resources = Vec::with_capacity(PAGE_SIZE.min(listing.len()));
        let mut last = None;
        while resources.len() < PAGE_SIZE
            && let Some(entry) = rest.next()
        {
            resources.push(self.resource(&entry, lent.generation));
            last = Some(entry.path);
        }
        let mut result = ListResourcesResult::with_all_items(resources);
        if rest.peek().is_some()
            && let Some(last) = last
        {
            result.next_cursor = Some(self.shared.cursors.issue(last));
        }
        Ok(result)
    }

    /// The export listed now (its `resource_list` line written), kept for the pages after.
    async fn listing_afresh(&self) -> Result<Arc<LentListing>, ErrorData> {
        let lent = self
            .shared
            .router
            .lend_listing()
            .await
            .map_err(|refusal| rpc_error(refusal.code))?;
        if let Ok(mut kept) = self.shared.lent.lock() {
            *kept = Some(lent.clone());
        }
        Ok(lent)
    }

    /// The listing kept from the last page while the watcher's etag is still its own (its
    /// line written again); a fresh one otherwise.
    async fn listing(&self) -> Result<Arc<LentListing>, ErrorData> {
        let kept = self.shared.lent.lock().ok().and_then(|kept| kept.clone());
        let watched = self.shared.router.watched_etag();
        match kept {
            Some(kept) if watched.as_deref() == Some(kept.etag.as_str()) => {
                self.shared
                    .router
                    .trace_relent(&kept)
                    .map_err(|refusal| rpc_error(refusal.code))?;
                Ok(kept)
            }
            _ => self.listing_afresh().await,
        }
    }

    fn resource(&self, entry: &RawEntry<'_>, generation: u64) -> Resource {
        let mut resource = Resource::new(self.uri_of(entry.path), entry.path.to_owned());
        resource.mime_type = Some(mime::of(entry.path).to_owned());
        resource.size = Some(entry.size);
        resource.meta = Some(meta(json!({
            "sha256": crate::hex::encode(entry.sha256),
            "mtime_ms": entry.mtime_ms,
            "generation": generation,
        })));
        resource
    }

    /// The uri of `path`: the prefix and the path, percent-encoded but for `/`.
    fn uri_of(&self, path: &str) -> String {
        let mut uri = String::with_capacity(self.shared.uri_prefix.len() + path.len());
        uri.push_str(&self.shared.uri_prefix);
        encode_path(path, &mut uri);
        uri
    }

    /// `resources/read`: the operator read of the uri's path.
    ///
    /// # Errors
    /// `-32002` (`not_found`) for a uri that is not one of this capsule's files, or a file
    /// that does not exist; the operator plane's refusal (its code in `data.error`) otherwise.
    async fn read(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let Some(raw) = uri.strip_prefix(self.shared.uri_prefix.as_str()) else {
            return Err(ErrorData::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                "not a resource of this server: its uri must start with the export's URL",
                Some(json!({"error": Code::NotFound.as_str(), "uri": uri})),
            ));
        };
        let mut target = format!(
            "{}{}/",
            self.shared.request_prefix,
            crate::wire::route::LISTING
        );
        escape_target(raw, &mut target);
        let target = http::uri::PathAndQuery::try_from(target).map_err(|_| {
            ErrorData::invalid_params(
                "the uri is not a valid URI path",
                Some(json!({"error": Code::InvalidRequest.as_str()})),
            )
        })?;
        let LentFile { bytes, sha256 } = self
            .shared
            .router
            .lend_read(&target)
            .await
            .map_err(rpc_error)?;
        let name =
            crate::path::percent_decode_strict(crate::path::strip_query(raw)).unwrap_or_default();
        let mime = mime::of(&name);
        let meta = Some(meta(json!({"sha256": sha256})));
        let text = mime::is_text(mime)
            .then(|| std::str::from_utf8(&bytes).ok())
            .flatten();
        let contents = match text {
            Some(text) => ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                text: text.to_owned(),
                meta,
            },
            None => ResourceContents::BlobResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                blob: STANDARD.encode(&bytes),
                meta,
            },
        };
        Ok(ReadResourceResult::new(vec![contents]))
    }

    /// Starts the session's change feed, once: notices from the export's watcher become
    /// `notifications/resources/list_changed` (any path added or removed) and
    /// `notifications/resources/updated` (a subscribed file changed or went).
    fn start_feed(&self, peer: Peer<RoleServer>) {
        let Some(changes) = &self.shared.changes else {
            return;
        };
        let Ok(mut feed) = self.session.feed.lock() else {
            return;
        };
        if feed.is_some() {
            return;
        }
        let Some(mut notices) = changes.subscribe() else {
            return;
        };
        let session = Arc::downgrade(&self.session);
        let shared = self.shared.clone();
        let task = tokio::spawn(async move {
            while let Some(notice) = notices.recv().await {
                let Some(session) = session.upgrade() else {
                    break;
                };
                if !deliver(&shared, &session, &peer, &notice).await {
                    break;
                }
            }
        });
        *feed = Some(task.abort_handle());
    }
}

/// Sends what `notice` means to this session; `false` once the session is gone.
async fn deliver(
    shared: &Shared,
    session: &Session,
    peer: &Peer<RoleServer>,
    notice: &ChangeNotice,
) -> bool {
    if notice.list_changed && peer.notify_resource_list_changed().await.is_err() {
        return false;
    }
    let updated: Vec<String> = {
        let Ok(subscribed) = session.subscribed.lock() else {
            return false;
        };
        notice
            .changed
            .iter()
            .map(|path| {
                let mut uri = shared.uri_prefix.clone();
                encode_path(path, &mut uri);
                uri
            })
            .filter(|uri| subscribed.contains(uri))
            .collect()
    };
    for uri in updated {
        if peer
            .notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(uri))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

/// Sends what `notice` means to one `subscriptions/listen` stream, within its accepted filter;
/// `false` once the stream is closed.
async fn deliver_listened(shared: &Shared, sink: &SubscriptionSink, notice: &ChangeNotice) -> bool {
    let accepted = sink.accepted();
    if notice.list_changed
        && accepted.resources_list_changed == Some(true)
        && sink.notify_resource_list_changed().await.is_err()
    {
        return false;
    }
    let Some(uris) = &accepted.resource_subscriptions else {
        return true;
    };
    for path in &notice.changed {
        let mut uri = shared.uri_prefix.clone();
        encode_path(path, &mut uri);
        if uris.contains(&uri) && sink.notify_resource_updated(uri).await.is_err() {
            return false;
        }
    }
    true
}

fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(object) => MetaObject(object),
        _ => MetaObject(Default::default()),
    }
}

/// The JSON-RPC error for the operator plane's refusal `code`, with the message its HTTP body
/// carries: `not_found` is `-32002` (MCP's resource-not-found), `io_error` and `client_gone`
/// `-32603`, every other code `-32602` (the request names something the plane will not serve);
/// `data` is `{"error":"<code>"}`.
fn rpc_error(code: Code) -> ErrorData {
    let rpc_code = match code {
        Code::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
        Code::IoError | Code::ClientGone => ErrorCode::INTERNAL_ERROR,
        _ => ErrorCode::INVALID_PARAMS,
    };
    ErrorData::new(
        rpc_code,
        code.message(),
        Some(json!({"error": code.as_str()})),
    )
}

/// Appends `path` percent-encoded: every byte but the unreserved ones and `/`.
pub(crate) fn encode_path(path: &str, out: &mut String) {
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(byte as char);
        } else {
            push_escape(byte, out);
        }
    }
}

/// Appends a uri's raw path part as a request target: what a URI path may hold is kept as it
/// is (a `%` escape stays for the router to decode strictly, a `?` starts the query the router
/// cuts), anything else (a space, a `#`, non-ASCII) is percent-encoded, which the router
/// decodes back to the same bytes.
fn escape_target(raw: &str, out: &mut String) {
    for byte in raw.bytes() {
        let keep = byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
                    | b'/'
                    | b'%'
                    | b'?'
            );
        if keep {
            out.push(byte as char);
        } else {
            push_escape(byte, out);
        }
    }
}

fn push_escape(byte: u8, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[usize::from(byte >> 4)] as char);
    out.push(HEX[usize::from(byte & 0xf)] as char);
}

impl ServerHandler for ResourceServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(super::implementation())
        .with_instructions(
            "The files this capsule exports, read-only. Each resource is one file; its uri is \
             the file's operator-plane URL and its _meta carries the sha256 of its bytes.",
        )
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        // Boxed: the SDK spawns each request's future whole, sized by its largest method's.
        Box::pin(self.page(cursor.as_deref())).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut template = ResourceTemplate::new(
            format!("{}{{+path}}", self.shared.uri_prefix),
            "exported file",
        );
        template.description = Some(
            "A file under the export root, by its path relative to the root \
             (percent-encoded; `/` separates directories)."
                .to_owned(),
        );
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // Boxed, as for `list_resources`.
        Box::pin(self.read(&request.uri))
            .await
            .map(ReadResourceResponse::from)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !request.uri.starts_with(self.shared.uri_prefix.as_str()) {
            return Err(ErrorData::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                "not a resource of this server: its uri must start with the export's URL",
                Some(json!({"error": Code::NotFound.as_str(), "uri": request.uri})),
            ));
        }
        if let Ok(mut subscribed) = self.session.subscribed.lock() {
            if subscribed.len() >= MAX_SUBSCRIPTIONS && !subscribed.contains(&request.uri) {
                return Err(ErrorData::invalid_params(
                    "this session holds the most subscriptions it may",
                    Some(json!({"error": Code::InvalidRequest.as_str()})),
                ));
            }
            subscribed.insert(request.uri);
        }
        self.start_feed(context.peer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Ok(mut subscribed) = self.session.subscribed.lock() {
            subscribed.remove(&request.uri);
        }
        Ok(())
    }

    /// `subscriptions/listen` (2026-07-28 on): the list's changes when asked for, and updates
    /// of the asked-for uris that are this server's resources (at most
    /// [`MAX_SUBSCRIPTIONS`]); others are left out of the acknowledged filter.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.supported_by(&self.get_info().capabilities);
        if let Some(uris) = &mut accepted.resource_subscriptions {
            uris.retain(|uri| uri.starts_with(self.shared.uri_prefix.as_str()));
            uris.truncate(MAX_SUBSCRIPTIONS);
        }
        Some(accepted)
    }

    /// One `subscriptions/listen` stream, fed by the export's watcher like a session's
    /// subscriptions, until the client cancels it or the watcher can watch no more (then the
    /// stream ends with its final result).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let notices = self
            .shared
            .changes
            .as_ref()
            .and_then(|changes| changes.subscribe());
        let Some(mut notices) = notices else {
            context.cancelled().await;
            return Ok(());
        };
        loop {
            let notice = tokio::select! {
                () = context.cancelled() => return Ok(()),
                notice = notices.recv() => notice,
            };
            let Some(notice) = notice else {
                return Ok(());
            };
            if !deliver_listened(&self.shared, context.sink(), &notice).await {
                return Ok(());
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // `list_changed` is promised to every session, subscribed or not.
        self.start_feed(context.peer);
    }
}

/// The subscriptions one session may hold: enough for any client that subscribes to what it
/// shows, bounded so a session's memory is.
const MAX_SUBSCRIPTIONS: usize = 10_000;
