//! Where a plane's files live and how they are contained: the export root as declared
//! ([`RootPath`], D-1.2), the containment class the runtime achieved ([`Containment`], D-2.5),
//! and the two with a size limit ([`ExportScope`]). Pure values: nothing here touches the
//! filesystem; the [`Filesystem`](crate::backends::Filesystem) backend takes them to open a
//! root, and the manifest builds them from the YAML.
//!
//! ```
//! use resource_plane::scope::{Containment, ExportScope, RootPath};
//!
//! let scope = ExportScope {
//!     root: RootPath::parse("./out/").unwrap(),
//!     max_bytes: 10 << 20,
//!     containment: Containment::Scoped,
//! };
//! assert_eq!(scope.root.declared(), "./out/");
//! assert_eq!(scope.root.relative(), "out");
//! assert!(!scope.containment.follows_symlinks());
//! assert!(RootPath::parse("../elsewhere").is_err());
//! ```

use std::fmt;

/// The containment class the embedding runtime achieved for this session, taken as given.
/// It decides symlinks below an export root (D-2.5): `scoped` refuses every one, the other two
/// follow those that stay beneath the root. Every file served names it in
/// `x-murmur-containment`.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::scope::Containment;
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/data.md", "hello", 0);
/// fs.add_symlink("out/latest.md", "data.md");
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(fs)
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .containment(Containment::Scoped)
///     .launch()
///     .unwrap();
/// let router = capsule.router();
/// let get = |path: &str| router.handle(http::Request::get(path).body(()).unwrap());
/// let file = get("/resources/files/data.md").await;
/// assert_eq!(file.headers()["x-murmur-containment"], Containment::Scoped.as_str());
/// assert_eq!(get("/resources/files/latest.md").await.status(), 403); // symlink_refused
/// assert_eq!(Containment::parse("scoped"), Some(Containment::Scoped));
/// assert!(Containment::default().follows_symlinks());
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Containment {
    /// Follows relative symlinks that stay beneath the root (the CLI's default).
    #[default]
    Advisory,
    /// Refuses every symlink below the root with `symlink_refused`.
    Scoped,
    /// Like `advisory` for symlinks.
    Sealed,
}

impl Containment {
    /// The header and trace spelling: `advisory`, `scoped` or `sealed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Containment::Advisory => "advisory",
            Containment::Scoped => "scoped",
            Containment::Sealed => "sealed",
        }
    }

    /// Parses the header spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "advisory" => Some(Containment::Advisory),
            "scoped" => Some(Containment::Scoped),
            "sealed" => Some(Containment::Sealed),
            _ => None,
        }
    }

    /// Whether symlinks below the root are followed (D-2.5).
    pub const fn follows_symlinks(self) -> bool {
        !matches!(self, Containment::Scoped)
    }

    /// All three classes, for suites that run under each.
    pub const ALL: [Containment; 3] = [
        Containment::Advisory,
        Containment::Scoped,
        Containment::Sealed,
    ];
}

/// An export root as declared (`out/`, `.`, `./out`): a relative path inside the workdir,
/// with no `..` component and no control character (D-1.2). It is echoed as declared, and
/// opened as its plain components.
///
/// ```
/// use resource_plane::scope::RootPath;
///
/// let root = RootPath::parse(" ./reports//q3/ ").unwrap();
/// assert_eq!(root.declared(), "./reports//q3/");
/// assert_eq!(root.relative(), "reports/q3");
/// assert_eq!(RootPath::parse(".").unwrap().relative(), ".");
/// for refused in ["/etc", "../elsewhere", "out/../..", "out\nx", ""] {
///     assert!(RootPath::parse(refused).is_err(), "{refused:?}");
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootPath {
    declared: String,
    components: Vec<String>,
}

impl RootPath {
    /// Validates a declared root (trimmed): relative, no `..` component, no control character.
    /// `.` components and a trailing `/` are dropped; an empty result is the workdir itself.
    /// Control characters (NUL, a line break, a tab) are refused because the root is echoed
    /// verbatim in the `x-murmur-export-root` header (D-1.2), which cannot carry them, as a
    /// capsule name with one is refused for the audience header.
    ///
    /// # Errors
    /// A [`RootPathError`] naming what is accepted, for `E-MAN-003`.
    pub fn parse(declared: &str) -> Result<Self, RootPathError> {
        const ACCEPTED: RootPathError = RootPathError {
            accepted: "a relative path inside the workdir such as out/ or . (no leading /, no \
                 .., no control characters)",
        };
        let declared = declared.trim();
        if declared.is_empty() || declared.starts_with('/') || declared.contains(char::is_control) {
            return Err(ACCEPTED);
        }
        let mut components = Vec::new();
        for c in declared.split('/') {
            match c {
                "" | "." => {}
                ".." => return Err(ACCEPTED),
                name => components.push(name.to_owned()),
            }
        }
        Ok(RootPath {
            declared: declared.to_owned(),
            components,
        })
    }

    /// The root as declared (trimmed): echoed verbatim in headers and listings.
    pub fn declared(&self) -> &str {
        &self.declared
    }

