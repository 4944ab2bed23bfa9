#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Property tests: each small language accepts exactly its documented forms.
//!
//! * `parse_byte_size` (D-1.4) and `parse_duration_secs` (D-1.5): strings generated from the
//!   grammar of accepted forms parse to the value a model computes; generated near-misses
//!   (wrong-case or doubled suffix, decimals, signs, inner spaces, empty, zero, overflow) are
//!   refused.
//! * `AllowRule` / `Address` (D-1.6, D-11): generated hosts, ports and schemes in the accepted
//!   forms parse, and `rule.matches(target)` agrees with a small model of D-11; near-miss
//!   addresses are refused.
//! * `percent_decode_strict` / `decode_request_path` (D-2.2, D-2.3): percent-encoding of plain
//!   UTF-8 names round-trips, invalid escapes are always refused, and whatever is accepted never
//!   has an empty, `.` or `..` component, a NUL, or a leading `/`.
//!
//! Case count: `RP_PROPTEST_CASES` (default 64).

mod common;

use proptest::prelude::*;
use resource_plane::path::{decode_request_path, percent_decode_strict};
use resource_plane::policy::{Address, AllowRule, Scheme};
use resource_plane::units::{parse_byte_size, parse_duration_secs};
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------------

fn config() -> ProptestConfig {
    common::config(common::cases())
}

// ------------------------------------------------------------------------------------------------
// Shared generators
// ------------------------------------------------------------------------------------------------

/// Surrounding whitespace the parsers trim.
fn padding() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec![' ', '\t', '\n', '\r']), 0..3)
        .prop_map(|v| v.into_iter().collect())
}

/// 1 to 20 ASCII digits, leading zeros allowed (the value may be zero or overflow).
fn digit_string() -> impl Strategy<Value = String> {
    "[0-9]{1,20}"
}

/// A digit string whose value is positive and small (never overflows with any suffix).
fn small_positive_digits() -> impl Strategy<Value = String> {
    (1u64..100_000, 0usize..3).prop_map(|(n, zeros)| format!("{}{n}", "0".repeat(zeros)))
}

/// The value of a digit string (at most 20 digits always fit `u128`).
fn digits_value(digits: &str) -> u128 {
    digits.parse::<u128>().expect("≤ 20 ASCII digits fit u128")
}

// ------------------------------------------------------------------------------------------------
// D-1.4 byte sizes
// ------------------------------------------------------------------------------------------------

