//! The events a watch delivers, and their Server-Sent Events form (D-17.3).

use super::change::ChangeBatch;
use bytes::Bytes;
use std::sync::Arc;

/// One event of a watch, in the order a subscriber receives them.
///
/// ```
/// use resource_plane::planes::watch::WatchEvent;
///
/// let event = WatchEvent::Listing { etag: "sha256:ab".into(), entry_count: 2 };
/// assert_eq!(
///     String::from_utf8(event.to_sse()).unwrap(),
///     "event: listing\nid: sha256:ab\ndata: {\"etag\":\"sha256:ab\",\"entry_count\":2}\n\n",
/// );
/// let reset = WatchEvent::Reset { etag: "sha256:cd".into() };
/// assert_eq!(reset.etag(), "sha256:cd");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The listing the watch starts from, when it resumes from none: re-list, and expect its
    /// etag to be `etag` (or resume from the etag the listing had).
    Listing {
        /// The current listing's etag (`sha256:<hex>`, unquoted).
        etag: String,
        /// Its entries.
        entry_count: u64,
    },
    /// The listing changed.
    Change(Arc<ChangeBatch>),
    /// The watch cannot say what changed since the listing it was asked to resume from (the
    /// history no longer reaches it, or it was never this export's): re-list, and resume from
    /// the etag of that listing. The watch goes on from `etag`.
    Reset {
        /// The current listing's etag.
        etag: String,
    },
}

impl WatchEvent {
    /// The etag of the listing after this event.
    pub fn etag(&self) -> &str {
        match self {
            WatchEvent::Listing { etag, .. } | WatchEvent::Reset { etag } => etag,
            WatchEvent::Change(batch) => &batch.etag,
        }
    }

    /// The event as Server-Sent Events: `event:`, `id:` (but for a reset), one `data:` line of
    /// compact JSON, and the blank line that ends it.
    pub fn to_sse(&self) -> Vec<u8> {
        let (name, id, data) = match self {
            WatchEvent::Listing { etag, entry_count } => (
                "listing",
                Some(etag.as_str()),
                serde_json::json!({"etag": etag, "entry_count": entry_count}).to_string(),
            ),
            WatchEvent::Change(batch) => (
                "change",
                Some(batch.etag.as_str()),
                serde_json::to_string(&**batch).unwrap_or_default(),
            ),
            WatchEvent::Reset { etag } => {
                ("reset", None, serde_json::json!({"etag": etag}).to_string())
            }
        };
        let mut out = Vec::with_capacity(data.len() + 100);
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        if let Some(id) = id {
            out.extend_from_slice(b"\nid: ");
            out.extend_from_slice(id.as_bytes());
        }
        out.extend_from_slice(b"\ndata: ");
        out.extend_from_slice(data.as_bytes());
        out.extend_from_slice(b"\n\n");
        out
    }
}

/// The comment a stream sends when it has sent nothing for a while, so proxies and clients
/// see the connection is alive.
pub(crate) const KEEP_ALIVE: Bytes = Bytes::from_static(b": keep-alive\n\n");

/// An etag as a client sends it back: `sha256:<hex>`, `"sha256:<hex>"` or `W/"sha256:<hex>"`
/// (from an `etag` header), trimmed; `None` for anything else.
pub(crate) fn client_etag(text: &str) -> Option<String> {
    let text = text.trim_matches([' ', '\t']);
    let bare = text.strip_prefix("W/").unwrap_or(text);
    let bare = bare
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(bare);
    let hex = bare.strip_prefix("sha256:")?;
    crate::hex::decode32(hex).map(|_| bare.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_etag_is_accepted_bare_quoted_or_weak_and_nothing_else() {
        let hex = "ab".repeat(32);
        let bare = format!("sha256:{hex}");
        for sent in [
            bare.clone(),
            format!("\"{bare}\""),
            format!("W/\"{bare}\""),
            format!(" {bare}\t"),
        ] {
            assert_eq!(client_etag(&sent).as_deref(), Some(bare.as_str()), "{sent}");
        }
        for sent in [
            hex.clone(),
            format!("sha256:{}", hex.to_uppercase()),
            format!("sha256:{hex}0"),
            "sha256:".to_owned(),
            format!("\"{bare}"),
        ] {
            assert_eq!(client_etag(&sent), None, "{sent}");
        }
    }
}
