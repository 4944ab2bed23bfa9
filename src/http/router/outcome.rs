//! What the router answers one request with, whichever plane (if any) answered, before it is
//! rendered; and the same outcome once its client left.

use super::listing::{ListAnswer, ListExtra};
use crate::http::watch_stream::WatchBody;
use crate::planes::watch::hub::Current;
use crate::planes::{ExportScope, IfNoneMatch, ReadOutcome, RedeemOutcome};
use crate::refusal::{Code, Refusal};

/// What the router answers one request with, whichever plane (if any) answered: rendered by
/// [`Router::render`](super::Router::render) into the response and the request's trace line. `'p` is the plane whose
/// scope the response echoes.
pub(super) enum Outcome<'p> {
    /// No route of the router's: `404`, no trace line.
    Foreign,
    /// The agent card for `GET`, else `405` with `allow: GET`; no trace line.
    AgentCard { method_allowed: bool },
    /// A `POST` to the card's JSON-RPC endpoint: the JSON-RPC error `-32601` (D-4.7.1); no
    /// trace line.
    NoAgent,
    /// The listing route: `resource_list`; a `304` when `if_none_match` holds its etag.
    Listing {
        result: Result<(&'p ExportScope, ListAnswer), Refusal>,
        if_none_match: IfNoneMatch,
        extra: ListExtra,
    },
    /// A watch stream opened on the listing route: `resource_list` with `watch: true`.
    Watch {
        scope: &'p ExportScope,
        current: Current,
        body: WatchBody,
    },
    /// The read route and any other route under `/resources`: `resource_read`, recording
    /// `path`.
    Read {
        path: String,
        result: Result<(&'p ExportScope, ReadOutcome), Refusal>,
    },
    /// The peer routes: `peer_handle_redeem`.
    Redeem {
        facts: RedeemFacts,
        outcome: RedeemOutcome,
    },
}

impl Outcome<'_> {
    /// The outcome of a request whose client left before its answer was ready: the same
    /// route's refusal `client_gone`, keeping what the request said of itself (a redeem's path
    /// once its MAC verified).
    pub(super) fn given_up(self) -> Self {
        match self {
            Outcome::Listing {
                if_none_match,
                extra,
                ..
            } => Outcome::Listing {
                result: Err(client_gone()),
                if_none_match,
                extra,
            },
            Outcome::Read { path, .. } => Outcome::Read {
                path,
                result: Err(client_gone()),
            },
            Outcome::Redeem { facts, outcome } => Outcome::Redeem {
                facts,
                outcome: RedeemOutcome {
                    result: Err(client_gone()),
                    ..outcome
                },
            },
            other @ (Outcome::Foreign
            | Outcome::AgentCard { .. }
            | Outcome::NoAgent
            | Outcome::Watch { .. }) => other,
        }
    }
}

/// The refusal recorded for a request whose client left before its answer was ready.
pub(super) fn client_gone() -> Refusal {
    Refusal::new(
        Code::ClientGone,
        "the client left before its answer was ready; its work was stopped or never started",
    )
}

/// What a request on a peer route says itself, for its `peer_handle_redeem` line whatever the
/// plane answers.
#[derive(Clone)]
pub(super) struct RedeemFacts {
    /// The handle id of the token sent; `None` when no token was sent.
    pub(super) handle_id: Option<String>,
    /// The first `x-murmur-audience`, normalised; `None` when absent.
    pub(super) audience_asserted: Option<String>,
}
