//! The outer wall: the process confines itself with Landlock, so that even code that went wrong
//! (this crate's, a dependency's) cannot read outside the workdir, write outside `peer-in/`,
//! open a new listening socket or connect to a TCP port no allow rule reaches. Path
//! containment still comes from the kernel-confined resolution of the filesystem backend; this
//! is the wall that holds if that code were wrong.

use crate::Manifest;
use crate::tools::LANDING_DIR;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, RestrictSelf, RestrictSelfAttr, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The newest Landlock ABI whose rights this wall was written and tested against. A newer
/// kernel is used at this ABI: rights it adds later (UDP, pathname unix sockets) are left
/// unhandled rather than refused untested.
const WALL_ABI: ABI = ABI::V8;

/// What name resolution reads (glibc's `getaddrinfo`): a peer named by host is resolved after
/// the wall is up.
const NAME_RESOLUTION_FILES: [&str; 5] = [
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
];

/// DNS over TCP, which a resolver falls back to for an answer too large for UDP.
const DNS_PORT: u16 = 53;

/// How many entries of a certificate directory are followed to find where their symlinks lead.
const CERT_DIR_ENTRIES: usize = 10_000;

/// How much of the wall the kernel enforces (the ready line's `confinement.status`).
///
/// ```
/// use resource_plane::confine::ConfinementStatus;
///
/// assert_eq!(ConfinementStatus::Partial.as_str(), "partial");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfinementStatus {
    /// Every part of the wall: files, no new listener, connects only to the allowed ports,
    /// abstract unix sockets and signals scoped (Landlock ABI 6 or later).
    Full,
    /// Landlock is enforced but part of the wall is missing: an allow rule without a port
    /// leaves TCP connects open, or the kernel's ABI predates network rules (4) or scopes (6).
    Partial,
    /// Not confined: `--no-confine`, or a kernel without Landlock.
    None,
}

impl ConfinementStatus {
    /// `full`, `partial` or `none`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConfinementStatus::Full => "full",
            ConfinementStatus::Partial => "partial",
            ConfinementStatus::None => "none",
        }
    }
}

impl fmt::Display for ConfinementStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`Confinement::apply`] enforced, or what it would enforce ([`Confinement::preview`]).
///
/// ```
/// use resource_plane::confine::{ConfinementReport, ConfinementStatus};
///
/// let report = ConfinementReport::unconfined(7);
/// assert_eq!(report.status, ConfinementStatus::None);
/// assert_eq!(report.to_json().to_string(), r#"{"landlock_abi":7,"status":"none"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfinementReport {
    /// The Landlock ABI the kernel offers (0: none), whether or not it was used.
    pub landlock_abi: u32,
    /// How much of the wall holds.
    pub status: ConfinementStatus,
    /// TCP connects are left open because an allow rule names no port.
    pub connects_open: bool,
    /// The kernel applied the wall to every thread of the process (Landlock ABI 8); otherwise
    /// only to the calling thread and the threads it starts afterwards.
    pub all_threads: bool,
}

impl ConfinementReport {
    /// A report for a process left unconfined on a kernel offering `landlock_abi`.
    pub fn unconfined(landlock_abi: u32) -> Self {
        ConfinementReport {
            landlock_abi,
            status: ConfinementStatus::None,
            connects_open: true,
            all_threads: false,
        }
    }

    /// `{"landlock_abi":N,"status":"full"|"partial"|"none"}`, the ready line's field.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"landlock_abi": self.landlock_abi, "status": self.status.as_str()})
    }
}

