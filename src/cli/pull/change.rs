//! The data of the watch stream's events (D-17.3), parsed and judged as hostile input: pure,
//! no I/O.
//!
//! Two levels of refusal, as for a listing. An event whose data is not its shape (not JSON, a
//! missing or malformed `from`, `etag` or `generation`, a change that is not an object with a
//! string `path` and a known `change`) is refused whole: it cannot be applied, so the watch
//! re-lists instead. A change with a usable `path` is judged alone: a path that could name
//! something outside the mirror, a malformed size or hash, or a path changed twice in one event
//! is reported under that path and nothing is written or removed for it.

use super::etag::Etag;
use super::listing::{self, Entry, EntryPath, RawEntry, Refused};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// A `change` event's data, judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The listing the changes apply to.
    pub(crate) from: Etag,
    /// The listing they make.
    pub(crate) etag: Etag,
    /// Files added or modified: to be fetched when the local copy differs.
    pub(crate) puts: Vec<Entry>,
    /// Files removed: deleted locally only with `--delete`.
    pub(crate) removes: Vec<EntryPath>,
    /// Changes refused by their own rules: reported, nothing done for them.
    pub(crate) refused: Vec<Refused>,
}

/// Why an event's data cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EventError {
    /// Not JSON, or not the event's shape (serde's account of it).
    Shape(String),
    /// An etag field that cannot be one (its name).
    Etag(&'static str),
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::Shape(e) => write!(f, "not the event's shape: {e}"),
            EventError::Etag(field) => write!(f, "`{field}` is not an etag"),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Added,
    Modified,
    Removed,
}

#[derive(Deserialize)]
struct RawChange {
    path: String,
    change: Kind,
    #[serde(default)]
    size_bytes: Value,
    #[serde(default)]
    mtime_ms: Value,
    #[serde(default)]
    sha256: Value,
}

#[derive(Deserialize)]
struct RawBatch {
    from: String,
    etag: String,
    // Checked for its type only: a mirror keeps files, not the export's generation.
    #[allow(dead_code)]
    generation: u64,
    changes: Vec<RawChange>,
}

#[derive(Deserialize)]
struct RawTag {
    etag: String,
}

fn shape(e: serde_json::Error) -> EventError {
    EventError::Shape(e.to_string())
}

fn etag(text: &str, field: &'static str) -> Result<Etag, EventError> {
    Etag::parse(text).ok_or(EventError::Etag(field))
}

/// Parses a `change` event's data: `{"from","etag","generation","changes":[…]}`, each change
/// `{"path","change":"added"|"modified"|"removed",…}` with an added or modified file's
/// `size_bytes`, `mtime_ms` and `sha256`. Unknown keys are ignored.
///
/// # Errors
/// [`EventError`] when the data is not that shape or an etag is unusable.
pub(crate) fn parse_change(data: &str) -> Result<Batch, EventError> {
    let raw: RawBatch = serde_json::from_str(data).map_err(shape)?;
    let mut batch = Batch {
        from: etag(&raw.from, "from")?,
        etag: etag(&raw.etag, "etag")?,
        puts: Vec::new(),
        removes: Vec::new(),
        refused: Vec::new(),
    };
    let mut times: HashMap<String, usize> = HashMap::new();
    for change in &raw.changes {
        *times.entry(change.path.clone()).or_default() += 1;
    }
    for change in raw.changes {
        if times[&change.path] > 1 {
            batch.refused.push(Refused {
                path: change.path,
                why: "duplicate_path: changed more than once in one event".to_owned(),
            });
            continue;
        }
        match change.change {
            Kind::Removed => match listing::check_path(&change.path) {
                Ok(path) => batch.removes.push(path),
                Err(why) => batch.refused.push(Refused {
                    why: format!("path_refused: {why}"),
                    path: change.path,
                }),
            },
            Kind::Added | Kind::Modified => {
                let raw = RawEntry {
                    path: change.path,
                    size_bytes: change.size_bytes,
                    mtime_ms: change.mtime_ms,
                    sha256: change.sha256,
                };
                match listing::judge(raw) {
                    Ok(entry) => batch.puts.push(entry),
                    Err(refused) => batch.refused.push(refused),
                }
            }
        }
    }
    Ok(batch)
}

