#![allow(clippy::disallowed_methods)] // tests build their own worlds with std::fs
//! A hostile-input table over the real binary.
//!
//! One export tree (`out/`) holds every file type and every symlink shape of D-2.5, with a
//! sentinel (`SENTINEL-OUTSIDE`) in `secret.txt` and `outside/f` beside it in the workdir.
//! Three `resource-plane serve` processes, one per containment class, serve that same workdir.
//! Every row of the table is sent as raw bytes on its own connection
//! (`GET <target> HTTP/1.1\r\nHost: x\r\n\r\n`, then read to EOF) and its answer is checked
//! per class: status, error code or served bytes, and the headers of D-4.
//!
//! Behaviour pinned down here that the spec leaves to the HTTP layer (hyper 1 / `http` 1):
//! - a raw `#` in the request target is an ordinary name byte (the listener's gate escapes it
//!   before hyper's URI parser could cut it off as a fragment): `report.md#x` is a file of that
//!   name, never `report.md`;
//! - absolute-form targets (`GET http://x/resources/…`) are routed on their path;
//! - authority-form `CONNECT x:1`, `OPTIONS *` and `GET *` are not under `/resources`: 404
//!   `not_found`, no trace line;
//! - raw UTF-8 bytes in the target reach the router (raw `é.txt` is served); bytes `http`
//!   refuses (0x7f, 0xff, `<`, `` ` ``, an extra token) are hyper's own 400, and a head over
//!   16 KiB its 431, both with `connection: close` and no trace line;
//! - the HTTP/2 preface, like any request line naming another HTTP version, gets 505;
//! - an HTTP/1.0 request is answered `HTTP/1.0` with `connection: close`.
//!
//! Global assertions: no body ever holds the sentinel; every answer carries
//! `connection: close`; each server's trace holds exactly one JSON line per request that
//! reached routing under `/resources`, in order, with the expected event type and outcome.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::time::Duration;
use support::http::{Reply, try_exchange_raw, try_parse_reply};
use support::process::{Launch, Served, Stderr, Workdir};
use support::sha256_hex;

const SENTINEL: &str = "SENTINEL-OUTSIDE";
/// The manifest's `max_bytes` (`1Ki`).
const MAX_BYTES: usize = 1024;
/// The longest a single exchange may take; a FIFO that blocked the server would trip it.
const IO_DEADLINE: Duration = Duration::from_secs(5);
const P: &str = "/resources/files/";

// ---------------------------------------------------------------------------------------------
// Classes and expectations.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Advisory,
    Scoped,
    Sealed,
}

const CLASSES: [Class; 3] = [Class::Advisory, Class::Scoped, Class::Sealed];

impl Class {
    fn as_str(self) -> &'static str {
        match self {
            Class::Advisory => "advisory",
            Class::Scoped => "scoped",
            Class::Sealed => "sealed",
        }
    }

    fn follows_symlinks(self) -> bool {
        self != Class::Scoped
    }
}

/// What one server must answer to one row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// 200 with exactly the bytes of `out/<path>` (a real file, after any link).
    File(String),
    /// 200 with the listing of this class.
    Listing,
    /// A JSON refusal `{"error": code, "message": …}`.
    Refused(u16, &'static str),
    /// A refusal to `HEAD`: the refusal's status and headers, no body.
    HeadRefused(u16, &'static str),
    /// hyper's own answer to a request it cannot parse: no JSON, no plane headers, no trace.
    Parser(u16),
    /// The connection closes with no answer at all.
    Closed,
}

impl Expect {
    /// The trace `outcome` this answer must have been recorded with.
    fn outcome(&self) -> &'static str {
        match self {
            Expect::File(_) | Expect::Listing => "ok",
            Expect::Refused(_, code) | Expect::HeadRefused(_, code) => code,
            Expect::Parser(_) | Expect::Closed => "(none)",
        }
    }
}

fn ok(path: &str) -> Expect {
    Expect::File(path.to_owned())
}
fn not_found() -> Expect {
    Expect::Refused(404, "not_found")
}
fn outside() -> Expect {
    Expect::Refused(403, "outside_root")
}
fn sym() -> Expect {
    Expect::Refused(403, "symlink_refused")
}
fn not_regular() -> Expect {
    Expect::Refused(403, "not_a_regular_file")
}
fn too_large() -> Expect {
    Expect::Refused(413, "too_large")
}
fn not_allowed() -> Expect {
    Expect::Refused(405, "method_not_allowed")
}
fn no_peer_plane() -> Expect {
    Expect::Refused(404, "no_peer_plane")
}

/// Compact per-class expectations.
#[derive(Debug, Clone)]
enum Per {
    /// Every class agrees.
    All(Expect),
    /// `advisory` and `sealed` follow links (D-2.5) and agree; `scoped` differs.
    Split { follow: Expect, scoped: Expect },
    /// Sent only to the advisory server (HTTP-level rows).
    AdvisoryOnly(Expect),
}

fn all(e: Expect) -> Per {
    Per::All(e)
}

/// A row that meets a symlink: the follow classes answer `follow`, scoped `symlink_refused`.
fn link(follow: Expect) -> Per {
    Per::Split {
        follow,
        scoped: sym(),
    }
}

