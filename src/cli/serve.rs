//! `resource-plane serve` (`contract.md`): launch checks first, so a refused launch creates
//! nothing; then bind, open the trace, print the ready line and serve until SIGINT, SIGTERM or
//! (with `--console`) end of stdin.

use super::check::{cli_error, open_workdir, read_manifest};
use super::socket_file::SocketFile;
use crate::backends::tls::PeerTls;
use crate::backends::{Filesystem, JsonlTraceSink, SystemClock};
use crate::capsule::{DEFAULT_FETCH_MAX_BYTES, DEFAULT_INFLIGHT_BUDGET_BYTES};
use crate::confine::{Confinement, ConfinementReport, ConfinementStatus, landlock_abi};
use crate::http::ListenerConfig;
use crate::http::edge::{ShardSocket, serve_sharded};
use crate::manifest::LaunchError;
use crate::scope::Containment;
use crate::{Capsule, Manifest};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// `serve`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The capsule's working directory.
    #[arg(long)]
    workdir: PathBuf,
    /// The YAML manifest.
    #[arg(long)]
    manifest: PathBuf,
    /// Address to listen on: IP:PORT, or HOST:PORT for a host the system resolves
    /// (`localhost:8080`; its first IPv4 address, else its first address), or unix:PATH for a
    /// Unix domain socket (then --url is required).
    #[arg(long, default_value = "127.0.0.1:0", value_parser = parse_listen)]
    listen: Listen,
    /// Advertised URL; default http://<bound addr>. Required with --listen unix:PATH.
    #[arg(long)]
    url: Option<String>,
    /// The containment class the embedding runtime achieved: advisory, scoped or sealed.
    #[arg(long, default_value = "advisory", value_parser = parse_containment)]
    containment: Containment,
    /// Trace file; default a per-session file outside the workdir.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The fetcher's own body cap in bytes (at least 1, like every byte limit).
    #[arg(long, default_value_t = DEFAULT_FETCH_MAX_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    fetch_max_bytes: u64,
    /// Bytes that in-flight read bodies may hold at once; more reads wait. At least 1.
    #[arg(long, default_value_t = DEFAULT_INFLIGHT_BUDGET_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    inflight_budget: u64,
    /// Seconds a response may make no progress (its client takes nothing) before the
    /// connection is dropped and its body's budget bytes come back.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    send_timeout: u64,
    /// Single-threaded HTTP runtimes sharing the listening socket; default half the cores (at
    /// least one), leaving the rest to the blocking pool (large reads, listings) and the capsule.
    #[arg(long, value_parser = parse_shards)]
    shards: Option<usize>,
    /// PEM certificates trusted for https peers, added to the system's roots.
    #[arg(long)]
    peer_ca: Vec<PathBuf>,
    /// Read tool calls from stdin: `json` (the default), one JSON object per line (README §
    /// Operating); `mcp`, an MCP server on stdin/stdout, the ready line on stderr (README § MCP).
    /// Written `--console`, `--console=mcp` or `--console mcp`.
    #[arg(long, num_args = 0..=1, default_missing_value = "json", value_enum)]
    console: Option<ConsoleMode>,
    /// Refuse unknown manifest keys (E-MAN-003) instead of warning about them.
    #[arg(long)]
    strict: bool,
    /// Refuse to start (E-CLI-001) when the kernel offers no Landlock to confine the process
    /// (README § Security).
    #[arg(long, conflicts_with = "no_confine")]
    require_confinement: bool,
    /// Do not confine the process with Landlock (README § Security).
    #[arg(long)]
    no_confine: bool,
}

/// What `--console` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ConsoleMode {
    /// One JSON request per line, one JSON answer per line (README § Operating).
    Json,
    /// An MCP server on stdin/stdout; the ready line on stderr (README § MCP).
    Mcp,
}

fn parse_containment(text: &str) -> Result<Containment, String> {
    Containment::parse(text).ok_or_else(|| "expected advisory, scoped or sealed".to_owned())
}

fn refuse(e: &LaunchError) -> ExitCode {
    super::log::say!("{e}");
    ExitCode::from(2)
}

