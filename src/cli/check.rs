//! `resource-plane check` (`contract.md`, D-15.4): the launch checks `serve` runs before it
//! creates anything, run alone. Exit 0 with one JSON line on stdout describing the effective
//! configuration; exit 2 with the refused launch's `error[…]` and `  hint:` lines on stderr.
//! `serve` reads its manifest and workdir through the same functions, so the two cannot
//! disagree.

use crate::Manifest;
use crate::backends::{Filesystem, OsFilesystem};
use crate::confine::Confinement;
use crate::manifest::{LaunchError, ParseOptions, Parsed};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `check`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The YAML manifest to validate.
    #[arg(long)]
    manifest: PathBuf,
    /// Also check the export roots beneath this workdir (E-CAP-007); nothing is created in it.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Refuse unknown manifest keys instead of warning about them.
    #[arg(long)]
    strict: bool,
}

/// A command-line refusal (`E-CLI-001`).
pub(crate) fn cli_error(message: impl Into<String>, hint: impl Into<String>) -> LaunchError {
    LaunchError::command_line(message, hint)
}

/// Reads and parses the manifest at `path`.
///
/// # Errors
/// `E-CLI-001` when the file cannot be read; `E-MAN-003` when it is malformed (or, `strict`,
/// holds an unknown key).
#[allow(clippy::disallowed_methods)] // the composition root reads the operator's file
pub(crate) fn read_manifest(path: &Path, strict: bool) -> Result<Parsed, LaunchError> {
    let bytes = std::fs::read(path).map_err(|e| {
        cli_error(
            format!("--manifest {}: {e}", path.display()),
            "pass a readable YAML manifest (README § Manifest)",
        )
    })?;
    let options = if strict {
        ParseOptions::STRICT
    } else {
        ParseOptions::LENIENT
    };
    // A file that was read but is not text is a malformed manifest, not a bad flag.
    Manifest::from_yaml_bytes_with(&bytes, options)
}

/// The workdir at `path`, canonical, and a filesystem opened on it. Creates nothing.
///
/// # Errors
/// `E-CLI-001` when it is not an existing directory or cannot be opened.
#[allow(clippy::disallowed_methods)] // the composition root resolves the operator's path
pub(crate) fn open_workdir(path: &Path) -> Result<(PathBuf, OsFilesystem), LaunchError> {
    let workdir = std::fs::canonicalize(path)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            cli_error(
                format!("--workdir {}: not an existing directory", path.display()),
                "create the workdir first; serve never creates it",
            )
        })?;
    let fs = OsFilesystem::open(&workdir)
        .map_err(|e| cli_error(format!("--workdir: {e}"), "check the workdir's permissions"))?;
    Ok((workdir, fs))
}

/// Runs `check`; exit 0 when the manifest (and the roots, with `--workdir`) would launch, 2
/// otherwise.
pub(crate) fn run(args: CheckArgs) -> ExitCode {
    match check(&args) {
        Ok(report) => match super::print_line(&report.to_string()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                super::log::say!("error: cannot write the result to stdout: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            super::log::say!("{e}");
            ExitCode::from(2)
        }
    }
}

/// The checks of a launch, in its order: the manifest (`E-MAN-003`), with a workdir the
/// workdir itself (`E-CLI-001`), the handle lifetime (`E-CAP-008`), then with a workdir the
/// export roots (`E-CAP-007`). The report: `{"check":"ok","manifest":{…},"tools":[…],"confinement":{…},"warnings":[…]}`, the
/// manifest as [`Manifest::effective`] describes it, the Landlock wall `serve` would put up
/// on this kernel (`{"landlock_abi":N,"status":…}`), each warning with its tokens redacted as
/// `serve`'s warning lines have them.
fn check(args: &CheckArgs) -> Result<serde_json::Value, LaunchError> {
    let parsed = read_manifest(&args.manifest, args.strict)?;
    let manifest = &parsed.manifest;
    let workdir = match &args.workdir {
        Some(workdir) => {
            let (workdir, fs) = open_workdir(workdir)?;
            manifest.check_launch(|root| Ok(fs.check_root(root)?))?;
            workdir
        }
        None => {
            manifest.check_handle_lifetime()?;
            PathBuf::new()
        }
    };
    // What `serve` would enforce here: the status depends on the kernel and the allow rules,
    // not on the workdir, which nothing opens.
    let confinement = Confinement::new(manifest, workdir).preview();
    Ok(serde_json::json!({
        "check": "ok",
        "manifest": manifest.effective(),
        "tools": manifest.granted_tools(),
        "confinement": confinement.to_json(),
        // Redacted as `serve` logs them: a key is the operator's text, but nothing
        // token-shaped is repeated (D-6.5).
        "warnings": parsed
            .warnings
            .iter()
            .map(|warning| crate::redact::redact_tokens(warning).into_owned())
            .collect::<Vec<_>>(),
    }))
}