impl Per {
    fn for_class(&self, class: Class) -> Option<&Expect> {
        match self {
            Per::All(e) => Some(e),
            Per::Split { follow, scoped } => Some(if class.follows_symlinks() {
                follow
            } else {
                scoped
            }),
            Per::AdvisoryOnly(e) => (class == Class::Advisory).then_some(e),
        }
    }
}

/// Which trace line a row must leave (D-6.3), if it reaches routing under `/resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trace {
    Read,
    List,
    Redeem,
    None,
}

impl Trace {
    fn event_type(self) -> &'static str {
        match self {
            Trace::Read => "resource_read",
            Trace::List => "resource_list",
            Trace::Redeem => "peer_handle_redeem",
            Trace::None => "(none)",
        }
    }
}

/// The spec's routing (D-4.2, D-6.3) applied to an origin-form target as the HTTP layer hands
/// it over: query cut (a `#` is a name byte, so `/resources/files#x` is no listing).
fn trace_of(target: &str) -> Trace {
    let path = target.split('?').next().unwrap_or_default();
    let Some(rest) = path.strip_prefix("/resources") else {
        return Trace::None;
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Trace::None;
    }
    if rest == "/files" {
        Trace::List
    } else if rest == "/peer" || rest.starts_with("/peer/") {
        Trace::Redeem
    } else {
        Trace::Read
    }
}

struct Row {
    label: String,
    request: Vec<u8>,
    per: Per,
    trace: Trace,
    /// The status line's version.
    version: &'static str,
}

fn label_of(text: &str) -> String {
    if text.len() <= 90 {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(60).collect();
        format!("{cut}…({} bytes)", text.len())
    }
}

/// `GET <target> HTTP/1.1` sent to every server the expectation names.
fn get(target: &str, per: Per) -> Row {
    Row {
        label: label_of(target),
        request: format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes(),
        per,
        trace: trace_of(target),
        version: "HTTP/1.1",
    }
}

/// `GET /resources/files/<rel>`.
fn file(rel: &str, per: Per) -> Row {
    get(&format!("{P}{rel}"), per)
}

/// Raw request bytes, advisory server only.
fn raw(label: &str, request: Vec<u8>, expect: Expect, trace: Trace) -> Row {
    Row {
        label: label.to_owned(),
        request,
        per: Per::AdvisoryOnly(expect),
        trace,
        version: "HTTP/1.1",
    }
}