/// Why the wall could not be put up. The process is unchanged when any of these is returned
/// (no rule is enforced), except that `peer-in/` may have been created.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfineError {
    /// A workdir could not be opened as a directory.
    Workdir {
        /// The workdir as given.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// `peer-in/` could not be created or opened in a workdir whose capsule may fetch.
    Landing {
        /// The workdir as given.
        workdir: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A path given to [`Confinement::read`] exists but could not be opened.
    Read {
        /// The path as given.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The kernel refused the ruleset or the restriction.
    Kernel {
        /// The Landlock library's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for ConfineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfineError::Workdir { path, source } => {
                write!(f, "workdir {}: {source}", path.display())
            }
            ConfineError::Landing { workdir, source } => {
                write!(
                    f,
                    "{LANDING_DIR}/ in workdir {}: {source}",
                    workdir.display()
                )
            }
            ConfineError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            ConfineError::Kernel { source } => write!(f, "landlock: {source}"),
        }
    }
}

impl std::error::Error for ConfineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfineError::Workdir { source, .. }
            | ConfineError::Landing { source, .. }
            | ConfineError::Read { source, .. } => Some(source),
            ConfineError::Kernel { source } => Some(source.as_ref()),
        }
    }
}

fn kernel(e: impl std::error::Error + Send + Sync + 'static) -> ConfineError {
    ConfineError::Kernel {
        source: Box::new(e),
    }
}

/// The Landlock ABI this kernel offers; 0 when it has no Landlock (not built in, or not
/// enabled at boot). Asks the kernel and changes nothing.
///
/// ```
/// let abi = resource_plane::confine::landlock_abi();
/// assert!(abi < 1000);
/// ```
pub fn landlock_abi() -> u32 {
    // With no flag and no `no_new_privs`, `apply` only reports what the kernel offers.
    match RestrictSelf::default().no_new_privs(false).apply() {
        Ok(status) => abi_number(status.landlock),
        Err(_) => 0,
    }
}

fn abi_number(status: LandlockStatus) -> u32 {
    match status {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => u32::try_from(kernel_abi.unwrap_or(effective_abi as i32)).unwrap_or(0),
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => 0,
    }
}

/// One workdir the wall admits.
#[derive(Debug, Clone)]
struct Workdir {
    path: PathBuf,
    /// Its capsule may fetch (`capabilities.peer_fetch`): write beneath `peer-in/`.
    landing: bool,
}

/// The Landlock wall for a process that serves one capsule (or several, each added with
/// [`also`](Self::also)), built from the manifest and put up with one call,
/// [`apply`](Self::apply). For a runtime that owns its process: the restriction cannot be
/// lifted, and covers the calling thread and every thread it starts afterwards (on Landlock
/// ABI 8 and later, every thread of the process).
///
/// **What it allows**, at the best Landlock ABI the kernel offers (rights newer than ABI 8
/// stay unhandled):
/// - reading files and listing directories beneath each workdir (the planes, and the reopen
///   of a probed file through `/proc/self/fd`, which lands on a file beneath the workdir: the
///   kernel checks the file opened, not the `/proc` path walked to it);
/// - reading the system certificate store, wherever the TLS roots are looked for
///   (`SSL_CERT_FILE`, `SSL_CERT_DIR`, the usual distribution paths, and the directories their
///   symlinks lead to), read at the first https handshake;
/// - reading what name resolution reads: `/etc/hosts`, `/etc/resolv.conf`,
///   `/etc/nsswitch.conf`, `/etc/gai.conf`, `/etc/host.conf`;
/// - reading each path given to [`read`](Self::read) (the `--peer-ca` files, say);
/// - writing beneath `peer-in/` in the workdir of a capsule that declares
///   `capabilities.peer_fetch` (the directory is created by `apply` if missing, since the wall
///   can only name a directory that exists);
/// - TCP connects (Landlock ABI 4) only to the ports the capsules' `capabilities.network.allow`
///   and `capabilities.peer_fetch.allow` rules reach (plus 53, DNS over TCP, when a rule names
///   a host rather than an address); a rule without a port leaves connects open and the
///   status is [`Partial`](ConfinementStatus::Partial);
/// - no new TCP listener (Landlock ABI 4): listeners bound before the call keep accepting;
/// - no connect to an abstract unix socket, and no signal, to anything outside the wall
///   (Landlock ABI 6).
///
/// **What it does not cover**: descriptors opened before the call keep their access (the
/// trace file, the listener, the workdir handle); threads started before the call on a kernel
/// before ABI 8 stay unconfined, so call it before starting an async runtime's workers; a
/// filesystem mounted (or a host directory bind-mounted) inside an export is beneath the
/// workdir and so readable: the wall judges paths, not devices; a file it names (a certificate
/// bundle, `/etc/resolv.conf`) that is replaced by a new file after the call is no longer
/// readable; UDP (name resolution's own traffic) is not restricted; executing nothing is
/// allowed.
///
/// ```no_run
/// use resource_plane::Manifest;
/// use resource_plane::confine::{Confinement, ConfinementStatus};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let manifest = Manifest::from_yaml(
///     "name: reporter\nexports: { files: { root: out/, mode: read-only } }\n\
///      capabilities: { peer_fetch: { allow: [\"localhost:41234\"] } }",
/// )?
/// .manifest;
/// // Bind listeners and open the trace first, then confine, then start the runtime.
/// let report = Confinement::new(&manifest, "/srv/capsule").apply()?;
/// assert_ne!(report.status, ConfinementStatus::Partial, "every allow rule names its port");
/// let runtime = tokio::runtime::Runtime::new()?;
/// # drop(runtime);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Confinement {
    workdirs: Vec<Workdir>,
    read: Vec<PathBuf>,
    ports: BTreeSet<u16>,
    any_port: bool,
}

