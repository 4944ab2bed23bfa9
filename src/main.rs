//! The `resource-plane` binary: `serve` one capsule's planes from the command line, or run the
//! two-capsule `demo` (`contract.md`). The binary is the composition root: it alone turns
//! command-line paths into backends.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Read-only file surfaces for an AI-agent capsule.
#[derive(Debug, Parser)]
#[command(name = "resource-plane", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve one capsule's resource planes over HTTP.
    Serve(cli::serve::ServeArgs),
    /// Run two capsules on loopback and exercise every step of the product.
    Demo,
    /// Mirror a capsule's operator plane into a local directory.
    Pull(cli::pull::PullArgs),
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

fn main() -> ExitCode {
    cli::log::init();
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
            cli::log::say!("error[E-CLI-001]: a subcommand is required: serve, demo or pull");
            cli::log::say!("  hint: run `resource-plane --help` for the commands and their flags");
            return ExitCode::from(2);
        }
        Err(e) => {
            // A command line that cannot be parsed is a refused launch like any other.
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            cli::log::say!(
                "error[E-CLI-001]: {}",
                message.join(" ").trim_start_matches("error: ")
            );
            cli::log::say!("  hint: run `resource-plane --help` for the flags");
            return ExitCode::from(2);
        }
    };
    raise_descriptor_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            cli::log::say!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match args.command {
        Command::Serve(serve) => runtime.block_on(cli::serve::run(serve)),
        Command::Demo => runtime.block_on(cli::demo::run()),
        Command::Pull(pull) => runtime.block_on(cli::pull::run(pull)),
    };
    // The console's stdin read cannot be cancelled; do not wait for it once the session is over.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}