/// Runs `serve`; exit 0 after a graceful end, 2 on a refused launch. Everything that reaches
/// outside the workdir is done first (the manifest read, the listener bound, the trace opened),
/// then the process confines itself, and only then is the async runtime started, so that
/// every one of its threads is inside the wall.
pub(crate) fn run(args: ServeArgs) -> ExitCode {
    let prepared = match prepare(args) {
        Ok(prepared) => prepared,
        Err(e) => return refuse(&e),
    };
    let Some(runtime) = super::runtime() else {
        super::log::release();
        return ExitCode::FAILURE;
    };
    let code = match runtime.block_on(serve(prepared)) {
        Ok(code) => code,
        Err(e) => refuse(&e),
    };
    // Whatever ended the session, nothing logged stays held back.
    super::log::release();
    // The console's stdin read cannot be cancelled; do not wait for it once the session is over.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

/// What `serve` holds once the launch checks passed and the process is confined.
struct Prepared {
    started: std::time::Instant,
    manifest: Manifest,
    fs: crate::backends::OsFilesystem,
    trace_path: PathBuf,
    sink: JsonlTraceSink,
    peer_tls: PeerTls,
    listeners: Vec<ShardSocket>,
    /// The `--listen unix:` socket file, removed when the session ends.
    socket_file: Option<SocketFile>,
    url: String,
    confinement: ConfinementReport,
    args: ServeArgs,
}

/// The parent of `path` made absolute and canonical, whether or not `path` exists yet.
#[allow(clippy::disallowed_methods)]
fn canonical_parent(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    let parent = absolute.parent()?;
    std::fs::canonicalize(parent).ok()
}

/// The launch checks, the listener, the trace, then the wall.
///
/// # Errors
/// The refused launch: `E-MAN-003`, `E-CAP-007`, `E-CAP-008`, or `E-CLI-001` (a flag, the
/// listener, the trace, `--require-confinement` on a kernel without Landlock, a wall that could
/// not be put up).
fn prepare(args: ServeArgs) -> Result<Prepared, LaunchError> {
    let started = std::time::Instant::now();
    let parsed = read_manifest(&args.manifest, args.strict)?;
    let console_mcp = args.console == Some(ConsoleMode::Mcp);
    #[cfg(not(feature = "mcp"))]
    if console_mcp {
        return Err(cli_error(
            "--console mcp: this build has no MCP (the `mcp` feature is off)",
            "use --console, or a build with the default features",
        ));
    }
    // Under `--console mcp` the ready line is the first line on stderr: logs (warnings for
    // the manifest, the confinement) are held back until it is out.
    if console_mcp {
        super::log::hold();
    }
    warn_manifest(&parsed.warnings);
    let manifest = parsed.manifest;
    let (workdir, fs) = open_workdir(&args.workdir)?;
    manifest.check_launch(|root| Ok(fs.check_root(root)?))?;
    if args.require_confinement && landlock_abi() == 0 {
        return Err(cli_error(
            "--require-confinement: this kernel offers no Landlock",
            "run on a kernel with Landlock enabled (Linux 5.13 or later, `landlock` in the lsm= \
             boot list), or drop --require-confinement to run unconfined (README § Security)",
        ));
    }

    let (trace_path, default_trace) = trace_location(args.trace.as_deref(), &workdir)?;
    let peer_tls = PeerTls::system()
        .add_pem_files(&args.peer_ca)
        .map_err(|e| cli_error(format!("--peer-ca: {e}"), "pass PEM certificate files"))?;
    // An advertised URL given is checked before anything is bound or created.
    if let Some(url) = &args.url {
        check_url(&manifest.name, url)?;
    }
    let (listeners, url, socket_file) = bind(&args, &manifest.name)?;
    let sink = open_trace(&trace_path, default_trace)?;
    // Read once, before the wall: the core count reads cgroup files outside it.
    super::cores();
    let confinement = confine(&args, &manifest, &workdir)?;
    Ok(Prepared {
        started,
        manifest,
        fs,
        trace_path,
        sink,
        peer_tls,
        listeners,
        socket_file,
        url,
        confinement,
        args,
    })
}

/// Where the trace goes, and whether that is the default per-session file: `--trace`, or a
/// fresh name under the temp directory. Its directory must exist (the default one may be made
/// later) and lie outside the workdir.
///
/// # Errors
/// `E-CLI-001`: the directory does not exist, or lies inside the workdir.
#[allow(clippy::disallowed_methods)]
fn trace_location(trace: Option<&Path>, workdir: &Path) -> Result<(PathBuf, bool), LaunchError> {
    let (trace_path, default_trace) = match trace {
        Some(path) => (path.to_path_buf(), false),
        None => {
            let dir = std::env::temp_dir().join("resource-plane-traces");
            // A name no earlier session has used (a process id repeats, across container
            // restarts say, and the file would then hold two sessions' lines).
            let name = format!("trace-{}.jsonl", super::random_hex::<16>());
            (dir.join(name), true)
        }
    };
    // The directory the trace will be written in, canonical. The default one may not exist
    // yet (it is made later): then it is the canonical temp dir joined with its name, which
    // no symlink can redirect because it does not exist.
    let trace_parent = if default_trace {
        trace_path.parent().and_then(|dir| {
            std::fs::canonicalize(dir).ok().or_else(|| {
                let name = dir.file_name()?;
                Some(std::fs::canonicalize(dir.parent()?).ok()?.join(name))
            })
        })
    } else {
        canonical_parent(&trace_path)
    };
    match trace_parent {
        None if default_trace => Err(cli_error(
            format!(
                "the default trace {}: the temp directory (TMPDIR) does not exist",
                trace_path.display()
            ),
            "set TMPDIR to an existing directory, or pass --trace",
        )),
        None => Err(cli_error(
            format!(
                "--trace {}: its directory does not exist",
                trace_path.display()
            ),
            "pass a trace path in an existing directory outside the workdir",
        )),
        Some(parent) if parent.starts_with(workdir) => Err(cli_error(
            format!("trace {} lies inside the workdir", trace_path.display()),
            "pass --trace with a path outside the workdir, where no export can serve it",
        )),
        Some(_) => Ok((trace_path, default_trace)),
    }
}

/// Binds `--listen`: one listening socket, accepted from by `--shards` single-threaded
/// runtimes; with it the advertised URL (`--url`, else `http://<bound address>`) and, for a
/// Unix socket, its file.
///
/// # Errors
/// `E-CLI-001`: the address cannot be bound, a Unix socket has no `--url`, or the URL yields
/// no audience.
fn bind(
    args: &ServeArgs,
    name: &str,
) -> Result<(Vec<ShardSocket>, String, Option<SocketFile>), LaunchError> {
    let shards = args.shards.unwrap_or_else(default_shards);
    match &args.listen {
        Listen::Tcp(address) => {
            let listeners = crate::backends::net::bind_shards(*address, shards).map_err(|e| {
                cli_error(format!("--listen {address}: {e}"), "choose a free address")
            })?;
            let bound = listeners[0]
                .local_addr()
                .map_err(|e| cli_error(format!("--listen: {e}"), "choose a free address"))?;
            let url = args
                .url
                .clone()
                .unwrap_or_else(|| format!("http://{bound}"));
            check_url(name, &url)?;
            let listeners = listeners.into_iter().map(ShardSocket::Tcp).collect();
            Ok((listeners, url, None))
        }
        Listen::Unix(path) => {
            let Some(url) = args.url.clone() else {
                return Err(cli_error(
                    format!("--listen unix:{}: no --url", path.display()),
                    "pass --url with the http(s) URL peers reach the capsule at over TCP",
                ));
            };
            let (socket_file, listeners) = SocketFile::bind(path, shards).map_err(|e| {
                cli_error(
                    format!("--listen unix:{}: {e}", path.display()),
                    "choose a path where no file is, or whose socket nobody listens on",
                )
            })?;
            let listeners = listeners.into_iter().map(ShardSocket::Unix).collect();
            Ok((listeners, url, Some(socket_file)))
        }
    }
}

/// Opens the trace at `trace_path`, making the default trace's directory first.
///
/// # Errors
/// `E-CLI-001`: the directory cannot be made, or the file is not one the sink accepts.
#[allow(clippy::disallowed_methods)]
fn open_trace(trace_path: &Path, default_trace: bool) -> Result<JsonlTraceSink, LaunchError> {
    if default_trace && let Some(dir) = trace_path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| cli_error(format!("trace directory: {e}"), "pass --trace"))?;
    }
    // The sink refuses anything but a regular file with a single link (a hard link inside the
    // workdir would let an export serve the trace) without creating anything.
    JsonlTraceSink::open(trace_path).map_err(|e| {
        cli_error(
            format!("trace {}: {e}", trace_path.display()),
            "pass --trace with a new file, or a writable regular file with a single link, outside the workdir",
        )
    })
}

