//! The typed manifest (D-1) and the launch checks that can refuse a launch before anything is
//! created: `E-MAN-003` (malformed), `E-CAP-008` (a persistent capsule's handle lifetime) and
//! `E-CAP-007` (an export root that escapes the workdir).

mod yaml;

use crate::backends::fs::{Filesystem, FsErrorKind, RootPath};
use crate::policy::{AllowList, AllowRule};
use crate::units::{parse_byte_size, parse_duration_secs};
use serde_json::{Map, Value};
use std::fmt;

/// Default `max_bytes` for both exports: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Default `exports.peer_files.max_ttl`: one hour.
pub const DEFAULT_MAX_TTL_SECS: u64 = 3600;
/// The ceiling on `max_ttl` for `after_task: sleep` (D-1.8).
pub const SLEEP_MAX_TTL_SECS: u64 = 900;

/// `exports.files`: the operator plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesExport {
    /// The export root.
    pub root: RootPath,
    /// The largest file a read serves.
    pub max_bytes: u64,
}

/// `exports.peer_files`: the peer plane.
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

/// `lifecycle.after_task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AfterTask {
    /// The capsule exits after its task (the default).
    #[default]
    Exit,
    /// The capsule sleeps and may be woken for another task.
    Sleep,
}

/// The typed manifest a runtime hands the plugin (D-1.1).
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

/// A refused launch: the diagnostic code, the message and a hint for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchError {
    /// `E-MAN-003`, `E-CAP-007`, `E-CAP-008` or `E-CLI-001`.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

impl LaunchError {
    fn malformed(field: &str, accepted: &str) -> Self {
        LaunchError {
            code: "E-MAN-003",
            message: format!("{field}: {accepted}"),
            hint: "fix the manifest field named above; see decisions.md D-1".into(),
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error[{}]: {}\n  hint: {}",
            self.code, self.message, self.hint
        )
    }
}

impl std::error::Error for LaunchError {}

/// A parsed manifest plus the warnings (unknown keys) it produced.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The manifest.
    pub manifest: Manifest,
    /// One line per unknown key, for stderr (D-1.1).
    pub warnings: Vec<String>,
}

type Res<T> = Result<T, LaunchError>;

struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// The mapping at `path`, with a warning for each key [`known_keys`] does not name there.
    fn of(path: &str, value: &'a Value, warnings: &mut Vec<String>) -> Res<Self> {
        let map = value
            .as_object()
            .ok_or_else(|| LaunchError::malformed(path, "a mapping"))?;
        let known = known_keys(path);
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                let full = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                warnings.push(format!("warning: unknown manifest key `{full}` ignored"));
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
/// a warning and never an error (D-1.1). The one statement of the manifest's shape, used by
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

/// `key` under the mapping at `path`.
fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Manifest {
    /// Parses a manifest file's bytes: UTF-8 YAML.
    ///
    /// # Errors
    /// `E-MAN-003`: not UTF-8, or as [`from_yaml`](Self::from_yaml).
    pub fn from_yaml_bytes(bytes: &[u8]) -> Result<Parsed, LaunchError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| LaunchError::malformed("manifest", "UTF-8 YAML text"))?;
        Self::from_yaml(text)
    }

    /// Parses a YAML manifest (the CLI's format).
    ///
    /// # Errors
    /// `E-MAN-003` naming the first malformed field.
    pub fn from_yaml(text: &str) -> Result<Parsed, LaunchError> {
        // A byte order mark may open a YAML stream (an editor's UTF-8 "with BOM"); the parser
        // would read it as content.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Self::from_value(&yaml::manifest_value(text)?)
    }

    /// Parses a manifest from a JSON-shaped value (what a runtime holds after its own parsing).
    ///
    /// # Errors
    /// `E-MAN-003` naming the first malformed field.
    pub fn from_value(value: &Value) -> Result<Parsed, LaunchError> {
        let mut warnings = Vec::new();
        let top = Fields::of("", value, &mut warnings)
            .map_err(|_| LaunchError::malformed("manifest", "a mapping with at least `name`"))?;

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
            let exports = Fields::of("exports", exports, &mut warnings)?;
            if let Some(v) = exports.block("files") {
                let f = Fields::of("exports.files", v, &mut warnings)?;
                let root = parse_root(&f)?;
                match f.get("mode") {
                    Some(Value::String(m)) if m == "read-only" => {}
                    _ => {
                        return Err(LaunchError::malformed(
                            &f.field("mode"),
                            "exactly read-only",
                        ));
                    }
                }
                files = Some(FilesExport {
                    root,
                    max_bytes: parse_max_bytes(&f)?,
                });
            }
            if let Some(v) = exports.block("peer_files") {
                let f = Fields::of("exports.peer_files", v, &mut warnings)?;
                let root = parse_root(&f)?;
                let declared_max_ttl_secs = match f.get("max_ttl") {
                    None => None,
                    Some(v) => Some(parse_duration_secs(v).ok_or_else(|| {
                        LaunchError::malformed(
                            &f.field("max_ttl"),
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
                            &f.field("require_peer_proof"),
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
            let caps = Fields::of("capabilities", caps, &mut warnings)?;
            for (key, slot) in [("peer_fetch", &mut peer_fetch), ("network", &mut network)] {
                if let Some(block) = caps.block(key) {
                    let path = caps.field(key);
                    let f = Fields::of(&path, block, &mut warnings)?;
                    *slot = Some(parse_allow(&f)?);
                }
            }
        }

        let mut after_task = AfterTask::Exit;
        if let Some(lifecycle) = top.get("lifecycle") {
            let l = Fields::of("lifecycle", lifecycle, &mut warnings)?;
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

        Ok(Parsed {
            manifest: Manifest {
                name,
                files,
                peer_files,
                peer_fetch,
                network,
                after_task,
            },
            warnings,
        })
    }

    /// The launch checks, in order: `E-CAP-008` then `E-CAP-007` for `exports.files.root` and
    /// `exports.peer_files.root` (D-1.8, D-1.9). Touches nothing but lookups.
    ///
    /// # Errors
    /// The first refusal.
    pub fn check_launch(&self, fs: &dyn Filesystem) -> Result<(), LaunchError> {
        if let Some(peer) = &self.peer_files
            && self.after_task == AfterTask::Sleep
            && peer
                .declared_max_ttl_secs
                .is_none_or(|ttl| ttl > SLEEP_MAX_TTL_SECS)
        {
            return Err(LaunchError {
                code: "E-CAP-008",
                message: "exports.peer_files.max_ttl must be declared and at most 900s when \
                          lifecycle.after_task: sleep; a handle's lifetime is not a durability \
                          mechanism"
                    .into(),
                hint: "declare exports.peer_files.max_ttl of 15m or less: a handle's \
                           lifetime is not a durability mechanism"
                    .into(),
            });
        }
        let roots = [
            ("exports.files.root", self.files.as_ref().map(|f| &f.root)),
            (
                "exports.peer_files.root",
                self.peer_files.as_ref().map(|f| &f.root),
            ),
        ];
        for (field, root) in roots {
            let Some(root) = root else { continue };
            if let Err(e) = fs.check_root(root) {
                let message = match e.kind {
                    FsErrorKind::OutsideRoot => {
                        format!(
                            "{field}: `{}` resolves outside the workdir",
                            root.declared()
                        )
                    }
                    _ => format!(
                        "{field}: `{}` cannot be checked ({})",
                        root.declared(),
                        e.detail
                    ),
                };
                return Err(LaunchError {
                    code: "E-CAP-007",
                    message,
                    hint: "point the export root at a directory inside the workdir, reached \
                           through no absolute symlink"
                        .into(),
                });
            }
        }
        Ok(())
    }
}

fn parse_root(f: &Fields<'_>) -> Res<RootPath> {
    match f.get("root") {
        Some(Value::String(s)) => RootPath::parse(s)
            .map_err(|accepted| LaunchError::malformed(&f.field("root"), &accepted)),
        // YAML reads `8`, `1.50` or `true` as a number or a boolean, whose text may not be
        // what was written (`1.50` is 1.5): refused, saying how to write it, not "required".
        Some(_) => Err(LaunchError::malformed(
            &f.field("root"),
            "a relative path inside the workdir written as a string: quote a name YAML reads \
             as a number or a boolean ('8')",
        )),
        None => Err(LaunchError::malformed(
            &f.field("root"),
            "a relative path inside the workdir such as out/ or . (required)",
        )),
    }
}

fn parse_max_bytes(f: &Fields<'_>) -> Res<u64> {
    match f.get("max_bytes") {
        None => Ok(DEFAULT_MAX_BYTES),
        Some(v) => parse_byte_size(v).ok_or_else(|| {
            LaunchError::malformed(
                &f.field("max_bytes"),
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
            Value::String(s) => AllowRule::parse(s),
            _ => Err(ENTRY.to_owned()),
        };
        rules.push(
            rule.map_err(|accepted| LaunchError::malformed(&format!("{field}[{i}]"), &accepted))?,
        );
    }
    AllowList::new(rules).ok_or_else(|| LaunchError::malformed(&field, NON_EMPTY))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::fs::MemoryFilesystem;

    fn parse(yaml: &str) -> Result<Manifest, LaunchError> {
        Manifest::from_yaml(yaml).map(|p| p.manifest)
    }

    fn field_of(yaml: &str) -> String {
        let e = parse(yaml).expect_err("must be refused");
        assert_eq!(e.code, "E-MAN-003");
        e.message.split(':').next().unwrap().to_owned()
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
            assert_eq!(e.code, "E-MAN-003", "{bad}");
            assert_eq!(
                e.message, "exports.peer_files.require_peer_proof: true or false",
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
            assert_eq!(refused.code, "E-MAN-003");
            assert_eq!(
                refused.message,
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
                vec!["warning: unknown manifest key `zzz` ignored".to_owned()]
            );
        }
    }

    #[test]
    fn a_manifest_that_is_not_utf8_is_e_man_003() {
        let refused = Manifest::from_yaml_bytes(b"name: caf\xe9\n").unwrap_err();
        assert_eq!(refused.code, "E-MAN-003");
        assert_eq!(refused.message, "manifest: UTF-8 YAML text");
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
    /// instead of calling the field required (a review found "(required)" beside `root: 8`).
    #[test]
    fn a_root_that_is_not_a_string_is_asked_to_be_quoted() {
        for root in ["8", "1.50", "true", "0x1F"] {
            let yaml =
                format!("name: x\nexports: {{ files: {{ root: {root}, mode: read-only }} }}");
            let e = Manifest::from_yaml(&yaml).expect_err(&yaml);
            assert_eq!(e.code, "E-MAN-003", "{root}");
            assert!(
                e.message.starts_with("exports.files.root: "),
                "{}",
                e.message
            );
            assert!(
                e.message.contains("quote") && !e.message.contains("required"),
                "{root}: {}",
                e.message
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
            // String fields too: `.inf` is no name, root or host (a review found them taken
            // as the text ".inf").
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
            assert_eq!(e.code, "E-MAN-003", "{root}");
            assert!(
                e.message.starts_with("exports.files.root: "),
                "{}",
                e.message
            );
            assert!(e.message.contains("control characters"), "{}", e.message);
        }

        let e = Manifest::from_yaml("name: x\ncapabilities: { peer_fetch: { allow: [5] } }")
            .expect_err("a number is no entry");
        assert!(
            e.message
                .starts_with("capabilities.peer_fetch.allow[0]: a string: host, host:port"),
            "{}",
            e.message
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
                vec![format!("warning: unknown manifest key `{key}` ignored")],
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
            vec!["warning: unknown manifest key `exports.null` ignored".to_owned()]
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
            assert_eq!(e.code, "E-MAN-003", "{yaml}");
            assert!(
                e.message.ends_with(": each key once per mapping"),
                "{yaml}: {}",
                e.message
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
        let fs = MemoryFilesystem::new();
        let refused = |yaml: &str| parse(yaml).unwrap().check_launch(&fs).err().map(|e| e.code);
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
            .check_launch(&fs)
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

    #[test]
    fn cap_007_escaping_roots() {
        let fs = MemoryFilesystem::new();
        fs.add_dir("inside");
        fs.add_symlink("ok", "inside");
        fs.add_symlink("out", "../elsewhere");
        fs.add_symlink("dangling", "nowhere/../../x");
        fs.add_symlink("abs", "/work/inside");
        let check = |root: &str| {
            parse(&format!(
                "name: x\nexports: {{ files: {{ root: {root}, mode: read-only }} }}"
            ))
            .unwrap()
            .check_launch(&fs)
            .err()
            .map(|e| (e.code, e.message))
        };
        assert_eq!(check("missing"), None);
        assert_eq!(check("ok"), None);
        assert_eq!(check("."), None);
        for bad in ["out", "dangling", "abs", "abs/sub"] {
            let (code, message) = check(bad).expect(bad);
            assert_eq!(code, "E-CAP-007");
            assert!(message.starts_with("exports.files.root"), "{message}");
        }
        // E-CAP-008 is checked first.
        let m = parse(
            "name: x\nlifecycle: { after_task: sleep }\nexports: { peer_files: { root: out } }",
        )
        .unwrap();
        assert_eq!(m.check_launch(&fs).unwrap_err().code, "E-CAP-008");
    }
}