impl Confinement {
    /// The wall for the capsule `manifest` describes, working in `workdir`.
    pub fn new(manifest: &Manifest, workdir: impl AsRef<Path>) -> Self {
        Confinement {
            workdirs: Vec::new(),
            read: Vec::new(),
            ports: BTreeSet::new(),
            any_port: false,
        }
        .also(manifest, workdir)
    }

    /// Adds another capsule served by the same process: the wall admits the union of what each
    /// needs (its workdir, its `peer-in/`, its allow rules' ports).
    pub fn also(mut self, manifest: &Manifest, workdir: impl AsRef<Path>) -> Self {
        self.workdirs.push(Workdir {
            path: workdir.as_ref().to_path_buf(),
            landing: manifest.peer_fetch.is_some(),
        });
        let lists = [manifest.network.as_ref(), manifest.peer_fetch.as_ref()];
        for rule in lists.into_iter().flatten().flat_map(|list| list.rules()) {
            match rule.reaches_port() {
                Some(port) => {
                    self.ports.insert(port);
                }
                None => self.any_port = true,
            }
            if !names_an_address(&rule.address().host) {
                self.ports.insert(DNS_PORT);
            }
        }
        self
    }

    /// Also allows reading `path`: a file, or everything beneath a directory. A path that does
    /// not exist when the wall goes up is skipped.
    pub fn read(mut self, path: impl AsRef<Path>) -> Self {
        self.read.push(path.as_ref().to_path_buf());
        self
    }

    /// What [`apply`](Self::apply) would report on this kernel, without changing anything.
    pub fn preview(&self) -> ConfinementReport {
        self.report(landlock_abi())
    }

    fn report(&self, abi: u32) -> ConfinementReport {
        if abi == 0 {
            return ConfinementReport::unconfined(0);
        }
        let status = if abi >= 6 && !self.any_port {
            ConfinementStatus::Full
        } else {
            ConfinementStatus::Partial
        };
        ConfinementReport {
            landlock_abi: abi,
            status,
            connects_open: self.any_port || abi < 4,
            all_threads: abi >= 8,
        }
    }

