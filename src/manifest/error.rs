//! The one vocabulary of refused launches: a malformed manifest (`E-MAN-003`), the launch
//! checks (`E-CAP-008`, `E-CAP-007`), and a command line or embedding configuration the launch
//! cannot use (`E-CLI-001`). Each refusal renders as the binary prints it:
//! `error[<code>]: <message>` and a `  hint: <hint>` line.

use std::fmt;

/// The hint of every malformed field: where the operator finds what each field accepts.
const MANIFEST_HINT: &str =
    "fix the manifest field named above; README § Manifest lists every field and what it accepts";

/// A refused launch. [`code`](Self::code) is its diagnostic code, [`message`](Self::message)
/// what is wrong and [`hint`](Self::hint) what to do about it; `Display` renders the binary's
/// two lines, `error[<code>]: <message>\n  hint: <hint>`.
///
/// ```
/// use resource_plane::{LaunchError, Manifest};
///
/// let refused = Manifest::from_yaml("name: x\nexports: { files: { root: /etc } }").unwrap_err();
/// assert_eq!(refused.code(), "E-MAN-003");
/// assert!(matches!(&refused, LaunchError::Malformed { field, .. } if field == "exports.files.root"));
/// assert!(refused.to_string().starts_with("error[E-MAN-003]: exports.files.root: "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchError {
    /// `E-MAN-003`: a manifest field (or the manifest itself, `manifest`) holds what it may
    /// not (D-1.7).
    #[non_exhaustive]
    Malformed {
        /// The field's key path (`exports.files.max_bytes`, `capabilities.network.allow[0]`).
        field: String,
        /// What the field accepts.
        accepted: String,
    },
    /// `E-MAN-003`: a key the manifest does not read, in a manifest read strictly (D-15.3).
    #[non_exhaustive]
    UnknownKey {
        /// The key's path (`exports.files.max_byte`).
        key: String,
        /// The known key within edit distance 2, if any (D-1.1).
        suggestion: Option<&'static str>,
    },
    /// `E-CAP-008`: a persistent capsule (`after_task: sleep`) exporting peer files without a
    /// `max_ttl` of at most 900 s (D-1.8).
    #[non_exhaustive]
    HandleLifetime {
        /// `exports.peer_files.max_ttl` as declared, in seconds; `None` when absent.
        declared_max_ttl_secs: Option<u64>,
    },
    /// `E-CAP-007`: an export root that resolves outside the workdir (D-1.9).
    #[non_exhaustive]
    RootEscapes {
        /// `exports.files.root` or `exports.peer_files.root`.
        field: &'static str,
        /// The root as declared.
        root: String,
    },
    /// `E-CAP-007`: an export root whose path could not be checked (D-1.9).
    #[non_exhaustive]
    RootUncheckable {
        /// `exports.files.root` or `exports.peer_files.root`.
        field: &'static str,
        /// The root as declared.
        root: String,
        /// What the filesystem said.
        detail: String,
    },
    /// `E-CLI-001`: an advertised URL that is not an http(s) URL with a host, so no audience
    /// can be formed from it (D-8).
    #[non_exhaustive]
    AdvertisedUrl {
        /// The URL as given.
        url: String,
    },
    /// `E-CLI-001`: a [`CapsuleBuilder`](crate::capsule::CapsuleBuilder) launched without a
    /// setting it cannot do without.
    #[non_exhaustive]
    Incomplete {
        /// The builder method that sets it: `filesystem`, `trace` or `advertised_url`.
        setting: &'static str,
    },
    /// `E-CLI-001`: a replacement plane supplied for an export the manifest does not declare;
    /// the manifest decides what a capsule serves.
    #[non_exhaustive]
    UndeclaredPlane {
        /// `exports.files` or `exports.peer_files`.
        export: &'static str,
    },
    /// `E-CLI-001`: a command-line flag's value the launch cannot use (a missing workdir, a
    /// trace inside it, an unreadable `--peer-ca`).
    #[non_exhaustive]
    CommandLine {
        /// What is wrong, naming the flag.
        message: String,
        /// What to do about it.
        hint: String,
    },
}

