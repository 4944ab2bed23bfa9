//! What a watcher reports: one path's change, a batch of them from one listing etag to the
//! next, and the difference of two listings that makes the batch (D-17.3).

use crate::planes::ListingEntry;
use crate::planes::listing::{Listing, RawEntry};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What happened to a path between two listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Listed now, not before.
    Added,
    /// Listed before and now, with another size, mtime or hash.
    Modified,
    /// Listed before, not now.
    Removed,
}

/// A file as a listing entry describes it, without its path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileState {
    /// The bytes hashed.
    pub size_bytes: u64,
    /// Modification time, Unix milliseconds.
    pub mtime_ms: i64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

/// One path's change: `{"path","change","size_bytes","mtime_ms","sha256"}`, a removal with
/// only `path` and `change` (D-17.3).
///
/// ```
/// use resource_plane::planes::watch::{Change, ChangeKind, FileState};
///
/// let added = Change {
///     path: "report.md".into(),
///     change: ChangeKind::Added,
///     file: Some(FileState { size_bytes: 5, mtime_ms: 7, sha256: "ab".repeat(32) }),
/// };
/// let json = serde_json::to_string(&added).unwrap();
/// assert!(json.starts_with(r#"{"path":"report.md","change":"added","size_bytes":5,"mtime_ms":7,"#));
/// let removed = Change { path: "old.md".into(), change: ChangeKind::Removed, file: None };
/// assert_eq!(serde_json::to_string(&removed).unwrap(), r#"{"path":"old.md","change":"removed"}"#);
/// assert_eq!(serde_json::from_str::<Change>(&json).unwrap(), added);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The path, relative to the export root.
    pub path: String,
    /// What happened to it.
    pub change: ChangeKind,
    /// The file now: present for an addition or a modification, absent for a removal.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileState>,
}

/// Every change from the listing whose etag is `from` to the one whose etag is `etag`, sorted
/// by path: applying them to the first listing ([`apply_to`](Self::apply_to)) gives exactly
/// the second, entries and generation. A generation step alone is a batch with no changes.
///
/// ```
/// use resource_plane::planes::ListingEntry;
/// use resource_plane::planes::watch::{Change, ChangeBatch, ChangeKind, FileState};
///
/// let entry = |path: &str, size| ListingEntry {
///     path: path.into(), size_bytes: size, mtime_ms: 1, sha256: "00".repeat(32),
/// };
/// let mut entries = vec![entry("a.md", 1), entry("b.md", 2)];
/// let batch = ChangeBatch {
///     from: "sha256:aaaa".into(),
///     etag: "sha256:bbbb".into(),
///     generation: 1,
///     changes: vec![
///         Change { path: "a.md".into(), change: ChangeKind::Removed, file: None },
///         Change {
///             path: "c.md".into(),
///             change: ChangeKind::Added,
///             file: Some(FileState { size_bytes: 3, mtime_ms: 1, sha256: "00".repeat(32) }),
///         },
///     ],
/// };
/// batch.apply_to(&mut entries).unwrap();
/// assert_eq!(entries, vec![entry("b.md", 2), entry("c.md", 3)]);
/// // The same batch again does not apply: `a.md` is no longer there to remove.
/// assert_eq!(batch.apply_to(&mut entries).unwrap_err().path, "a.md");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeBatch {
    /// The etag (`sha256:<hex>`, unquoted) of the listing before.
    pub from: String,
    /// The etag of the listing after.
    pub etag: String,
    /// The generation the listing after carries.
    pub generation: u64,
    /// The changes, sorted by path (byte order, as a listing is).
    pub changes: Vec<Change>,
}

/// A batch that does not fit the entries it was applied to: the client's listing is not the
/// one the batch starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyError {
    /// The first path that did not fit.
    pub path: String,
    /// Why.
    pub reason: &'static str,
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "change to {:?} does not apply: {}",
            self.path, self.reason
        )
    }
}

impl std::error::Error for ApplyError {}

