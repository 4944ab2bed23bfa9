//! The manifest's shape, key by key: which keys each mapping reads ([`known_keys`]), and what
//! reading a mapping does with any other (a warning naming the key most likely meant, or under
//! [`strict`](super::ParseOptions::strict) a refusal).

use super::{LaunchError, ParseOptions, Res};
use serde_json::{Map, Value};

/// What reading one manifest collects on the way: its warnings, and whether an unknown key is
/// one of them or a refusal.
pub(super) struct Reader {
    pub(super) options: ParseOptions,
    pub(super) warnings: Vec<String>,
}

pub(super) struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// The mapping at `path`. Each key [`known_keys`] does not name there is a warning, naming
    /// the known key within edit distance 2 if there is one; under
    /// [`strict`](ParseOptions::strict) the first such key refuses the manifest.
    pub(super) fn of(path: &str, value: &'a Value, reader: &mut Reader) -> Res<Self> {
        let map = value
            .as_object()
            .ok_or_else(|| LaunchError::malformed(path, "a mapping"))?;
        let known = known_keys(path);
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                let full = child_path(path, key);
                let suggestion = suggest(key, known);
                if reader.options.strict {
                    return Err(LaunchError::unknown_key(&full, suggestion));
                }
                reader
                    .warnings
                    .push(format!("unknown key `{full}`{}", did_you_mean(suggestion)));
            }
        }
        Ok(Fields {
            path: path.to_owned(),
            map,
        })
    }

    /// The path of `key` in this mapping, as a message names it.
    pub(super) fn field(&self, key: &str) -> String {
        child_path(&self.path, key)
    }

    /// A present, non-null value.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A declared block. A null one (`files:` with nothing under it) is declared and empty, so
    /// its required fields are reported missing instead of the block being silently dropped.
    pub(super) fn block(&self, key: &str) -> Option<&'a Value> {
        static EMPTY: std::sync::LazyLock<Value> =
            std::sync::LazyLock::new(|| Value::Object(Map::new()));
        self.map
            .get(key)
            .map(|v| if v.is_null() { &*EMPTY } else { v })
    }
}

/// The keys a manifest reads in the mapping at `path` (D-1): any other key there is unknown,
/// a warning (D-1.1) unless the manifest is read strictly (D-15.3). The one statement of the manifest's shape, used by
/// the reader and by the YAML conversion.
pub(super) fn known_keys(path: &str) -> &'static [&'static str] {
    match path {
        "" => &["name", "exports", "capabilities", "lifecycle"],
        "exports" => &["files", "peer_files"],
        "exports.files" => &["root", "mode", "max_bytes"],
        "exports.peer_files" => &["root", "max_ttl", "max_bytes", "require_peer_proof"],
        "capabilities" => &["peer_fetch", "network"],
        "capabilities.peer_fetch" | "capabilities.network" => &["allow"],
        "lifecycle" => &["after_task"],
        _ => &[],
    }
}

/// The farthest an unknown key may be from a known one, in single-character edits, for the
/// warning to name the known key (D-1.1).
const SUGGESTION_DISTANCE: usize = 2;

/// The known key an unknown `key` most likely meant: the one at the smallest edit distance, at
/// most [`SUGGESTION_DISTANCE`]; on a tie, the first in `known` (the order of D-1.1).
pub(super) fn suggest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    known
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, _)| *distance <= SUGGESTION_DISTANCE)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// ` (did you mean `key`?)`, or nothing.
pub(super) fn did_you_mean(suggestion: Option<&str>) -> String {
    suggestion.map_or_else(String::new, |key| format!(" (did you mean `{key}`?)"))
}

/// The Levenshtein distance between `a` and `b` in characters: the fewest insertions,
/// deletions and substitutions that turn one into the other. A key is short; one row is kept.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// `key` under the mapping at `path`.
pub(super) fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_character_edits() {
        for (a, b, distance) in [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("max_bytes", "max_bytes", 0),
            ("max_byte", "max_bytes", 1),
            ("max_bytess", "max_bytes", 1),
            ("max_bites", "max_bytes", 1),
            ("mxa_bytes", "max_bytes", 2),
            ("roots", "root", 1),
            ("kitten", "sitting", 3),
            ("nmae", "name", 2),
            // Characters, not bytes: one accented letter is one edit.
            ("nàme", "name", 1),
        ] {
            assert_eq!(edit_distance(a, b), distance, "{a} / {b}");
            assert_eq!(edit_distance(b, a), distance, "{b} / {a}");
        }
    }

    #[test]
    fn the_suggestion_is_the_nearest_known_key_within_two_edits() {
        let files = known_keys("exports.files");
        assert_eq!(suggest("max_byte", files), Some("max_bytes"));
        assert_eq!(suggest("maxbytes", files), Some("max_bytes"));
        assert_eq!(suggest("mod", files), Some("mode"));
        assert_eq!(suggest("Root", files), Some("root"));
        // Three edits away, or nothing like any key: no suggestion.
        assert_eq!(suggest("max_b", files), None);
        assert_eq!(suggest("colour", files), None);
        assert_eq!(suggest("", files), None);
        // The nearest wins over an earlier key that is farther: `rode` is 2 from `root`, 1
        // from `mode`.
        assert_eq!(edit_distance("rode", "root"), 2);
        assert_eq!(suggest("rode", files), Some("mode"));
        // A tie goes to the first key of the level: `roe` is 2 from `root` and 2 from `mode`.
        assert_eq!(edit_distance("roe", "root"), 2);
        assert_eq!(edit_distance("roe", "mode"), 2);
        assert_eq!(suggest("roe", files), Some("root"));
        // Keys of another level are never suggested.
        assert_eq!(suggest("max_ttl", known_keys("exports.files")), None);
        assert_eq!(
            suggest("max_tll", known_keys("exports.peer_files")),
            Some("max_ttl")
        );
        assert_eq!(
            suggest("require_peer_prof", known_keys("exports.peer_files")),
            Some("require_peer_proof")
        );
    }
}