/// Parses the etag of a `listing` event's data (`{"etag","entry_count"}`) or a `reset`
/// event's (`{"etag"}`); other keys are ignored.
///
/// # Errors
/// [`EventError`] when the data has no usable `etag`.
pub(crate) fn parse_tag(data: &str) -> Result<Etag, EventError> {
    let raw: RawTag = serde_json::from_str(data).map_err(shape)?;
    etag(&raw.etag, "etag")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HASH: &str = "868db1c52a946cae0278871d41b60fcdef206b933946bf8668a42ac1ea443412";

    fn data(changes: Value) -> String {
        json!({"from": "\"sha256:a\"", "etag": "\"sha256:b\"", "generation": 3,
               "changes": changes})
        .to_string()
    }

    fn put(path: &str, change: &str) -> Value {
        json!({"path": path, "change": change, "size_bytes": 3, "mtime_ms": 5, "sha256": HASH})
    }

    fn refused(batch: &Batch) -> Vec<(&str, &str)> {
        batch
            .refused
            .iter()
            .map(|r| (r.path.as_str(), r.why.as_str()))
            .collect()
    }

    #[test]
    fn a_batch_of_every_kind() {
        let batch = parse_change(&data(json!([
            put("a.txt", "added"),
            put("sub/b.txt", "modified"),
            {"path": "gone.txt", "change": "removed"},
            {"path": "gone/too.txt", "change": "removed", "future": 1},
        ])))
        .unwrap();
        assert_eq!(batch.from.as_str(), "\"sha256:a\"");
        assert_eq!(batch.etag.as_str(), "\"sha256:b\"");
        let puts: Vec<_> = batch.puts.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(puts, ["a.txt", "sub/b.txt"]);
        assert_eq!(batch.puts[0].size, 3);
        assert_eq!(batch.puts[0].mtime_ms, 5);
        assert_eq!(batch.puts[0].sha256, HASH);
        let removes: Vec<_> = batch.removes.iter().map(EntryPath::as_str).collect();
        assert_eq!(removes, ["gone.txt", "gone/too.txt"]);
        assert!(batch.refused.is_empty());
        let empty = parse_change(&data(json!([]))).unwrap();
        assert!(empty.puts.is_empty() && empty.removes.is_empty());
    }

    #[test]
    fn hostile_changes_are_refused_alone_and_named() {
        let mut bad_hash = put("hash.txt", "added");
        bad_hash["sha256"] = json!("ABC");
        let batch = parse_change(&data(json!([
            put("../escape", "added"),
            put("/etc/passwd", "modified"),
            {"path": "../../gone", "change": "removed"},
            put("a/./b", "added"),
            put("twice", "added"),
            {"path": "twice", "change": "removed"},
            {"path": "size.txt", "change": "added", "mtime_ms": 1, "sha256": HASH},
            bad_hash,
            put("ok", "added"),
        ])))
        .unwrap();
        let puts: Vec<_> = batch.puts.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(puts, ["ok"]);
        assert!(batch.removes.is_empty());
        assert_eq!(
            refused(&batch),
            [
                ("../escape", "path_refused: `..` path component"),
                ("/etc/passwd", "path_refused: absolute path"),
                ("../../gone", "path_refused: `..` path component"),
                ("a/./b", "path_refused: `.` path component"),
                (
                    "twice",
                    "duplicate_path: changed more than once in one event"
                ),
                (
                    "twice",
                    "duplicate_path: changed more than once in one event"
                ),
                (
                    "size.txt",
                    "malformed_entry: size_bytes is not a whole number"
                ),
                (
                    "hash.txt",
                    "malformed_entry: sha256 is not 64 lowercase hex digits"
                ),
            ]
        );
    }

    #[test]
    fn data_that_is_not_the_shape_is_refused_whole() {
        for bad in [
            "".to_owned(),
            "{\"from\":".to_owned(),
            "[]".to_owned(),
            json!({"etag": "x", "generation": 1, "changes": []}).to_string(),
            json!({"from": "x", "etag": "y", "generation": -1, "changes": []}).to_string(),
            json!({"from": "x", "etag": "y", "generation": 1, "changes": {}}).to_string(),
            data(json!([{"path": "a", "change": "renamed"}])),
            data(json!([{"path": ["a"], "change": "added"}])),
            data(json!([{"change": "removed"}])),
            data(json!(["a"])),
        ] {
            assert!(
                matches!(parse_change(&bad), Err(EventError::Shape(_))),
                "{bad}"
            );
        }
        for (bad, field) in [
            (
                json!({"from": "", "etag": "y", "generation": 1, "changes": []}),
                "from",
            ),
            (
                json!({"from": "x", "etag": "a\u{7f}", "generation": 1, "changes": []}),
                "etag",
            ),
        ] {
            assert_eq!(parse_change(&bad.to_string()), Err(EventError::Etag(field)));
        }
    }

    #[test]
    fn listing_and_reset_data_carry_an_etag() {
        assert_eq!(
            parse_tag(&json!({"etag": "\"sha256:c\"", "entry_count": 2}).to_string())
                .unwrap()
                .as_str(),
            "\"sha256:c\""
        );
        assert!(matches!(parse_tag("{}"), Err(EventError::Shape(_))));
        assert!(matches!(parse_tag("nope"), Err(EventError::Shape(_))));
        assert_eq!(
            parse_tag(&json!({"etag": "é"}).to_string()),
            Err(EventError::Etag("etag"))
        );
    }
}