impl ChangeBatch {
    /// Applies the changes to `entries`, sorted by path as a listing is, keeping them sorted.
    /// The generation is the caller's to take from [`generation`](Self::generation).
    ///
    /// # Errors
    /// [`ApplyError`] for an addition of a path already there, or a modification or removal
    /// of one that is not; the entries changed before it stay changed.
    pub fn apply_to(&self, entries: &mut Vec<ListingEntry>) -> Result<(), ApplyError> {
        for change in &self.changes {
            let at = entries.binary_search_by(|e| e.path.as_bytes().cmp(change.path.as_bytes()));
            let refuse = |reason| ApplyError {
                path: change.path.clone(),
                reason,
            };
            let entry = |file: &Option<FileState>| {
                file.as_ref()
                    .map(|file| ListingEntry {
                        path: change.path.clone(),
                        size_bytes: file.size_bytes,
                        mtime_ms: file.mtime_ms,
                        sha256: file.sha256.clone(),
                    })
                    .ok_or_else(|| refuse("an addition or modification without its file"))
            };
            match (change.change, at) {
                (ChangeKind::Added, Err(at)) => entries.insert(at, entry(&change.file)?),
                (ChangeKind::Added, Ok(_)) => return Err(refuse("added, but already listed")),
                (ChangeKind::Modified, Ok(at)) => entries[at] = entry(&change.file)?,
                (ChangeKind::Removed, Ok(at)) => {
                    entries.remove(at);
                }
                (ChangeKind::Modified | ChangeKind::Removed, Err(_)) => {
                    return Err(refuse("modified or removed, but not listed"));
                }
            }
        }
        Ok(())
    }
}

/// The changes from `old` to `new`, sorted by path: one merge of the two sorted listings,
/// allocating only for the paths that changed.
pub(crate) fn diff(old: &Listing, new: &Listing) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut old = old.raw_entries().peekable();
    let mut new = new.raw_entries().peekable();
    let state = |e: &RawEntry<'_>| {
        Some(FileState {
            size_bytes: e.size,
            mtime_ms: e.mtime_ms,
            sha256: crate::hex::encode(e.sha256),
        })
    };
    loop {
        let order = match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(o), Some(n)) => o.path.as_bytes().cmp(n.path.as_bytes()),
        };
        match order {
            std::cmp::Ordering::Less => {
                let gone = old.next().expect("peeked");
                changes.push(Change {
                    path: gone.path.to_owned(),
                    change: ChangeKind::Removed,
                    file: None,
                });
            }
            std::cmp::Ordering::Greater => {
                let came = new.next().expect("peeked");
                changes.push(Change {
                    path: came.path.to_owned(),
                    change: ChangeKind::Added,
                    file: state(&came),
                });
            }
            std::cmp::Ordering::Equal => {
                let (was, now) = (old.next().expect("peeked"), new.next().expect("peeked"));
                if was != now {
                    changes.push(Change {
                        path: now.path.to_owned(),
                        change: ChangeKind::Modified,
                        file: state(&now),
                    });
                }
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(path: &str, size: u64, byte: u8) -> ListingEntry {
        ListingEntry {
            path: path.into(),
            size_bytes: size,
            mtime_ms: i64::from(byte),
            sha256: crate::hex::encode(&[byte; 32]),
        }
    }

    fn entries() -> impl Strategy<Value = Vec<ListingEntry>> {
        prop::collection::btree_map("[ab/é]{1,4}", (0u64..3, 0u8..3), 0..12).prop_map(|m| {
            m.into_iter()
                .map(|(path, (size, byte))| entry(&path, size, byte))
                .collect()
        })
    }

    proptest! {
        /// The diff of any two listings, applied to the first, gives the second; it names
        /// each path at most once, in order, and nothing when they are equal.
        #[test]
        fn a_diff_applied_to_the_old_listing_gives_the_new(old in entries(), new in entries()) {
            let (a, b) = (Listing::from_entries(old), Listing::from_entries(new));
            let changes = diff(&a, &b);
            let paths: Vec<&[u8]> = changes.iter().map(|c| c.path.as_bytes()).collect();
            prop_assert!(paths.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
            let batch = ChangeBatch {
                from: String::new(),
                etag: String::new(),
                generation: 0,
                changes,
            };
            let mut applied: Vec<ListingEntry> = a.iter().collect();
            batch.apply_to(&mut applied).unwrap();
            prop_assert_eq!(applied, b.iter().collect::<Vec<_>>());
            prop_assert!(diff(&b, &b).is_empty());
        }
    }

    #[test]
    fn each_kind_of_change_is_named() {
        let a = Listing::from_entries(vec![
            entry("gone", 1, 1),
            entry("same", 1, 1),
            entry("x", 1, 1),
        ]);
        let b = Listing::from_entries(vec![
            entry("new", 2, 2),
            entry("same", 1, 1),
            entry("x", 1, 2),
        ]);
        let kinds: Vec<(String, ChangeKind)> = diff(&a, &b)
            .into_iter()
            .map(|c| (c.path, c.change))
            .collect();
        assert_eq!(
            kinds,
            [
                ("gone".to_owned(), ChangeKind::Removed),
                ("new".to_owned(), ChangeKind::Added),
                ("x".to_owned(), ChangeKind::Modified),
            ]
        );
    }
}
