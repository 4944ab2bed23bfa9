//! The typed manifest (D-1) and the launch checks that can refuse a launch before anything is
//! created: `E-MAN-003` (malformed), `E-CAP-008` (a persistent capsule's handle lifetime) and
//! `E-CAP-007` (an export root that escapes the workdir).

mod depth;
mod error;
mod yaml;

/// The allow-lists of `capabilities` and their rules.
pub use crate::policy::{Address, AddressError, AllowList, AllowRule, Scheme};
pub use error::LaunchError;

use crate::scope::{RootCheckError, RootPath};
use crate::units::{parse_byte_size, parse_duration_secs};
use serde_json::{Map, Value};

/// The warning for a manifest that declares no plane and no capability (D-15.1).
const NOTHING_DECLARED: &str = "the manifest declares no plane and no capability: nothing is \
     served and no tool is registered (declare exports.files, exports.peer_files, \
     capabilities.peer_fetch or capabilities.network; see README § Manifest)";

/// Default `max_bytes` for both exports: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Default `exports.peer_files.max_ttl`: one hour.
pub const DEFAULT_MAX_TTL_SECS: u64 = 3600;
/// The ceiling on `max_ttl` for `after_task: sleep` (D-1.8).
pub const SLEEP_MAX_TTL_SECS: u64 = 900;

/// `exports.files`: the operator plane, which lists and reads the files under `root`.
///
/// ```
/// use resource_plane::Manifest;
/// use resource_plane::manifest::DEFAULT_MAX_BYTES;
///
/// let manifest = Manifest::from_yaml(
///     "name: r\nexports: { files: { root: ./out/, mode: read-only, max_bytes: 1Mi } }",
/// ).unwrap().manifest;
/// let files = manifest.files.unwrap();
/// assert_eq!(files.root.declared(), "./out/");
/// assert_eq!(files.max_bytes, 1 << 20);
///
/// let plain = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// assert_eq!(plain.unwrap().manifest.files.unwrap().max_bytes, DEFAULT_MAX_BYTES);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesExport {
    /// The export root.
    pub root: RootPath,
    /// The largest file a read serves.
    pub max_bytes: u64,
}

/// `exports.peer_files`: the peer plane, which mints handles for files under `root` (the
/// `share-file` tool) and serves them to the peers they name.
///
/// ```
/// use resource_plane::Manifest;
///
/// let manifest = Manifest::from_yaml(
///     "name: r\nexports: { peer_files: { root: out/, max_ttl: 15m, require_peer_proof: true } }",
/// ).unwrap().manifest;
/// let peer_files = manifest.peer_files.unwrap();
/// assert_eq!(peer_files.declared_max_ttl_secs, Some(900));
/// assert_eq!(peer_files.max_ttl_secs(), 900);
/// assert!(peer_files.require_peer_proof);
///
/// let plain = Manifest::from_yaml("name: r\nexports: { peer_files: { root: out/ } }");
/// let plain = plain.unwrap().manifest.peer_files.unwrap();
/// assert_eq!((plain.declared_max_ttl_secs, plain.max_ttl_secs()), (None, 3600));
/// assert!(!plain.require_peer_proof);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerFilesExport {
    /// The export root.
    pub root: RootPath,
    /// `max_ttl` as declared, in seconds; `None` when absent.
    pub declared_max_ttl_secs: Option<u64>,
    /// The largest file a redeem serves.
    pub max_bytes: u64,
    /// `require_peer_proof`: mint only for peers whose card publishes an identity key
    /// (D-14.2). Default false.
    pub require_peer_proof: bool,
}

impl PeerFilesExport {
    /// The effective `max_ttl` in seconds: as declared, else one hour (D-1.5).
    pub fn max_ttl_secs(&self) -> u64 {
        self.declared_max_ttl_secs.unwrap_or(DEFAULT_MAX_TTL_SECS)
    }
}

/// `lifecycle.after_task`: what the capsule does once its task is done. A capsule that sleeps
/// may be woken much later, so handles it minted must not outlive a short bound: exporting
/// peer files, it must declare a `max_ttl` of at most 900 s (`E-CAP-008`).
///
/// ```
/// use resource_plane::Manifest;
/// use resource_plane::manifest::AfterTask;
///
/// let sleeper = |max_ttl: &str| {
///     let yaml = format!(
///         "name: r\n\
///          exports: {{ peer_files: {{ root: out/{max_ttl} }} }}\n\
///          lifecycle: {{ after_task: sleep }}"
///     );
///     Manifest::from_yaml(&yaml).unwrap().manifest
/// };
/// let short = sleeper(", max_ttl: 15m");
/// assert_eq!(short.after_task, AfterTask::Sleep);
/// assert!(short.check_handle_lifetime().is_ok());
/// assert_eq!(sleeper("").check_handle_lifetime().unwrap_err().code(), "E-CAP-008");
/// assert_eq!(Manifest::from_yaml("name: r").unwrap().manifest.after_task, AfterTask::Exit);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AfterTask {
    /// The capsule exits after its task (the default).
    #[default]
    Exit,
    /// The capsule sleeps and may be woken for another task.
    Sleep,
}

/// The typed manifest a runtime hands the plugin (D-1.1): what the capsule exports, what it
/// may reach, and what it does after its task. A runtime parses it from the capsule's YAML,
/// or from the JSON-shaped value it already holds; both read the same way.
///
/// ```
/// use resource_plane::Manifest;
///
/// let yaml = "name: reporter\n\
///             exports: { files: { root: out/, mode: read-only } }\n\
///             capabilities: { peer_fetch: { allow: [localhost] } }";
/// let from_yaml = Manifest::from_yaml(yaml).unwrap().manifest;
/// let from_value = Manifest::from_value(&serde_json::json!({
///     "name": "reporter",
///     "exports": { "files": { "root": "out/", "mode": "read-only" } },
///     "capabilities": { "peer_fetch": { "allow": ["localhost"] } },
/// })).unwrap().manifest;
/// assert_eq!(from_yaml, from_value);
/// assert_eq!(from_yaml.planes(), ["files"]);
/// assert_eq!(from_yaml.granted_tools(), ["fetch-peer-file"]);
/// assert_eq!(from_yaml.effective()["exports"]["files"]["max_bytes"], 10 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The capsule's name: its agent card's `name` and the head of its audience.
    pub name: String,
    /// `exports.files`, when declared.
    pub files: Option<FilesExport>,
    /// `exports.peer_files`, when declared.
    pub peer_files: Option<PeerFilesExport>,
    /// `capabilities.peer_fetch.allow`, when `capabilities.peer_fetch` is declared.
    pub peer_fetch: Option<AllowList>,
    /// `capabilities.network.allow`, when declared. Absent means no outbound authority.
    pub network: Option<AllowList>,
    /// `lifecycle.after_task`.
    pub after_task: AfterTask,
}