/// Logs the manifest's warnings.
fn warn_manifest(warnings: &[String]) {
    for warning in warnings {
        // A key is the operator's text; even so, nothing token-shaped reaches a log.
        tracing::warn!("{}", crate::redact::redact_tokens(warning));
    }
}

/// Puts the wall up (unless `--no-confine`), or says why not.
///
/// # Errors
/// `E-CLI-001` when the wall cannot be put up, or when `--require-confinement` finds the kernel
/// did not enforce it.
fn confine(
    args: &ServeArgs,
    manifest: &Manifest,
    workdir: &Path,
) -> Result<ConfinementReport, LaunchError> {
    if args.no_confine {
        return Ok(ConfinementReport::unconfined(landlock_abi()));
    }
    let wall = args
        .peer_ca
        .iter()
        .fold(Confinement::new(manifest, workdir), |wall, ca| {
            wall.read(ca)
        });
    let report = wall.apply().map_err(|e| {
        cli_error(
            format!("confinement: {e}"),
            "check the workdir and --peer-ca paths, or pass --no-confine to run without the \
             Landlock wall (README § Security)",
        )
    })?;
    match report.status {
        ConfinementStatus::None if args.require_confinement => Err(cli_error(
            "--require-confinement: the kernel did not enforce the Landlock ruleset",
            "drop --require-confinement to run unconfined (README § Security)",
        )),
        ConfinementStatus::None => {
            tracing::warn!(
                "this kernel offers no Landlock: serving unconfined (README § Security)"
            );
            Ok(report)
        }
        ConfinementStatus::Partial if report.connects_open => {
            tracing::warn!(
                "an allow rule names no port: TCP connects stay open to every port \
                 (README § Security)"
            );
            Ok(report)
        }
        _ => Ok(report),
    }
}

