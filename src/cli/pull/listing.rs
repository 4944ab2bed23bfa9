//! The listing a pull mirrors (D-16), parsed and judged as hostile input: pure, no I/O.
//!
//! Two levels of refusal. A document that is not the listing's shape (not JSON, not an
//! object, no `entries` array, an entry that is not an object or has no string `path`, a
//! `max_bytes` that is not a whole number) is refused whole: nothing in it can be trusted or
//! even named, and the pull stops with exit status 2. An entry with a string `path` is judged
//! alone: a path that could name something outside the mirror, a malformed size or hash, a
//! path listed twice, or a file that another entry needs as a directory goes to the run's
//! `failed` list under that path, and nothing is written for it.

use serde::Deserialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// The most bytes of listing a pull reads: 256 MiB, about 1.5 million entries. A listing
/// declared or streamed longer is refused whole, so a hostile server cannot make the pull hold
/// more than this (and what parsing it costs).
pub(crate) const LISTING_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// The longest single name a Linux filesystem takes (`NAME_MAX`); a longer one could never be
/// written locally.
const NAME_MAX: usize = 255;

/// A listed path whose every component is a plain name: non-empty, not `.` or `..`, at most
/// [`NAME_MAX`] bytes, with no `/`, NUL or other path separator of the local system. Only
/// [`check_path`] builds one, so a value of this type can be opened component by component
/// beneath the mirror directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct EntryPath(String);

impl EntryPath {
    /// The `/`-joined form, as listed.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The components, in order; never empty.
    pub(crate) fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl fmt::Display for EntryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `c` separates path components on this system although it is not the listing's
/// `/`. A backslash is an ordinary character in a Linux or other Unix file name, so a name
/// holding one lands as it is; on a system where a backslash separates paths (Windows), the
/// name would reach outside its component and is refused.
fn is_local_separator(c: char) -> bool {
    c != '/' && std::path::is_separator(c)
}

/// Why a listed path is refused: the text after `path_refused: ` in the run's `failed` list.
///
/// # Errors
/// The first rule `path` breaks, checked in this order: empty, absolute, NUL, a path separator
/// of the local system other than `/` (none on Unix; the backslash on Windows), an empty, `.`
/// or `..` component, a component longer than 255 bytes.
pub(crate) fn check_path(path: &str) -> Result<EntryPath, &'static str> {
    if path.is_empty() {
        return Err("empty path");
    }
    if path.starts_with('/') {
        return Err("absolute path");
    }
    if path.contains('\0') {
        return Err("NUL byte in path");
    }
    if path.chars().any(is_local_separator) {
        return Err("a path separator of this system in a name");
    }
    for component in path.split('/') {
        match component {
            "" => return Err("empty path component"),
            "." => return Err("`.` path component"),
            ".." => return Err("`..` path component"),
            name if name.len() > NAME_MAX => return Err("a path component over 255 bytes"),
            _ => {}
        }
    }
    Ok(EntryPath(path.to_owned()))
}

/// One entry the pull may mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Where the file goes beneath the mirror directory.
    pub(crate) path: EntryPath,
    /// `size_bytes`: the bytes a read must bring.
    pub(crate) size: u64,
    /// `mtime_ms`, given to the local copy when the read carries no `x-murmur-mtime-ms`.
    pub(crate) mtime_ms: i64,
    /// `sha256`: 64 lowercase hex digits.
    pub(crate) sha256: String,
}

/// An entry refused by the listing's own rules: reported, nothing written for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The path as listed (it may be anything a JSON string can hold).
    pub(crate) path: String,
    /// `<code>: <text>`.
    pub(crate) why: String,
}

/// A judged listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listing {
    /// The export's `max_bytes`, when the listing states it: a larger file is never served.
    pub(crate) max_bytes: Option<u64>,
    /// How many entries the listing has, refused ones included.
    pub(crate) listed: usize,
    /// The entries to mirror, in listing order.
    pub(crate) entries: Vec<Entry>,
    /// The refused entries, in listing order.
    pub(crate) refused: Vec<Refused>,
    /// Every path string the listing names, refused or not: `--delete` removes only files
    /// named by none of them.
    pub(crate) names: HashSet<String>,
}

/// A document that is not a listing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListingError(pub(crate) String);

impl fmt::Display for ListingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The document's shape. Unknown keys are ignored (the listing may grow fields); a key given
/// twice is refused by serde.
#[derive(Deserialize)]
struct RawListing {
    entries: Vec<RawEntry>,
    #[serde(default)]
    max_bytes: Option<u64>,
}