/// A parsed manifest plus the warnings it produced, which a runtime shows its operator.
///
/// ```
/// use resource_plane::Manifest;
///
/// let parsed = Manifest::from_yaml(
///     "name: r\nexports: { files: { root: out/, mode: read-only, max_byte: 1Mi } }",
/// ).unwrap();
/// assert_eq!(
///     parsed.warnings,
///     ["unknown key `exports.files.max_byte` (did you mean `max_bytes`?)"],
/// );
/// assert_eq!(parsed.manifest.files.unwrap().max_bytes, 10 * 1024 * 1024, "the default applies");
/// ```
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The manifest.
    pub manifest: Manifest,
    /// One line per unknown key (``unknown key `exports.files.max_byte` (did you mean
    /// `max_bytes`?)``, D-1.1), then one when the manifest declares no plane and no capability
    /// (D-15.1). Plain text without a level prefix: the binary logs each at `warn`, `check`
    /// lists them in its JSON.
    pub warnings: Vec<String>,
}

/// How a manifest is read: leniently, unknown keys being warnings (the default), or strictly,
/// an unknown key refusing the manifest.
///
/// ```
/// use resource_plane::Manifest;
/// use resource_plane::manifest::ParseOptions;
///
/// let yaml = "name: r\nexports: { files: { root: out/, mode: read-only, max_byte: 1Mi } }";
/// assert_eq!(Manifest::from_yaml_with(yaml, ParseOptions::LENIENT).unwrap().warnings.len(), 1);
/// let refused = Manifest::from_yaml_with(yaml, ParseOptions::STRICT).unwrap_err();
/// assert_eq!(refused.code(), "E-MAN-003");
/// assert!(refused.to_string().contains("exports.files.max_byte"));
/// assert_eq!(ParseOptions::default(), ParseOptions::LENIENT);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParseOptions {
    /// Unknown keys refuse the manifest (`E-MAN-003`) instead of being warnings (D-15.3):
    /// what `serve --strict` and `check --strict` ask for.
    pub strict: bool,
}

impl ParseOptions {
    /// Unknown keys are warnings (the default, D-1.1).
    pub const LENIENT: ParseOptions = ParseOptions { strict: false };
    /// Unknown keys refuse the manifest (D-15.3).
    pub const STRICT: ParseOptions = ParseOptions { strict: true };
}

type Res<T> = Result<T, LaunchError>;

/// What reading one manifest collects on the way: its warnings, and whether an unknown key is
/// one of them or a refusal.
struct Reader {
    options: ParseOptions,
    warnings: Vec<String>,
}

struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// The mapping at `path`. Each key [`known_keys`] does not name there is a warning, naming
    /// the known key within edit distance 2 if there is one; under
    /// [`strict`](ParseOptions::strict) the first such key refuses the manifest.
    fn of(path: &str, value: &'a Value, reader: &mut Reader) -> Res<Self> {
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

    fn field(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// A present, non-null value.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A declared block. A null one (`files:` with nothing under it) is declared and empty, so
    /// its required fields are reported missing instead of the block being silently dropped.
    fn block(&self, key: &str) -> Option<&'a Value> {
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
fn known_keys(path: &str) -> &'static [&'static str] {
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
fn suggest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    known
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, _)| *distance <= SUGGESTION_DISTANCE)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// ` (did you mean `key`?)`, or nothing.
fn did_you_mean(suggestion: Option<&str>) -> String {
    suggestion.map_or_else(String::new, |key| format!(" (did you mean `{key}`?)"))
}

