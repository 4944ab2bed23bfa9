//! The `resource-plane` command line: `serve` one capsule's planes, `check` a manifest without
//! serving, `pull` a capsule's files, or run the two-capsule `demo` (`contract.md`). This is the
//! composition root: it alone turns command-line paths, addresses and the environment into
//! backends, so it may reach the world directly (clippy.toml bans that in the rest of the
//! library). Built with the `cli` feature (on by default); the binary's `main` is [`main`].

#![allow(clippy::disallowed_methods)]

mod check;
mod console;
mod demo;
mod log;
#[cfg(feature = "mcp")]
mod mcp_console;
mod pull;
mod serve;
mod socket_file;

use crate::backends::{OsRandom, Random};
use clap::{Parser, Subcommand};

/// `N` bytes of the OS random source as lowercase hex: the command line's temporary names. The
/// command line is the composition root, so it draws from the OS directly.
fn random_hex<const N: usize>() -> String {
    let os: &dyn Random = &OsRandom;
    os.hex::<N>()
}

/// Writes `line` and a line end to stdout and flushes it: the ready line, `check`'s report and
/// `pull`'s summary, each one whole line a script reads.
fn print_line(line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

/// Writes `line` and a line end to stderr and flushes it: the ready line under
/// `--console mcp`, where stdout carries only MCP.
fn print_error_line(line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    writeln!(stderr, "{line}")?;
    stderr.flush()
}
use std::process::ExitCode;

/// Read-only file surfaces for an AI-agent capsule.
#[derive(Debug, Parser)]
#[command(name = "resource-plane", version, about, after_help = AFTER_HELP)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve one capsule's resource planes over HTTP.
    #[command(after_help = AFTER_HELP)]
    Serve(serve::ServeArgs),
    /// Validate a manifest without serving or creating anything.
    ///
    /// Prints the effective configuration as one JSON line and exits 0, or prints the refused
    /// launch's error and hint and exits 2. With --workdir the export roots are checked too.
    #[command(after_help = AFTER_HELP)]
    Check(check::CheckArgs),
    /// Run two capsules on loopback and exercise every step of the product.
    Demo,
    /// Mirror a capsule's operator plane into a local directory; with --watch, keep it current.
    ///
    /// Exits 0 when nothing failed, 1 when something did, 2 when the listing cannot be had or
    /// DIR cannot be used, 130 or 143 when SIGINT or SIGTERM stopped it (a watch ends with 0).
    Pull(pull::PullArgs),
}