    /// The path to open beneath the workdir: `.` for the workdir itself.
    pub fn relative(&self) -> String {
        if self.components.is_empty() {
            ".".into()
        } else {
            self.components.join("/")
        }
    }
}

/// Why a declared root is no [`RootPath`]: it renders as what is accepted, the text of the
/// `E-MAN-003` that names the root's field.
///
/// ```
/// use resource_plane::Manifest;
/// use resource_plane::scope::RootPath;
///
/// let refused = RootPath::parse("../elsewhere").unwrap_err();
/// assert!(refused.accepted().starts_with("a relative path inside the workdir"));
/// let yaml = "name: r\nexports: { files: { root: ../elsewhere, mode: read-only } }";
/// let launch = Manifest::from_yaml(yaml).unwrap_err();
/// assert_eq!(launch.code(), "E-MAN-003");
/// assert!(launch.to_string().contains(&format!("exports.files.root: {refused}")));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootPathError {
    accepted: &'static str,
}

impl RootPathError {
    /// What a root may be.
    pub const fn accepted(&self) -> &'static str {
        self.accepted
    }
}

impl fmt::Display for RootPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.accepted)
    }
}

impl std::error::Error for RootPathError {}

/// Where one plane's files live and how they are contained: what a plane serves from, and
/// what its responses echo.
///
/// ```
/// use resource_plane::Manifest;
/// use resource_plane::scope::{Containment, ExportScope};
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out/, mode: read-only } }");
/// let files = manifest.unwrap().manifest.files.unwrap();
/// let scope = ExportScope {
///     root: files.root,
///     max_bytes: files.max_bytes,
///     containment: Containment::Sealed,
/// };
/// assert_eq!(scope.root.declared(), "out/");
/// assert_eq!(scope.max_bytes, 10 * 1024 * 1024);
/// assert!(scope.containment.follows_symlinks());
/// ```
#[derive(Debug, Clone)]
pub struct ExportScope {
    /// The export root.
    pub root: RootPath,
    /// The largest file served.
    pub max_bytes: u64,
    /// The achieved containment class.
    pub containment: Containment,
}

/// Why a declared root cannot be served from the workdir: what the launch check for roots
/// escaping the workdir (D-1.9) learns from the filesystem, in terms the manifest turns into
/// `E-CAP-007`. The filesystem backend converts its own errors into this.
///
/// ```
/// use resource_plane::backends::{FsError, FsErrorKind};
/// use resource_plane::scope::RootCheckError;
/// use resource_plane::{LaunchError, Manifest};
///
/// let escape = RootCheckError::from(FsError::new(FsErrorKind::OutsideRoot, "absolute link"));
/// assert_eq!(escape, RootCheckError::Escapes);
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }")
///     .unwrap()
///     .manifest;
/// let refused = manifest.check_roots(|_| Err(RootCheckError::Uncheckable("EACCES".into())));
/// let refused = refused.unwrap_err();
/// assert_eq!(refused.code(), "E-CAP-007");
/// assert!(matches!(refused, LaunchError::RootUncheckable { detail, .. } if detail == "EACCES"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCheckError {
    /// The root's path leaves the workdir: a relative link out (dangling or not) or any
    /// absolute link (`E-CAP-007`).
    Escapes,
    /// The workdir could not be read to tell; the text says why.
    Uncheckable(String),
}

impl fmt::Display for RootCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootCheckError::Escapes => f.write_str("the root escapes the workdir"),
            RootCheckError::Uncheckable(detail) => {
                write!(f, "the root cannot be checked: {detail}")
            }
        }
    }
}

impl std::error::Error for RootCheckError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_relative_without_dot_dot_or_control_characters() {
        for (declared, relative) in [
            ("out/", "out"),
            (".", "."),
            ("./out", "out"),
            ("  a/./b//  ", "a/b"),
            ("./", "."),
        ] {
            let root = RootPath::parse(declared).expect(declared);
            assert_eq!(root.relative(), relative, "{declared:?}");
            assert_eq!(root.declared(), declared.trim(), "{declared:?}");
        }
        for refused in [
            "", "   ", "/abs", "../x", "a/../b", "a/..", "a\nb", "a\0b", "a\tb",
        ] {
            let e = RootPath::parse(refused).expect_err(refused);
            assert!(e.accepted().contains("relative path"), "{refused:?}: {e}");
            assert_eq!(e.to_string(), e.accepted());
        }
    }

    #[test]
    fn containment_spellings_round_trip_and_only_scoped_refuses_symlinks() {
        for class in Containment::ALL {
            assert_eq!(Containment::parse(class.as_str()), Some(class));
            assert_eq!(class.follows_symlinks(), class != Containment::Scoped);
        }
        for unknown in ["", "Advisory", "scoped ", "none"] {
            assert_eq!(Containment::parse(unknown), None, "{unknown:?}");
        }
        assert_eq!(Containment::default(), Containment::Advisory);
    }

    #[test]
    fn root_check_errors_say_what_happened() {
        assert!(RootCheckError::Escapes.to_string().contains("escapes"));
        assert!(
            RootCheckError::Uncheckable("EACCES".into())
                .to_string()
                .contains("EACCES")
        );
    }
}