/// The Levenshtein distance between `a` and `b` in characters: the fewest insertions,
/// deletions and substitutions that turn one into the other. A key is short; one row is kept.
fn edit_distance(a: &str, b: &str) -> usize {
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
fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Manifest {
    /// Parses a manifest file's bytes: UTF-8 YAML. Unknown keys are warnings.
    ///
    /// # Errors
    /// `E-MAN-003`: not UTF-8, or as [`from_yaml`](Self::from_yaml).
    pub fn from_yaml_bytes(bytes: &[u8]) -> Result<Parsed, LaunchError> {
        Self::from_yaml_bytes_with(bytes, ParseOptions::LENIENT)
    }

    /// [`from_yaml_bytes`](Self::from_yaml_bytes) read with `options`.
    ///
    /// # Errors
    /// `E-MAN-003`: not UTF-8, or as [`from_yaml_with`](Self::from_yaml_with).
    pub fn from_yaml_bytes_with(
        bytes: &[u8],
        options: ParseOptions,
    ) -> Result<Parsed, LaunchError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| LaunchError::malformed("manifest", "UTF-8 YAML text"))?;
        Self::from_yaml_with(text, options)
    }

    /// Parses a YAML manifest (the CLI's format). Unknown keys are warnings.
    ///
    /// # Errors
    /// `E-MAN-003` naming the first malformed field, or the line and column of a YAML syntax
    /// error.
    pub fn from_yaml(text: &str) -> Result<Parsed, LaunchError> {
        Self::from_yaml_with(text, ParseOptions::LENIENT)
    }

    /// [`from_yaml`](Self::from_yaml) read with `options`:
    /// `Manifest::from_yaml_with(text, ParseOptions::STRICT)` refuses unknown keys as
    /// `serve --strict` does (D-15.3).
    ///
    /// # Errors
    /// As [`from_yaml`](Self::from_yaml); under [`ParseOptions::STRICT`] also
    /// `E-MAN-003` ``<key path>: unknown key`` for the first unknown key.
    pub fn from_yaml_with(text: &str, options: ParseOptions) -> Result<Parsed, LaunchError> {
        // A byte order mark may open a YAML stream (an editor's UTF-8 "with BOM"); the parser
        // would read it as content.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Self::from_value_with(&yaml::manifest_value(text)?, options)
    }

    /// Parses a manifest from a JSON-shaped value (what a runtime holds after its own parsing).
    /// Unknown keys are warnings.
    ///
    /// # Errors
    /// `E-MAN-003` naming the first malformed field.
    pub fn from_value(value: &Value) -> Result<Parsed, LaunchError> {
        Self::from_value_with(value, ParseOptions::LENIENT)
    }

    /// [`from_value`](Self::from_value) read with `options`.
    ///
    /// # Errors
    /// As [`from_value`](Self::from_value); under [`ParseOptions::STRICT`] also `E-MAN-003`
    /// ``<key path>: unknown key`` for the first unknown key.
    pub fn from_value_with(value: &Value, options: ParseOptions) -> Result<Parsed, LaunchError> {
        let mut reader = Reader {
            options,
            warnings: Vec::new(),
        };
        if !value.is_object() {
            return Err(LaunchError::malformed(
                "manifest",
                "a mapping with at least `name`",
            ));
        }
        let top = Fields::of("", value, &mut reader)?;

        // The name heads the audience, which a peer sends as an HTTP header value (D-8): it
        // may be any text but a control character, which no header can carry.
        let name = match top.get("name") {
            Some(Value::String(s)) if crate::audience::is_usable_name(s) => s.trim().to_owned(),
            _ => {
                return Err(LaunchError::malformed(
                    "name",
                    "a non-empty string without control characters",
                ));
            }
        };

        let (mut files, mut peer_files) = (None, None);
        if let Some(exports) = top.get("exports") {
            let exports = Fields::of("exports", exports, &mut reader)?;
            if let Some(v) = exports.block("files") {
                let f = Fields::of("exports.files", v, &mut reader)?;
                let root = parse_root(&f)?;
                match f.get("mode") {
                    Some(Value::String(m)) if m == "read-only" => {}
                    _ => {
                        return Err(LaunchError::malformed(f.field("mode"), "exactly read-only"));
                    }
                }
                files = Some(FilesExport {
                    root,
                    max_bytes: parse_max_bytes(&f)?,
                });
            }
            if let Some(v) = exports.block("peer_files") {
                let f = Fields::of("exports.peer_files", v, &mut reader)?;
                let root = parse_root(&f)?;
                let declared_max_ttl_secs = match f.get("max_ttl") {
                    None => None,
                    Some(v) => Some(parse_duration_secs(v).ok_or_else(|| {
                        LaunchError::malformed(
                            f.field("max_ttl"),
                            "a positive duration: seconds, or digits with one of s, m, h, d (15m)",
                        )
                    })?),
                };
                let max_bytes = parse_max_bytes(&f)?;
                let require_peer_proof = match f.get("require_peer_proof") {
                    None => false,
                    Some(Value::Bool(required)) => *required,
                    Some(_) => {
                        return Err(LaunchError::malformed(
                            f.field("require_peer_proof"),
                            "true or false",
                        ));
                    }
                };
                peer_files = Some(PeerFilesExport {
                    root,
                    declared_max_ttl_secs,
                    max_bytes,
                    require_peer_proof,
                });
            }
        }

        let (mut peer_fetch, mut network) = (None, None);
        if let Some(caps) = top.get("capabilities") {
            let caps = Fields::of("capabilities", caps, &mut reader)?;
            for (key, slot) in [("peer_fetch", &mut peer_fetch), ("network", &mut network)] {
                if let Some(block) = caps.block(key) {
                    let path = caps.field(key);
                    let f = Fields::of(&path, block, &mut reader)?;
                    *slot = Some(parse_allow(&f)?);
                }
            }
        }

        let mut after_task = AfterTask::Exit;
        if let Some(lifecycle) = top.get("lifecycle") {
            let l = Fields::of("lifecycle", lifecycle, &mut reader)?;
            after_task = match l.get("after_task") {
                None => AfterTask::Exit,
                Some(Value::String(s)) if s.trim() == "exit" => AfterTask::Exit,
                Some(Value::String(s)) if s.trim() == "sleep" => AfterTask::Sleep,
                Some(_) => {
                    return Err(LaunchError::malformed(
                        "lifecycle.after_task",
                        "exit or sleep",
                    ));
                }
            };
        }

        let manifest = Manifest {
            name,
            files,
            peer_files,
            peer_fetch,
            network,
            after_task,
        };
        if manifest.declares_nothing() {
            reader.warnings.push(NOTHING_DECLARED.to_owned());
        }
        Ok(Parsed {
            manifest,
            warnings: reader.warnings,
        })
    }

    /// Whether the manifest declares no plane (`exports.files`, `exports.peer_files`) and no
    /// capability (`capabilities.peer_fetch`, `capabilities.network`): a capsule that serves
    /// nothing and has no tool, worth a warning (D-15.1).
    pub fn declares_nothing(&self) -> bool {
        self.files.is_none()
            && self.peer_files.is_none()
            && self.peer_fetch.is_none()
            && self.network.is_none()
    }

    /// The planes declared, sorted: `files` for `exports.files`, `peer_files` for
    /// `exports.peer_files` (the ready line's `planes`, D-15.6).
    pub fn planes(&self) -> Vec<&'static str> {
        let mut planes = Vec::new();
        if self.files.is_some() {
            planes.push("files");
        }
        if self.peer_files.is_some() {
            planes.push("peer_files");
        }
        planes
    }

    /// The tools a capsule launched from this manifest registers, sorted (D-12):
    /// `fetch-peer-file` when `capabilities.peer_fetch` is declared, `share-file` when
    /// `exports.peer_files` is.
    pub fn granted_tools(&self) -> Vec<&'static str> {
        let mut tools = Vec::new();
        if self.peer_fetch.is_some() {
            tools.push("fetch-peer-file");
        }
        if self.peer_files.is_some() {
            tools.push("share-file");
        }
        tools
    }

    /// The effective configuration, every default filled in (what `check` prints, D-15.4). It
    /// mirrors the YAML's shape, with sizes in bytes and durations in seconds, and `null` for a
    /// block that is not declared:
    ///
    /// ```json
    /// {"name":"reporter",
    ///  "exports":{"files":{"root":"out/","mode":"read-only","max_bytes":10485760},
    ///             "peer_files":{"root":"out/","max_ttl":900,"max_bytes":10485760,
    ///                           "require_peer_proof":false}},
    ///  "capabilities":{"peer_fetch":{"allow":["localhost:41234"]},"network":null},
    ///  "lifecycle":{"after_task":"exit"}}
    /// ```
    ///
    /// Roots are as declared (trimmed); allow entries as parsed (host lowercased, a bare
    /// trailing `/` dropped).
    pub fn effective(&self) -> Value {
        let allow = |list: &Option<AllowList>| {
            list.as_ref().map(|list| {
                serde_json::json!({
                    "allow": list.rules().iter().map(ToString::to_string).collect::<Vec<_>>()
                })
            })
        };
        serde_json::json!({
            "name": self.name,
            "exports": {
                "files": self.files.as_ref().map(|f| serde_json::json!({
                    "root": f.root.declared(),
                    "mode": "read-only",
                    "max_bytes": f.max_bytes,
                })),
                "peer_files": self.peer_files.as_ref().map(|p| serde_json::json!({
                    "root": p.root.declared(),
                    "max_ttl": p.max_ttl_secs(),
                    "max_bytes": p.max_bytes,
                    "require_peer_proof": p.require_peer_proof,
                })),
            },
            "capabilities": {
                "peer_fetch": allow(&self.peer_fetch),
                "network": allow(&self.network),
            },
            "lifecycle": {
                "after_task": match self.after_task {
                    AfterTask::Exit => "exit",
                    AfterTask::Sleep => "sleep",
                },
            },
        })
    }

    /// The launch checks, in order: [`check_handle_lifetime`](Self::check_handle_lifetime)
    /// (`E-CAP-008`), then [`check_roots`](Self::check_roots) (`E-CAP-007`) (D-1.8, D-1.9).
    /// `check_root` is asked about each declared root, as in `check_roots`.
    ///
    /// ```
    /// use resource_plane::backends::{Filesystem, MemoryFilesystem};
    /// use resource_plane::Manifest;
    ///
    /// let fs = MemoryFilesystem::new();
    /// fs.add_symlink("out", "../elsewhere");
    /// let manifest = Manifest::from_yaml("name: x\nexports: { files: { root: out, mode: read-only } }")
    ///     .unwrap()
    ///     .manifest;
    /// let refused = manifest.check_launch(|root| Ok(fs.check_root(root)?)).unwrap_err();
    /// assert_eq!(refused.code(), "E-CAP-007");
    /// ```
    ///
    /// # Errors
    /// The first refusal.
    pub fn check_launch(
        &self,
        check_root: impl FnMut(&RootPath) -> Result<(), RootCheckError>,
    ) -> Result<(), LaunchError> {
        self.check_handle_lifetime()?;
        self.check_roots(check_root)
    }

    /// `E-CAP-008` (D-1.8): a persistent capsule (`after_task: sleep`) exporting peer files
    /// must declare a `max_ttl` of at most 900 s. Needs no filesystem.
    ///
    /// # Errors
    /// `E-CAP-008`.
    pub fn check_handle_lifetime(&self) -> Result<(), LaunchError> {
        if let Some(peer) = &self.peer_files
            && self.after_task == AfterTask::Sleep
            && peer
                .declared_max_ttl_secs
                .is_none_or(|ttl| ttl > SLEEP_MAX_TTL_SECS)
        {
            return Err(LaunchError::HandleLifetime {
                declared_max_ttl_secs: peer.declared_max_ttl_secs,
            });
        }
        Ok(())
    }

    /// `E-CAP-007` (D-1.9) for `exports.files.root` then `exports.peer_files.root`: a root
    /// whose path, resolved beneath the workdir, escapes it. The manifest touches no
    /// filesystem: `check_root` answers for each declared root, in that order, usually
    /// `|root| Ok(fs.check_root(root)?)` over the workdir's
    /// [`Filesystem`](crate::backends::Filesystem), which looks the path up and creates nothing.
    ///
    /// # Errors
    /// `E-CAP-007` naming the field: [`LaunchError::RootEscapes`] when `check_root` says
    /// [`RootCheckError::Escapes`], [`LaunchError::RootUncheckable`] when it says the workdir
    /// could not be read to tell.
    pub fn check_roots(
        &self,
        mut check_root: impl FnMut(&RootPath) -> Result<(), RootCheckError>,
    ) -> Result<(), LaunchError> {
        let roots = [
            ("exports.files.root", self.files.as_ref().map(|f| &f.root)),
            (
                "exports.peer_files.root",
                self.peer_files.as_ref().map(|f| &f.root),
            ),
        ];
        for (field, root) in roots {
            let Some(root) = root else { continue };
            if let Err(e) = check_root(root) {
                let root = root.declared().to_owned();
                return Err(match e {
                    RootCheckError::Escapes => LaunchError::RootEscapes { field, root },
                    RootCheckError::Uncheckable(detail) => LaunchError::RootUncheckable {
                        field,
                        root,
                        detail,
                    },
                });
            }
        }
        Ok(())
    }
}