    /// Puts the wall up for this process: from now on the calling thread and every thread it
    /// starts (every thread, from Landlock ABI 8) can only do what [`Confinement`] lists. On a
    /// kernel without Landlock nothing changes and the report says
    /// [`None`](ConfinementStatus::None); the caller decides whether to go on.
    ///
    /// # Errors
    /// [`ConfineError::Workdir`] when a workdir cannot be opened, [`ConfineError::Landing`]
    /// when `peer-in/` cannot be created or opened, [`ConfineError::Read`] when a path given to
    /// [`read`](Self::read) exists but cannot be opened, [`ConfineError::Kernel`] when the
    /// kernel refuses the ruleset. No restriction is in force after an error.
    pub fn apply(self) -> Result<ConfinementReport, ConfineError> {
        let abi = landlock_abi();
        if abi == 0 {
            return Ok(ConfinementReport::unconfined(0));
        }
        let mut rules = self.workdir_rules()?;
        rules.extend(self.read_rules()?);
        let status = self.restrict(rules)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Ok(ConfinementReport::unconfined(abi));
        }
        let mut report = self.report(abi);
        report.all_threads = status.all_threads;
        Ok(report)
    }

    /// Each workdir readable, and its `peer-in/` writable where the capsule fetches.
    ///
    /// # Errors
    /// [`ConfineError::Workdir`], [`ConfineError::Landing`].
    fn workdir_rules(&self) -> Result<Vec<PathRule>, ConfineError> {
        let write = AccessFs::from_all(WALL_ABI) & !AccessFs::Execute;
        let mut rules = Vec::new();
        for workdir in &self.workdirs {
            let fd = rustix::fs::open(
                &workdir.path,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| ConfineError::Workdir {
                path: workdir.path.clone(),
                source: e.into(),
            })?;
            if workdir.landing
                && let Some(landing) =
                    open_landing(&fd).map_err(|source| ConfineError::Landing {
                        workdir: workdir.path.clone(),
                        source,
                    })?
            {
                rules.push((landing, write));
            }
            rules.push((fd, read_dir()));
        }
        Ok(rules)
    }

    /// The paths given to [`read`](Self::read), what name resolution reads and the certificate
    /// store, each readable where it exists.
    ///
    /// # Errors
    /// [`ConfineError::Read`] for a path given to [`read`](Self::read) that cannot be opened.
    fn read_rules(&self) -> Result<Vec<PathRule>, ConfineError> {
        let mut readable: Vec<PathBuf> = self.read.clone();
        readable.extend(NAME_RESOLUTION_FILES.iter().map(PathBuf::from));
        readable.extend(certificate_store());
        let mut rules = Vec::new();
        for path in &readable {
            match open_readable(path) {
                Ok(Some((fd, is_dir))) => {
                    rules.push((
                        fd,
                        if is_dir {
                            read_dir()
                        } else {
                            AccessFs::ReadFile.into()
                        },
                    ));
                }
                Ok(None) => {}
                Err(source) if self.read.contains(path) => {
                    return Err(ConfineError::Read {
                        path: path.clone(),
                        source,
                    });
                }
                // A system file the wall could name but cannot open: left out, as if absent.
                Err(_) => {}
            }
        }
        Ok(rules)
    }

    /// Restricts every thread of the process to `rules`, binding no TCP port, and connecting
    /// only to the allowed ports unless an allow rule names none.
    ///
    /// # Errors
    /// [`ConfineError::Kernel`].
    fn restrict(&self, rules: Vec<PathRule>) -> Result<RestrictionStatus, ConfineError> {
        let mut net: BitFlags<AccessNet> = AccessNet::BindTcp.into();
        if !self.any_port {
            net |= AccessNet::ConnectTcp;
        }
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(WALL_ABI))
            .map_err(kernel)?
            .handle_access(net)
            .map_err(kernel)?
            .scope(Scope::from_all(WALL_ABI))
            .map_err(kernel)?
            .create()
            .map_err(kernel)?;
        for (fd, access) in rules {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(kernel)?;
        }
        if !self.any_port {
            for port in &self.ports {
                ruleset = ruleset
                    .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                    .map_err(kernel)?;
            }
        }
        ruleset
            .all_threads(true)
            .map_err(kernel)?
            .restrict_self()
            .map_err(kernel)
    }
}

/// A path-beneath rule: an open directory or file and what the wall allows beneath it.
type PathRule = (OwnedFd, BitFlags<AccessFs>);

