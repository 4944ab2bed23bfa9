//! A capsule's operator plane as MCP resources (D-18.2). Every list and read is a request to
//! the capsule's own [`Router`], synthesized as the HTTP `GET` it stands for, so every rule of
//! D-2 and D-3, every refusal code and every trace line is the operator plane's own.

use super::changes::{ChangeNotice, ExportChanges};
use super::cursor::Cursors;
use super::mime;
use crate::http::Router;
use crate::refusal::Code;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{
    ErrorCode, ErrorData, ListResourceTemplatesResult, ListResourcesResult, MetaObject,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{Peer, RoleServer, ServerHandler};
use serde::Deserialize;
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
    /// The router's base path (empty for none): a synthesized request's path starts with it.
    pub(crate) request_prefix: String,
    pub(crate) cursors: Cursors,
    pub(crate) changes: Option<Arc<dyn ExportChanges>>,
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

/// The listing as the operator plane renders it (D-3.5): what a page needs of it.
#[derive(Debug, Deserialize)]
struct ListingDoc {
    generation: u64,
    entries: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    path: String,
    size_bytes: u64,
    mtime_ms: i64,
    sha256: String,
}

impl ResourceServer {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ResourceServer {
            shared,
            session: Arc::new(Session::default()),
        }
    }

    /// One page of resources after the cursor's path.
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
        let listing = self.listing().await?;
        let start = match &after {
            // Sorted by path, byte order (D-3.5): the first path after the cursor's.
            Some(after) => listing
                .entries
                .partition_point(|entry| entry.path.as_str() <= after.as_str()),
            None => 0,
        };
        let rest = &listing.entries[start..];
        let page = &rest[..rest.len().min(PAGE_SIZE)];
        let resources = page
            .iter()
            .map(|entry| self.resource(entry, listing.generation))
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        if rest.len() > page.len()
            && let Some(last) = page.last()
        {
            result.next_cursor = Some(self.shared.cursors.issue(&last.path));
        }
        Ok(result)
    }

    fn resource(&self, entry: &Entry, generation: u64) -> Resource {
        let mut resource = Resource::new(self.uri_of(&entry.path), entry.path.clone());
        resource.mime_type = Some(mime::of(&entry.path).to_owned());
        resource.size = Some(entry.size_bytes);
        resource.meta = Some(meta(json!({
            "sha256": entry.sha256,
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

    /// `GET /resources/files` through the router: its trace line, its refusals.
    async fn listing(&self) -> Result<ListingDoc, ErrorData> {
        let target = format!("{}/resources/files", self.shared.request_prefix);
        let (status, _, body) = self.get(&target).await?;
        if status != 200 {
            return Err(refusal(&body));
        }
        serde_json::from_slice(&body)
            .map_err(|_| ErrorData::internal_error("the listing did not parse", None))
    }

    /// A synthesized `GET` of `target` through the router: status, etag and body.
    async fn get(&self, target: &str) -> Result<(u16, Option<String>, bytes::Bytes), ErrorData> {
        let request = http::Request::get(target).body(()).map_err(|_| {
            ErrorData::invalid_params(
                "the uri is not a valid URI path",
                Some(json!({"error": Code::InvalidRequest.as_str()})),
            )
        })?;
        let response = self.shared.router.handle(request).await;
        let etag = response
            .headers()
            .get(http::header::ETAG)
            .and_then(|value| value.to_str().ok())
            .map(|etag| {
                etag.trim_matches('"')
                    .trim_start_matches("sha256:")
                    .to_owned()
            });
        Ok((response.status().as_u16(), etag, response.body().bytes()))
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
        let mut target = format!("{}/resources/files/", self.shared.request_prefix);
        escape_target(raw, &mut target);
        let (status, etag, body) = self.get(&target).await?;
        if status != 200 {
            return Err(refusal(&body));
        }
        let name =
            crate::path::percent_decode_strict(crate::path::strip_query(raw)).unwrap_or_default();
        let mime = mime::of(&name);
        let meta = Some(meta(json!({"sha256": etag})));
        let contents = match (mime::is_text(mime), std::str::from_utf8(&body)) {
            (true, Ok(text)) => ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                text: text.to_owned(),
                meta,
            },
            _ => ResourceContents::BlobResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime.to_owned()),
                blob: STANDARD.encode(&body),
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

fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(object) => MetaObject(object),
        _ => MetaObject(Default::default()),
    }
}

/// The JSON-RPC error for an operator-plane refusal whose JSON body is `body`: `not_found` is
/// `-32002` (MCP's resource-not-found), `io_error` and `client_gone` `-32603`, every other
/// code `-32602` (the request names something the plane will not serve); `data` is
/// `{"error":"<code>"}` and the message the plane's own.
fn refusal(body: &[u8]) -> ErrorData {
    #[derive(Deserialize)]
    struct Body {
        error: String,
        #[serde(default)]
        message: String,
    }
    let Ok(Body { error, message }) = serde_json::from_slice::<Body>(body) else {
        return ErrorData::internal_error("the operator plane's answer did not parse", None);
    };
    let code = match Code::from_wire(&error) {
        Some(Code::NotFound) => ErrorCode::RESOURCE_NOT_FOUND,
        Some(Code::IoError | Code::ClientGone) => ErrorCode::INTERNAL_ERROR,
        _ => ErrorCode::INVALID_PARAMS,
    };
    ErrorData::new(code, message, Some(json!({"error": error})))
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
        self.page(cursor.as_deref()).await
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
        self.read(&request.uri)
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

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // `list_changed` is promised to every session, subscribed or not.
        self.start_feed(context.peer);
    }
}

/// The subscriptions one session may hold: enough for any client that subscribes to what it
/// shows, bounded so a session's memory is.
const MAX_SUBSCRIPTIONS: usize = 10_000;