/// Serves the prepared session until SIGINT, SIGTERM or the console's end.
///
/// # Errors
/// `E-CLI-001` when the signal handlers cannot be installed; the capsule's own launch errors.
async fn serve(prepared: Prepared) -> Result<ExitCode, LaunchError> {
    let Prepared {
        started,
        manifest,
        fs,
        trace_path,
        sink,
        peer_tls,
        listeners,
        socket_file: _socket_file,
        url,
        confinement,
        args,
    } = prepared;
    // Handlers first: a signal that arrives right after the ready line must end the session
    // gracefully, not kill the process.
    let signals = Signals::install().map_err(|e| {
        cli_error(
            format!("signal handlers: {e}"),
            "check the process's limits",
        )
    })?;
    let capsule = Capsule::builder(&manifest)
        .filesystem(Arc::new(fs))
        .clock(Arc::new(SystemClock))
        .trace(Arc::new(sink))
        .advertised_url(url.clone())
        .containment(args.containment)
        .fetch_max_bytes(args.fetch_max_bytes)
        .inflight_budget_bytes(args.inflight_budget)
        .cores(super::cores())
        .peer_tls(peer_tls)
        .launch()?;
    let trace = std::path::absolute(&trace_path).unwrap_or(trace_path);
    let announced = Announced {
        manifest: &manifest,
        url: &url,
        trace: &trace,
        confinement: &confinement,
    };
    if let Err(failed) = announce(&capsule, &announced, &args) {
        capsule.end_session();
        return Ok(failed);
    }
    let capsule = Arc::new(capsule);
    let listener_failed = run_session(&capsule, listeners, signals, &args).await;
    capsule.end_session();
    let stats = capsule.stats();
    tracing::info!(
        requests_answered = stats.requests_answered,
        handles_minted = stats.handles_minted,
        seconds_run = started.elapsed().as_secs(),
        "session ended"
    );
    Ok(if listener_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What the ready line and the `listening` log line say besides the capsule's own.
struct Announced<'a> {
    manifest: &'a Manifest,
    url: &'a str,
    /// The trace's absolute path.
    trace: &'a Path,
    confinement: &'a ConfinementReport,
}

/// Prints the ready line (on stdout, or stderr under `--console mcp`), releases the logs held
/// back until then, and logs `listening`.
///
/// # Errors
/// The exit status when the ready line cannot be written (said on stderr): nobody could learn
/// the session's address, so it must end at once.
fn announce(capsule: &Capsule, said: &Announced<'_>, args: &ServeArgs) -> Result<(), ExitCode> {
    let console_mcp = args.console == Some(ConsoleMode::Mcp);
    let tools = capsule.tools().names();
    let ready = serde_json::json!({
        "event": "listening",
        "url": said.url,
        "audience": capsule.audience(),
        "session_id": capsule.session_id(),
        "trace": said.trace.display().to_string(),
        "planes": said.manifest.planes(),
        "tools": tools,
        "confinement": said.confinement.to_json(),
    });
    // Nobody can learn the session's address once stdout is gone (a closed pipe, a full
    // disk): end the session at once, with a word on stderr, instead of panicking as
    // `println!` does.
    let printed = if console_mcp {
        super::print_error_line(&ready.to_string())
    } else {
        super::print_line(&ready.to_string())
    };
    if let Err(e) = printed {
        let stream = if console_mcp { "stderr" } else { "stdout" };
        super::log::say!("error: cannot write the ready line to {stream}: {e}");
        return Err(ExitCode::FAILURE);
    }
    super::log::release();
    tracing::info!(
        url = %said.url,
        audience = %capsule.audience(),
        planes = %declared_planes(said.manifest),
        tools = %list_or_none(&tools),
        containment = %args.containment.as_str(),
        confinement = %said.confinement.status,
        landlock_abi = said.confinement.landlock_abi,
        trace = %said.trace.display(),
        "listening"
    );
    Ok(())
}

/// Serves until a signal, the console's end or a listener's failure, then lets a console call
/// in flight finish. Whether a listener failed.
async fn run_session(
    capsule: &Arc<Capsule>,
    listeners: Vec<ShardSocket>,
    signals: Signals,
    args: &ServeArgs,
) -> bool {
    let listener_config = ListenerConfig {
        send_timeout: std::time::Duration::from_secs(args.send_timeout),
        ..ListenerConfig::default()
    };
    let drain = listener_config.drain_deadline;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let console = args
        .console
        .map(|mode| spawn_console(capsule.clone(), mode, stop_tx.clone(), drain));
    let stop_console = stop_tx.clone();
    tokio::spawn(async move {
        signals.wait().await;
        let _ = stop_tx.send(true);
    });
    let listener_failed = serve_planes(capsule, listeners, listener_config, stop_rx).await;
    // A console call in flight at the signal finishes (answer and trace line) before the key
    // goes. The console bounds the call by the drain deadline; the bound here also covers an
    // answer stuck writing to a stdout nobody reads, and a listener that ended on its own.
    let _ = stop_console.send(true);
    if let Some(console) = console
        && tokio::time::timeout(drain + CONSOLE_MARGIN, console)
            .await
            .is_err()
    {
        tracing::warn!("the console did not finish within the drain deadline; abandoned");
    }
    listener_failed
}

/// The console (`--console`) on its own task; its end stops the session.
fn spawn_console(
    capsule: Arc<Capsule>,
    mode: ConsoleMode,
    stop: tokio::sync::watch::Sender<bool>,
    drain: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    let stopping = stop.subscribe();
    tokio::spawn(async move {
        match mode {
            ConsoleMode::Json => super::console::run(&capsule, stopping, drain).await,
            #[cfg(feature = "mcp")]
            ConsoleMode::Mcp => {
                super::mcp_console::run(&capsule, stopping, drain).await;
            }
            #[cfg(not(feature = "mcp"))]
            ConsoleMode::Mcp => {}
        }
        let _ = stop.send(true);
    })
}

/// Serves the capsule's router (and `/mcp` beside it) on `listeners` until `stop` is raised.
/// Whether a listener failed: a supervisor must not read that as a clean end.
async fn serve_planes(
    capsule: &Arc<Capsule>,
    listeners: Vec<ShardSocket>,
    listener_config: ListenerConfig,
    stop: tokio::sync::watch::Receiver<bool>,
) -> bool {
    let router = capsule.router();
    // Watch streams end, and held long-polls answer, when shutdown begins, so the drain does
    // not wait on them.
    let watches = router.clone();
    let mut stopping = stop.clone();
    tokio::spawn(async move {
        if stopping.wait_for(|stop| *stop).await.is_ok() {
            watches.shut_down_watches();
        }
    });
    let lanes = router.lane_count();
    // `/mcp` beside the planes (D-18.2), its subscriptions fed by the export's watcher;
    // without the feature, the planes alone.
    #[cfg(feature = "mcp")]
    let service = router.with_mcp(crate::mcp::McpService::new(
        capsule,
        crate::mcp::McpConfig::default(),
    ));
    #[cfg(not(feature = "mcp"))]
    let service = router;
    let served = crate::blocking::run(move || {
        serve_sharded(listeners, service, lanes, listener_config, stop)
    })
    .await;
    match served {
        Ok(Ok(())) => false,
        Ok(Err(e)) => {
            tracing::error!("listener failed: {e}");
            super::log::say!("error: the listener stopped: {e}");
            true
        }
        Err(_) => {
            super::log::say!("error: the listener stopped unexpectedly");
            true
        }
    }
}

/// The planes declared with their roots, for the listening log line:
/// `files:out/,peer_files:out/`, or `none`.
fn declared_planes(manifest: &Manifest) -> String {
    let mut planes = String::new();
    let declared = [
        ("files", manifest.files.as_ref().map(|f| &f.root)),
        ("peer_files", manifest.peer_files.as_ref().map(|p| &p.root)),
    ];
    for (plane, root) in declared {
        if let Some(root) = root {
            let comma = if planes.is_empty() { "" } else { "," };
            let _ = write!(planes, "{comma}{plane}:{}", root.declared());
        }
    }
    if planes.is_empty() {
        planes.push_str("none");
    }
    planes
}

/// `a,b`, or `none` for an empty list.
fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(",")
    }
}

