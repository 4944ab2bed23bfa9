//! The typed manifest (D-1) and the launch checks that can refuse a launch before anything is
//! created: `E-MAN-003` (malformed), `E-CAP-008` (a persistent capsule's handle lifetime) and
//! `E-CAP-007` (an export root that escapes the workdir).
//!
//! A manifest is read in steps, each its own module: `yaml` turns the text into a JSON-shaped
//! value (with `depth` bounding its nesting first), `read` turns the value into a [`Manifest`]
//! field by field, `keys` says which keys each mapping reads and words the warning for any
//! other, and `checks` holds the launch checks. `error` is every refusal's code and message.

mod checks;
mod depth;
mod error;
mod keys;
mod read;
mod yaml;

/// The allow-lists of `capabilities` and their rules.
pub use crate::policy::{Address, AddressError, AllowList, AllowRule, Scheme};
pub use error::LaunchError;

use crate::scope::RootPath;
use serde_json::Value;

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
        read::manifest(value, options)
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
        declared([
            ("files", self.files.is_some()),
            ("peer_files", self.peer_files.is_some()),
        ])
    }

    /// The tools a capsule launched from this manifest registers, sorted (D-12):
    /// `fetch-peer-file` when `capabilities.peer_fetch` is declared, `share-file` when
    /// `exports.peer_files` is.
    pub fn granted_tools(&self) -> Vec<&'static str> {
        declared([
            ("fetch-peer-file", self.peer_fetch.is_some()),
            ("share-file", self.peer_files.is_some()),
        ])
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
}

/// The names in `named` whose block is declared, in the order given.
fn declared<const N: usize>(named: [(&'static str, bool); N]) -> Vec<&'static str> {
    named
        .into_iter()
        .filter_map(|(name, is_declared)| is_declared.then_some(name))
        .collect()
}

#[cfg(test)]
mod tests;
