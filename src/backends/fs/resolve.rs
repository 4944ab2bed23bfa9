//! The containment rules of D-2.5 as one algorithm over any directory tree. The in-memory
//! filesystem and the OS fallback walk both run it, so they cannot disagree with each other;
//! the conformance suite checks both against the kernel's `openat2`.
//!
//! It mirrors the kernel's `RESOLVE_BENEATH` walk step by step: `..` at the starting directory
//! and any absolute link are `OutsideRoot`, a missing name or a non-directory in the middle is
//! `NotFound`, more than 40 link hops is a loop.

use super::{FsError, FsErrorKind};
use crate::path::{NAME_MAX, PATH_MAX};
use crate::scope::Containment;
use std::collections::VecDeque;

/// The kernel's limit on symlink hops in one resolution (`MAXSYMLINKS`).
pub(super) const MAX_SYMLINK_HOPS: usize = 40;

/// What a name in a directory is.
#[derive(Debug)]
pub(super) enum Node<D, F> {
    Dir(D),
    File(F),
    Symlink(Vec<u8>),
    /// FIFO, socket or device: never opened.
    Special(&'static str),
}

/// One directory tree's primitive: look a name up in a directory without following it.
pub(super) trait Lookup {
    type Dir: Clone;
    type File;

    /// # Errors
    /// `NotFound` when absent, `Io` otherwise.
    fn lookup(&self, dir: &Self::Dir, name: &[u8]) -> Result<Node<Self::Dir, Self::File>, FsError>;
}

/// How symlinks met during a resolution are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Symlinks {
    /// Followed while they stay beneath the start (advisory, sealed, and a root's own path).
    Follow,
    /// Any symlink is `SymlinkRefused` (scoped, below the root).
    Refuse,
    /// Followed, and additionally refused when the link's text alone would climb above the
    /// start, even if the walk would stop earlier at a missing name: the launch check of D-1.9
    /// ("dangling or not").
    FollowLexicallyContained,
}

impl Symlinks {
    /// How a symlink below an export root is treated under `class` (D-2.5).
    pub(super) const fn under(class: Containment) -> Self {
        if class.follows_symlinks() {
            Symlinks::Follow
        } else {
            Symlinks::Refuse
        }
    }
}

/// Resolves `path` beneath `start`.
///
/// # Errors
/// As the kernel would answer an `openat2(start, path, O_PATH, RESOLVE_BENEATH)`, mapped to
/// kinds: `NotFound`, `OutsideRoot`, `SymlinkRefused` (under `Refuse`), `Io`.
pub(super) fn resolve<L: Lookup>(
    tree: &L,
    start: &L::Dir,
    path: &[u8],
    symlinks: Symlinks,
) -> Result<Node<L::Dir, L::File>, FsError> {
    resolve_with_names(tree, start, path, symlinks).map(|(node, _)| node)
}

