//! Request-path decoding and the lexical refusals of D-2.1 to D-2.3: pure, no I/O.
//!
//! A caller never sanitises a path. Everything here either yields a [`RelPath`] whose every
//! component is a plain name, or refuses with `outside_root`; nothing is ever normalised into
//! something servable.

use crate::refusal::{Code, Refusal};
use std::fmt;

/// The longest single component the kernel accepts (`NAME_MAX`); longer is `ENAMETOOLONG`.
pub const NAME_MAX: usize = 255;
/// The longest path the kernel accepts (`PATH_MAX` less the NUL); longer is `ENAMETOOLONG`.
pub const PATH_MAX: usize = 4095;

/// A relative path whose components are all plain names: non-empty, not `.` or `..`, no `/`,
/// no NUL, valid UTF-8. Only the decoding of a request path and [`RelPath::parse_canonical`] build one.
///
/// A runtime meets it as the candidates a root's walk yields and the paths it opens:
///
/// ```
/// use resource_plane::backends::{Filesystem, MemoryFilesystem};
/// use resource_plane::scope::{Containment, RootPath};
///
/// let fs = MemoryFilesystem::new();
/// fs.add_file("out/reports/q3.md", "all green", 0);
/// let root = fs.open_root(&RootPath::parse("out").unwrap(), Containment::Advisory).unwrap();
/// let path = root.walk().unwrap().remove(0);
/// assert_eq!(path.as_str(), "reports/q3.md");
/// assert_eq!(path.components().collect::<Vec<_>>(), ["reports", "q3.md"]);
/// assert_eq!(path.file_name(), "q3.md");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath {
    joined: String,
}

impl RelPath {
    /// The components, in order.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.joined.split('/')
    }

    /// The `/`-joined form, as it appears in listings, handles and traces.
    pub fn as_str(&self) -> &str {
        &self.joined
    }

    /// The `/`-joined form, owned.
    pub fn into_string(self) -> String {
        self.joined
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.joined.rsplit('/').next().unwrap_or(&self.joined)
    }

    /// Parses an already-decoded `/`-separated path (a handle's `p`, a listing entry, a tool's
    /// `path` after decoding) with the D-2.3 lexical rules.
    ///
    /// # Errors
    /// `outside_root` for an empty or absolute path, a NUL, or an `""`, `.` or `..` component.
    pub fn parse_canonical(path: &str) -> Result<Self, Refusal> {
        if path.is_empty() {
            return Err(lexical("empty path"));
        }
        if path.starts_with('/') {
            return Err(lexical("absolute path"));
        }
        if path.contains('\0') {
            return Err(lexical("NUL byte in path"));
        }
        for component in path.split('/') {
            match component {
                "" => return Err(lexical("empty path component")),
                "." => return Err(lexical("`.` path component")),
                ".." => return Err(lexical("`..` path component")),
                _ => {}
            }
        }
        Ok(RelPath {
            joined: path.to_owned(),
        })
    }

    /// Joins a child name (one plain component) under this path.
    pub(crate) fn join(&self, name: &str) -> RelPath {
        // Sized once and copied: a listing joins one path per file.
        let mut joined = String::with_capacity(self.joined.len() + 1 + name.len());
        joined.push_str(&self.joined);
        joined.push('/');
        joined.push_str(name);
        RelPath { joined }
    }

    /// Whether a file below this directory could still have a path of at most [`PATH_MAX`]
    /// bytes (a separator and a one-byte name are the least a child adds).
    pub(crate) fn has_room_for_children(&self) -> bool {
        self.joined.len() + 2 <= PATH_MAX
    }

    /// Whether the path fits in [`PATH_MAX`] bytes, so a read can reach it.
    pub(crate) fn fits_path_max(&self) -> bool {
        self.joined.len() <= PATH_MAX
    }

    /// A one-component path from a plain name (a directory entry's name).
    pub(crate) fn from_name(name: &str) -> RelPath {
        RelPath {
            joined: name.to_owned(),
        }
    }

    /// `name` (one plain component) under `parent`, or alone without one: [`join`](Self::join)
    /// or [`from_name`](Self::from_name).
    pub(crate) fn child(parent: Option<&RelPath>, name: &str) -> RelPath {
        match parent {
            Some(parent) => parent.join(name),
            None => RelPath::from_name(name),
        }
    }

    /// Makes `slot` hold [`child`](Self::child)`(parent, name)`, in the buffer it already has:
    /// a walk names every file it finds in one buffer rather than allocating a path for each.
    pub(crate) fn set_child<'a>(
        slot: &'a mut Option<RelPath>,
        parent: Option<&RelPath>,
        name: &str,
    ) -> &'a RelPath {
        match slot {
            Some(path) => {
                path.joined.clear();
                if let Some(parent) = parent {
                    path.joined.push_str(&parent.joined);
                    path.joined.push('/');
                }
                path.joined.push_str(name);
                path
            }
            None => slot.insert(RelPath::child(parent, name)),
        }
    }

    /// Whether `name` under this path (or alone, without a parent) fits in [`PATH_MAX`] bytes:
    /// [`fits_path_max`](Self::fits_path_max) of the [`child`](Self::child), without building it.
    pub(crate) fn child_fits_path_max(parent: Option<&RelPath>, name: &str) -> bool {
        parent.map_or(0, |p| p.joined.len() + 1) + name.len() <= PATH_MAX
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.joined)
    }
}

