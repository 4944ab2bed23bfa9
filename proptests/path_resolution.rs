#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! Property tests: path resolution (D-2) against an independent model.
//!
//! Small export trees (at most 8 nodes) are generated from tokens: regular files holding
//! `IN:<path>`, directories, FIFOs, and symlinks (relative, with `.`/`..`/trailing `/`, staying
//! in or climbing out of the root, dangling, looping; absolute, into the root or at the secret).
//! Beside the root, in the workdir, lies `secret.txt` holding `SENTINEL-OUTSIDE`; the root is
//! mostly a plain directory `out/` or a symlink `out -> data` (D-2.5: links in the root's own
//! path are followed in every class while they stay in the workdir), and sometimes missing, a
//! dangling link or a regular file (every walk then answers `not_found`).
//!
//! Request paths are generated from tokens too: names of the tree (plain or fully
//! percent-encoded), `.`, `..`, empty components, `%2e`, `%2e%2e`, `%2f` separators, `%00`,
//! invalid escapes (`%zz`, `%`, `%2`), a leading `/` and a query.
//!
//! The model (written here from the text of D-2, not from the crate) percent-decodes strictly,
//! refuses lexically with `outside_root`, then walks the model tree with the D-2.5 symlink table.
//! Properties, for every tree, path and class (advisory, scoped, sealed):
//! * the router of a capsule over [`MemoryFilesystem`] answers the model's status and code, and a
//!   200's body is exactly the file the model resolved to, never `SENTINEL-OUTSIDE`;
//! * the same tree on disk, served by [`OsFilesystem::open`] (openat2) and by
//!   [`OsFilesystem::open_with_fallback_walk`], answers exactly as memory does (fewer cases:
//!   they create real files).
//!
//! Case count: `RP_PROPTEST_CASES` (default 64; the OS property runs a quarter of that).

mod common;

use http::Method;
use proptest::prelude::*;
use resource_plane::backends::{Filesystem, MemoryFilesystem, OsFilesystem};
use resource_plane::backends::{ManualClock, RecordingTraceSink};
use resource_plane::scope::Containment;
use resource_plane::{Backends, Capsule, Manifest};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

// ------------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------------

const SENTINEL: &str = "SENTINEL-OUTSIDE";
/// The absolute workdir a memory-only world pretends to live at (absolute links name it).
const FAKE_WORKDIR: &str = "/srv/capsule/workdir";
/// Names nodes of the tree may have (`%41` is literal on disk: a request names it as `%2541`).
const NAMES: [&str; 6] = ["a", "b", "c", "d", "%41", "é"];
/// Names a symlink's text may use: the tree's, the workdir's own entries, and missing ones.
const LINK_NAMES: [&str; 11] = [
    "a",
    "b",
    "c",
    "d",
    "%41",
    "é",
    "secret.txt",
    "out",
    "data",
    "zz",
    "A",
];
/// Names a request may use (`%41` written raw decodes to `A`).
const REQUEST_NAMES: [&str; 8] = ["a", "b", "c", "d", "%41", "é", "secret.txt", "zz"];
/// The kernel's symlink budget (`MAXSYMLINKS`), which D-2.5 adopts.
const MAX_HOPS: usize = 40;
const MAX_NODES: usize = 8;

// ------------------------------------------------------------------------------------------------
// Tree tokens
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum LinkComp {
    Name(usize),
    Dot,
    DotDot,
    /// An empty component: `a//b`, or a leading `/` (an absolute text) when first.
    Empty,
}

#[derive(Debug, Clone)]
enum LinkSpec {
    /// Components joined by `/` (`.` when there are none), optionally with a trailing `/`.
    Relative {
        comps: Vec<LinkComp>,
        trailing_slash: bool,
    },
    /// `<workdir>/out/<names>`: an absolute path that does name something inside the root.
    AbsoluteIntoRoot(Vec<usize>),
    /// `<workdir>/secret.txt`.
    AbsoluteSecret,
    /// A relative path to an entry created earlier (a regular file when there is one): by the
    /// common prefix, or (`via_root`) by
    /// climbing to the root first. Never above the root.
    ToEntry {
        at: prop::sample::Index,
        via_root: bool,
    },
}