/// `Filesystem::check_root` for a tree: `root`, beneath `workdir`, escapes nowhere (symlinks
/// in its own path followed while they stay lexically inside). A root that does not exist yet
/// passes: it is an empty export until created.
///
/// # Errors
/// The resolution's error for a root that escapes or cannot be checked.
pub(super) fn check_root<L: Lookup>(
    tree: &L,
    workdir: &L::Dir,
    root: &crate::scope::RootPath,
) -> Result<(), FsError> {
    match resolve(
        tree,
        workdir,
        root.relative().as_bytes(),
        Symlinks::FollowLexicallyContained,
    ) {
        Ok(_) => Ok(()),
        Err(e) if e.kind == super::FsErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A resolved node and the names of its canonical path (see [`resolve_with_names`]).
pub(super) type Resolved<D, F> = (Node<D, F>, Vec<Vec<u8>>);

/// [`resolve`], also returning the names of the node's canonical path beneath `start`: every
/// symlink followed replaced by where it led, `..` applied (what the spec calls canonicalising;
/// empty for `start` itself).
///
/// # Errors
/// As [`resolve`].
pub(super) fn resolve_with_names<L: Lookup>(
    tree: &L,
    start: &L::Dir,
    path: &[u8],
    symlinks: Symlinks,
) -> Result<Resolved<L::Dir, L::File>, FsError> {
    if path.len() > PATH_MAX {
        return Err(FsError::new(
            FsErrorKind::NotFound,
            "path too long (ENAMETOOLONG)",
        ));
    }
    let mut stack: Vec<L::Dir> = vec![start.clone()];
    // The names of the directories on `stack` past `start`, and then of the final node.
    let mut names: Vec<Vec<u8>> = Vec::new();
    let mut queue: VecDeque<Vec<u8>> = split(path);
    let mut hops = 0usize;
    // The node the last component named; `None` means "the directory on top of the stack".
    let mut current: Option<Node<L::Dir, L::File>> = None;

    while let Some(component) = queue.pop_front() {
        if let Some(node) = &current
            && !matches!(node, Node::Dir(_))
        {
            return Err(FsError::new(
                FsErrorKind::NotFound,
                "a path component is not a directory (ENOTDIR)",
            ));
        }
        current = None;
        match component.as_slice() {
            b"" | b"." => {}
            b".." => {
                if stack.len() == 1 {
                    return Err(FsError::new(
                        FsErrorKind::OutsideRoot,
                        "resolution climbs above the root (EXDEV)",
                    ));
                }
                stack.pop();
                names.pop();
            }
            name => {
                if name.len() > NAME_MAX {
                    return Err(FsError::new(
                        FsErrorKind::NotFound,
                        "a path component is too long (ENAMETOOLONG)",
                    ));
                }
                let dir = stack.last().expect("stack never empties");
                match tree.lookup(dir, name)? {
                    Node::Dir(d) => {
                        stack.push(d.clone());
                        names.push(name.to_vec());
                        current = Some(Node::Dir(d));
                    }
                    Node::Symlink(target) => {
                        hops += 1;
                        may_follow(&target, symlinks, hops, stack.len() - 1)?;
                        for part in split(&target).into_iter().rev() {
                            queue.push_front(part);
                        }
                    }
                    other => {
                        names.push(name.to_vec());
                        current = Some(other);
                    }
                }
            }
        }
    }
    Ok(match current {
        Some(node) => (node, names),
        None => (Node::Dir(stack.pop().expect("stack never empties")), names),
    })
}

/// Whether the walk may follow a symlink to `target`, met `depth` directories below the start
/// as the `hops`-th link of this resolution: the kernel's refusals, in its order.
///
/// # Errors
/// `SymlinkRefused` under [`Symlinks::Refuse`]; `NotFound` past [`MAX_SYMLINK_HOPS`] or for
/// an empty link; `OutsideRoot` for an absolute link, or under
/// [`Symlinks::FollowLexicallyContained`] for link text that climbs above the start.
fn may_follow(target: &[u8], symlinks: Symlinks, hops: usize, depth: usize) -> Result<(), FsError> {
    if symlinks == Symlinks::Refuse {
        return Err(FsError::new(
            FsErrorKind::SymlinkRefused,
            "symlink under the scoped class (ELOOP)",
        ));
    }
    if hops > MAX_SYMLINK_HOPS {
        return Err(FsError::new(
            FsErrorKind::NotFound,
            "too many levels of symbolic links (ELOOP)",
        ));
    }
    if target.first() == Some(&b'/') {
        return Err(FsError::new(
            FsErrorKind::OutsideRoot,
            "absolute symlink target (EXDEV)",
        ));
    }
    if target.is_empty() {
        return Err(FsError::new(
            FsErrorKind::NotFound,
            "empty symlink (ENOENT)",
        ));
    }
    if symlinks == Symlinks::FollowLexicallyContained && climbs_above(depth, target) {
        return Err(FsError::new(
            FsErrorKind::OutsideRoot,
            "symlink text climbs above the workdir",
        ));
    }
    Ok(())
}

/// Splits on `/`, keeping empty components so a trailing slash still demands a directory.
fn split(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|b| *b == b'/').map(<[u8]>::to_vec).collect()
}

/// Whether the link text, read from `depth` levels below the start, ever climbs above it.
fn climbs_above(depth: usize, target: &[u8]) -> bool {
    let mut depth = depth as isize;
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

/// The canonical path beneath `start` of the regular file `path` resolves to (see
/// [`RootDir::canonical_path`](super::RootDir::canonical_path)), for any backend's lookups.
///
/// # Errors
/// As [`resolve`], then as [`regular_file`]; `Io` when the canonical path is not UTF-8.
pub(super) fn canonical_path<L: Lookup>(
    tree: &L,
    start: &L::Dir,
    path: &crate::path::RelPath,
    symlinks: Symlinks,
) -> Result<crate::path::RelPath, FsError> {
    let (node, names) = resolve_with_names(tree, start, path.as_str().as_bytes(), symlinks)?;
    regular_file(node)?;
    super::rel_path_of(&names)
}

/// The file a resolution ended on, or the refusal for any other node (D-2.5, D-2.6): a
/// directory or a special file is `NotARegularFile`, a symlink left unfollowed (the scoped
/// class) `SymlinkRefused`.
///
/// # Errors
/// `NotARegularFile` or `SymlinkRefused`.
pub(super) fn regular_file<D, F>(node: Node<D, F>) -> Result<F, FsError> {
    match node {
        Node::File(f) => Ok(f),
        Node::Dir(_) => Err(FsError::new(
            FsErrorKind::NotARegularFile,
            "the target is a directory",
        )),
        Node::Special(kind) => Err(FsError::new(
            FsErrorKind::NotARegularFile,
            format!("the target is {kind}"),
        )),
        Node::Symlink(_) => Err(FsError::new(FsErrorKind::SymlinkRefused, "symlink")),
    }
}

#[cfg(test)]
mod tests {
    use super::climbs_above;

    #[test]
    fn lexical_climb() {
        assert!(climbs_above(0, b".."));
        assert!(climbs_above(0, b"a/../../x"));
        assert!(!climbs_above(1, b"../x"));
        assert!(!climbs_above(0, b"a/./b/.."));
    }
}