impl LaunchError {
    /// `E-MAN-003` for `field`, which accepts `accepted`.
    pub fn malformed(field: impl Into<String>, accepted: impl Into<String>) -> Self {
        LaunchError::Malformed {
            field: field.into(),
            accepted: accepted.into(),
        }
    }

    /// `E-CLI-001` for a flag's value: `message` names the flag, `hint` says what to pass.
    pub fn command_line(message: impl Into<String>, hint: impl Into<String>) -> Self {
        LaunchError::CommandLine {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// `E-MAN-003` for an unknown key under strict reading (D-15.3).
    pub(crate) fn unknown_key(key: &str, suggestion: Option<&'static str>) -> Self {
        LaunchError::UnknownKey {
            key: key.to_owned(),
            suggestion,
        }
    }

    /// The diagnostic code: `E-MAN-003`, `E-CAP-008`, `E-CAP-007` or `E-CLI-001`.
    pub const fn code(&self) -> &'static str {
        match self {
            LaunchError::Malformed { .. } | LaunchError::UnknownKey { .. } => "E-MAN-003",
            LaunchError::HandleLifetime { .. } => "E-CAP-008",
            LaunchError::RootEscapes { .. } | LaunchError::RootUncheckable { .. } => "E-CAP-007",
            LaunchError::AdvertisedUrl { .. }
            | LaunchError::Incomplete { .. }
            | LaunchError::UndeclaredPlane { .. }
            | LaunchError::CommandLine { .. } => "E-CLI-001",
        }
    }

    /// What is wrong: the text after `error[<code>]: `, naming the field or flag first.
    pub fn message(&self) -> String {
        match self {
            LaunchError::Malformed { field, accepted } => format!("{field}: {accepted}"),
            LaunchError::UnknownKey { key, suggestion } => {
                format!(
                    "{key}: unknown key{}",
                    super::keys::did_you_mean(*suggestion)
                )
            }
            LaunchError::HandleLifetime { .. } => "exports.peer_files.max_ttl must be declared \
                 and at most 900s when lifecycle.after_task: sleep; a handle's lifetime is not a \
                 durability mechanism"
                .to_owned(),
            LaunchError::RootEscapes { field, root } => {
                format!("{field}: `{root}` resolves outside the workdir")
            }
            LaunchError::RootUncheckable {
                field,
                root,
                detail,
            } => format!("{field}: `{root}` cannot be checked ({detail})"),
            LaunchError::AdvertisedUrl { url } => {
                format!("advertised url `{url}`: an http(s) URL with a host")
            }
            LaunchError::Incomplete { setting } => {
                format!("the capsule builder was launched without `{setting}`, which it needs")
            }
            LaunchError::UndeclaredPlane { export } => format!(
                "a replacement {} was given, but the manifest does not declare {export}",
                plane_of(export)
            ),
            LaunchError::CommandLine { message, .. } => message.clone(),
        }
    }

    /// What to do about it: the text after `  hint: `.
    pub fn hint(&self) -> &str {
        match self {
            LaunchError::Malformed { .. } => MANIFEST_HINT,
            LaunchError::UnknownKey { .. } => {
                "remove or correct the key (without --strict it is only a warning); README § \
                 Manifest lists every key"
            }
            LaunchError::HandleLifetime { .. } => {
                "declare exports.peer_files.max_ttl of 15m or less, or use lifecycle.after_task: \
                 exit: a handle's lifetime is not a durability mechanism (README § Manifest)"
            }
            LaunchError::RootEscapes { .. } | LaunchError::RootUncheckable { .. } => {
                "point the export root at a directory inside the workdir, reached through no \
                 absolute symlink (README § Manifest)"
            }
            LaunchError::AdvertisedUrl { .. } => {
                "advertise the capsule as http://host:port or https://host:port (the binary's \
                 --url)"
            }
            LaunchError::Incomplete { .. } => {
                "call that method (or .backends / .config) on Capsule::builder before .launch() \
                 (README § Embedding)"
            }
            LaunchError::UndeclaredPlane { .. } => {
                "declare the export in the manifest, or launch without the replacement plane \
                 (README § Embedding)"
            }
            LaunchError::CommandLine { hint, .. } => hint,
        }
    }
}

/// The plane an export's replacement is.
fn plane_of(export: &str) -> &'static str {
    if export == "exports.peer_files" {
        "peer plane"
    } else {
        "resource plane"
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error[{}]: {}\n  hint: {}",
            self.code(),
            self.message(),
            self.hint()
        )
    }
}