fn method(verb: &str, target: &str, expect: Expect) -> Row {
    raw(
        &format!("{verb} {target}"),
        format!("{verb} {target} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes(),
        expect,
        trace_of(target),
    )
}

// ---------------------------------------------------------------------------------------------
// The tree: one workdir holding the export tree and the sentinels.
// ---------------------------------------------------------------------------------------------

/// The manifest every server runs: `out/` with a 1 KiB `max_bytes`.
const MANIFEST: &str =
    "name: hostile\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 1Ki }\n";

/// The export tree the table is about, in a support [`Workdir`] (`wd/`), with what it holds.
struct Tree {
    dir: Workdir,
    /// Regular files under `out/`: path → bytes.
    files: BTreeMap<String, Vec<u8>>,
    /// Links the follow classes list (D-3.2): link path → the real file it resolves to.
    listed_links: BTreeMap<String, String>,
    /// The 255-byte name.
    long_name: String,
    /// Whether the character device could be created.
    have_device: bool,
    /// Kept alive so `out/sock` stays a live socket.
    _socket: UnixListener,
}

fn name_255() -> String {
    format!("{}.txt", "n".repeat(251))
}

fn chain(i: usize) -> String {
    format!("c{i:02}")
}

impl Tree {
    fn build() -> Tree {
        let dir = Workdir::new(MANIFEST);
        let workdir = dir.path();
        for sub in ["out/sub/deep", "out/emptydir", "outside"] {
            std::fs::create_dir_all(workdir.join(sub)).expect("create a directory");
        }
        let out = workdir.join("out");
        std::fs::write(workdir.join("secret.txt"), format!("{SENTINEL}\n"))
            .expect("write secret.txt");
        std::fs::write(
            workdir.join("outside/f"),
            format!("{SENTINEL} in outside/f\n"),
        )
        .expect("write outside/f");

        let long_name = name_255();
        assert_eq!(long_name.len(), 255);
        let mut files = BTreeMap::new();
        files.insert(
            "report.md".to_owned(),
            b"# Report\nnothing secret in here\n".to_vec(),
        );
        for name in [
            "a b.txt",
            "é.txt",
            "+plus",
            "back\\slash",
            "...",
            ".hidden",
            long_name.as_str(),
            "sub/deep/f.txt",
        ] {
            files.insert(
                name.to_owned(),
                format!("contents of {name}\n").into_bytes(),
            );
        }
        files.insert("big".to_owned(), vec![b'B'; MAX_BYTES + 1]);
        files.insert("exact".to_owned(), vec![b'E'; MAX_BYTES]);
        for (path, bytes) in &files {
            std::fs::write(out.join(path), bytes).expect("write an export file");
        }

        let mut listed_links = BTreeMap::new();
        let mut symlink = |target: &str, at: &str, resolves_to: Option<&str>| {
            std::os::unix::fs::symlink(target, out.join(at)).expect("create a symlink");
            if let Some(real) = resolves_to {
                listed_links.insert(at.to_owned(), real.to_owned());
            }
        };
        symlink("report.md", "l", Some("report.md"));
        symlink("../report.md", "sub/l", Some("report.md"));
        symlink("sub", "ld", None);
        symlink("../out/report.md", "ub", None);
        symlink("../secret.txt", "s", None);
        symlink("../outside", "od", None);
        let abs_in = out.join("report.md");
        let abs_out = workdir.join("secret.txt");
        let abs_out_dir = workdir.join("outside");
        symlink(abs_in.to_str().unwrap(), "abs_in", None);
        symlink(abs_out.to_str().unwrap(), "abs_out", None);
        symlink(abs_out_dir.to_str().unwrap(), "abs_out_dir", None);
        symlink("nope.txt", "dangling", None);
        symlink("loop_b", "loop_a", None);
        symlink("loop_a", "loop_b", None);
        // c00 -> c01 -> … -> c40 -> report.md: c00 takes 41 hops (one over MAXSYMLINKS),
        // c01 exactly 40.
        for i in 0..40 {
            let resolves = (i >= 1).then_some("report.md");
            symlink(&chain(i + 1), &chain(i), resolves);
        }
        symlink("report.md", &chain(40), Some("report.md"));
        symlink("sub", "ldir", None);
        symlink(".", "self", None);
        symlink("big", "lbig", Some("big"));

        rustix::fs::mkfifoat(rustix::fs::CWD, out.join("fifo"), 0o644.into())
            .expect("mkfifo out/fifo");
        let socket = UnixListener::bind(out.join("sock")).expect("bind out/sock");
        let have_device = match rustix::fs::mknodat(
            rustix::fs::CWD,
            out.join("null"),
            rustix::fs::FileType::CharacterDevice,
            0o666.into(),
            rustix::fs::makedev(1, 3),
        ) {
            Ok(()) => true,
            Err(e) => {
                println!(
                    "note: mknod out/null failed ({e}); the character-device rows are skipped"
                );
                false
            }
        };

        Tree {
            dir,
            files,
            listed_links,
            long_name,
            have_device,
            _socket: socket,
        }
    }

    /// The bytes a `File(path)` expectation must serve.
    fn contents(&self, path: &str) -> &[u8] {
        self.files
            .get(path)
            .unwrap_or_else(|| panic!("the table names a file the world lacks: {path}"))
    }

    /// The listing's entries for a class, as (path, real file).
    fn listed(&self, class: Class) -> Vec<(String, String)> {
        let mut entries: Vec<(String, String)> =
            self.files.keys().map(|p| (p.clone(), p.clone())).collect();
        if class.follows_symlinks() {
            entries.extend(
                self.listed_links
                    .iter()
                    .map(|(l, real)| (l.clone(), real.clone())),
            );
        }
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        entries
    }
}

// ---------------------------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------------------------

fn target_table(world: &Tree) -> Vec<Row> {
    let long = world.long_name.as_str();
    let mut rows = vec![
        // Plain names and nesting.
        file("report.md", all(ok("report.md"))),
        file("a%20b.txt", all(ok("a b.txt"))),
        file("%C3%A9.txt", all(ok("é.txt"))),
        file("%c3%a9.txt", all(ok("é.txt"))),
        file("é.txt", all(ok("é.txt"))), // raw UTF-8 bytes on the wire
        file("e%CC%81.txt", all(not_found())), // NFD é is another name
        file("+plus", all(ok("+plus"))),
        file("%2Bplus", all(ok("+plus"))),
        file("back\\slash", all(ok("back\\slash"))),
        file("back%5Cslash", all(ok("back\\slash"))),
        file("...", all(ok("..."))),
        file("%2E%2E%2E", all(ok("..."))),
        file(".hidden", all(ok(".hidden"))),
        file("%2Ehidden", all(ok(".hidden"))),
        file(long, all(ok(long))),
        file(&format!("{}.txt", "n".repeat(252)), all(not_found())), // 256-byte component
        file(&"x".repeat(1000), all(not_found())),
        file("sub/deep/f.txt", all(ok("sub/deep/f.txt"))),
        file("%72eport.md", all(ok("report.md"))),
        file("report%2emd", all(ok("report.md"))),
        file("%72%65%70%6f%72%74%2e%6d%64", all(ok("report.md"))),
        file("nope.txt", all(not_found())),
        file("REPORT.md", all(not_found())),
        file("report.md.", all(not_found())),
        file("report.md%20", all(not_found())),
        file("%20report.md", all(not_found())),
        file("a+b.txt", all(not_found())), // `+` is a plus, not a space
        file("report.md;x", all(not_found())),
        file("{x}\"|^~", all(not_found())),
        file("report.md/x", all(not_found())), // ENOTDIR
        // `%2F` is a separator.
        file("sub%2Fdeep%2Ff.txt", all(ok("sub/deep/f.txt"))),
        file("sub%2fdeep/f.txt", all(ok("sub/deep/f.txt"))),
        file("a%2Fb", all(not_found())),
        file("%2Fsub/deep/f.txt", all(outside())),
        file("%2F", all(outside())),
        file("%2fsecret.txt", all(outside())),
        file("sub%2F", all(outside())),
        file("sub%2F%2Fdeep/f.txt", all(outside())),
        // Dot segments, raw and encoded: refused, never normalised.
        file("..", all(outside())),
        file(".", all(outside())),
        file("%2e", all(outside())),
        file("%2e%2e", all(outside())),
        file("../secret.txt", all(outside())),
        file("../../secret.txt", all(outside())),
        file("../out/report.md", all(outside())),
        file("%2e%2e%2fsecret.txt", all(outside())),
        file("%2E%2E/secret.txt", all(outside())),
        file("..%2fsecret.txt", all(outside())),
        file(".%2e/secret.txt", all(outside())),
        file("%2e./secret.txt", all(outside())),
        file("%2e%2e%2f%2e%2e%2fsecret.txt", all(outside())),
        file("sub/../report.md", all(outside())),
        file("sub%2f..%2freport.md", all(outside())),
        file("sub/deep/../../report.md", all(outside())),
        file("./report.md", all(outside())),
        file("%2E/report.md", all(outside())),
        file("sub/./deep/f.txt", all(outside())),
        // Empty components and trailing slashes.
        get("/resources/files/", all(outside())),
        get("/resources/files//report.md", all(outside())),
        file("sub//deep/f.txt", all(outside())),
        file("sub/deep//f.txt", all(outside())),
        file("report.md/", all(outside())),
        file("sub/", all(outside())),
        file("sub/deep/", all(outside())),
        file("l/", all(outside())),
        // Double encoding decodes once: a literal name that does not exist.
        file("%252e%252e%252fsecret.txt", all(not_found())),
        file("%25", all(not_found())),
        file("%2525", all(not_found())),
        file("%252F", all(not_found())),
        file("report.md%3F..%2Fsecret.txt", all(not_found())),
        file("%3Freport.md", all(not_found())),
        file("report.md%23frag", all(not_found())),
        // Overlong and otherwise invalid UTF-8.
        file("%c0%ae%c0%ae/secret.txt", all(outside())),
        file("%c0%ae%c0%ae/", all(outside())),
        file("%e0%80%ae", all(outside())),
        file("%e0%80%ae%e0%80%ae%c0%afsecret.txt", all(outside())),
        file("%f0%80%80%ae", all(outside())),
        file("%c0%af", all(outside())),
        file("%ED%A0%80", all(outside())),    // a surrogate
        file("%F4%90%80%80", all(outside())), // above U+10FFFF
        file("%C3", all(outside())),
        file("%80", all(outside())),
        file("%ff", all(outside())),
        // Invalid escapes.
        file("%", all(outside())),
        file("report.md%", all(outside())),
        file("%g1", all(outside())),
        file("%2", all(outside())),
        file("report.md%2", all(outside())),
        file("%2g", all(outside())),
        file("%u002e", all(outside())),
        file("%u002e%u002e/secret.txt", all(outside())),
        file("%%32%65", all(outside())),
        // NUL.
        file("%00", all(outside())),
        file("a%00b", all(outside())),
        file("report.md%00", all(outside())),
        file("report.md%00.txt", all(outside())),
        // Backslashes are ordinary bytes.
        file("..\\secret.txt", all(not_found())),
        file("..%5Csecret.txt", all(not_found())),
        file("..%5C..%5Csecret.txt", all(not_found())),
        file("sub\\deep\\f.txt", all(not_found())),
        // Lookalike dots and slashes are ordinary names.
        file("%E2%80%A4%E2%80%A4", all(not_found())),
        file("%E2%80%A4%E2%80%A4/secret.txt", all(not_found())),
        file("%EF%BC%8E%EF%BC%8E/secret.txt", all(not_found())),
        file("%EF%BC%8E", all(not_found())),
        file("%EF%BC%8E%EF%BC%8E%EF%BC%8Fsecret.txt", all(not_found())),
        file("..%E2%88%95secret.txt", all(not_found())),
        file("%EF%B9%92%EF%B9%92/secret.txt", all(not_found())),
        file("%EF%BB%BFreport.md", all(not_found())),
        // Queries never select anything (D-2.1).
        file("report.md?../../secret.txt", all(ok("report.md"))),
        file("report.md?", all(ok("report.md"))),
        file("report.md??x", all(ok("report.md"))),
        file("report.md?x=%00", all(ok("report.md"))),
        file("?report.md", all(outside())),
        file("nope?report.md", all(not_found())),
        file("s?x", link(outside())),
        // A raw `#` is a name byte, never a fragment cut off before routing.
        file("report.md#frag", all(not_found())),
        file("report.md#/../../secret.txt", all(outside())),
        file("#report.md", all(not_found())),
        file("nope#/../report.md", all(outside())),
        file("report.md%23frag", all(not_found())),
        // Every symlink shape (D-2.5).
        file("l", link(ok("report.md"))),
        file("sub/l", link(ok("report.md"))),
        file("ld/deep/f.txt", link(ok("sub/deep/f.txt"))),
        file("ld/l", link(ok("report.md"))),
        file("ld", link(not_regular())),
        file("ld/../report.md", all(outside())),
        file("ub", link(outside())),
        file("s", link(outside())),
        file("od", link(outside())),
        file("od/f", link(outside())),
        file("abs_in", link(outside())),
        file("abs_out", link(outside())),
        file("abs_out_dir", link(outside())),
        file("abs_out_dir/f", link(outside())),
        file("dangling", link(not_found())),
        file("loop_a", link(not_found())),
        file("loop_b", link(not_found())),
        file(&chain(0), link(not_found())),
        file(&chain(1), link(ok("report.md"))),
        file(&chain(40), link(ok("report.md"))),
        file("ldir", link(not_regular())),
        file("self", link(not_regular())),
        file("self/report.md", link(ok("report.md"))),
        file("self/self/self/l", link(ok("report.md"))),
        file("self/s", link(outside())),
        file("self/ub", link(outside())),
        file("self/../secret.txt", all(outside())),
        file("sub/l/x", link(not_found())),
        file("l%2F..%2Fsecret.txt", all(outside())),
        file("lbig", link(too_large())),
        // Every file type (D-2.6).
        file("emptydir", all(not_regular())),
        file("sub", all(not_regular())),
        file("sub/deep", all(not_regular())),
        file("fifo", all(not_regular())),
        file("sock", all(not_regular())),
        // max_bytes (D-2.7).
        file("big", all(too_large())),
        file("exact", all(ok("exact"))),
        // Other routes under /resources (D-4.2) and outside it.
        get("/resources", all(not_found())),
        get("/resources/", all(not_found())),
        get("/resources/filesx", all(not_found())),
        get("/resources/files%2Freport.md", all(not_found())),
        get("/resources/./files/report.md", all(not_found())),
        get("/resources/files/../files/report.md", all(outside())),
        get("/resources/peer", all(no_peer_plane())),
        get("/resources/peer/", all(no_peer_plane())),
        get("/resources/peer/mh1.a.b", all(no_peer_plane())),
        get("/RESOURCES/files/report.md", all(not_found())),
        get("//resources/files/report.md", all(not_found())),
        get("/resourcesx", all(not_found())),
        get("/", all(not_found())),
        // The listing.
        get("/resources/files", all(Expect::Listing)),
        get("/resources/files?../secret.txt", all(Expect::Listing)),
        get("/resources/files#frag", all(not_found())),
    ];
    if world.have_device {
        rows.push(file("null", all(not_regular())));
    }
    // A path of 5000 bytes made of existing-looking components: beyond PATH_MAX.
    let mut deep = "sub/".to_owned();
    while deep.len() < 4990 {
        deep.push_str(&"d".repeat(99));
        deep.push('/');
    }
    deep.push_str("f.txt");
    assert!(deep.len() >= 5000, "the long path is {} bytes", deep.len());
    rows.push(file(&deep, all(not_found())));
    rows
}

/// HTTP-level oddities, checked once on the advisory server.
fn http_table() -> Vec<Row> {
    let report = "/resources/files/report.md";
    let mut rows =
        vec![
        raw(
            "absolute-form http://x/…",
            b"GET http://x/resources/files/report.md HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            ok("report.md"),
            Trace::Read,
        ),
        raw(
            "absolute-form https://x:9/…?query",
            b"GET https://x:9/resources/files/report.md?../secret.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                .to_vec(),
            ok("report.md"),
            Trace::Read,
        ),
        raw(
            "authority-form CONNECT x:1",
            b"CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n".to_vec(),
            not_found(),
            Trace::None,
        ),
        raw(
            "OPTIONS *",
            b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            not_found(),
            Trace::None,
        ),
        raw(
            "GET *",
            b"GET * HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            not_found(),
            Trace::None,
        ),
        raw(
            "raw 0x7f in the target",
            b"GET /resources/files/a\x7fb HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            Expect::Parser(400),
            Trace::None,
        ),
        raw(
            "raw 0xff in the target",
            b"GET /resources/files/\xff HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            Expect::Parser(400),
            Trace::None,
        ),
        raw(
            "raw space: an extra token",
            b"GET /resources/files/a b.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            Expect::Parser(400),
            Trace::None,
        ),
        raw(
            "raw < and >",
            b"GET /resources/files/<x> HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            Expect::Parser(400),
            Trace::None,
        ),
        raw(
            "raw backtick",
            b"GET /resources/files/`x HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            Expect::Parser(400),
            Trace::None,
        ),
        raw(
            "origin-form without its leading slash",
            b"GET resources/files/report.md HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            Expect::Parser(400),
            Trace::None,
        ),
        raw(
            "a head over 16 KiB (one big header)",
            format!(
                "GET {report} HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
                "a".repeat(17 * 1024)
            )
            .into_bytes(),
            Expect::Parser(431),
            Trace::None,
        ),
        raw(
            "a head over 16 KiB (a 20000-byte target: 431 as D-4.6 says, not 414)",
            format!("GET {P}{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(20_000)).into_bytes(),
            Expect::Parser(431),
            Trace::None,
        ),
        raw(
            "the HTTP/2 preface",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
            Expect::Parser(505),
            Trace::None,
        ),
        Row {
            version: "HTTP/1.0",
            ..raw(
                "HTTP/1.0",
                format!("GET {report} HTTP/1.0\r\nHost: x\r\n\r\n").into_bytes(),
                ok("report.md"),
                Trace::Read,
            )
        },
        raw(
            "POST with a body",
            format!("POST {report} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
                .into_bytes(),
            not_allowed(),
            Trace::Read,
        ),
        raw(
            "PUT a new file with a body",
            format!("PUT {P}new.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
                .into_bytes(),
            not_allowed(),
            Trace::Read,
        ),
        method("POST", "/resources/files", not_allowed()),
        method("DELETE", "/resources/files", not_allowed()),
        method("PUT", "/resources/peer/mh1.a.b", not_allowed()),
        method("DELETE", "/resources/nowhere", not_allowed()),
        method("GET", report, ok("report.md")),
        method("HEAD", report, Expect::HeadRefused(405, "method_not_allowed")),
        method("get", report, not_allowed()), // methods are case-sensitive
    ];
    for verb in [
        "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "FOO",
    ] {
        rows.push(method(verb, report, not_allowed()));
    }
    rows
}

// ---------------------------------------------------------------------------------------------
// One server process per class.
// ---------------------------------------------------------------------------------------------

/// `serve` over the tree under `class`, tracing to its own file, stderr captured.
fn spawn(tree: &Tree, class: Class) -> Served {
    let name = class.as_str();
    let trace = tree.dir.trace_for(name).display().to_string();
    let args = tree
        .dir
        .args_without_trace(&["--containment", name, "--trace", &trace]);
    Launch::new(&args)
        .label(name)
        .stderr(Stderr::File(tree.dir.log_for(name)))
        .start()
}

/// The server's trace, line by line; an unreadable trace fails the test.
fn trace_lines(class: Class, server: &Served) -> Vec<String> {
    std::fs::read_to_string(server.trace_path())
        .unwrap_or_else(|e| panic!("{}: read the trace: {e}", class.as_str()))
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Checks. Each pushes a description of every mismatch, so one run reports the whole table.
// ---------------------------------------------------------------------------------------------

struct Checker<'a> {
    world: &'a Tree,
    class: Class,
    failures: Vec<String>,
    /// One fixed message per refusal code (D-4.4).
    messages: BTreeMap<String, String>,
}

macro_rules! expect {
    ($checker:expr, $row:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            let what = format!($($fmt)+);
            $checker.fail($row, what);
        }
    };
}

impl Checker<'_> {
    fn fail(&mut self, row: &Row, what: String) {
        self.failures
            .push(format!("[{}] {}: {what}", self.class.as_str(), row.label));
    }

    fn header_is(&mut self, row: &Row, reply: &Reply, name: &str, want: &str) {
        match reply.single(name) {
            Ok(v) if v == want => {}
            Ok(v) => self.fail(row, format!("`{name}: {v}`, expected `{want}`")),
            Err(e) => self.fail(row, format!("{e}, expected `{name}: {want}`")),
        }
    }

    fn check(&mut self, row: &Row, expect: &Expect, raw: &[u8]) {
        let sentinel = SENTINEL.as_bytes();
        expect!(
            self,
            row,
            !raw.windows(sentinel.len()).any(|w| w == sentinel),
            "the answer holds the sentinel: {}",
            String::from_utf8_lossy(raw)
        );
        if *expect == Expect::Closed {
            expect!(
                self,
                row,
                raw.is_empty(),
                "expected a close without an answer, got {:?}",
                String::from_utf8_lossy(raw)
            );
            return;
        }
        let reply = match try_parse_reply(raw) {
            Ok(reply) => reply,
            Err(e) => {
                let text = String::from_utf8_lossy(raw).into_owned();
                self.fail(row, format!("unparseable answer ({e}): {text:?}"));
                return;
            }
        };
        expect!(
            self,
            row,
            reply.version == row.version,
            "status line version {}, expected {}",
            reply.version,
            row.version
        );
        self.header_is(row, &reply, "connection", "close");
        expect!(
            self,
            row,
            !reply.has("transfer-encoding"),
            "unexpected transfer-encoding"
        );
        let head = matches!(expect, Expect::HeadRefused(..));
        if !head {
            self.header_is(row, &reply, "content-length", &reply.body.len().to_string());
        }
        let plane_route = row.trace != Trace::None;
        if plane_route {
            self.header_is(row, &reply, "x-murmur-generation", "0");
        } else {
            expect!(
                self,
                row,
                !reply.has("x-murmur-generation"),
                "x-murmur-generation on a route outside /resources"
            );
        }
        match expect {
            Expect::File(path) => self.check_file(row, &reply, path),
            Expect::Listing => self.check_listing(row, &reply),
            Expect::Refused(status, code) => self.check_refusal(row, &reply, *status, code),
            Expect::HeadRefused(status, _) => {
                expect!(
                    self,
                    row,
                    reply.status == *status,
                    "status {}, expected {status}",
                    reply.status
                );
                self.header_is(row, &reply, "content-type", "application/json");
                if *status == 405 {
                    self.header_is(row, &reply, "allow", "GET");
                }
                expect!(
                    self,
                    row,
                    reply.body.is_empty(),
                    "a HEAD answer with a body"
                );
            }
            Expect::Parser(status) => {
                expect!(
                    self,
                    row,
                    reply.status == *status,
                    "status {}, expected hyper's {status}",
                    reply.status
                );
                expect!(
                    self,
                    row,
                    reply.body.is_empty(),
                    "hyper's refusal with a body"
                );
            }
            Expect::Closed => unreachable!("handled above"),
        }
    }

    fn check_file(&mut self, row: &Row, reply: &Reply, path: &str) {
        let want = self.world.contents(path).to_vec();
        expect!(
            self,
            row,
            reply.status == 200,
            "status {} ({}), expected 200 with {path}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        if reply.status != 200 {
            return;
        }
        expect!(
            self,
            row,
            reply.body == want,
            "body {:?}, expected the bytes of {path}",
            String::from_utf8_lossy(&reply.body)
        );
        self.header_is(row, reply, "content-type", "application/octet-stream");
        let etag = format!("\"sha256:{}\"", sha256_hex(&reply.body));
        self.header_is(row, reply, "etag", &etag);
        self.header_is(row, reply, "x-murmur-containment", self.class.as_str());
        self.header_is(row, reply, "x-murmur-export-root", "out/");
        expect!(
            self,
            row,
            reply
                .single("x-murmur-mtime-ms")
                .is_ok_and(|v| v.parse::<i64>().is_ok_and(|ms| ms > 0)),
            "x-murmur-mtime-ms missing or not a positive integer"
        );
    }

    fn check_refusal(&mut self, row: &Row, reply: &Reply, status: u16, code: &str) {
        let body = String::from_utf8_lossy(&reply.body).into_owned();
        expect!(
            self,
            row,
            reply.status == status,
            "status {}, expected {status} {code}; body {body}",
            reply.status
        );
        self.header_is(row, reply, "content-type", "application/json");
        if status == 405 {
            self.header_is(row, reply, "allow", "GET");
        } else {
            expect!(self, row, !reply.has("allow"), "`allow` on a non-405");
        }
        expect!(self, row, !reply.has("etag"), "an etag on a refusal");
        let Ok(Value::Object(json)) = serde_json::from_slice::<Value>(&reply.body) else {
            self.fail(row, format!("refusal body is not a JSON object: {body}"));
            return;
        };
        let keys: Vec<&str> = json.keys().map(String::as_str).collect();
        expect!(
            self,
            row,
            keys == ["error", "message"],
            "refusal keys {keys:?}"
        );
        expect!(
            self,
            row,
            json["error"] == code,
            "error {}, expected {code}",
            json["error"]
        );
        let message = json["message"].as_str().unwrap_or_default().to_owned();
        expect!(self, row, !message.is_empty(), "empty refusal message");
        let known = self
            .messages
            .entry(json["error"].to_string())
            .or_insert_with(|| message.clone())
            .clone();
        expect!(
            self,
            row,
            known == message,
            "message {message:?} differs from {known:?} for the same code"
        );
    }

    fn check_listing(&mut self, row: &Row, reply: &Reply) {
        let class = self.class;
        expect!(
            self,
            row,
            reply.status == 200,
            "listing status {}",
            reply.status
        );
        self.header_is(row, reply, "content-type", "application/json");
        self.header_is(row, reply, "x-murmur-containment", class.as_str());
        self.header_is(row, reply, "x-murmur-export-root", "out/");
        let Ok(Value::Object(json)) = serde_json::from_slice::<Value>(&reply.body) else {
            let body = String::from_utf8_lossy(&reply.body).into_owned();
            self.fail(row, format!("listing is not a JSON object: {body}"));
            return;
        };
        let keys: Vec<&str> = json.keys().map(String::as_str).collect();
        expect!(
            self,
            row,
            keys == [
                "root",
                "mode",
                "max_bytes",
                "generation",
                "containment_achieved",
                "entries"
            ],
            "listing keys {keys:?}"
        );
        expect!(self, row, json["root"] == "out/", "root {}", json["root"]);
        expect!(
            self,
            row,
            json["mode"] == "read-only",
            "mode {}",
            json["mode"]
        );
        expect!(
            self,
            row,
            json["max_bytes"] == MAX_BYTES,
            "max_bytes {}",
            json["max_bytes"]
        );
        expect!(
            self,
            row,
            json["generation"] == 0,
            "generation {}",
            json["generation"]
        );
        expect!(
            self,
            row,
            json["containment_achieved"] == class.as_str(),
            "containment_achieved {}",
            json["containment_achieved"]
        );
        let entries = json["entries"].as_array().cloned().unwrap_or_default();
        let got: Vec<&str> = entries
            .iter()
            .map(|e| e["path"].as_str().unwrap_or("<not a string>"))
            .collect();
        let want_entries = self.world.listed(class);
        let want: Vec<&str> = want_entries.iter().map(|(p, _)| p.as_str()).collect();
        if got != want {
            let missing: Vec<&&str> = want.iter().filter(|p| !got.contains(p)).collect();
            let extra: Vec<&&str> = got.iter().filter(|p| !want.contains(p)).collect();
            self.fail(
                row,
                format!(
                    "listed paths differ: missing {missing:?}, unexpected {extra:?} \
                     (order or duplicates differ when both are empty)"
                ),
            );
        }
        for entry in &entries {
            let path = entry["path"].as_str().unwrap_or_default();
            let Some((_, real)) = want_entries.iter().find(|(p, _)| p == path) else {
                continue;
            };
            let bytes = self.world.contents(real).to_vec();
            let entry_keys: Vec<&str> = entry
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect())
                .unwrap_or_default();
            expect!(
                self,
                row,
                entry_keys == ["path", "size_bytes", "mtime_ms", "sha256"],
                "entry {path}: keys {entry_keys:?}"
            );
            expect!(
                self,
                row,
                entry["size_bytes"] == bytes.len(),
                "entry {path}: size_bytes {}, expected {}",
                entry["size_bytes"],
                bytes.len()
            );
            expect!(
                self,
                row,
                entry["sha256"] == sha256_hex(&bytes),
                "entry {path}: sha256 {}",
                entry["sha256"]
            );
        }
    }

    /// The trace holds one JSON line per routed row, in order (requests are sequential and
    /// each line is written before its answer leaves, D-6.4).
    fn check_trace(&mut self, server: &Served, sent: &[(&Row, &Expect)]) {
        let class = self.class.as_str();
        let lines = trace_lines(self.class, server);
        let routed: Vec<&(&Row, &Expect)> = sent
            .iter()
            .filter(|(r, _)| r.trace != Trace::None)
            .collect();
        if lines.len() != routed.len() {
            self.failures.push(format!(
                "[{class}] trace has {} lines, expected {} (one per request routed under \
                 /resources; {} requests sent, {} never reached routing)",
                lines.len(),
                routed.len(),
                sent.len(),
                sent.len() - routed.len()
            ));
        }
        for (i, (line, (row, expect))) in lines.iter().zip(&routed).enumerate() {
            expect!(
                self,
                row,
                !line.contains(SENTINEL),
                "trace line {i} holds the sentinel"
            );
            let event: Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => {
                    self.fail(row, format!("trace line {i} is not JSON ({e}): {line}"));
                    continue;
                }
            };
            expect!(
                self,
                row,
                event["event_type"] == row.trace.event_type(),
                "trace line {i}: event_type {}, expected {}",
                event["event_type"],
                row.trace.event_type()
            );
            expect!(
                self,
                row,
                event["outcome"] == expect.outcome(),
                "trace line {i}: outcome {}, expected {}",
                event["outcome"],
                expect.outcome()
            );
            if row.trace != Trace::Redeem {
                expect!(
                    self,
                    row,
                    event["containment_achieved"] == class,
                    "trace line {i}: containment_achieved {}",
                    event["containment_achieved"]
                );
            }
            expect!(
                self,
                row,
                event["generation"] == 0,
                "trace line {i}: generation {}",
                event["generation"]
            );
            let refused = expect.outcome() != "ok";
            expect!(
                self,
                row,
                event["reason"].is_string() == refused,
                "trace line {i}: reason {} for outcome {}",
                event["reason"],
                expect.outcome()
            );
            if let Expect::File(path) = expect {
                let bytes = self.world.contents(path);
                expect!(
                    self,
                    row,
                    event["sha256"] == sha256_hex(bytes) && event["bytes"] == bytes.len(),
                    "trace line {i}: bytes {} sha256 {} do not describe {path}",
                    event["bytes"],
                    event["sha256"]
                );
            }
        }
    }
}