#[derive(Debug, Clone)]
enum KindSpec {
    File,
    Dir,
    Fifo,
    Link(LinkSpec),
}

#[derive(Debug, Clone)]
struct NodeSpec {
    /// Which directory created so far (the root included) holds this node.
    parent: prop::sample::Index,
    name: usize,
    kind: KindSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootLayout {
    /// `out/` is a directory.
    Plain,
    /// `out -> data`, the tree lives in `data/`.
    Linked,
    /// No `out` at all: every walk is `not_found` (lexical refusals still come first).
    Missing,
    /// `out -> nothere`: accepted at launch (D-1.9), then `not_found`.
    DanglingLink,
    /// `out` is a regular file: `not_found`.
    IsFile,
}

fn link_comp() -> impl Strategy<Value = LinkComp> {
    prop_oneof![
        6 => (0..NAMES.len()).prop_map(LinkComp::Name),
        1 => (NAMES.len()..LINK_NAMES.len()).prop_map(LinkComp::Name),
        1 => Just(LinkComp::Dot),
        2 => Just(LinkComp::DotDot),
        1 => Just(LinkComp::Empty),
    ]
}

fn link_spec() -> impl Strategy<Value = LinkSpec> {
    prop_oneof![
        8 => (prop::collection::vec(link_comp(), 0..4), prop::bool::weighted(0.15))
            .prop_map(|(comps, trailing_slash)| LinkSpec::Relative { comps, trailing_slash }),
        1 => prop::collection::vec(0..NAMES.len(), 0..3).prop_map(LinkSpec::AbsoluteIntoRoot),
        1 => Just(LinkSpec::AbsoluteSecret),
        4 => (any::<prop::sample::Index>(), any::<bool>())
            .prop_map(|(at, via_root)| LinkSpec::ToEntry { at, via_root }),
    ]
}

fn kind_spec() -> impl Strategy<Value = KindSpec> {
    prop_oneof![
        3 => Just(KindSpec::File),
        3 => Just(KindSpec::Dir),
        1 => Just(KindSpec::Fifo),
        4 => link_spec().prop_map(KindSpec::Link),
    ]
}

fn tree_spec() -> impl Strategy<Value = (Vec<NodeSpec>, RootLayout)> {
    (
        prop::collection::vec(
            (any::<prop::sample::Index>(), 0..NAMES.len(), kind_spec())
                .prop_map(|(parent, name, kind)| NodeSpec { parent, name, kind }),
            0..=MAX_NODES,
        ),
        prop_oneof![
            12 => Just(RootLayout::Plain),
            4 => Just(RootLayout::Linked),
            1 => Just(RootLayout::Missing),
            1 => Just(RootLayout::DanglingLink),
            1 => Just(RootLayout::IsFile),
        ],
    )
}

// ------------------------------------------------------------------------------------------------
// Concrete trees
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum LinkText {
    Relative(String),
    /// Absolute; the string follows the workdir's absolute path.
    Absolute(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Fifo,
    Link(LinkText),
}

/// A tree below the export root: paths (components relative to the root) to kinds.
#[derive(Debug, Clone)]
struct Tree {
    entries: Vec<(Vec<String>, Kind)>,
    layout: RootLayout,
}

fn render_link(spec: &LinkSpec, dir: &[String], earlier: &[(Vec<String>, Kind)]) -> LinkText {
    match spec {
        LinkSpec::ToEntry { at, via_root } => {
            if earlier.is_empty() {
                return LinkText::Relative(".".into());
            }
            // Prefer a regular file, so followed links often end in a 200.
            let files: Vec<&Vec<String>> = earlier
                .iter()
                .filter(|(_, k)| *k == Kind::File)
                .map(|(p, _)| p)
                .collect();
            let target = if files.is_empty() {
                &earlier[at.index(earlier.len())].0
            } else {
                files[at.index(files.len())]
            };
            let common = if *via_root {
                0
            } else {
                dir.iter().zip(target).take_while(|(a, b)| a == b).count()
            };
            let mut parts: Vec<&str> = vec![".."; dir.len() - common];
            parts.extend(target[common..].iter().map(String::as_str));
            if parts.is_empty() {
                parts.push(".");
            }
            LinkText::Relative(parts.join("/"))
        }
        LinkSpec::Relative {
            comps,
            trailing_slash,
        } => {
            let mut text = comps
                .iter()
                .map(|c| match c {
                    LinkComp::Name(i) => LINK_NAMES[*i],
                    LinkComp::Dot => ".",
                    LinkComp::DotDot => "..",
                    LinkComp::Empty => "",
                })
                .collect::<Vec<_>>()
                .join("/");
            if text.is_empty() {
                text.push('.');
            }
            if *trailing_slash {
                text.push('/');
            }
            LinkText::Relative(text)
        }
        LinkSpec::AbsoluteIntoRoot(names) => {
            let mut text = "/out".to_owned();
            for n in names {
                text.push('/');
                text.push_str(NAMES[*n]);
            }
            LinkText::Absolute(text)
        }
        LinkSpec::AbsoluteSecret => LinkText::Absolute("/secret.txt".into()),
    }
}

fn build_tree((specs, layout): &(Vec<NodeSpec>, RootLayout)) -> Tree {
    let mut dirs: Vec<Vec<String>> = vec![Vec::new()];
    let mut entries: Vec<(Vec<String>, Kind)> = Vec::new();
    for spec in specs {
        let mut path = dirs[spec.parent.index(dirs.len())].clone();
        path.push(NAMES[spec.name].to_owned());
        if entries.iter().any(|(p, _)| *p == path) {
            continue;
        }
        let kind = match &spec.kind {
            KindSpec::File => Kind::File,
            KindSpec::Dir => {
                dirs.push(path.clone());
                Kind::Dir
            }
            KindSpec::Fifo => Kind::Fifo,
            KindSpec::Link(l) => Kind::Link(render_link(l, &path[..path.len() - 1], &entries)),
        };
        entries.push((path, kind));
    }
    if Tree::base_of(*layout).is_none() {
        // No root directory: nothing below it exists.
        entries.clear();
    }
    Tree {
        entries,
        layout: *layout,
    }
}

fn content_of(path: &[String]) -> String {
    format!("IN:{}", path.join("/"))
}

impl Tree {
    /// Where the tree lives, relative to the workdir, when the root is a directory.
    fn base_of(layout: RootLayout) -> Option<&'static str> {
        match layout {
            RootLayout::Plain => Some("out"),
            RootLayout::Linked => Some("data"),
            RootLayout::Missing | RootLayout::DanglingLink | RootLayout::IsFile => None,
        }
    }

    fn link_text(text: &LinkText, workdir: &str) -> String {
        match text {
            LinkText::Relative(t) => t.clone(),
            LinkText::Absolute(t) => format!("{workdir}{t}"),
        }
    }

    fn build_memory(&self, workdir: &str) -> MemoryFilesystem {
        let fs = MemoryFilesystem::new();
        fs.add_file("secret.txt", SENTINEL, 1_000);
        match self.layout {
            RootLayout::Plain | RootLayout::Missing => {}
            RootLayout::Linked => fs.add_symlink("out", "data"),
            RootLayout::DanglingLink => fs.add_symlink("out", "nothere"),
            RootLayout::IsFile => fs.add_file("out", "IN:the root is a file", 1_000),
        }
        let Some(base) = Self::base_of(self.layout) else {
            return fs;
        };
        fs.add_dir(base);
        for (path, kind) in &self.entries {
            let at = format!("{base}/{}", path.join("/"));
            match kind {
                Kind::File => fs.add_file(&at, content_of(path), 1_000),
                Kind::Dir => fs.add_dir(&at),
                Kind::Fifo => fs.add_fifo(&at),
                Kind::Link(text) => fs.add_symlink(&at, &Self::link_text(text, workdir)),
            }
        }
        fs
    }

    fn build_os(&self, workdir: &Path) {
        let abs = workdir.to_str().expect("UTF-8 tempdir");
        std::fs::write(workdir.join("secret.txt"), SENTINEL).expect("secret");
        let out = workdir.join("out");
        match self.layout {
            RootLayout::Plain | RootLayout::Missing => {}
            RootLayout::Linked => std::os::unix::fs::symlink("data", &out).expect("root link"),
            RootLayout::DanglingLink => {
                std::os::unix::fs::symlink("nothere", &out).expect("root link")
            }
            RootLayout::IsFile => std::fs::write(&out, "IN:the root is a file").expect("root"),
        }
        let Some(base) = Self::base_of(self.layout) else {
            return;
        };
        std::fs::create_dir(workdir.join(base)).expect("base");
        for (path, kind) in &self.entries {
            let at = workdir.join(base).join(path.join("/"));
            match kind {
                Kind::File => std::fs::write(&at, content_of(path)).expect("file"),
                Kind::Dir => std::fs::create_dir(&at).expect("dir"),
                Kind::Fifo => rustix::fs::mkfifoat(
                    rustix::fs::CWD,
                    &at,
                    rustix::fs::Mode::from_raw_mode(0o644),
                )
                .expect("mkfifo"),
                Kind::Link(text) => {
                    std::os::unix::fs::symlink(Self::link_text(text, abs), &at).expect("symlink")
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Request tokens
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Segment {
    /// The whole path of one of the tree's entries (so most walks start somewhere real).
    Entry(prop::sample::Index),
    Name(usize),
    /// A name with every byte percent-encoded.
    EncodedName(usize),
    Dot,
    DotDot,
    Empty,
    EncDot,
    EncDotDot,
    /// A name followed by `%00`.
    NulAfter(usize),
    BadEscape(&'static str),
}

#[derive(Debug, Clone)]
struct RequestSpec {
    leading_slash: bool,
    /// Segments, each with the separator written before it (ignored for the first).
    segments: Vec<(Segment, &'static str)>,
    query: Option<&'static str>,
}

fn segment() -> impl Strategy<Value = Segment> {
    prop_oneof![
        6 => any::<prop::sample::Index>().prop_map(Segment::Entry),
        6 => (0..REQUEST_NAMES.len()).prop_map(Segment::Name),
        2 => (0..REQUEST_NAMES.len()).prop_map(Segment::EncodedName),
        1 => Just(Segment::Dot),
        1 => Just(Segment::DotDot),
        1 => Just(Segment::Empty),
        1 => Just(Segment::EncDot),
        1 => Just(Segment::EncDotDot),
        1 => (0..REQUEST_NAMES.len()).prop_map(Segment::NulAfter),
        1 => prop::sample::select(vec!["%zz", "%", "%2", "a%g0"]).prop_map(Segment::BadEscape),
    ]
}

/// A segment that is a plain name or a whole entry path.
fn clean_segment() -> impl Strategy<Value = Segment> {
    prop_oneof![
        2 => any::<prop::sample::Index>().prop_map(Segment::Entry),
        1 => (0..REQUEST_NAMES.len()).prop_map(Segment::Name),
    ]
}

fn request_spec() -> impl Strategy<Value = RequestSpec> {
    // Mostly one entry's whole path, sometimes with one more name after it.
    let clean = (
        Just(false),
        (
            any::<prop::sample::Index>(),
            prop::collection::vec((clean_segment(), Just("/")), 0..2),
        )
            .prop_map(|(at, more)| {
                let mut segments = vec![(Segment::Entry(at), "/")];
                segments.extend(more);
                segments
            }),
        Just(None),
    );
    let hostile = (
        prop::bool::weighted(0.1),
        prop::collection::vec(
            (
                segment(),
                prop_oneof![8 => Just("/"), 1 => Just("%2f"), 1 => Just("%2F")],
            ),
            1..5,
        ),
        prop::option::weighted(
            0.2,
            prop::sample::select(vec!["?", "?x=../secret.txt", "?a/b"]),
        ),
    );
    prop_oneof![3 => clean, 2 => hostile].prop_map(|(leading_slash, segments, query)| RequestSpec {
        leading_slash,
        segments,
        query,
    })
}

fn render_request(spec: &RequestSpec, tree: &Tree) -> String {
    let mut out = String::new();
    if spec.leading_slash {
        out.push('/');
    }
    for (i, (seg, sep)) in spec.segments.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        match seg {
            Segment::Entry(at) => match tree.entries.len() {
                0 => out.push_str(REQUEST_NAMES[at.index(REQUEST_NAMES.len())]),
                n => out.push_str(&tree.entries[at.index(n)].0.join("/").replace('%', "%25")),
            },
            Segment::Name(n) => out.push_str(REQUEST_NAMES[*n]),
            Segment::EncodedName(n) => {
                for b in REQUEST_NAMES[*n].bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            Segment::Dot => out.push('.'),
            Segment::DotDot => out.push_str(".."),
            Segment::Empty => {}
            Segment::EncDot => out.push_str("%2e"),
            Segment::EncDotDot => out.push_str("%2e%2e"),
            Segment::NulAfter(n) => {
                out.push_str(REQUEST_NAMES[*n]);
                out.push_str("%00");
            }
            Segment::BadEscape(e) => out.push_str(e),
        }
    }
    if let Some(q) = spec.query {
        out.push_str(q);
    }
    out
}

// ------------------------------------------------------------------------------------------------
// The model of D-2
// ------------------------------------------------------------------------------------------------

/// What the model answers: the file's path below the root, or an error code.
type ModelAnswer = Result<Vec<String>, &'static str>;

/// D-2.2: strict percent-decoding; `None` for an invalid escape or non-UTF-8.
fn model_decode(raw: &str) -> Option<String> {
    let mut bytes = Vec::new();
    let mut rest = raw.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'%' {
            let hex = tail.get(..2)?;
            let value = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            bytes.push(value);
            rest = &tail[2..];
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// D-2.1 to D-2.5 for one request path (the raw `<relpath>`, query included).
fn model(tree: &Tree, class: Containment, raw: &str) -> ModelAnswer {
    // D-2.1: the query never selects anything.
    let raw = raw.split('?').next().unwrap_or("");
    // D-2.2 and D-2.3: all lexical refusals are outside_root.
    let Some(decoded) = model_decode(raw) else {
        return Err("outside_root");
    };
    if decoded.is_empty() || decoded.starts_with('/') || decoded.contains('\0') {
        return Err("outside_root");
    }
    let request: Vec<String> = decoded.split('/').map(str::to_owned).collect();
    if request
        .iter()
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("outside_root");
    }
    walk(tree, class, request)
}

/// The D-2.5 walk over the model tree.
fn walk(tree: &Tree, class: Containment, request: Vec<String>) -> ModelAnswer {
    let kinds: BTreeMap<&[String], &Kind> = tree
        .entries
        .iter()
        .map(|(p, k)| (p.as_slice(), k))
        .collect();
    // The directory the walk stands in, as its physical path below the root.
    let mut here: Vec<String> = Vec::new();
    let mut pending: VecDeque<String> = request.into();
    let mut hops = 0;
    // A non-directory the previous component named.
    let mut named: Option<(Vec<String>, &Kind)> = None;
    while let Some(component) = pending.pop_front() {
        if named.is_some() {
            // Something follows a file or a FIFO: ENOTDIR.
            return Err("not_found");
        }
        match component.as_str() {
            "" | "." => {}
            ".." => {
                // Above the root at any step, even to come back.
                if here.pop().is_none() {
                    return Err("outside_root");
                }
            }
            name => {
                let mut path = here.clone();
                path.push(name.to_owned());
                match kinds.get(path.as_slice()) {
                    None => return Err("not_found"),
                    Some(Kind::Dir) => here = path,
                    Some(kind @ (Kind::File | Kind::Fifo)) => named = Some((path, kind)),
                    Some(Kind::Link(text)) => {
                        if class == Containment::Scoped {
                            return Err("symlink_refused");
                        }
                        hops += 1;
                        if hops > MAX_HOPS {
                            return Err("not_found");
                        }
                        match text {
                            // Absolute, even when it names a path inside the root.
                            LinkText::Absolute(_) => return Err("outside_root"),
                            LinkText::Relative(t) if t.starts_with('/') => {
                                return Err("outside_root");
                            }
                            LinkText::Relative(t) => {
                                for part in t.split('/').rev() {
                                    pending.push_front(part.to_owned());
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    match named {
        None => Err("not_a_regular_file"),
        Some((_, Kind::Fifo)) => Err("not_a_regular_file"),
        Some((path, _)) => Ok(path),
    }
}

fn status_of(code: &str) -> u16 {
    match code {
        "ok" => 200,
        "not_found" => 404,
        "outside_root" | "symlink_refused" | "not_a_regular_file" => 403,
        other => panic!("the model never answers {other}"),
    }
}

// ------------------------------------------------------------------------------------------------
// Capsules
// ------------------------------------------------------------------------------------------------

fn manifest() -> Manifest {
    Manifest::from_yaml("name: exporter\nexports: { files: { root: out/, mode: read-only } }")
        .expect("manifest")
        .manifest
}

fn launch(fs: Arc<dyn Filesystem>, class: Containment) -> Capsule {
    let config = common::capsule_config().containment(class);
    Capsule::launch(
        &manifest(),
        config,
        Backends {
            fs,
            clock: Arc::new(ManualClock::new(1_787_577_327_015)),
            keys: None,
            trace: Arc::new(RecordingTraceSink::new()),
        },
    )
    .expect("launch")
}

/// What a router said: status, code (`ok` on 200) and, on 200, the body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    code: String,
    body: Option<String>,
}

fn ask(capsule: &Capsule, raw: &str) -> Answer {
    let response = capsule
        .router()
        .respond(&Method::GET, &format!("/resources/files/{raw}"), &[]);
    let status = response.status().as_u16();
    let bytes = response.body().bytes();
    if status == 200 {
        Answer {
            status,
            code: "ok".into(),
            body: Some(String::from_utf8_lossy(&bytes).into_owned()),
        }
    } else {
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            code: body["error"]
                .as_str()
                .unwrap_or("<no error field>")
                .to_owned(),
            body: None,
        }
    }
}

fn expected(answer: &ModelAnswer) -> Answer {
    match answer {
        Ok(path) => Answer {
            status: 200,
            code: "ok".into(),
            body: Some(content_of(path)),
        },
        Err(code) => Answer {
            status: status_of(code),
            code: (*code).to_owned(),
            body: None,
        },
    }
}

fn describe(tree: &Tree) -> String {
    let mut out = format!("layout {:?}:", tree.layout);
    for (path, kind) in &tree.entries {
        out.push_str(&format!("\n  {} {:?}", path.join("/"), kind));
    }
    out
}

fn check_answer(
    what: &str,
    tree: &Tree,
    class: Containment,
    raw: &str,
    got: &Answer,
    want: &Answer,
) -> Result<(), TestCaseError> {
    if let Some(body) = &got.body {
        prop_assert!(
            !body.contains(SENTINEL),
            "{what} served the secret outside the root for {raw:?} under {class:?}\n{}",
            describe(tree)
        );
    }
    prop_assert_eq!(
        got,
        want,
        "{} for {:?} under {:?} disagrees with the model\n{}",
        what,
        raw,
        class,
        describe(tree)
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(common::config(common::cases()))]

    #[test]
    fn memory_router_answers_as_the_model(
        tree in tree_spec().prop_map(|t| build_tree(&t)),
        requests in prop::collection::vec(request_spec(), 1..12),
    ) {
        let fs: Arc<dyn Filesystem> = Arc::new(tree.build_memory(FAKE_WORKDIR));
        for class in Containment::ALL {
            let capsule = launch(fs.clone(), class);
            for spec in &requests {
                let raw = render_request(spec, &tree);
                let want = expected(&model(&tree, class, &raw));
                let got = ask(&capsule, &raw);
                check_answer("memory", &tree, class, &raw, &got, &want)?;
            }
        }
    }
}

proptest! {
    #![proptest_config(common::config(common::cases() / 4))]

    #[test]
    fn os_filesystems_answer_as_memory_and_the_model(
        tree in tree_spec().prop_map(|t| build_tree(&t)),
        requests in prop::collection::vec(request_spec(), 1..12),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let workdir = dir.path().canonicalize().expect("canonical tempdir");
        tree.build_os(&workdir);
        let memory: Arc<dyn Filesystem> =
            Arc::new(tree.build_memory(workdir.to_str().expect("UTF-8")));
        let openat2: Arc<dyn Filesystem> =
            Arc::new(OsFilesystem::open(&workdir).expect("open workdir"));
        let fallback: Arc<dyn Filesystem> =
            Arc::new(OsFilesystem::open_with_fallback_walk(&workdir).expect("open workdir"));
        for class in Containment::ALL {
            let capsules = [
                ("memory", launch(memory.clone(), class)),
                ("openat2", launch(openat2.clone(), class)),
                ("fallback walk", launch(fallback.clone(), class)),
            ];
            for spec in &requests {
                let raw = render_request(spec, &tree);
                let want = expected(&model(&tree, class, &raw));
                for (what, capsule) in &capsules {
                    let got = ask(capsule, &raw);
                    check_answer(what, &tree, class, &raw, &got, &want)?;
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Sanity checks of the model and the harness
// ------------------------------------------------------------------------------------------------

fn tree_of(entries: &[(&str, Kind)]) -> Tree {
    Tree {
        entries: entries
            .iter()
            .map(|(p, k)| (p.split('/').map(str::to_owned).collect(), k.clone()))
            .collect(),
        layout: RootLayout::Plain,
    }
}

fn rel(text: &str) -> Kind {
    Kind::Link(LinkText::Relative(text.into()))
}

#[test]
fn model_follows_the_d25_table() {
    use Containment::{Advisory, Scoped};
    let tree = tree_of(&[
        ("a", Kind::File),
        ("b", Kind::Dir),
        ("b/c", Kind::File),
        ("l", rel("b/c")),
        ("up", rel("../out/a")),
        ("abs", Kind::Link(LinkText::Absolute("/out/a".into()))),
        ("dang", rel("zz")),
        ("loop", rel("loop")),
        ("dir", rel("b")),
        ("root", rel(".")),
        ("f", Kind::Fifo),
        ("b/back", rel("../a")),
        ("slash", rel("a/")),
    ]);
    let cases: [(&str, Containment, ModelAnswer); 17] = [
        ("a", Advisory, Ok(vec!["a".into()])),
        ("l", Advisory, Ok(vec!["b".into(), "c".into()])),
        ("l", Scoped, Err("symlink_refused")),
        ("up", Advisory, Err("outside_root")),
        ("abs", Advisory, Err("outside_root")),
        ("dang", Advisory, Err("not_found")),
        ("loop", Advisory, Err("not_found")),
        ("dir", Advisory, Err("not_a_regular_file")),
        ("dir/c", Advisory, Ok(vec!["b".into(), "c".into()])),
        ("root", Advisory, Err("not_a_regular_file")),
        ("f", Advisory, Err("not_a_regular_file")),
        ("a/x", Advisory, Err("not_found")),
        ("b/back", Advisory, Ok(vec!["a".into()])),
        ("slash", Advisory, Err("not_found")),
        ("%2e%2e/secret.txt", Advisory, Err("outside_root")),
        ("b%2Fc?x", Advisory, Ok(vec!["b".into(), "c".into()])),
        ("a%zz", Advisory, Err("outside_root")),
    ];
    for (raw, class, want) in cases {
        assert_eq!(model(&tree, class, raw), want, "{raw} under {class:?}");
    }
}

#[test]
fn openat2_is_what_the_os_property_exercises() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = OsFilesystem::open(dir.path()).expect("open");
    assert_eq!(
        fs.strategy(),
        resource_plane::backends::Strategy::Openat2,
        "this kernel hides openat2: the OS property then checks the fallback walk twice"
    );
}
