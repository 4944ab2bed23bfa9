//! The launch checks a manifest can refuse a launch with before anything is created:
//! `E-CAP-008` (a persistent capsule's handle lifetime, D-1.8) and `E-CAP-007` (an export root
//! that escapes the workdir, D-1.9).

use super::{AfterTask, LaunchError, Manifest, SLEEP_MAX_TTL_SECS};
use crate::scope::{RootCheckError, RootPath};

impl Manifest {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A workdir where every root is inside.
    fn all_inside(_: &RootPath) -> Result<(), RootCheckError> {
        Ok(())
    }

    fn parse(yaml: &str) -> Manifest {
        Manifest::from_yaml(yaml).unwrap().manifest
    }

    #[test]
    fn cap_008_sleep_needs_short_ttl() {
        let refused = |yaml: &str| parse(yaml).check_launch(all_inside).err().map(|e| e.code());
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
        );
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
        );
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
