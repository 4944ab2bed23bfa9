//! The two small value languages of the manifest and the tools: byte sizes (D-1.4) and
//! durations (D-1.5). Each accepts exactly its documented language and nothing near it.

use serde_json::Value;

/// Parses a byte size: a positive integer, or a string of ASCII digits with at most one
/// case-sensitive suffix `Ki`, `Mi` or `Gi`, surrounding whitespace trimmed. `10MB`, `1.5Mi`,
/// `0`, `-1` and overflow are refused.
pub fn parse_byte_size(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64().filter(|v| *v > 0),
        Value::String(s) => {
            let s = s.trim();
            let (digits, scale) = [("Gi", 1u64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)]
                .iter()
                .find_map(|(suffix, scale)| s.strip_suffix(suffix).map(|d| (d, *scale)))
                .unwrap_or((s, 1));
            parse_digits(digits)?.checked_mul(scale).filter(|v| *v > 0)
        }
        _ => None,
    }
}

/// Parses a duration into seconds: a positive integer of seconds, or a string of ASCII digits
/// with at most one lowercase suffix `s`, `m`, `h` or `d`, surrounding whitespace trimmed.
/// `1h30m`, `5min`, `30S`, `1.5h` and `0` are refused, and so is a duration whose milliseconds
/// do not fit an `exp` (i64): as a manifest's `max_ttl` it could mint no handle.
pub fn parse_duration_secs(value: &Value) -> Option<u64> {
    duration_as_written(value).filter(|secs| {
        secs.checked_mul(1000)
            .is_some_and(|ms| i64::try_from(ms).is_ok())
    })
}

/// Parses a tool's `ttl` (the language of [`parse_duration_secs`]) clamped down to `max_secs`
/// (D-9.3): a well-formed duration longer than any handle may live, however long, is the
/// longest one, never a refusal. `None` when `value` is not in the language or is zero.
pub fn parse_ttl_secs(value: &Value, max_secs: u64) -> Option<u64> {
    duration_as_written(value).map(|secs| secs.min(max_secs))
}

/// A positive duration in the D-1.5 language, in seconds, saturating at `u64::MAX` (a string
/// of digits too long for 64 bits is still a duration, only a very long one). A JSON number
/// must be an integer that fits 64 bits: past that, JSON numbers lose the integer/decimal
/// distinction.
fn duration_as_written(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64().filter(|v| *v > 0),
        Value::String(s) => {
            let s = s.trim();
            let (digits, scale) = [("s", 1u64), ("m", 60), ("h", 3600), ("d", 86_400)]
                .iter()
                .find_map(|(suffix, scale)| s.strip_suffix(suffix).map(|d| (d, *scale)))
                .unwrap_or((s, 1));
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let count = digits.parse::<u64>().unwrap_or(u64::MAX);
            Some(count.saturating_mul(scale)).filter(|v| *v > 0)
        }
        _ => None,
    }
}

fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_byte_size(&json!(10485760)), Some(10_485_760));
        assert_eq!(parse_byte_size(&json!("10Mi")), Some(10 << 20));
        assert_eq!(parse_byte_size(&json!(" 4Ki ")), Some(4096));
        assert_eq!(parse_byte_size(&json!("1Gi")), Some(1 << 30));
        assert_eq!(parse_byte_size(&json!("512")), Some(512));
        for bad in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!("10MB"),
            json!("1.5Mi"),
            json!("0"),
            json!("0Ki"),
            json!("10mi"),
            json!("Mi"),
            json!(""),
            json!("1 Mi"),
            json!("+1"),
            json!(null),
            json!(true),
            json!("99999999999999999999Gi"),
            json!("18014398509481984Gi"),
        ] {
            assert_eq!(parse_byte_size(&bad), None, "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_secs(&json!(90)), Some(90));
        assert_eq!(parse_duration_secs(&json!("30s")), Some(30));
        assert_eq!(parse_duration_secs(&json!("15m")), Some(900));
        assert_eq!(parse_duration_secs(&json!(" 1h ")), Some(3600));
        assert_eq!(parse_duration_secs(&json!("2d")), Some(172_800));
        assert_eq!(parse_duration_secs(&json!("45")), Some(45));
        for bad in [
            json!(0),
            json!(-5),
            json!(1.5),
            json!("1h30m"),
            json!("5min"),
            json!("30S"),
            json!("1.5h"),
            json!("0s"),
            json!(""),
            json!("h"),
            json!("1 h"),
            json!([]),
            json!("99999999999999999999d"),
            json!(u64::MAX),
        ] {
            assert_eq!(parse_duration_secs(&bad), None, "{bad}");
        }
    }

    /// A tool's `ttl` is clamped down to `max_ttl` however long it is written (D-9.3); what is
    /// not a duration is still refused.
    #[test]
    fn ttls_clamp_to_the_maximum_however_long() {
        for (ttl, max, expected) in [
            (json!("30s"), 900, 30),
            (json!(900), 900, 900),
            (json!("16m"), 900, 900),
            (json!("9223372036854776"), 3600, 3600),
            (json!("99999999999999999999d"), 3600, 3600),
            (json!(" 999999999999999999999999999999h "), 60, 60),
            (json!(u64::MAX), 3600, 3600),
            (json!("0000000000000000000000000000001m"), 3600, 60),
        ] {
            assert_eq!(parse_ttl_secs(&ttl, max), Some(expected), "{ttl}");
        }
        for bad in [
            json!(0),
            json!(-5),
            json!(1.5),
            json!("0000000000000000000000000000000s"),
            json!("99999999999999999999x"),
            json!("1h30m"),
            json!(""),
            json!(true),
        ] {
            assert_eq!(parse_ttl_secs(&bad, 3600), None, "{bad}");
        }
    }
}