/// How long past the drain deadline the session waits for the console to write its last
/// answer.
const CONSOLE_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// SIGTERM and SIGINT, installed before the ready line is printed.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {},
            _ = self.int.recv() => {},
        }
    }
}

/// Half the cores, at least one. The plane shares its host with the capsule it serves, and
/// its clients: on the 2-core machine this crate is measured on, one shard served 4 KiB reads
/// at 0.98x nginx's req/s and 1.19x its CPU per request, two shards at 0.82x and 1.35x (more
/// runnable threads than cores, and both shards woken for every connection). Large reads and
/// listings run on the blocking pool, which uses the other cores either way.
fn default_shards() -> usize {
    (super::cores() / 2).max(1)
}

/// Refuses an advertised URL no audience can be formed from (D-8).
fn check_url(name: &str, url: &str) -> Result<(), LaunchError> {
    if crate::audience::audience(name, url).is_none() {
        return Err(cli_error(
            format!("--url {url}: an http(s) URL with a host"),
            "pass --url http://host:port",
        ));
    }
    Ok(())
}

/// Where `serve` listens (`--listen`).
#[derive(Debug, Clone)]
enum Listen {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix domain socket's path (D-20.1).
    Unix(PathBuf),
}

/// `--listen`: `unix:PATH` (a non-empty path), a socket address as written, else `HOST:PORT`
/// resolved by the system (its first IPv4 address, so `localhost` means `127.0.0.1` wherever
/// that is one of its addresses).
fn parse_listen(text: &str) -> Result<Listen, String> {
    if let Some(path) = text.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("expected a path after unix:".to_owned());
        }
        return Ok(Listen::Unix(PathBuf::from(path)));
    }
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(Listen::Tcp(address));
    }
    let expected = || "expected IP:PORT, HOST:PORT or unix:PATH".to_owned();
    if !text.contains(':') {
        return Err(expected());
    }
    let resolved: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(text)
        .map_err(|e| format!("{}: {e}", expected()))?
        .collect();
    resolved
        .iter()
        .find(|address| address.is_ipv4())
        .or_else(|| resolved.first())
        .copied()
        .map(Listen::Tcp)
        .ok_or_else(expected)
}

/// `--shards`: 1 to 256.
fn parse_shards(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err("expected a whole number from 1 to 256".to_owned()),
    }
}