/// An entry's shape (a listing's, or an added or modified file of a watch event's): only
/// `path` is typed here, so that an entry with a usable path and a bad field is refused alone,
/// by that path.
#[derive(Deserialize)]
pub(crate) struct RawEntry {
    pub(crate) path: String,
    #[serde(default)]
    pub(crate) size_bytes: Value,
    #[serde(default)]
    pub(crate) mtime_ms: Value,
    #[serde(default)]
    pub(crate) sha256: Value,
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Judges one entry's fields other than collisions.
///
/// # Errors
/// [`Refused`] by the path rules of [`check_path`] (`path_refused`), then by the field types
/// (`malformed_entry`).
pub(crate) fn judge(raw: RawEntry) -> Result<Entry, Refused> {
    let refuse = |code: &str, text: &str| Refused {
        path: raw.path.clone(),
        why: format!("{code}: {text}"),
    };
    let path = check_path(&raw.path).map_err(|why| refuse("path_refused", why))?;
    let size = raw
        .size_bytes
        .as_u64()
        .ok_or_else(|| refuse("malformed_entry", "size_bytes is not a whole number"))?;
    let mtime_ms = raw
        .mtime_ms
        .as_i64()
        .ok_or_else(|| refuse("malformed_entry", "mtime_ms is not a whole number"))?;
    let sha256 = raw
        .sha256
        .as_str()
        .filter(|hash| is_sha256_hex(hash))
        .ok_or_else(|| refuse("malformed_entry", "sha256 is not 64 lowercase hex digits"))?
        .to_owned();
    Ok(Entry {
        path,
        size,
        mtime_ms,
        sha256,
    })
}

/// Parses and judges a listing document (`GET /resources/files`, spec §Operator plane).
///
/// Per entry, in this order: the path rules of [`check_path`] (`path_refused`), the field
/// types (`malformed_entry`), then, across entries, a path listed more than once
/// (`duplicate_path`, every copy refused) and a path that is both a file and another entry's
/// directory (`path_collision`, both refused). The outcome does not depend on entry order.
///
/// # Errors
/// [`ListingError`] when `bytes` is not JSON or not the listing's shape.
pub(crate) fn parse(bytes: &[u8]) -> Result<Listing, ListingError> {
    let raw: RawListing = serde_json::from_slice(bytes).map_err(|e| {
        let what = if e.is_data() {
            "not the listing's shape"
        } else {
            "not JSON"
        };
        ListingError(format!("{what}: {e}"))
    })?;
    let listed = raw.entries.len();
    let names: HashSet<String> = raw.entries.iter().map(|e| e.path.clone()).collect();
    let mut judged: Vec<Result<Entry, Refused>> = raw.entries.into_iter().map(judge).collect();

    // Collisions among the well-formed paths.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut directories: HashSet<&str> = HashSet::new();
    for entry in judged.iter().flatten() {
        let path = entry.path.as_str();
        *seen.entry(path).or_default() += 1;
        directories.extend(path.match_indices('/').map(|(at, _)| &path[..at]));
    }
    let verdicts: Vec<Option<&'static str>> = judged
        .iter()
        .map(|judged| {
            let path = judged.as_ref().ok()?.path.as_str();
            if seen.get(path).copied().unwrap_or(0) > 1 {
                Some("duplicate_path: listed more than once")
            } else if directories.contains(path) {
                Some("path_collision: another entry lies beneath it, so it would be a directory")
            } else if path
                .match_indices('/')
                .any(|(at, _)| seen.contains_key(&path[..at]))
            {
                Some("path_collision: one of its parents is listed as a file")
            } else {
                None
            }
        })
        .collect();
    for (slot, verdict) in judged.iter_mut().zip(verdicts) {
        if let (Some(why), Ok(entry)) = (verdict, &*slot) {
            *slot = Err(Refused {
                path: entry.path.as_str().to_owned(),
                why: why.to_owned(),
            });
        }
    }

    let (mut entries, mut refused) = (Vec::new(), Vec::new());
    for judged in judged {
        match judged {
            Ok(entry) => entries.push(entry),
            Err(r) => refused.push(r),
        }
    }
    Ok(Listing {
        max_bytes: raw.max_bytes,
        listed,
        entries,
        refused,
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HASH: &str = "868db1c52a946cae0278871d41b60fcdef206b933946bf8668a42ac1ea443412";

    fn entry(path: &str) -> Value {
        json!({"path": path, "size_bytes": 3, "mtime_ms": 1, "sha256": HASH})
    }

    fn listing(entries: Vec<Value>) -> Listing {
        let document = json!({
            "root": "out/", "mode": "read-only", "max_bytes": 10,
            "generation": 0, "containment_achieved": "sealed", "entries": entries,
        });
        parse(document.to_string().as_bytes()).expect("a listing")
    }

    fn refused(listing: &Listing) -> Vec<(String, String)> {
        listing
            .refused
            .iter()
            .map(|r| (r.path.clone(), r.why.clone()))
            .collect()
    }

    fn accepted(listing: &Listing) -> Vec<&str> {
        listing.entries.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn plain_paths_pass() {
        for path in [
            "a",
            "report.md",
            "a/b/c.txt",
            ".hidden",
            "...",
            "..a",
            "a..",
            "sp ace/é?#%.txt",
            "new\nline",
            &"n".repeat(255),
        ] {
            assert_eq!(
                check_path(path).map(|p| p.as_str().to_owned()),
                Ok(path.to_owned())
            );
        }
        let path = check_path("a/b/c").unwrap();
        assert_eq!(path.components().collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    /// A backslash is an ordinary character of a Unix name: `back\slash.txt` is one file in
    /// the mirror's root, and `..\x` one name beginning with two dots, never a parent.
    #[cfg(unix)]
    #[test]
    fn backslashes_are_ordinary_characters_on_unix() {
        for (path, components) in [
            ("back\\slash.txt", vec!["back\\slash.txt"]),
            ("..\\x", vec!["..\\x"]),
            ("C:\\x", vec!["C:\\x"]),
            ("a\\/b\\", vec!["a\\", "b\\"]),
            ("\\", vec!["\\"]),
        ] {
            let checked = check_path(path).unwrap_or_else(|why| panic!("{path:?}: {why}"));
            assert_eq!(checked.components().collect::<Vec<_>>(), components);
        }
    }

    /// Where a backslash separates paths, a name holding one would escape its component.
    #[cfg(windows)]
    #[test]
    fn backslashes_are_refused_where_they_separate_paths() {
        for path in ["a\\b", "..\\x", "C:\\x"] {
            assert_eq!(
                check_path(path),
                Err("a path separator of this system in a name")
            );
        }
    }

    #[test]
    fn hostile_paths_are_refused_with_their_rule() {
        for (path, why) in [
            ("", "empty path"),
            ("/etc/passwd", "absolute path"),
            ("/", "absolute path"),
            ("a\0b", "NUL byte in path"),
            ("a//b", "empty path component"),
            ("a/", "empty path component"),
            ("./a", "`.` path component"),
            ("a/./b", "`.` path component"),
            (".", "`.` path component"),
            ("..", "`..` path component"),
            ("../x", "`..` path component"),
            ("a/../../x", "`..` path component"),
            (&"n".repeat(256), "a path component over 255 bytes"),
        ] {
            assert_eq!(check_path(path), Err(why), "{path:?}");
        }
    }

    #[test]
    fn a_good_listing_is_read_whole() {
        let l = listing(vec![entry("a.txt"), entry("sub/b.txt")]);
        assert_eq!(l.listed, 2);
        assert_eq!(l.max_bytes, Some(10));
        assert_eq!(accepted(&l), ["a.txt", "sub/b.txt"]);
        assert_eq!(
            l.entries[1],
            Entry {
                path: check_path("sub/b.txt").unwrap(),
                size: 3,
                mtime_ms: 1,
                sha256: HASH.into(),
            }
        );
        assert!(l.refused.is_empty());
    }

    #[test]
    fn hostile_entries_are_refused_alone_and_named() {
        let l = listing(vec![
            entry("../x"),
            entry("/etc/passwd"),
            entry("a//b"),
            entry("a\0b"),
            entry(""),
            entry("ok.txt"),
        ]);
        assert_eq!(l.listed, 6);
        assert_eq!(accepted(&l), ["ok.txt"]);
        assert_eq!(
            refused(&l),
            [
                ("../x", "path_refused: `..` path component"),
                ("/etc/passwd", "path_refused: absolute path"),
                ("a//b", "path_refused: empty path component"),
                ("a\0b", "path_refused: NUL byte in path"),
                ("", "path_refused: empty path"),
            ]
            .map(|(p, w)| (p.to_owned(), w.to_owned()))
        );
        assert!(l.names.contains("../x") && l.names.contains("ok.txt"));
    }

    #[test]
    fn malformed_fields_refuse_their_entry() {
        let bad = |key: &str, value: Value| {
            let mut e = entry("f");
            e[key] = value;
            e
        };
        for (e, why) in [
            (
                bad("size_bytes", json!(-1)),
                "size_bytes is not a whole number",
            ),
            (
                bad("size_bytes", json!("3")),
                "size_bytes is not a whole number",
            ),
            (
                bad("size_bytes", json!(1.5)),
                "size_bytes is not a whole number",
            ),
            (
                bad("mtime_ms", json!(null)),
                "mtime_ms is not a whole number",
            ),
            (
                bad("sha256", json!(HASH.to_uppercase())),
                "sha256 is not 64 lowercase hex digits",
            ),
            (
                bad("sha256", json!(&HASH[1..])),
                "sha256 is not 64 lowercase hex digits",
            ),
            (
                bad("sha256", json!(format!("{}g", &HASH[1..]))),
                "sha256 is not 64 lowercase hex digits",
            ),
            (
                bad("sha256", json!(7)),
                "sha256 is not 64 lowercase hex digits",
            ),
            (json!({"path": "f"}), "size_bytes is not a whole number"),
        ] {
            let l = listing(vec![e.clone(), entry("g")]);
            assert_eq!(accepted(&l), ["g"], "{e}");
            assert_eq!(
                refused(&l),
                [("f".to_owned(), format!("malformed_entry: {why}"))],
                "{e}"
            );
        }
    }

    #[test]
    fn duplicates_and_collisions_refuse_every_party_in_any_order() {
        let entries = ["dup", "c", "c/d", "x/y", "x/y/z", "dup", "fine/leaf"].map(entry);
        let forwards = listing(entries.to_vec());
        let backwards = listing(entries.into_iter().rev().collect());
        for l in [&forwards, &backwards] {
            assert_eq!(accepted(l), ["fine/leaf"]);
            let mut got = refused(l);
            got.sort();
            assert_eq!(
                got,
                [
                    (
                        "c",
                        "path_collision: another entry lies beneath it, so it would be a directory"
                    ),
                    (
                        "c/d",
                        "path_collision: one of its parents is listed as a file"
                    ),
                    ("dup", "duplicate_path: listed more than once"),
                    ("dup", "duplicate_path: listed more than once"),
                    (
                        "x/y",
                        "path_collision: another entry lies beneath it, so it would be a directory"
                    ),
                    (
                        "x/y/z",
                        "path_collision: one of its parents is listed as a file"
                    ),
                ]
                .map(|(p, w)| (p.to_owned(), w.to_owned()))
            );
        }
    }

    #[test]
    fn a_refused_path_collides_with_nothing() {
        // `a/../b` is refused lexically; `a` stays a plain file.
        let l = listing(vec![entry("a"), entry("a/../b")]);
        assert_eq!(accepted(&l), ["a"]);
    }

    #[test]
    fn documents_that_are_not_listings_are_refused_whole() {
        for (document, what) in [
            ("", "not JSON"),
            ("<html>", "not JSON"),
            ("{\"entries\": [", "not JSON"),
            ("[]", "not the listing's shape"),
            ("{}", "not the listing's shape"),
            ("{\"entries\": \"a\"}", "not the listing's shape"),
            ("{\"entries\": null}", "not the listing's shape"),
            ("{\"entries\": [1]}", "not the listing's shape"),
            ("{\"entries\": [{}]}", "not the listing's shape"),
            ("{\"entries\": [{\"path\": 7}]}", "not the listing's shape"),
            (
                "{\"entries\": [{\"path\": \"a\", \"path\": \"b\"}]}",
                "not the listing's shape",
            ),
            (
                "{\"entries\": [], \"max_bytes\": \"10Mi\"}",
                "not the listing's shape",
            ),
            (
                "{\"entries\": [], \"max_bytes\": -1}",
                "not the listing's shape",
            ),
            ("{\"entries\": [{\"path\": \"\\ud800\"}]}", "not JSON"),
        ] {
            let error = parse(document.as_bytes()).expect_err(document);
            assert!(error.0.starts_with(what), "{document}: {error}");
        }
    }

    #[test]
    fn unknown_keys_and_a_missing_max_bytes_are_accepted() {
        let document = json!({"entries": [{"path": "a", "size_bytes": 0, "mtime_ms": -5,
            "sha256": HASH, "extra": [1]}], "future": true});
        let l = parse(document.to_string().as_bytes()).expect("a listing");
        assert_eq!(l.max_bytes, None);
        assert_eq!(l.entries[0].mtime_ms, -5);
    }
}