/// Sends every row meant for `server`'s class, then a final normal read, and checks each
/// answer and the trace. Returns the failures and how many rows hyper refused by itself.
fn run_server(
    world: &Tree,
    class: Class,
    server: &mut Served,
    rows: &[Row],
) -> (Vec<String>, usize) {
    let mut checker = Checker {
        world,
        class,
        failures: Vec::new(),
        messages: BTreeMap::new(),
    };
    let after = get("/resources/files/report.md", all(ok("report.md")));
    let after = Row {
        label: "a normal read after the whole table".to_owned(),
        ..after
    };
    let mut sent: Vec<(&Row, &Expect)> = Vec::new();
    for row in rows.iter().chain(std::iter::once(&after)) {
        let Some(expect) = row.per.for_class(class) else {
            continue;
        };
        match try_exchange_raw(server.port(), &row.request, IO_DEADLINE) {
            Ok(raw) => checker.check(row, expect, &raw),
            Err(e) => checker.fail(row, e),
        }
        sent.push((row, expect));
    }
    match server.child.try_wait() {
        Ok(None) => {}
        other => checker.failures.push(format!(
            "[{}] the server is no longer running after the table: {other:?}; stderr:\n{}",
            class.as_str(),
            server.stderr()
        )),
    }
    checker.check_trace(server, &sent);
    let unparsed = sent
        .iter()
        .filter(|(_, e)| matches!(e, Expect::Parser(_) | Expect::Closed))
        .count();
    (checker.failures, unparsed)
}