impl std::error::Error for LaunchError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant renders as `error[<code>]: <message>\n  hint: <hint>`, with the code of
    /// its family, and none is empty.
    #[test]
    fn every_variant_renders_its_code_message_and_hint() {
        let cases = [
            (LaunchError::malformed("name", "a string"), "E-MAN-003"),
            (
                LaunchError::unknown_key("exports.files.max_byte", Some("max_bytes")),
                "E-MAN-003",
            ),
            (
                LaunchError::HandleLifetime {
                    declared_max_ttl_secs: None,
                },
                "E-CAP-008",
            ),
            (
                LaunchError::RootEscapes {
                    field: "exports.files.root",
                    root: "out".into(),
                },
                "E-CAP-007",
            ),
            (
                LaunchError::RootUncheckable {
                    field: "exports.peer_files.root",
                    root: "out".into(),
                    detail: "EACCES".into(),
                },
                "E-CAP-007",
            ),
            (
                LaunchError::AdvertisedUrl {
                    url: "ftp://x".into(),
                },
                "E-CLI-001",
            ),
            (LaunchError::Incomplete { setting: "trace" }, "E-CLI-001"),
            (
                LaunchError::UndeclaredPlane {
                    export: "exports.peer_files",
                },
                "E-CLI-001",
            ),
            (
                LaunchError::command_line("--workdir x: not an existing directory", "create it"),
                "E-CLI-001",
            ),
        ];
        for (error, code) in cases {
            assert_eq!(error.code(), code, "{error:?}");
            assert!(!error.message().is_empty() && !error.hint().is_empty());
            assert_eq!(
                error.to_string(),
                format!(
                    "error[{code}]: {}\n  hint: {}",
                    error.message(),
                    error.hint()
                )
            );
        }
    }

    #[test]
    fn messages_name_what_is_wrong() {
        assert_eq!(
            LaunchError::malformed("exports.files.mode", "exactly read-only").message(),
            "exports.files.mode: exactly read-only"
        );
        assert_eq!(
            LaunchError::unknown_key("exports.files.max_byte", Some("max_bytes")).message(),
            "exports.files.max_byte: unknown key (did you mean `max_bytes`?)"
        );
        assert_eq!(
            LaunchError::unknown_key("zzz", None).message(),
            "zzz: unknown key"
        );
        let escapes = LaunchError::RootEscapes {
            field: "exports.files.root",
            root: "out".into(),
        };
        assert_eq!(
            escapes.message(),
            "exports.files.root: `out` resolves outside the workdir"
        );
        let undeclared = LaunchError::UndeclaredPlane {
            export: "exports.files",
        };
        assert!(
            undeclared.message().contains("resource plane")
                && undeclared.message().contains("exports.files"),
            "{}",
            undeclared.message()
        );
        let missing = LaunchError::Incomplete {
            setting: "advertised_url",
        };
        assert!(missing.message().contains("`advertised_url`"));
        let command_line = LaunchError::command_line("--listen x: in use", "choose a free address");
        assert_eq!(
            command_line.to_string(),
            "error[E-CLI-001]: --listen x: in use\n  hint: choose a free address"
        );
    }
}
