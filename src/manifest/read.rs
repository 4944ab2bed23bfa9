//! Reading a manifest's JSON-shaped value into a [`Manifest`], block by block: each field is
//! checked as it is read, and the first malformed one refuses the manifest (`E-MAN-003`)
//! naming its path.

use super::keys::{Fields, Reader};
use super::{
    AfterTask, AllowList, AllowRule, DEFAULT_MAX_BYTES, FilesExport, LaunchError, Manifest,
    ParseOptions, Parsed, PeerFilesExport, Res,
};
use crate::scope::RootPath;
use crate::units::{parse_byte_size, parse_duration_secs};
use serde_json::Value;

/// The warning for a manifest that declares no plane and no capability (D-15.1).
pub(super) const NOTHING_DECLARED: &str = "the manifest declares no plane and no capability: nothing is \
     served and no tool is registered (declare exports.files, exports.peer_files, \
     capabilities.peer_fetch or capabilities.network; see README § Manifest)";

/// The manifest `value` declares, with the warnings reading it gave: the body of
/// [`Manifest::from_value_with`].
pub(super) fn manifest(value: &Value, options: ParseOptions) -> Res<Parsed> {
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
    let name = name(&top)?;
    let (mut files, mut peer_files) = (None, None);
    if let Some(exports) = top.get("exports") {
        let exports = Fields::of("exports", exports, &mut reader)?;
        if let Some(v) = exports.block("files") {
            files = Some(files_export(&Fields::of("exports.files", v, &mut reader)?)?);
        }
        if let Some(v) = exports.block("peer_files") {
            let f = Fields::of("exports.peer_files", v, &mut reader)?;
            peer_files = Some(peer_files_export(&f)?);
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
    let after_task = match top.get("lifecycle") {
        Some(lifecycle) => after_task(&Fields::of("lifecycle", lifecycle, &mut reader)?)?,
        None => AfterTask::Exit,
    };

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

/// `name`. It heads the audience, which a peer sends as an HTTP header value (D-8): it may be
/// any text but a control character, which no header can carry.
fn name(top: &Fields<'_>) -> Res<String> {
    match top.get("name") {
        Some(Value::String(s)) if crate::audience::is_usable_name(s) => Ok(s.trim().to_owned()),
        _ => Err(LaunchError::malformed(
            "name",
            "a non-empty string without control characters",
        )),
    }
}

/// `exports.files`.
fn files_export(f: &Fields<'_>) -> Res<FilesExport> {
    let root = parse_root(f)?;
    match f.get("mode") {
        Some(Value::String(m)) if m == "read-only" => {}
        _ => return Err(LaunchError::malformed(f.field("mode"), "exactly read-only")),
    }
    Ok(FilesExport {
        root,
        max_bytes: parse_max_bytes(f)?,
    })
}

/// `exports.peer_files`.
fn peer_files_export(f: &Fields<'_>) -> Res<PeerFilesExport> {
    let root = parse_root(f)?;
    let declared_max_ttl_secs = match f.get("max_ttl") {
        None => None,
        Some(v) => Some(parse_duration_secs(v).ok_or_else(|| {
            LaunchError::malformed(
                f.field("max_ttl"),
                "a positive duration: seconds, or digits with one of s, m, h, d (15m)",
            )
        })?),
    };
    let max_bytes = parse_max_bytes(f)?;
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
    Ok(PeerFilesExport {
        root,
        declared_max_ttl_secs,
        max_bytes,
        require_peer_proof,
    })
}

/// `lifecycle.after_task`: `exit` when absent.
fn after_task(lifecycle: &Fields<'_>) -> Res<AfterTask> {
    match lifecycle.get("after_task") {
        None => Ok(AfterTask::Exit),
        Some(Value::String(s)) if s.trim() == "exit" => Ok(AfterTask::Exit),
        Some(Value::String(s)) if s.trim() == "sleep" => Ok(AfterTask::Sleep),
        Some(_) => Err(LaunchError::malformed(
            "lifecycle.after_task",
            "exit or sleep",
        )),
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