#[test]
fn hostile_table() {
    let world = Tree::build();

    let targets = target_table(&world);
    assert!(
        targets.len() >= 100,
        "the target table has only {} rows",
        targets.len()
    );
    let http = http_table();
    println!(
        "{} target rows for every class, {} HTTP-level rows on advisory",
        targets.len(),
        http.len()
    );
    let rows: Vec<Row> = targets.into_iter().chain(http).collect();

    let mut servers: Vec<(Class, Served)> = CLASSES
        .iter()
        .map(|class| (*class, spawn(&world, *class)))
        .collect();
    let results: Vec<(Class, Vec<String>, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .iter_mut()
            .map(|(class, server)| {
                let (world, rows, class) = (&world, &rows, *class);
                scope.spawn(move || {
                    let (failures, unparsed) = run_server(world, class, server, rows);
                    (class, failures, unparsed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a server's table thread panicked"))
            .collect()
    });

    let mut failures = Vec::new();
    for (class, class_failures, unparsed) in results {
        println!(
            "{}: {} rows failed, {unparsed} requests answered by the HTTP parser alone \
             (no trace line)",
            class.as_str(),
            class_failures.len()
        );
        failures.extend(class_failures);
    }
    expect_nothing_written(&world, &mut failures);
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// No verb wrote anything: the PUT row's target does not exist afterwards.
fn expect_nothing_written(world: &Tree, failures: &mut Vec<String>) {
    let put_target = world.dir.path().join("out/new.txt");
    if put_target.exists() {
        failures.push("PUT created out/new.txt".to_owned());
    }
}
