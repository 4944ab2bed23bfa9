//! The `date` header (RFC 9110 §6.6.1), read from the capsule's [`Clock`] like every other
//! time the crate states, so a test with a [`ManualClock`](crate::backends::ManualClock) sees
//! its own reading in a response.

use crate::backends::Clock;
use http::header::{DATE, HeaderMap, HeaderValue};

/// The latest instant an IMF-fixdate can spell: 9999-12-31T23:59:59.999Z.
const LAST_MS: i64 = 253_402_300_799_999;

/// `now_ms` (Unix milliseconds) as an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`. A reading
/// before 1970 is written as the epoch and one past the year 9999 as its last second: the
/// format has no other years, and a clock set there (a test's) must not take a response down.
pub(crate) fn http_date(now_ms: i64) -> String {
    let ms = u64::try_from(now_ms.clamp(0, LAST_MS)).unwrap_or(0);
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

/// Gives `headers` a `date` of `clock`'s reading, unless the service already set one.
pub(crate) fn stamp(headers: &mut HeaderMap, clock: &dyn Clock) {
    if !headers.contains_key(DATE)
        && let Ok(value) = HeaderValue::from_str(&http_date(clock.now_ms()))
    {
        headers.insert(DATE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::ManualClock;

    #[test]
    fn dates_are_imf_fixdates_clamped_to_what_the_format_spells() {
        assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(-1), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_999), "Thu, 01 Jan 1970 00:00:01 GMT");
        assert_eq!(http_date(i64::MIN), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(i64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(http_date(LAST_MS), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn a_stamp_reads_the_clock_and_keeps_a_date_already_set() {
        let clock = ManualClock::new(784_111_777_000);
        let mut headers = HeaderMap::new();
        stamp(&mut headers, &clock);
        assert_eq!(headers[DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
        clock.advance(60_000);
        stamp(&mut headers, &clock);
        assert_eq!(headers[DATE], "Sun, 06 Nov 1994 08:49:37 GMT", "kept");
        assert_eq!(headers.get_all(DATE).iter().count(), 1);
    }
}