const BYTE_SUFFIXES: [(&str, u128); 4] =
    [("", 1), ("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)];

/// The model of D-1.4 for a string in the accepted grammar: digits × scale, positive, fits u64.
fn byte_size_model(digits: &str, scale: u128) -> Option<u64> {
    let value = digits_value(digits) * scale;
    (value > 0)
        .then_some(value)
        .and_then(|v| u64::try_from(v).ok())
}

/// Strings that are near the byte-size language but outside it.
fn byte_size_near_miss() -> impl Strategy<Value = String> {
    let d = small_positive_digits;
    prop_oneof![
        // Wrong-case suffixes.
        (
            d(),
            prop::sample::select(vec!["ki", "KI", "kI", "mi", "MI", "mI", "gi", "GI", "gI"])
        )
            .prop_map(|(n, s)| format!("{n}{s}")),
        // SI and other unit spellings.
        (
            d(),
            prop::sample::select(vec![
                "K", "k", "M", "G", "KB", "MB", "GB", "KiB", "MiB", "B", "b", "Ti", "Pi", "kb"
            ])
        )
            .prop_map(|(n, s)| format!("{n}{s}")),
        // Two suffixes.
        (
            d(),
            prop::sample::select(vec!["Ki", "Mi", "Gi"]),
            prop::sample::select(vec!["Ki", "Mi", "Gi"])
        )
            .prop_map(|(n, a, b)| format!("{n}{a}{b}")),
        // Decimals.
        (
            d(),
            "[0-9]{1,3}",
            prop::sample::select(vec!["", "Ki", "Mi", "Gi"])
        )
            .prop_map(|(n, f, s)| format!("{n}.{f}{s}")),
        (d(), prop::sample::select(vec!["", "Ki", "Mi"])).prop_map(|(n, s)| format!(".{n}{s}")),
        // Signs.
        (
            prop::sample::select(vec!["+", "-"]),
            d(),
            prop::sample::select(vec!["", "Ki", "Mi", "Gi"])
        )
            .prop_map(|(sign, n, s)| format!("{sign}{n}{s}")),
        // Inner spaces: between digits and suffix, or inside the digits.
        (
            d(),
            prop::sample::select(vec!["Ki", "Mi", "Gi"]),
            prop::sample::select(vec![" ", "\t", "  "])
        )
            .prop_map(|(n, s, sp)| format!("{n}{sp}{s}")),
        (1u64..1000, 0u64..1000, prop::sample::select(vec!["", "Ki"]))
            .prop_map(|(a, b, s)| format!("{a} {b}{s}")),
        // Empty, blank, suffix alone.
        padding(),
        prop::sample::select(vec!["Ki", "Mi", "Gi", " Mi ", "i"]).prop_map(str::to_owned),
        // Zero in every spelling.
        ("0{1,4}", prop::sample::select(vec!["", "Ki", "Mi", "Gi"]))
            .prop_map(|(z, s)| format!("{z}{s}")),
        // Other numeral spellings.
        prop::sample::select(vec![
            "0x10", "1e3", "1_000", "1,000", "١٢", "１２", "10Mi.", "Mi10", "10 Mi", "1Ki2"
        ])
        .prop_map(str::to_owned),
        // Overflow: 2^64 and above, with or without a suffix.
        prop::sample::select(vec![
            "18446744073709551616",
            "99999999999999999999",
            "17179869184Gi",
            "18014398509481984Ki",
            "17592186044416Mi",
        ])
        .prop_map(str::to_owned),
    ]
}

// ------------------------------------------------------------------------------------------------
// D-1.5 durations
// ------------------------------------------------------------------------------------------------

const DURATION_SUFFIXES: [(&str, u128); 5] =
    [("", 1), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)];

/// The model of D-1.5 for a string in the accepted grammar: positive seconds whose milliseconds
/// fit an `exp` (i64), as the crate documents.
fn duration_model(digits: &str, scale: u128) -> Option<u64> {
    let secs = digits_value(digits) * scale;
    (secs > 0 && secs * 1000 <= i64::MAX as u128).then_some(secs as u64)
}

fn duration_near_miss() -> impl Strategy<Value = String> {
    let d = small_positive_digits;
    prop_oneof![
        // Wrong case.
        (d(), prop::sample::select(vec!["S", "M", "H", "D"])).prop_map(|(n, s)| format!("{n}{s}")),
        // Compound and long spellings.
        (
            d(),
            prop::sample::select(vec!["s", "m", "h", "d"]),
            d(),
            prop::sample::select(vec!["s", "m", "h", "d"])
        )
            .prop_map(|(a, x, b, y)| format!("{a}{x}{b}{y}")),
        (
            d(),
            prop::sample::select(vec!["ss", "mh", "hs", "dd", "sm"])
        )
            .prop_map(|(n, s)| format!("{n}{s}")),
        (
            d(),
            prop::sample::select(vec![
                "min", "mins", "sec", "secs", "hr", "hours", "ms", "w", "y", "us", "ns"
            ])
        )
            .prop_map(|(n, s)| format!("{n}{s}")),
        // Decimals and signs.
        (
            d(),
            "[0-9]{1,2}",
            prop::sample::select(vec!["", "s", "m", "h", "d"])
        )
            .prop_map(|(n, f, s)| format!("{n}.{f}{s}")),
        (
            prop::sample::select(vec!["+", "-"]),
            d(),
            prop::sample::select(vec!["", "s", "m", "h", "d"])
        )
            .prop_map(|(sign, n, s)| format!("{sign}{n}{s}")),
        // Inner spaces.
        (
            d(),
            prop::sample::select(vec!["s", "m", "h", "d"]),
            prop::sample::select(vec![" ", "\t"])
        )
            .prop_map(|(n, s, sp)| format!("{n}{sp}{s}")),
        // Empty, blank, suffix alone.
        padding(),
        prop::sample::select(vec!["s", "m", "h", "d", " h "]).prop_map(str::to_owned),
        // Zero in every spelling.
        ("0{1,4}", prop::sample::select(vec!["", "s", "m", "h", "d"]))
            .prop_map(|(z, s)| format!("{z}{s}")),
        // Other spellings and overflow.
        prop::sample::select(vec![
            "PT1H",
            "1e3",
            "0x10",
            "1_000",
            "١٢s",
            "h1",
            "99999999999999999999d",
            "18446744073709551616",
            "9223372036854776s",
            "106751991167301d",
        ])
        .prop_map(str::to_owned),
    ]
}

// ------------------------------------------------------------------------------------------------
// D-1.6 / D-11 addresses and allow rules
// ------------------------------------------------------------------------------------------------

/// A host token: the same few hosts so rules and targets collide often.
#[derive(Debug, Clone)]
enum HostTok {
    Name(&'static str),
    V6(&'static str),
}

const HOST_NAMES: [&str; 7] = [
    "localhost",
    "example.com",
    "peer-1.internal",
    "a_b",
    "127.0.0.1",
    "127.0.0.2",
    "x",
];
const HOST_V6: [&str; 3] = ["::1", "fe80::1", "2001:db8::a"];

fn host_tok() -> impl Strategy<Value = HostTok> {
    prop_oneof![
        4 => prop::sample::select(HOST_NAMES.to_vec()).prop_map(HostTok::Name),
        1 => prop::sample::select(HOST_V6.to_vec()).prop_map(HostTok::V6),
    ]
}

impl HostTok {
    /// The canonical (lowercase) spelling, as the model compares it.
    fn canonical(&self) -> String {
        match self {
            HostTok::Name(n) => (*n).to_owned(),
            HostTok::V6(v) => format!("[{v}]"),
        }
    }
}

/// An address in one of the accepted forms, written with random letter case.
#[derive(Debug, Clone)]
struct AddrSpec {
    scheme: Option<Scheme>,
    host: HostTok,
    port: Option<u16>,
    /// Per-character upper-casing mask for the scheme and host.
    case_mask: u64,
    /// A trailing `/` after a URL's authority (accepted by the crate, documented in `Address`).
    trailing_slash: bool,
    pad_left: String,
    pad_right: String,
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![
        prop::sample::select(vec![80u16, 443, 8080, 41234, 1, 65535]),
        1u16..=65535,
    ]
}

fn addr_spec() -> impl Strategy<Value = AddrSpec> {
    (
        prop::option::of(prop::sample::select(vec![Scheme::Http, Scheme::Https])),
        host_tok(),
        prop::option::weighted(0.6, port()),
        any::<u64>(),
        any::<bool>(),
        prop::sample::select(vec!["", " ", "\t"]),
        prop::sample::select(vec!["", " ", "\t"]),
    )
        .prop_map(
            |(scheme, host, port, case_mask, trailing_slash, l, r)| AddrSpec {
                scheme,
                host,
                port,
                case_mask,
                trailing_slash,
                pad_left: l.to_owned(),
                pad_right: r.to_owned(),
            },
        )
}

fn with_case(text: &str, mask: u64, offset: usize) -> String {
    text.chars()
        .enumerate()
        .map(|(i, c)| {
            if mask >> ((i + offset) % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

impl AddrSpec {
    fn render(&self) -> String {
        let mut out = self.pad_left.clone();
        if let Some(s) = self.scheme {
            out.push_str(&with_case(&format!("{}://", s.as_str()), self.case_mask, 0));
        }
        out.push_str(&with_case(&self.host.canonical(), self.case_mask, 11));
        if let Some(p) = self.port {
            out.push_str(&format!(":{p}"));
        }
        if self.scheme.is_some() && self.trailing_slash {
            out.push('/');
        }
        out.push_str(&self.pad_right);
        out
    }

    /// The scheme a target connects with: as written, else http (D-11).
    fn target_scheme(&self) -> Scheme {
        self.scheme.unwrap_or(Scheme::Http)
    }

    /// The port a target connects to: as written, else its scheme's default.
    fn target_port(&self) -> u16 {
        self.port.unwrap_or(match self.target_scheme() {
            Scheme::Http => 80,
            Scheme::Https => 443,
        })
    }
}

/// D-11 as written: hosts compare case-insensitively and exactly; a bare rule matches either
/// scheme on its port (any port when none); a URL rule binds its scheme on its port or the
/// scheme's default.
fn d11_model(rule: &AddrSpec, target: &AddrSpec) -> bool {
    if !rule
        .host
        .canonical()
        .eq_ignore_ascii_case(&target.host.canonical())
    {
        return false;
    }
    match rule.scheme {
        None => rule.port.is_none_or(|p| p == target.target_port()),
        Some(scheme) => {
            let default = match scheme {
                Scheme::Http => 80,
                Scheme::Https => 443,
            };
            scheme == target.target_scheme() && rule.port.unwrap_or(default) == target.target_port()
        }
    }
}

fn address_near_miss() -> impl Strategy<Value = String> {
    let host = || prop::sample::select(HOST_NAMES.to_vec());
    let prefix = || prop::sample::select(vec!["", "http://", "https://"]);
    prop_oneof![
        // A path, query or fragment after the authority.
        (
            prefix(),
            host(),
            prop::sample::select(vec!["/x", "/a/", "?q", "?", "#f", "#", "/?", "//"])
        )
            .prop_map(|(p, h, tail)| format!("{p}{h}{tail}")),
        // Userinfo.
        (prefix(), host()).prop_map(|(p, h)| format!("{p}user@{h}")),
        (prefix(), host()).prop_map(|(p, h)| format!("{p}user:pw@{h}:80")),
        // Bad ports.
        (
            prefix(),
            host(),
            prop::sample::select(vec![
                ":0", ":00000", ":65536", ":99999", ":-1", ":", ":8o", ":80:80", ": 80", ":+80",
                ":123456"
            ])
        )
            .prop_map(|(p, h, port)| format!("{p}{h}{port}")),
        // Other schemes, and a scheme with no host.
        (
            prop::sample::select(vec![
                "ftp://", "ws://", "file://", "http:/", "https:", "http//"
            ]),
            host()
        )
            .prop_map(|(p, h)| format!("{p}{h}")),
        prop::sample::select(vec![
            "",
            " ",
            "http://",
            "https://",
            "http:///",
            "https://:80"
        ])
        .prop_map(str::to_owned),
        // Whitespace or forbidden bytes inside the host.
        (
            prefix(),
            host(),
            prop::sample::select(vec![" ", "\t", "\\", "%", "*", "é", "!"])
        )
            .prop_map(|(p, h, bad)| format!("{p}{h}{bad}{h}")),
        // Broken IPv6 literals.
        prop::sample::select(vec![
            "[::1",
            "::1]",
            "[]",
            "[]:80",
            "[zz]",
            "[::1]80",
            "[::1]:",
            "[fe80::1%eth0]",
            "::1",
            "[::1]:0"
        ])
        .prop_map(str::to_owned),
    ]
}

// ------------------------------------------------------------------------------------------------
// D-2.2 / D-2.3 request paths
// ------------------------------------------------------------------------------------------------

/// A plain name: non-empty, not `.` or `..`, no `/`, no NUL, any other UTF-8.
fn plain_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9._ +%?#~-]{1,8}",
        any::<String>().prop_map(|s| s.chars().take(6).collect::<String>()),
        prop::sample::select(vec![
            "...", ".hidden", "a..b", "%2e", "é", "日本", "a\\..\\b"
        ])
        .prop_map(str::to_owned),
    ]
    .prop_filter("a plain name", |n| {
        !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('\0')
    })
}

/// Percent-encodes `text`: `%` always, every other byte when its mask bit says so, in upper or
/// lower hex.
fn percent_encode(text: &str, mask: u64, upper: bool) -> String {
    let mut out = String::new();
    for (i, b) in text.bytes().enumerate() {
        if b == b'%' || !b.is_ascii() || mask >> (i % 64) & 1 == 1 {
            if upper {
                out.push_str(&format!("%{b:02X}"));
            } else {
                out.push_str(&format!("%{b:02x}"));
            }
        } else {
            out.push(b as char);
        }
    }
    out
}

fn encode_all_bytes(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

/// An escape that strict decoding must refuse wherever it appears: `%` followed by a non-hex
/// byte, or by one hex digit then a non-hex byte, or `%`/`%X` at the very end.
#[derive(Debug, Clone)]
enum BadEscape {
    NonHex(char),
    OneHexThen(char, char),
    AtEnd(Option<char>),
}

fn non_hex() -> impl Strategy<Value = char> {
    prop::sample::select(vec!['z', 'G', 'g', '/', '%', ' ', '.', 'u', '-', 'é', '?'])
}

fn hex_digit() -> impl Strategy<Value = char> {
    prop::sample::select("0123456789abcdefABCDEF".chars().collect::<Vec<_>>())
}

fn bad_escape() -> impl Strategy<Value = BadEscape> {
    prop_oneof![
        non_hex().prop_map(BadEscape::NonHex),
        (hex_digit(), non_hex()).prop_map(|(h, n)| BadEscape::OneHexThen(h, n)),
        prop::option::of(hex_digit()).prop_map(BadEscape::AtEnd),
    ]
}

/// One token of a hostile request path.
#[derive(Debug, Clone)]
enum PathTok {
    Name(String),
    Sep,
    EncSep,
    Dot,
    EncDot,
    DotDot,
    EncDotDot,
    Nul,
    Lead,
}

fn path_tok() -> impl Strategy<Value = PathTok> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "report.md", ".h", "..."])
            .prop_map(|s| PathTok::Name(s.to_owned())),
        4 => Just(PathTok::Sep),
        2 => prop::sample::select(vec!["%2f", "%2F"]).prop_map(|_| PathTok::EncSep),
        2 => Just(PathTok::Dot),
        1 => Just(PathTok::EncDot),
        2 => Just(PathTok::DotDot),
        1 => Just(PathTok::EncDotDot),
        1 => Just(PathTok::Nul),
        1 => Just(PathTok::Lead),
    ]
}

fn render_path(tokens: &[PathTok]) -> String {
    tokens
        .iter()
        .map(|t| match t {
            PathTok::Name(n) => n.clone(),
            PathTok::Sep | PathTok::Lead => "/".into(),
            PathTok::EncSep => "%2F".into(),
            PathTok::Dot => ".".into(),
            PathTok::EncDot => "%2e".into(),
            PathTok::DotDot => "..".into(),
            PathTok::EncDotDot => "%2E%2e".into(),
            PathTok::Nul => "%00".into(),
        })
        .collect()
}

/// A model of D-2.2 + D-2.3 written from the text of the decisions.
fn decode_model(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(text, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let decoded = String::from_utf8(out).ok()?;
    let refused = decoded.is_empty()
        || decoded.starts_with('/')
        || decoded.contains('\0')
        || decoded
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..");
    (!refused).then_some(decoded)
}

fn assert_plain_path(path: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        !path.starts_with('/'),
        "accepted path {path:?} starts with /"
    );
    prop_assert!(!path.contains('\0'), "accepted path {path:?} holds a NUL");
    for c in path.split('/') {
        prop_assert!(
            !c.is_empty() && c != "." && c != "..",
            "accepted path {path:?} has component {c:?}"
        );
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    // ---- D-1.4 ----

    #[test]
    fn byte_size_grammar_parses_to_the_model_value(
        digits in digit_string(),
        suffix in 0usize..BYTE_SUFFIXES.len(),
        left in padding(),
        right in padding(),
    ) {
        let (text, scale) = BYTE_SUFFIXES[suffix];
        let input = format!("{left}{digits}{text}{right}");
        prop_assert_eq!(
            parse_byte_size(&json!(input)),
            byte_size_model(&digits, scale),
            "parse_byte_size({:?})", input
        );
    }

    #[test]
    fn byte_size_integers_parse_when_positive(n in any::<i64>(), u in any::<u64>()) {
        prop_assert_eq!(parse_byte_size(&json!(n)), u64::try_from(n).ok().filter(|v| *v > 0));
        prop_assert_eq!(parse_byte_size(&json!(u)), Some(u).filter(|v| *v > 0));
    }

    #[test]
    fn byte_size_near_misses_are_refused(text in byte_size_near_miss(), left in padding(), right in padding()) {
        let input = format!("{left}{text}{right}");
        prop_assert_eq!(parse_byte_size(&json!(input)), None, "{:?} must be refused", input);
    }

    #[test]
    fn byte_size_non_integers_are_refused(f in any::<f64>(), b in any::<bool>()) {
        prop_assert_eq!(parse_byte_size(&json!(f)), None, "float {} must be refused", f);
        prop_assert_eq!(parse_byte_size(&json!(b)), None);
        prop_assert_eq!(parse_byte_size(&Value::Null), None);
        prop_assert_eq!(parse_byte_size(&json!([1])), None);
    }

    // ---- D-1.5 ----

    #[test]
    fn duration_grammar_parses_to_the_model_value(
        digits in digit_string(),
        suffix in 0usize..DURATION_SUFFIXES.len(),
        left in padding(),
        right in padding(),
    ) {
        let (text, scale) = DURATION_SUFFIXES[suffix];
        let input = format!("{left}{digits}{text}{right}");
        prop_assert_eq!(
            parse_duration_secs(&json!(input)),
            duration_model(&digits, scale),
            "parse_duration_secs({:?})", input
        );
    }

    #[test]
    fn duration_integers_parse_when_positive_and_representable(n in any::<i64>(), u in any::<u64>()) {
        let model = |v: u64| (v > 0 && u128::from(v) * 1000 <= i64::MAX as u128).then_some(v);
        prop_assert_eq!(parse_duration_secs(&json!(n)), u64::try_from(n).ok().and_then(model));
        prop_assert_eq!(parse_duration_secs(&json!(u)), model(u));
    }

    #[test]
    fn duration_near_misses_are_refused(text in duration_near_miss(), left in padding(), right in padding()) {
        let input = format!("{left}{text}{right}");
        prop_assert_eq!(parse_duration_secs(&json!(input)), None, "{:?} must be refused", input);
    }

    // ---- D-1.6 / D-11 ----

    #[test]
    fn accepted_address_forms_parse_canonically(spec in addr_spec()) {
        let text = spec.render();
        let parsed = Address::parse(&text);
        prop_assert!(parsed.is_ok(), "{:?} must parse: {:?}", text, parsed);
        let parsed = parsed.unwrap();
        prop_assert_eq!(parsed.scheme, spec.scheme, "scheme of {:?}", text);
        prop_assert_eq!(&parsed.host, &spec.host.canonical(), "host of {:?}", text);
        prop_assert_eq!(parsed.port, spec.port, "port of {:?} (kept as written)", text);
        prop_assert_eq!(parsed.effective_port(), spec.target_port(), "effective port of {:?}", text);
        prop_assert_eq!(parsed.effective_scheme(), spec.target_scheme());
        // The display form parses back to the same address.
        let shown = parsed.to_string();
        prop_assert_eq!(Address::parse(&shown), Ok(parsed.clone()), "display {:?}", shown);
        // The same text is an allow rule.
        prop_assert!(AllowRule::parse(&text).is_ok(), "{:?} must parse as a rule", text);
    }

    #[test]
    fn rule_matching_agrees_with_the_d11_model(rule in addr_spec(), target in addr_spec()) {
        let rule_text = rule.render();
        let target_text = target.render();
        let parsed_rule = AllowRule::parse(&rule_text).expect("accepted rule form");
        let parsed_target = Address::parse(&target_text).expect("accepted target form");
        prop_assert_eq!(
            parsed_rule.matches(&parsed_target),
            d11_model(&rule, &target),
            "rule {:?} vs target {:?}", rule_text, target_text
        );
        // A rule always admits its own address as a target.
        let own = Address::parse(&rule_text).unwrap();
        prop_assert!(parsed_rule.matches(&own), "rule {:?} must admit itself", rule_text);
    }

    #[test]
    fn address_near_misses_are_refused(text in address_near_miss()) {
        prop_assert!(Address::parse(&text).is_err(), "{:?} must be refused as an address", text);
        prop_assert!(AllowRule::parse(&text).is_err(), "{:?} must be refused as a rule", text);
    }

    // ---- D-2.2 / D-2.3 ----

    #[test]
    fn percent_encoded_plain_names_round_trip(
        names in prop::collection::vec(plain_name(), 1..5),
        masks in prop::collection::vec(any::<u64>(), 5),
        seps in prop::collection::vec(prop::sample::select(vec!["/", "%2F", "%2f"]), 5),
        upper in any::<bool>(),
    ) {
        let raw: String = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let sep = if i == 0 { "" } else { seps[i] };
                format!("{sep}{}", percent_encode(n, masks[i], upper))
            })
            .collect();
        let want = names.join("/");
        let decoded = decode_request_path(&raw);
        prop_assert!(decoded.is_ok(), "{:?} must decode to {:?}: {:?}", raw, want, decoded);
        let decoded = decoded.unwrap();
        prop_assert_eq!(decoded.as_str(), want.as_str());
        prop_assert_eq!(decoded.components().collect::<Vec<_>>(), names.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn strict_decoding_of_fully_encoded_bytes(bytes in prop::collection::vec(any::<u8>(), 0..24), upper in any::<bool>()) {
        let raw = encode_all_bytes(&bytes, upper);
        let want = String::from_utf8(bytes.clone()).ok();
        let got = percent_decode_strict(&raw).ok();
        prop_assert_eq!(got, want, "percent_decode_strict({:?})", raw);
    }

    #[test]
    fn invalid_escapes_are_always_refused(
        names in prop::collection::vec(plain_name(), 1..4),
        mask in any::<u64>(),
        bad in bad_escape(),
        at in any::<prop::sample::Index>(),
    ) {
        let valid: String = names
            .iter()
            .map(|n| percent_encode(n, mask, false))
            .collect::<Vec<_>>()
            .join("/");
        let raw = match &bad {
            BadEscape::AtEnd(tail) => format!("{valid}%{}", tail.map(String::from).unwrap_or_default()),
            BadEscape::NonHex(c) | BadEscape::OneHexThen(_, c) => {
                let insert = match &bad {
                    BadEscape::OneHexThen(h, _) => format!("%{h}{c}"),
                    _ => format!("%{c}"),
                };
                // Insert at any char boundary.
                let boundaries: Vec<usize> =
                    (0..=valid.len()).filter(|i| valid.is_char_boundary(*i)).collect();
                let pos = boundaries[at.index(boundaries.len())];
                format!("{}{insert}{}", &valid[..pos], &valid[pos..])
            }
        };
        let strict = percent_decode_strict(&raw);
        prop_assert!(strict.is_err(), "{:?} must be refused by percent_decode_strict: {:?}", raw, strict);
        let decoded = decode_request_path(&raw);
        prop_assert!(decoded.is_err(), "{:?} must be refused: {:?}", raw, decoded);
        prop_assert_eq!(decoded.unwrap_err().code.as_str(), "outside_root");
    }

    #[test]
    fn decoded_paths_agree_with_the_model_and_are_always_plain(
        tokens in prop::collection::vec(path_tok(), 0..10),
    ) {
        let raw = render_path(&tokens);
        let got = decode_request_path(&raw);
        let want = decode_model(&raw);
        match (&got, &want) {
            (Ok(path), Some(model)) => {
                prop_assert_eq!(path.as_str(), model.as_str(), "decode_request_path({:?})", raw);
                assert_plain_path(path.as_str())?;
            }
            (Err(refusal), None) => {
                prop_assert_eq!(refusal.code.as_str(), "outside_root", "{:?}", raw);
            }
            _ => prop_assert!(false, "decode_request_path({:?}) = {:?}, model says {:?}", raw, got, want),
        }
    }

    #[test]
    fn arbitrary_strings_decode_only_to_plain_paths(raw in any::<String>()) {
        match (decode_request_path(&raw), decode_model(&raw)) {
            (Ok(path), Some(model)) => {
                prop_assert_eq!(path.as_str(), model.as_str());
                assert_plain_path(path.as_str())?;
            }
            (Err(refusal), None) => prop_assert_eq!(refusal.code.as_str(), "outside_root"),
            (got, want) => prop_assert!(false, "{:?}: got {:?}, model {:?}", raw, got, want),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Sanity checks of the generators and models themselves
// ------------------------------------------------------------------------------------------------

#[test]
fn models_answer_the_documented_examples() {
    assert_eq!(byte_size_model("10", 1 << 20), Some(10 << 20));
    assert_eq!(byte_size_model("0", 1), None);
    assert_eq!(duration_model("15", 60), Some(900));
    assert_eq!(decode_model("a%2Fb"), Some("a/b".into()));
    assert_eq!(decode_model("%2e%2e/x"), None);
    assert_eq!(decode_model("a%zz"), None);
    let spec = |s: Option<Scheme>, port: Option<u16>| AddrSpec {
        scheme: s,
        host: HostTok::Name("h"),
        port,
        case_mask: 0,
        trailing_slash: false,
        pad_left: String::new(),
        pad_right: String::new(),
    };
    assert!(d11_model(
        &spec(None, None),
        &spec(Some(Scheme::Https), Some(9))
    ));
    assert!(d11_model(
        &spec(Some(Scheme::Https), None),
        &spec(Some(Scheme::Https), Some(443))
    ));
    assert!(!d11_model(
        &spec(Some(Scheme::Https), None),
        &spec(None, Some(443))
    ));
    assert!(d11_model(&spec(None, Some(80)), &spec(None, None)));
}
