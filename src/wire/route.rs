//! The routes (D-4.2): where each plane answers, below the path the capsule is mounted at,
//! and how a raw request path is classified into one of them.

use crate::path::strip_query;

/// Everything the planes answer lies under it.
pub(crate) const RESOURCES: &str = "/resources";
/// The operator plane's listing, `GET /resources/files` (D-4.2); its reads lie below it.
pub(crate) const LISTING: &str = "/resources/files";
/// The peer plane, `/resources/peer`; each handle redeems below it.
pub(crate) const PEER: &str = "/resources/peer";
/// The agent card (D-4.7.1).
pub(crate) const AGENT_CARD: &str = "/.well-known/agent-card.json";

/// The request target reading `encoded`, a relative path already percent-encoded as the
/// request carries it: `/resources/files/<encoded>`.
#[cfg_attr(not(feature = "cli"), allow(dead_code))] // requested by `pull` and the demo
pub(crate) fn read(encoded: &str) -> String {
    format!("{LISTING}/{encoded}")
}

/// The request target redeeming `token`: `/resources/peer/<token>` (a token's characters need
/// no encoding).
pub(crate) fn redeem(token: &str) -> String {
    format!("{PEER}/{token}")
}

/// Where a raw request path leads (D-4.2).
///
/// ```
/// use resource_plane::http::Route;
///
/// assert_eq!(Route::of("/resources/files?x=1"), Route::Listing);
/// assert_eq!(Route::of("/resources/files/a%2Fb"), Route::Read("a%2Fb"));
/// assert_eq!(Route::of("/resources/peer/mh1.a.b"), Route::Redeem("mh1.a.b"));
/// assert_eq!(Route::of("/.well-known/agent-card.json"), Route::AgentCard);
/// assert_eq!(Route::of("/resources/other"), Route::OtherResource);
/// assert_eq!(Route::of("/health"), Route::Foreign);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/resources/files`.
    Listing,
    /// `/resources/files/<raw relpath>`.
    Read(&'a str),
    /// `/resources/peer` or `/resources/peer/`.
    PeerIndex,
    /// `/resources/peer/<raw token>`.
    Redeem(&'a str),
    /// Anything else under `/resources`.
    OtherResource,
    /// `/.well-known/agent-card.json`.
    AgentCard,
    /// Not this crate's: a runtime mounting the router may answer it itself.
    Foreign,
}

impl<'a> Route<'a> {
    /// Classifies a raw request path (its query is cut first, D-2.1).
    pub fn of(raw_path: &'a str) -> Route<'a> {
        let path = strip_query(raw_path);
        if path == AGENT_CARD {
            return Route::AgentCard;
        }
        let below = |plane: &str| path.strip_prefix(plane);
        if path == LISTING {
            Route::Listing
        } else if let Some(relpath) = below(LISTING).and_then(|rest| rest.strip_prefix('/')) {
            Route::Read(relpath)
        } else if path == PEER || below(PEER) == Some("/") {
            Route::PeerIndex
        } else if let Some(token) = below(PEER).and_then(|rest| rest.strip_prefix('/')) {
            Route::Redeem(token)
        } else if below(RESOURCES).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')) {
            Route::OtherResource
        } else {
            Route::Foreign
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(Route::of("/resources/files"), Route::Listing);
        assert_eq!(Route::of("/resources/files?x=1"), Route::Listing);
        assert_eq!(Route::of("/resources/files/"), Route::Read(""));
        assert_eq!(Route::of("/resources/files/a%2Fb"), Route::Read("a%2Fb"));
        assert_eq!(Route::of("/resources/files%2Fa"), Route::OtherResource);
        assert_eq!(Route::of("/resources/peer"), Route::PeerIndex);
        assert_eq!(Route::of("/resources/peer/"), Route::PeerIndex);
        assert_eq!(
            Route::of("/resources/peer/mh1.a.b"),
            Route::Redeem("mh1.a.b")
        );
        assert_eq!(Route::of("/resources/peerx"), Route::OtherResource);
        assert_eq!(Route::of("/resources/"), Route::OtherResource);
        assert_eq!(Route::of("/resources"), Route::OtherResource);
        assert_eq!(Route::of("/resources/filesx"), Route::OtherResource);
        assert_eq!(Route::of("/resourcesx"), Route::Foreign);
        assert_eq!(Route::of("/"), Route::Foreign);
        assert_eq!(Route::of("/.well-known/agent-card.json"), Route::AgentCard);
        assert_eq!(
            Route::of("/.well-known/agent-card.json?x"),
            Route::AgentCard
        );
    }

    #[test]
    fn the_built_targets_route_back_to_their_plane() {
        assert_eq!(Route::of(LISTING), Route::Listing);
        assert_eq!(Route::of(&read("a%20b/c.md")), Route::Read("a%20b/c.md"));
        assert_eq!(Route::of(&redeem("mh1.x.y")), Route::Redeem("mh1.x.y"));
        assert_eq!(Route::of(PEER), Route::PeerIndex);
        assert_eq!(Route::of(AGENT_CARD), Route::AgentCard);
    }
}