fn lexical(why: &str) -> Refusal {
    Refusal::new(Code::OutsideRoot, format!("refused lexically: {why}"))
}

/// Cuts a raw request target at its first `?` (D-2.1): the query never selects anything.
pub fn strip_query(raw: &str) -> &str {
    raw.split_once('?').map_or(raw, |(path, _)| path)
}

/// Strictly percent-decodes `raw` (D-2.2): `%` must be followed by two hex digits; `+` stays a
/// plus; backslash is an ordinary byte.
///
/// # Errors
/// `outside_root` for an invalid escape or decoded bytes that are not UTF-8.
pub fn percent_decode_strict(raw: &str) -> Result<String, Refusal> {
    let bytes = raw.as_bytes();
    if !bytes.contains(&b'%') {
        return Ok(raw.to_owned());
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = bytes.get(i + 1).and_then(|b| hex_value(*b));
            let lo = bytes.get(i + 2).and_then(|b| hex_value(*b));
            match (hi, lo) {
                (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                _ => return Err(lexical("invalid percent escape")),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| lexical("decoded path is not UTF-8"))
}

/// Decodes every valid `%XX` escape and keeps everything else as sent, replacing invalid UTF-8:
/// the form a refused path is recorded in, so a percent-encoded token in it is still visible
/// to the trace's redaction (D-6.5) while the request itself was refused.
pub fn percent_decode_lossy(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| Some(hex_value(*bytes.get(i + 1)?)? << 4 | hex_value(*bytes.get(i + 2)?)?))
            .flatten();
        match escape {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes the `<relpath>` of `GET /resources/files/<relpath>` (query already cut) into a
/// [`RelPath`], in the order of D-2.2 and D-2.3, touching no filesystem.
///
/// # Errors
/// `outside_root` for an invalid escape, non-UTF-8, an empty or absolute path, a NUL, or an
/// `""`, `.` or `..` component (so `a//b`, `./a`, `a/`, `sub/../a`, `%2e%2e/x` are refused).
pub fn decode_request_path(raw: &str) -> Result<RelPath, Refusal> {
    let decoded = percent_decode_strict(raw)?;
    RelPath::parse_canonical(&decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(raw: &str) -> Result<String, Code> {
        decode_request_path(raw)
            .map(|p| p.as_str().to_owned())
            .map_err(|r| r.code)
    }

    #[test]
    fn plain_paths_pass() {
        assert_eq!(code("report.md"), Ok("report.md".into()));
        assert_eq!(code("a/b/c.txt"), Ok("a/b/c.txt".into()));
        assert_eq!(code("a+b"), Ok("a+b".into()));
        assert_eq!(code("a\\..\\b"), Ok("a\\..\\b".into()));
        assert_eq!(code("..."), Ok("...".into()));
        assert_eq!(code(".hidden"), Ok(".hidden".into()));
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(code("a%20b"), Ok("a b".into()));
        assert_eq!(code("a%2Fb"), Ok("a/b".into()));
        assert_eq!(code("a%2fb"), Ok("a/b".into()));
        assert_eq!(code("%C3%A9"), Ok("é".into()));
    }

    #[test]
    fn lexical_refusals_are_outside_root() {
        for raw in [
            "",
            "/etc/passwd",
            "a//b",
            "./a",
            "a/",
            "sub/../a",
            "..",
            ".",
            "%2e%2e/x",
            "%2E%2E",
            "a%2f..%2fb",
            "%2fetc",
            "a%00b",
            "a\0b",
            "%",
            "%zz",
            "%2",
            "%u002e",
            "a%2",
            "%C3",
            "%ff",
            "%c0%ae%c0%ae",
            "a/%2e",
            "a%2F",
            "%2F",
        ] {
            assert_eq!(code(raw), Err(Code::OutsideRoot), "{raw:?}");
        }
    }

    #[test]
    fn lossy_decoding_keeps_what_it_cannot_decode() {
        assert_eq!(percent_decode_lossy("mh1%2Ea.b%zz%"), "mh1.a.b%zz%");
        assert_eq!(percent_decode_lossy("%ff%41"), "\u{fffd}A");
    }

    #[test]
    fn query_is_cut_at_first_question_mark() {
        assert_eq!(strip_query("a?b?c"), "a");
        assert_eq!(strip_query("a"), "a");
        assert_eq!(strip_query("?x"), "");
    }

    #[test]
    fn canonical_helpers() {
        let p = RelPath::parse_canonical("a/b/c").unwrap();
        assert_eq!(p.file_name(), "c");
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(p.join("d").as_str(), "a/b/c/d");
    }

    /// A walk names every file in one reused buffer: each name set in it is exactly the path
    /// `join` or `from_name` builds, whatever the buffer held before (longer, shorter, nested
    /// deeper or at the root).
    #[test]
    fn a_reused_path_is_each_child_exactly() {
        let deep = RelPath::parse_canonical("reports/2024/q3").unwrap();
        let top = RelPath::parse_canonical("a").unwrap();
        let mut slot = None;
        let steps: [(Option<&RelPath>, &str, &str); 5] = [
            (Some(&deep), "summary.md", "reports/2024/q3/summary.md"),
            (None, "x", "x"),
            (Some(&top), "b", "a/b"),
            (Some(&deep), "é.txt", "reports/2024/q3/é.txt"),
            (None, "long-name-at-the-root.bin", "long-name-at-the-root.bin"),
        ];
        for (parent, name, expected) in steps {
            let built = RelPath::set_child(&mut slot, parent, name).clone();
            assert_eq!(built.as_str(), expected);
            assert_eq!(built, RelPath::child(parent, name));
            assert_eq!(built.file_name(), name);
        }
    }

    #[test]
    fn a_child_fits_path_max_exactly_when_its_joined_path_does() {
        let parent = RelPath::parse_canonical(&"d".repeat(100)).unwrap();
        for len in [1, PATH_MAX - 101, PATH_MAX - 100, PATH_MAX - 1, PATH_MAX] {
            let name = "n".repeat(len);
            let joined = RelPath::child(Some(&parent), &name);
            assert_eq!(
                RelPath::child_fits_path_max(Some(&parent), &name),
                joined.fits_path_max(),
                "a {len}-byte name"
            );
            assert_eq!(
                RelPath::child_fits_path_max(None, &name),
                RelPath::from_name(&name).fits_path_max(),
                "a {len}-byte name at the root"
            );
        }
        assert!(RelPath::child_fits_path_max(
            Some(&parent),
            &"n".repeat(PATH_MAX - 101)
        ));
        assert!(!RelPath::child_fits_path_max(
            Some(&parent),
            &"n".repeat(PATH_MAX - 100)
        ));
        assert!(RelPath::child_fits_path_max(None, &"n".repeat(PATH_MAX)));
        assert!(!RelPath::child_fits_path_max(None, &"n".repeat(PATH_MAX + 1)));
    }
}