/// The end of `--help`: a manifest, the exit statuses and the log level, so the help stands on
/// its own.
const AFTER_HELP: &str = "\
A manifest (YAML; every field in README § Manifest):
  name: reporter
  exports:
    files:      { root: out/, mode: read-only, max_bytes: 10Mi }
    peer_files: { root: out/, max_ttl: 15m }
  capabilities:
    peer_fetch: { allow: [\"localhost:41234\"] }
    network:    { allow: [\"localhost\"] }
  lifecycle: { after_task: exit }

Exit status:
  0  serve: the session ended on SIGINT, SIGTERM or end of the console's stdin;
     check: the manifest would launch (one JSON line on stdout); --help, --version
  1  the ready line could not be written, the listener failed, or the runtime could not start
  2  a refused launch (error[E-…] and a hint on stderr; nothing created) or a command line
     that does not parse

Logs go to stderr; RESOURCE_PLANE_LOG sets their level (error, warn, info (default), debug,
trace, or target=level directives). See README § Operating.";

/// The level of the logs when `RESOURCE_PLANE_LOG` is unset, empty or unusable: `info` for
/// this crate (D-15.1), `warn` for the libraries under it.
const DEFAULT_LOG_FILTER: &str = "warn,resource_plane=info";

/// The log filter `RESOURCE_PLANE_LOG` asks for, and the value itself when it cannot be used
/// (the default applies and a warning says so). Accepted: a level (`off`, `error`, `warn`,
/// `info`, `debug`, `trace`, any case) or comma-separated `target=level` directives, each
/// naming a level. A bare word that is no level (`garbage`) is refused rather than read as a
/// target name, which would silently switch every log off.
fn log_filter() -> (tracing_subscriber::EnvFilter, Option<String>) {
    use tracing_subscriber::EnvFilter;
    let default = || EnvFilter::new(DEFAULT_LOG_FILTER);
    let Some(value) = std::env::var_os("RESOURCE_PLANE_LOG") else {
        return (default(), None);
    };
    let Some(text) = value.to_str().map(str::trim) else {
        return (default(), Some(value.to_string_lossy().into_owned()));
    };
    if text.is_empty() {
        return (default(), None);
    }
    let is_level = |word: &str| {
        ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .any(|level| word.trim().eq_ignore_ascii_case(level))
    };
    let usable = text
        .split(',')
        .all(|directive| match directive.rsplit_once('=') {
            Some((target, level)) => !target.trim().is_empty() && is_level(level),
            None => is_level(directive),
        });
    match EnvFilter::try_new(text) {
        Ok(filter) if usable => (filter, None),
        _ => (default(), Some(text.to_owned())),
    }
}

/// Raises the soft descriptor limit to the hard one, as Go's runtime does: the listener holds a
/// descriptor per connection (up to 2,048), reads a few each, and the fallback path walk (where
/// `openat2` is missing) one per path component, up to 2,048 for a `PATH_MAX` path; a soft
/// limit of 1,024, a common default, would fail them with `EMFILE` long before the hard limit.
fn raise_descriptor_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (limit.current, limit.maximum)
        && current < maximum
    {
        let raised = Rlimit {
            current: Some(maximum),
            maximum: Some(maximum),
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!("could not raise the descriptor limit from {current}: {e}");
        }
    }
}

/// Runs the `resource-plane` command line (`contract.md`): parses the arguments, sets up the
/// logs and the runtime, runs the subcommand and returns the process's exit status. The
/// binary's `main` is this function.
pub fn main() -> ExitCode {
    let (filter, unusable_level) = log_filter();
    log::init(filter);
    if let Some(value) = unusable_level {
        tracing::warn!(
            "RESOURCE_PLANE_LOG={value:?} is not a log level (error, warn, info, debug, trace, \
             or target=level directives); logging at info"
        );
    }
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::MissingSubcommand
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            log::say!("error[E-CLI-001]: a subcommand is required: serve, check, demo or pull");
            log::say!("  hint: run `resource-plane --help` for the commands and their flags");
            return ExitCode::from(2);
        }
        Err(e) => {
            // A command line that cannot be parsed is a refused launch like any other: its
            // code on the first line, then clap's own rendering (the reason, a tip where it has
            // one, the usage), then the hint.
            let text = e.to_string();
            let text = text.trim_end();
            log::say!(
                "error[E-CLI-001]: {}",
                text.strip_prefix("error: ").unwrap_or(text)
            );
            log::say!("  hint: see `resource-plane <command> --help` or README § Operating");
            return ExitCode::from(2);
        }
    };
    raise_descriptor_limit();
    match args.command {
        Command::Serve(serve) => serve::run(serve),
        Command::Check(check) => check::run(check),
        Command::Demo => demo::run(),
        Command::Pull(pull) => {
            let Some(runtime) = runtime() else {
                return ExitCode::FAILURE;
            };
            let code = runtime.block_on(pull::run(pull));
            runtime.shutdown_timeout(std::time::Duration::from_millis(200));
            code
        }
    }
}

/// The multi-threaded async runtime, one worker per core; `None` (said on stderr) when it
/// cannot start. `serve` and `demo` build it only once the process is confined, so that
/// every worker and blocking thread starts inside the Landlock wall.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores())
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            log::say!("error: cannot start the async runtime: {e}");
            None
        }
    }
}

/// The machine's cores, taken once for the whole process: the binary sizes its shards and
/// its capsules' work by it (the library reads nothing itself, D-15.8).
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}