/// Reading files and listing directories.
fn read_dir() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// Whether `host` is an IP address literal (no name resolution needed).
fn names_an_address(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<std::net::IpAddr>().is_ok()
}

/// `peer-in/` beneath `workdir`, created if missing, opened without following a symlink.
/// `None` when something else is in the way (a symlink, a file): fetching refuses to land
/// there anyway, so the wall grants no write access at all.
fn open_landing(workdir: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    match rustix::fs::mkdirat(workdir, LANDING_DIR, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    match rustix::fs::openat(
        workdir,
        LANDING_DIR,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::LOOP | Errno::NOTDIR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `path` opened for naming in a rule (following symlinks, as a reader would), and whether it
/// is a directory; `None` when it does not exist.
fn open_readable(path: &Path) -> io::Result<Option<(OwnedFd, bool)>> {
    match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => {
            let stat = rustix::fs::fstat(&fd)?;
            let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
            Ok(Some((fd, is_dir)))
        }
        Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Where the TLS roots are read from at the first https handshake: what `rustls-native-certs`
/// looks at (`SSL_CERT_FILE`, each `SSL_CERT_DIR` entry, else the distribution's bundle and
/// directories), and the directories the symlinks in those lead to (`/etc/ssl/certs/*.pem`
/// point into `/usr/share/ca-certificates` on Debian). A bundle that is itself a symlink needs
/// nothing more: the rule is put on the file it leads to.
fn certificate_store() -> Vec<PathBuf> {
    let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
    let probe = openssl_probe::probe();
    paths.extend(probe.cert_file);
    let mut dirs = probe.cert_dir;
    if let Some(value) = std::env::var_os("SSL_CERT_DIR") {
        dirs.extend(std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Some(file) = std::env::var_os("SSL_CERT_FILE") {
        paths.insert(PathBuf::from(file));
    }
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten().take(CERT_DIR_ENTRIES) {
                let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
                if is_link
                    && let Some(target_dir) = std::fs::canonicalize(entry.path())
                        .ok()
                        .and_then(|real| real.parent().map(Path::to_path_buf))
                {
                    paths.insert(target_dir);
                }
            }
        }
        paths.insert(dir);
    }
    paths.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(yaml: &str) -> Manifest {
        Manifest::from_yaml(yaml).unwrap().manifest
    }

    #[test]
    fn allow_rules_decide_the_ports_and_the_status() {
        let bounded = Confinement::new(
            &manifest(
                "name: a\ncapabilities:\n  peer_fetch: { allow: [\"127.0.0.1:41234\"] }\n  \
                 network: { allow: [\"https://peer.example\"] }\n",
            ),
            "/nonexistent",
        );
        assert!(!bounded.any_port);
        assert_eq!(
            bounded.ports.iter().copied().collect::<Vec<_>>(),
            [DNS_PORT, 443, 41234],
            "a named host adds DNS over TCP; an address does not"
        );
        assert_eq!(bounded.report(7).status, ConfinementStatus::Full);
        assert_eq!(bounded.report(5).status, ConfinementStatus::Partial);
        assert_eq!(bounded.report(0).status, ConfinementStatus::None);
        assert!(bounded.workdirs[0].landing);

        let open = bounded.also(
            &manifest("name: b\ncapabilities: { network: { allow: [localhost] } }"),
            "/elsewhere",
        );
        assert!(open.any_port, "a rule without a port leaves connects open");
        let report = open.report(7);
        assert_eq!(report.status, ConfinementStatus::Partial);
        assert!(report.connects_open);
        assert!(!open.workdirs[1].landing);
    }

    #[test]
    fn no_allow_rule_means_no_connect_at_all() {
        let wall = Confinement::new(&manifest("name: a"), "/w");
        assert!(!wall.any_port && wall.ports.is_empty());
        assert!(!wall.workdirs[0].landing);
    }

    #[test]
    fn addresses_are_told_from_names() {
        assert!(names_an_address("127.0.0.1"));
        assert!(names_an_address("[::1]"));
        assert!(!names_an_address("localhost"));
    }
}
