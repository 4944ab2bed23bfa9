//! Where the router is mounted and what it answers there: the base path, cut off the raw path
//! before routing, the paths it claims below it, and the card's JSON-RPC endpoint, which a
//! prefix cut in front of the router moves.

use super::mount::Router;
use crate::path::strip_query;
use crate::wire::Route;
use std::fmt;
use std::sync::Arc;

/// A base path [`Router::with_base_path`] refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBasePath {
    /// The base path as given.
    pub base: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for InvalidBasePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid base path {:?}: {}", self.base, self.reason)
    }
}

impl std::error::Error for InvalidBasePath {}

impl Router {
    /// This router answering under `base` instead of at the root: `base` is cut off the raw
    /// path before routing, so `/capsules/a/resources/files/x` reads `x`, and a path not under
    /// `base` is not the router's ([`Route::Foreign`]: 404 `not_found`, nothing traced). The
    /// clone shares the planes, trace and counts of `self`; its base replaces any base `self`
    /// had.
    ///
    /// The match is on the raw bytes, before any decoding, as routing is (D-4.2): a path is
    /// under `/capsules/a` when it is `/capsules/a` itself or goes on with a raw `/`, so
    /// `/capsules/ab/…` and `/capsules/a%2Fresources/…` are not under it; neither is
    /// `/capsules/a//resources/…` (what follows the base is routed as sent, and `//resources`
    /// is no route). `/capsules/a` itself and `/capsules/a/` are under it, and no route of the
    /// router's (404). Traces record the path relative to the plane, as without a base path
    /// (D-6.2).
    ///
    /// Use it when nothing in front of the router strips the prefix; under axum's
    /// `nest_service`, which strips it, mount the router itself.
    ///
    /// # Errors
    /// [`InvalidBasePath`] when `base` does not start with `/`, has an empty, `.` or `..`
    /// segment, is `/` alone, or holds a byte other than an RFC 3986 path character (`%` too:
    /// a prefix matched on raw bytes must have one spelling). One trailing `/` is allowed and
    /// ignored: `/capsules/a/` is `/capsules/a`.
    pub fn with_base_path(&self, base: &str) -> Result<Router, InvalidBasePath> {
        let refuse = |reason| InvalidBasePath {
            base: base.to_owned(),
            reason,
        };
        let Some(rest) = base.strip_prefix('/') else {
            return Err(refuse("it must start with `/`"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(refuse("it names no segment (mount the router itself)"));
        }
        for segment in rest.split('/') {
            match segment {
                "" => return Err(refuse("it has an empty segment")),
                "." | ".." => return Err(refuse("it has a `.` or `..` segment")),
                _ if !segment.bytes().all(is_plain_path_byte) => {
                    return Err(refuse(
                        "it holds a byte other than a letter, digit or one of -._~!$&'()*+,;=:@",
                    ));
                }
                _ => {}
            }
        }
        Ok(Router {
            base: Some(Arc::from(&base[..rest.len() + 1])),
            ..self.clone()
        })
    }

    /// The base path this router answers under ([`with_base_path`](Self::with_base_path)).
    pub fn base_path(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// `raw_path` relative to the base path: the rest after it, or `""` (which no route
    /// claims) when `raw_path` is not under it.
    pub(crate) fn local_path<'a>(&self, raw_path: &'a str) -> &'a str {
        let Some(base) = self.base.as_deref() else {
            return raw_path;
        };
        match raw_path.strip_prefix(base) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => "",
        }
    }

    /// Whether `raw_path` (the whole request path, before the base path is cut) names the
    /// JSON-RPC endpoint the agent card advertises: the path of the card's `url`, or the root
    /// of the router's mount (`/` without a base path, the base path itself with one), which is
    /// where that URL leads when something in front of the router (axum's `nest_service`, a
    /// proxy) cuts a prefix the router never sees.
    pub(super) fn is_rpc_endpoint(&self, raw_path: &str) -> bool {
        let path = strip_query(raw_path);
        if path == self.mounted.rpc_path {
            return true;
        }
        match self.base.as_deref() {
            None => path == "/",
            Some(base) => matches!(path.strip_prefix(base), Some("" | "/")),
        }
    }

    /// Whether this router answers `raw_path`, its base path considered: what
    /// [`claims`](Self::claims) says of the path relative to the base, `false` outside it.
    pub fn answers(&self, raw_path: &str) -> bool {
        Router::claims(self.local_path(raw_path))
    }

    /// Whether this router answers `raw_path` (everything under `/resources` and the card);
    /// a runtime mounting it beside its own routes sends only these here.
    pub fn claims(raw_path: &str) -> bool {
        !matches!(Route::of(raw_path), Route::Foreign)
    }
}

/// A byte a base path may hold in a segment: an RFC 3986 `pchar` other than `%` (unreserved and
/// sub-delims, `:` and `@`).
fn is_plain_path_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
}