fn parse_root(f: &Fields<'_>) -> Res<RootPath> {
    match f.get("root") {
        Some(Value::String(s)) => RootPath::parse(s)
            .map_err(|refused| LaunchError::malformed(f.field("root"), refused.accepted())),
        // YAML reads `8`, `1.50` or `true` as a number or a boolean, whose text may not be
        // what was written (`1.50` is 1.5): refused, saying how to write it, not "required".
        Some(_) => Err(LaunchError::malformed(
            f.field("root"),
            "a relative path inside the workdir written as a string: quote a name YAML reads \
             as a number or a boolean ('8')",
        )),
        None => Err(LaunchError::malformed(
            f.field("root"),
            "a relative path inside the workdir such as out/ or . (required)",
        )),
    }
}

fn parse_max_bytes(f: &Fields<'_>) -> Res<u64> {
    match f.get("max_bytes") {
        None => Ok(DEFAULT_MAX_BYTES),
        Some(v) => parse_byte_size(v).ok_or_else(|| {
            LaunchError::malformed(
                f.field("max_bytes"),
                "a positive integer, or digits with one suffix Ki, Mi or Gi (10Mi)",
            )
        }),
    }
}

fn parse_allow(f: &Fields<'_>) -> Res<AllowList> {
    const NON_EMPTY: &str =
        "a non-empty list of host, host:port, http://host[:port] or https://host[:port]";
    const ENTRY: &str = "a string: host, host:port, http://host[:port] or https://host[:port]";
    let field = f.field("allow");
    let Some(Value::Array(items)) = f.get("allow") else {
        return Err(LaunchError::malformed(&field, NON_EMPTY));
    };
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let rule = match item {
            Value::String(s) => AllowRule::parse(s).map_err(|refused| refused.accepted()),
            _ => Err(ENTRY),
        };
        rules.push(
            rule.map_err(|accepted| LaunchError::malformed(format!("{field}[{i}]"), accepted))?,
        );
    }
    AllowList::new(rules).ok_or_else(|| LaunchError::malformed(&field, NON_EMPTY))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workdir where every root is inside.
    fn all_inside(_: &RootPath) -> Result<(), RootCheckError> {
        Ok(())
    }

    fn parse(yaml: &str) -> Result<Manifest, LaunchError> {
        Manifest::from_yaml(yaml).map(|p| p.manifest)
    }

    fn field_of(yaml: &str) -> String {
        let e = parse(yaml).expect_err("must be refused");
        assert_eq!(e.code(), "E-MAN-003");
        e.message().split(':').next().unwrap().to_owned()
    }

    #[test]
    fn contract_example_parses_with_defaults() {
        let m = parse(
            "name: reporter\nexports:\n  files: { root: out/, mode: read-only, max_bytes: 10Mi }\n  \
             peer_files: { root: out/, max_ttl: 15m }\ncapabilities:\n  peer_fetch: { allow: [\"localhost:41234\"] }\n  \
             network: { allow: [\"localhost\"] }\nlifecycle: { after_task: exit }\n",
        )
        .unwrap();
        assert_eq!(m.name, "reporter");
        assert_eq!(m.files.as_ref().unwrap().root.declared(), "out/");
        assert_eq!(m.files.as_ref().unwrap().max_bytes, 10 << 20);
        let peer = m.peer_files.unwrap();
        assert_eq!(peer.max_ttl_secs(), 900);
        assert_eq!(peer.max_bytes, DEFAULT_MAX_BYTES);
        assert!(m.peer_fetch.is_some() && m.network.is_some());
    }

    #[test]
    fn require_peer_proof_is_a_boolean_defaulting_to_false() {
        let peer = |extra: &str| {
            parse(&format!(
                "name: x\nexports:\n  peer_files: {{ root: out/{extra} }}"
            ))
        };
        let required = |extra: &str| peer(extra).unwrap().peer_files.unwrap().require_peer_proof;
        assert!(!required(""));
        assert!(!required(", require_peer_proof: false"));
        assert!(required(", require_peer_proof: true"));
        let parsed = Manifest::from_yaml(
            "name: x\nexports:\n  peer_files: { root: out/, require_peer_proof: true }",
        )
        .unwrap();
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        for bad in ["\"true\"", "yes_please", "1", "0", "[true]", "{ a: true }"] {
            let e = peer(&format!(", require_peer_proof: {bad}")).expect_err(bad);
            assert_eq!(e.code(), "E-MAN-003", "{bad}");
            assert_eq!(
                e.message(),
                "exports.peer_files.require_peer_proof: true or false",
                "{bad}"
            );
        }
        for bad in ["!x true", ".nan"] {
            let yaml = format!(
                "name: x\nexports:\n  peer_files: {{ root: out/, require_peer_proof: {bad} }}"
            );
            assert_eq!(
                field_of(&yaml),
                "exports.peer_files.require_peer_proof",
                "{bad}"
            );
        }
        // A null value is absent, as for every field: the default.
        assert!(!required(", require_peer_proof: ~"));
    }

    #[test]
    fn minimal_manifest_declares_nothing() {
        let m = parse("name: x").unwrap();
        assert!(m.files.is_none() && m.peer_files.is_none());
        assert!(m.peer_fetch.is_none() && m.network.is_none());
        assert_eq!(m.after_task, AfterTask::Exit);
        let m = parse("name: x\nexports:\n  peer_files: { root: . }").unwrap();
        assert_eq!(m.peer_files.unwrap().max_ttl_secs(), 3600);
    }

    #[test]
    fn unknown_keys_warn() {
        let p = Manifest::from_yaml(
            "name: x\ncolour: blue\nexports: { files: { root: o, mode: read-only, extra: 1 } }",
        )
        .unwrap();
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(p.warnings[1].contains("exports.files.extra"));
    }

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

    #[test]
    fn unknown_key_warnings_name_the_key_meant_at_every_level() {
        for (yaml, warning) in [
            (
                "name: x\nexports: { files: { root: o, mode: read-only, max_byte: 1 } }",
                "unknown key `exports.files.max_byte` (did you mean `max_bytes`?)",
            ),
            (
                "nam: y\nname: x\nexports: { files: { root: o, mode: read-only } }",
                "unknown key `nam` (did you mean `name`?)",
            ),
            (
                "name: x\nexport: {}\nexports: { files: { root: o, mode: read-only } }",
                "unknown key `export` (did you mean `exports`?)",
            ),
            (
                "name: x\nexports: { file: {}, files: { root: o, mode: read-only } }",
                "unknown key `exports.file` (did you mean `files`?)",
            ),
            (
                "name: x\nexports: { peer_files: { root: o, max_tll: 5m } }",
                "unknown key `exports.peer_files.max_tll` (did you mean `max_ttl`?)",
            ),
            (
                "name: x\ncapabilities: { peer_fetc: {}, network: { allow: [a] } }",
                "unknown key `capabilities.peer_fetc` (did you mean `peer_fetch`?)",
            ),
            (
                "name: x\ncapabilities: { peer_fetch: { allow: [a], alow: [b] } }",
                "unknown key `capabilities.peer_fetch.alow` (did you mean `allow`?)",
            ),
            (
                "name: x\ncapabilities: { network: { allow: [a], allows: [b] } }",
                "unknown key `capabilities.network.allows` (did you mean `allow`?)",
            ),
            (
                "name: x\nexports: { files: { root: o, mode: read-only } }\nlifecycle: { after_tsak: exit }",
                "unknown key `lifecycle.after_tsak` (did you mean `after_task`?)",
            ),
            (
                "name: x\nexports: { files: { root: o, mode: read-only, colour: red } }",
                "unknown key `exports.files.colour`",
            ),
        ] {
            let parsed = Manifest::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
            assert_eq!(parsed.warnings, vec![warning.to_owned()], "{yaml}");
        }
        // `require_peer_proof` is a key of `exports.peer_files`: no warning.
        let parsed = Manifest::from_yaml(
            "name: x\nexports: { peer_files: { root: o, require_peer_proof: true } }",
        )
        .expect("a known key");
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    }

    #[test]
    fn strict_parsing_refuses_the_first_unknown_key_at_every_level() {
        for (yaml, message) in [
            (
                "name: x\nexports: { files: { root: o, mode: read-only, max_byte: 1 } }",
                "exports.files.max_byte: unknown key (did you mean `max_bytes`?)",
            ),
            ("name: x\ncolour: blue", "colour: unknown key"),
            (
                "name: x\nexports: { filez: {} }",
                "exports.filez: unknown key (did you mean `files`?)",
            ),
            (
                "name: x\nexports: { peer_files: { root: o, ttl: 5m } }",
                "exports.peer_files.ttl: unknown key",
            ),
            (
                "name: x\ncapabilities: { netwrok: { allow: [a] } }",
                "capabilities.netwrok: unknown key (did you mean `network`?)",
            ),
            (
                "name: x\ncapabilities: { peer_fetch: { allow: [a], deny: [b] } }",
                "capabilities.peer_fetch.deny: unknown key",
            ),
            (
                "name: x\ncapabilities: { network: { Allow: [a] } }",
                "capabilities.network.Allow: unknown key (did you mean `allow`?)",
            ),
            (
                "name: x\nlifecycle: { after: exit }",
                "lifecycle.after: unknown key",
            ),
            // Unknown keys of any shape are refused too, by the text they read as.
            ("name: x\n~: 1", "null: unknown key"),
        ] {
            let e = Manifest::from_yaml_with(yaml, ParseOptions::STRICT).expect_err(yaml);
            assert_eq!(e.code(), "E-MAN-003", "{yaml}");
            assert_eq!(e.message(), message, "{yaml}");
            assert!(e.hint().contains("README § Manifest"), "{}", e.hint());
            // Read leniently, the key is only a warning (the block may still lack a field).
            if let Err(e) = Manifest::from_yaml(yaml) {
                assert!(!e.message().contains("unknown key"), "{yaml}: {e}");
            }
        }
        // Strictness refuses unknown keys only: a clean manifest, and one declaring nothing
        // (a warning, not an unknown key), are accepted.
        let clean = "name: x\nexports: { files: { root: o, mode: read-only } }";
        assert!(Manifest::from_yaml_with(clean, ParseOptions::STRICT).is_ok());
        let nothing = Manifest::from_yaml_with("name: x", ParseOptions::STRICT).expect("valid");
        assert_eq!(nothing.warnings, vec![NOTHING_DECLARED.to_owned()]);
        // The bytes and value entry points take the same options.
        let bytes = Manifest::from_yaml_bytes_with(b"name: x\nnmae: y", ParseOptions::STRICT);
        assert_eq!(
            bytes.expect_err("strict").message(),
            "nmae: unknown key (did you mean `name`?)"
        );
        let value = serde_json::json!({"name": "x", "lifecycle": {"after_task": "exit", "x": 1}});
        assert_eq!(
            Manifest::from_value_with(&value, ParseOptions::STRICT)
                .expect_err("strict")
                .message(),
            "lifecycle.x: unknown key"
        );
        assert!(Manifest::from_value(&value).is_ok());
        assert_eq!(ParseOptions::default(), ParseOptions::LENIENT);
    }

    #[test]
    fn a_manifest_declaring_no_plane_and_no_capability_is_warned_about() {
        let parsed = Manifest::from_yaml("name: x\nlifecycle: { after_task: exit }").unwrap();
        assert_eq!(parsed.warnings, vec![NOTHING_DECLARED.to_owned()]);
        assert!(NOTHING_DECLARED.contains("no plane and no capability"));
        assert!(parsed.manifest.declares_nothing());
        for yaml in [
            "name: x\nexports: { files: { root: o, mode: read-only } }",
            "name: x\nexports: { peer_files: { root: o } }",
            "name: x\ncapabilities: { peer_fetch: { allow: [a] } }",
            "name: x\ncapabilities: { network: { allow: [a] } }",
        ] {
            let parsed = Manifest::from_yaml(yaml).unwrap();
            assert!(parsed.warnings.is_empty(), "{yaml}: {:?}", parsed.warnings);
            assert!(!parsed.manifest.declares_nothing(), "{yaml}");
        }
    }

    #[test]
    fn yaml_syntax_errors_say_where_and_nothing_about_keys() {
        for (yaml, start) in [
            (
                "name: x\nexports:\n  files: {root: out, mode: read-only}\n peer_files: {root: out}\n",
                "manifest: YAML syntax error at line 4 column 2: did not find expected key",
            ),
            (
                "name: x\n  exports: 1\n",
                "manifest: YAML syntax error at line 2 column 10: ",
            ),
            (
                "name: [unclosed\n",
                "manifest: YAML syntax error at line 2 column 1: ",
            ),
            (
                "name: x\n	foo: 1\n",
                "manifest: YAML syntax error at line 2 column 1: ",
            ),
        ] {
            let e = Manifest::from_yaml(yaml).expect_err(yaml);
            assert_eq!(e.code(), "E-MAN-003");
            assert!(e.message().starts_with(start), "{yaml:?}: {}", e.message());
            assert!(!e.message().contains("each key once"), "{}", e.message());
            // The position is said once, up front.
            let position = &start["manifest: YAML syntax error ".len()..];
            let position = position.split(':').next().unwrap();
            assert_eq!(e.message().matches(position).count(), 1, "{}", e.message());
        }
        let e = Manifest::from_yaml("name: x\n---\nname: y\n").expect_err("two documents");
        assert_eq!(
            e.message(),
            "manifest: a single YAML document (this file holds more than one)"
        );
        let deep = format!("name: x\nzzz: {}{}", "[".repeat(200), "]".repeat(200));
        let e = Manifest::from_yaml(&deep).expect_err("too deep");
        assert!(
            e.message()
                .starts_with("manifest: YAML nested too deeply at line 2 column "),
            "{}",
            e.message()
        );
    }

    #[test]
    fn planes_tools_and_the_effective_configuration() {
        let full = parse(
            "name: Reporter\nexports:\n  files: { root: ' out/ ', mode: read-only }\n  \
             peer_files: { root: shared, max_ttl: 15m, max_bytes: 1Ki }\ncapabilities:\n  \
             peer_fetch: { allow: [\"LOCALHOST:41234\", \"https://peer.example/\"] }\n",
        )
        .unwrap();
        assert_eq!(full.planes(), ["files", "peer_files"]);
        assert_eq!(full.granted_tools(), ["fetch-peer-file", "share-file"]);
        assert_eq!(
            full.effective(),
            serde_json::json!({
                "name": "Reporter",
                "exports": {
                    "files": {"root": "out/", "mode": "read-only", "max_bytes": 10_485_760},
                    "peer_files": {"root": "shared", "max_ttl": 900, "max_bytes": 1024, "require_peer_proof": false},
                },
                "capabilities": {
                    "peer_fetch": {"allow": ["localhost:41234", "https://peer.example"]},
                    "network": null,
                },
                "lifecycle": {"after_task": "exit"},
            })
        );
        let sleeper = parse(
            "name: s\nexports: { peer_files: { root: . } }\ncapabilities: { network: { allow: [h] } }\n\
             lifecycle: { after_task: sleep }",
        )
        .unwrap();
        assert_eq!(sleeper.planes(), ["peer_files"]);
        assert_eq!(sleeper.granted_tools(), ["share-file"]);
        let effective = sleeper.effective();
        assert_eq!(effective["exports"]["files"], Value::Null);
        assert_eq!(effective["exports"]["peer_files"]["max_ttl"], 3600);
        assert_eq!(
            effective["capabilities"]["network"]["allow"],
            serde_json::json!(["h"])
        );
        assert_eq!(effective["lifecycle"]["after_task"], "sleep");
        let bare = parse("name: b").unwrap();
        assert!(bare.planes().is_empty() && bare.granted_tools().is_empty());
    }

    #[test]
    fn an_integer_over_64_bits_is_refused_naming_its_field() {
        for (yaml, field) in [
            (
                "name: x\nexports:\n  files: { root: o, mode: read-only, max_bytes: 18446744073709551616 }",
                "exports.files.max_bytes",
            ),
            (
                "name: x\nexports:\n  peer_files: { root: o, max_ttl: -99999999999999999999 }",
                "exports.peer_files.max_ttl",
            ),
        ] {
            let refused = Manifest::from_yaml(yaml).unwrap_err();
            assert_eq!(refused.code(), "E-MAN-003");
            assert_eq!(
                refused.message(),
                format!("{field}: a whole number that fits in 64 bits")
            );
        }
        // Under an unknown key it is only that key's warning (D-1.1), as any value is.
        for extra in [
            "zzz: 18446744073709551616",
            "zzz: { a: [-99999999999999999999] }",
        ] {
            let yaml = format!("name: x\n{extra}\n");
            let parsed = Manifest::from_yaml(&yaml).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
            assert_eq!(
                parsed.warnings,
                vec!["unknown key `zzz`".to_owned(), NOTHING_DECLARED.to_owned()]
            );
        }
    }

    #[test]
    fn a_manifest_that_is_not_utf8_is_e_man_003() {
        let refused = Manifest::from_yaml_bytes(b"name: caf\xe9\n").unwrap_err();
        assert_eq!(refused.code(), "E-MAN-003");
        assert_eq!(refused.message(), "manifest: UTF-8 YAML text");
        let parsed = Manifest::from_yaml_bytes("name: café\n".as_bytes()).unwrap();
        assert_eq!(parsed.manifest.name, "café");
    }

    #[test]
    fn malformed_fields_are_named() {
        let cases = [
            ("", "manifest"),
            ("- a", "manifest"),
            ("name: ''", "name"),
            ("name: 3", "name"),
            ("name: \"a\\nb\"", "name"),
            ("name: \"tab\\there\"", "name"),
            ("name: \"del\\x7f\"", "name"),
            ("exports: {}", "name"),
            ("name: x\nexports: 3", "exports"),
            (
                "name: x\nexports: { files: { mode: read-only } }",
                "exports.files.root",
            ),
            (
                "name: x\nexports: { files: { root: /abs, mode: read-only } }",
                "exports.files.root",
            ),
            (
                "name: x\nexports: { files: { root: a/../b, mode: read-only } }",
                "exports.files.root",
            ),
            (
                "name: x\nexports: { files: { root: out } }",
                "exports.files.mode",
            ),
            (
                "name: x\nexports: { files: { root: out, mode: read-write } }",
                "exports.files.mode",
            ),
            (
                "name: x\nexports: { files: { root: out, mode: read-only, max_bytes: 10MB } }",
                "exports.files.max_bytes",
            ),
            (
                "name: x\nexports: { files: { root: out, mode: read-only, max_bytes: 0 } }",
                "exports.files.max_bytes",
            ),
            (
                "name: x\nexports: { peer_files: { root: out, max_bytes: -1 } }",
                "exports.peer_files.max_bytes",
            ),
            (
                "name: x\nexports: { peer_files: { root: out, max_ttl: 1h30m } }",
                "exports.peer_files.max_ttl",
            ),
            (
                "name: x\nexports: { peer_files: { root: out, max_ttl: 30S } }",
                "exports.peer_files.max_ttl",
            ),
            (
                "name: x\nexports: { peer_files: { max_ttl: 30s } }",
                "exports.peer_files.root",
            ),
            (
                "name: x\ncapabilities: { peer_fetch: { allow: [] } }",
                "capabilities.peer_fetch.allow",
            ),
            (
                "name: x\ncapabilities: { peer_fetch: {} }",
                "capabilities.peer_fetch.allow",
            ),
            (
                "name: x\ncapabilities: { peer_fetch: }",
                "capabilities.peer_fetch.allow",
            ),
            // A declared block with nothing under it is declared, with its fields missing.
            ("name: x\nexports: { files: }", "exports.files.root"),
            (
                "name: x\nexports:\n  peer_files:\n",
                "exports.peer_files.root",
            ),
            (
                "name: x\nexports: { files: null, peer_files: { root: out } }",
                "exports.files.root",
            ),
            (
                "name: x\ncapabilities: { network: { allow: [\"h/p\"] } }",
                "capabilities.network.allow[0]",
            ),
            (
                "name: x\ncapabilities: { network: { allow: [3] } }",
                "capabilities.network.allow[0]",
            ),
            (
                "name: x\nlifecycle: { after_task: nap }",
                "lifecycle.after_task",
            ),
        ];
        for (yaml, field) in cases {
            assert_eq!(field_of(yaml), field, "{yaml}");
        }
    }

    /// A root YAML reads as a number or a boolean is present: the message says to quote it
    /// instead of calling the field required.
    #[test]
    fn a_root_that_is_not_a_string_is_asked_to_be_quoted() {
        for root in ["8", "1.50", "true", "0x1F"] {
            let yaml =
                format!("name: x\nexports: {{ files: {{ root: {root}, mode: read-only }} }}");
            let e = Manifest::from_yaml(&yaml).expect_err(&yaml);
            assert_eq!(e.code(), "E-MAN-003", "{root}");
            assert!(
                e.message().starts_with("exports.files.root: "),
                "{}",
                e.message()
            );
            assert!(
                e.message().contains("quote") && !e.message().contains("required"),
                "{root}: {}",
                e.message()
            );
        }
        let quoted = "name: x\nexports: { files: { root: '8', mode: read-only } }";
        assert_eq!(
            Manifest::from_yaml(quoted)
                .expect("a quoted root")
                .manifest
                .files
                .map(|f| f.root.relative()),
            Some("8".into())
        );
    }

    /// `.inf` and `.nan` in a known field are refused under that field's name (JSON would have
    /// read them as null, so `max_bytes: .inf` silently took the default); under an unknown
    /// key they are only that key's warning (D-1.1), as are keys that are not strings.
    #[test]
    fn infinities_and_nans_are_refused_not_read_as_absent() {
        for (yaml, field) in [
            (
                "name: x\nexports: { files: { root: a, mode: read-only, max_bytes: .inf } }",
                "exports.files.max_bytes",
            ),
            (
                "name: x\nexports: { files: { root: a, mode: read-only, max_bytes: .nan } }",
                "exports.files.max_bytes",
            ),
            ("name: x\nexports: { files: .nan }", "exports.files"),
            (
                "name: x\nexports: { peer_files: { root: a, max_ttl: -.inf } }",
                "exports.peer_files.max_ttl",
            ),
            // String fields too: `.inf` is no name, root or host, never the text ".inf".
            ("name: .nan", "name"),
            (
                "name: x\nexports: { files: { root: .Inf, mode: read-only } }",
                "exports.files.root",
            ),
            (
                "name: x\ncapabilities: { network: { allow: [a, .inf] } }",
                "capabilities.network.allow[1]",
            ),
            (
                "name: x\nlifecycle: { after_task: .nan }",
                "lifecycle.after_task",
            ),
        ] {
            assert_eq!(field_of(yaml), field, "{yaml}");
        }
    }

    /// Review findings: a UTF-8 byte order mark opens a valid manifest; a root with a control
    /// character is refused at launch (no header could echo it verbatim); a non-string allow
    /// entry is told what an entry is, not what the list is.
    #[test]
    fn byte_order_marks_control_characters_and_entry_messages() {
        let valid = "name: r\nexports:\n  files: {root: out/, mode: read-only}\n";
        let with_bom = [b"\xEF\xBB\xBF".as_slice(), valid.as_bytes()].concat();
        let parsed = Manifest::from_yaml_bytes(&with_bom).expect("a BOM opens a YAML stream");
        assert_eq!(parsed.manifest.name, "r");
        assert!(parsed.warnings.is_empty());

        for root in [
            r#""out\nx""#,
            r#""out\u0001""#,
            r#""out\tx""#,
            r#""a\u007fb""#,
        ] {
            let yaml =
                format!("name: x\nexports: {{ files: {{ root: {root}, mode: read-only }} }}");
            let e = Manifest::from_yaml(&yaml).expect_err(root);
            assert_eq!(e.code(), "E-MAN-003", "{root}");
            assert!(
                e.message().starts_with("exports.files.root: "),
                "{}",
                e.message()
            );
            assert!(
                e.message().contains("control characters"),
                "{}",
                e.message()
            );
        }

        let e = Manifest::from_yaml("name: x\ncapabilities: { peer_fetch: { allow: [5] } }")
            .expect_err("a number is no entry");
        assert!(
            e.message()
                .starts_with("capabilities.peer_fetch.allow[0]: a string: host, host:port"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn unknown_keys_of_any_shape_are_warnings_never_errors() {
        let base = "name: x\nexports: { files: { root: out, mode: read-only } }\n";
        for (extra, key) in [
            ("~: 1", "null"),
            ("null: 1", "null"),
            ("[a, b]: 1", r#"["a","b"]"#),
            ("{a: 1}: 2", r#"{"a":1}"#),
            ("1: x", "1"),
            ("true: 1", "true"),
            ("zzz: .nan", "zzz"),
            ("zzz: {a: [-.inf]}", "zzz"),
            ("zzz: !foo bar", "zzz"),
            // A tagged key is its tag and text: never the known key it spells.
            ("!x name: mallory", "!x name"),
        ] {
            let yaml = format!("{base}{extra}\n");
            let parsed = Manifest::from_yaml(&yaml).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
            assert_eq!(
                parsed.warnings,
                vec![format!("unknown key `{key}`")],
                "{extra}"
            );
        }
        let tagged = format!("{base}!x name: mallory\n");
        assert_eq!(
            Manifest::from_yaml(&tagged).expect("valid").manifest.name,
            "x",
            "a tagged key never replaces the known one it spells"
        );
        // Unknown keys that read as the same text are only warnings (D-1.1).
        for yaml in [
            "name: x\n1: a\n\"1\": b\n",
            "name: x\ncolour: {~: x, \"null\": y}\n",
            "name: x\nzzz: { a: 1, a: 2 }\n",
        ] {
            assert!(Manifest::from_yaml(yaml).is_ok(), "{yaml}");
        }
        for (yaml, field) in [
            (
                "name: x\nexports: !x { files: { root: out, mode: read-only } }",
                "exports",
            ),
            (
                "name: x\nexports: { files: { root: out, mode: !x read-only } }",
                "exports.files.mode",
            ),
        ] {
            assert_eq!(field_of(yaml), field, "{yaml}");
        }
        let nested = "name: x\nexports:\n  ~: 1\n  files: { root: out, mode: read-only }\n";
        let parsed = Manifest::from_yaml(nested).expect("a null key under exports");
        assert_eq!(
            parsed.warnings,
            vec!["unknown key `exports.null`".to_owned()]
        );
    }

    #[test]
    fn a_key_given_twice_is_refused_wherever_it_is() {
        for yaml in [
            "name: x\nname: y",
            "name: x\nexports: { files: { root: a, root: b, mode: read-only } }",
            "name: x\ncapabilities:\n  network: { allow: [a] }\n  network: { allow: [b] }",
        ] {
            let e = Manifest::from_yaml(yaml).expect_err(yaml);
            assert_eq!(e.code(), "E-MAN-003", "{yaml}");
            assert!(
                e.message().ends_with(": each key once per mapping"),
                "{yaml}: {}",
                e.message()
            );
        }
        // Named by the field given twice; under an unknown key it is only that key's warning
        // (D-1.1), the first value standing.
        for (yaml, field) in [
            ("name: x\nname: y", "name"),
            (
                "name: x\nexports: { files: { root: a, root: b } }",
                "exports.files.root",
            ),
        ] {
            assert_eq!(field_of(yaml), field, "{yaml}");
        }
    }

    #[test]
    fn cap_008_sleep_needs_short_ttl() {
        let refused = |yaml: &str| {
            parse(yaml)
                .unwrap()
                .check_launch(all_inside)
                .err()
                .map(|e| e.code())
        };
        let base = "name: x\nlifecycle: { after_task: sleep }\nexports: { peer_files: { root: out";
        assert_eq!(refused(&format!("{base} }} }}")), Some("E-CAP-008"));
        assert_eq!(
            refused(&format!("{base}, max_ttl: 901 }} }}")),
            Some("E-CAP-008")
        );
        assert_eq!(
            refused(&format!("{base}, max_ttl: 1h }} }}")),
            Some("E-CAP-008")
        );
        assert_eq!(refused(&format!("{base}, max_ttl: 900s }} }}")), None);
        assert_eq!(refused(&format!("{base}, max_ttl: 15m }} }}")), None);
        let e = parse(&format!("{base} }} }}"))
            .unwrap()
            .check_launch(all_inside)
            .unwrap_err();
        let text = e.to_string();
        for needle in [
            "exports.peer_files.max_ttl",
            "lifecycle.after_task: sleep",
            "900s",
            "durability",
        ] {
            assert!(text.contains(needle), "{text}");
        }
    }

    /// The manifest asks about each declared root in field order, and turns the first
    /// answer that is not `Ok` into `E-CAP-007` naming that root's field.
    #[test]
    fn cap_007_names_the_first_root_the_workdir_refuses() {
        let both = parse(
            "name: x\nexports: { files: { root: ./a/, mode: read-only }, \
             peer_files: { root: b, mode: read-only } }",
        )
        .unwrap();
        let mut asked = Vec::new();
        both.check_launch(|root| {
            asked.push(root.declared().to_owned());
            Ok(())
        })
        .unwrap();
        assert_eq!(asked, ["./a/", "b"], "each root, files first");

        let escapes_at = |bad: &'static str| {
            move |root: &RootPath| {
                if root.relative() == bad {
                    Err(RootCheckError::Escapes)
                } else {
                    Ok(())
                }
            }
        };
        let e = both.check_launch(escapes_at("a")).unwrap_err();
        assert_eq!(e.code(), "E-CAP-007");
        assert!(
            e.message().starts_with("exports.files.root"),
            "{}",
            e.message()
        );
        assert!(e.message().contains("./a/"), "{}", e.message());
        let e = both.check_launch(escapes_at("b")).unwrap_err();
        assert_eq!(e.code(), "E-CAP-007");
        assert!(
            e.message().starts_with("exports.peer_files.root"),
            "{}",
            e.message()
        );

        let e = both
            .check_launch(|_| Err(RootCheckError::Uncheckable("EACCES on the workdir".into())))
            .unwrap_err();
        assert_eq!(e.code(), "E-CAP-007");
        assert!(
            matches!(
                &e,
                LaunchError::RootUncheckable { field: "exports.files.root", detail, .. }
                    if detail == "EACCES on the workdir"
            ),
            "{e:?}"
        );
    }

    /// `E-CAP-008` is decided first, without asking about any root.
    #[test]
    fn cap_008_comes_before_any_root_is_checked() {
        let m = parse(
            "name: x\nlifecycle: { after_task: sleep }\nexports: { peer_files: { root: out } }",
        )
        .unwrap();
        let mut asked = 0;
        let e = m
            .check_launch(|_| {
                asked += 1;
                Err(RootCheckError::Escapes)
            })
            .unwrap_err();
        assert_eq!(e.code(), "E-CAP-008");
        assert_eq!(asked, 0);
    }
}
