//! The listing's query (D-17.2, D-17.3): `wait=<seconds>` for a long-poll, `watch=1` for a
//! stream. Every other parameter is ignored, as the listing always ignored its query.

use crate::refusal::{Code, Refusal};
use std::time::Duration;

/// The longest `wait` a long-poll may ask for, in seconds.
pub(crate) const MAX_WAIT_SECS: u64 = 300;

/// What a listing request asks beyond the listing itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ListingQuery {
    /// `wait=N`: hold the answer up to this long while the listing matches `If-None-Match`.
    pub(crate) wait: Option<Duration>,
    /// `watch=1`: answer with the stream of changes.
    pub(crate) watch: bool,
}

impl ListingQuery {
    /// Parses the raw query (after `?`, not decoded: a value must be plain digits as sent).
    ///
    /// # Errors
    /// `invalid_request` for a `wait` that is not 1 to 300 plain decimal digits, a `watch`
    /// other than `1`, either given twice, or both given together.
    pub(crate) fn parse(query: Option<&str>) -> Result<ListingQuery, Refusal> {
        let mut asked = ListingQuery::default();
        let mut seen = (false, false);
        for pair in query.unwrap_or("").split('&') {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "wait" => {
                    if std::mem::replace(&mut seen.0, true) {
                        return Err(refuse("wait is given more than once"));
                    }
                    asked.wait = Some(Duration::from_secs(wait_secs(value)?));
                }
                "watch" => {
                    if std::mem::replace(&mut seen.1, true) {
                        return Err(refuse("watch is given more than once"));
                    }
                    if value != "1" {
                        return Err(refuse("watch must be 1"));
                    }
                    asked.watch = true;
                }
                _ => {}
            }
        }
        if asked.watch && asked.wait.is_some() {
            return Err(refuse("wait and watch cannot be combined"));
        }
        Ok(asked)
    }
}

/// The seconds of a `wait` value: 1 to 3 decimal digits spelling 1..=300.
fn wait_secs(value: &str) -> Result<u64, Refusal> {
    if value.is_empty() || value.len() > 3 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse(
            "wait must be a whole number of seconds from 1 to 300",
        ));
    }
    match value.parse::<u64>() {
        Ok(secs @ 1..=MAX_WAIT_SECS) => Ok(secs),
        _ => Err(refuse(
            "wait must be a whole number of seconds from 1 to 300",
        )),
    }
}

fn refuse(reason: &'static str) -> Refusal {
    Refusal::new(Code::InvalidRequest, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_and_watch_are_read_and_other_parameters_ignored() {
        assert_eq!(ListingQuery::parse(None).unwrap(), ListingQuery::default());
        assert_eq!(
            ListingQuery::parse(Some("x=1&y")).unwrap(),
            ListingQuery::default()
        );
        let long_poll = ListingQuery::parse(Some("wait=300&x=2")).unwrap();
        assert_eq!(long_poll.wait, Some(Duration::from_secs(300)));
        assert!(!long_poll.watch);
        let watch = ListingQuery::parse(Some("watch=1")).unwrap();
        assert!(watch.watch && watch.wait.is_none());
        assert_eq!(
            ListingQuery::parse(Some("wait=007")).unwrap().wait,
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn a_malformed_wait_or_watch_is_invalid_request() {
        for query in [
            "wait=0",
            "wait=301",
            "wait=",
            "wait",
            "wait=1.5",
            "wait=-1",
            "wait=+1",
            "wait=%31",
            "wait=1000",
            "wait= 1",
            "wait=1&wait=2",
            "watch=0",
            "watch=true",
            "watch",
            "watch=1&watch=1",
            "watch=1&wait=5",
        ] {
            let refusal = ListingQuery::parse(Some(query)).unwrap_err();
            assert_eq!(refusal.code, Code::InvalidRequest, "{query}");
        }
    }
}
