//! `resource-plane pull URL DIR [--delete] [--jobs N] [--watch]` (D-16, D-17.3, `contract.md`):
//! mirrors a capsule's operator plane into a local directory, and with `--watch` keeps it
//! current from the export's watch stream.
//!
//! One pass: check that `DIR` can be used, fetch and judge the listing ([`listing`]), create
//! `DIR` when missing, remove the temporary files a killed run left ([`local`]), remove stale
//! files (`--delete`), then for each entry compare the local copy's sha256 and download it when
//! it differs or is missing, `--jobs` at a time ([`fetch`]). A download is written only when its
//! body's sha256 equals the listing's hash and the `etag`'s. Entries that failed in a way a
//! changing file explains (404, 413, a hash, etag or size mismatch, a broken connection, a 5xx)
//! are reported on stderr and retried once against a *fresh listing* (re-reading against the old
//! one could only fail again for a file that changed); one re-listing serves every retry. The
//! last stdout line is the summary; the exit status is 0 when nothing failed, 1 when something
//! did (`"pull":"partial"`), and 2, with `error[E-CLI-001]` and a hint on stderr and nothing on
//! stdout, when the listing cannot be had or `DIR` cannot be used. SIGINT or SIGTERM drops the
//! download in flight, its temporary file with it, and ends the run with status 130 or 143
//! ([`stop`]).
//!
//! `--watch` follows the stream after the first pass ([`watch`]) until SIGINT or SIGTERM, which
//! end it after the files in flight with status 0.

mod change;
mod etag;
mod fetch;
mod listing;
mod local;
mod progress;
mod remote;
mod sse;
mod stop;
mod watch;

use crate::manifest::LaunchError;
use etag::Etag;
use fetch::{Context, ListingFetchError, Outcome, Why};
use listing::Listing;
use local::MirrorDir;
use progress::Progress;
use remote::{Origin, Remote};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use stop::{FirstSignal, Stop};

/// `pull`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct PullArgs {
    /// The capsule's URL, as `serve` prints it: http(s)://host[:port][/path].
    url: String,
    /// The local directory to mirror into; created (one level) when it does not exist.
    dir: PathBuf,
    /// Also remove local regular files the listing does not name (never through a symlink).
    #[arg(long)]
    delete: bool,
    /// Concurrent downloads, 1 to 64.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// Seconds any wait may last (connect and TLS, an answer's head, the next body bytes)
    /// before the request is abandoned, 1 to 3600.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
    /// PEM certificates trusted for an https URL, added to the system's roots.
    #[arg(long)]
    ca: Vec<PathBuf>,
    /// After the first pass, follow the export's watch stream and apply each change as it
    /// comes, until SIGINT or SIGTERM.
    #[arg(long)]
    watch: bool,
}

/// Runs `pull`: the exit status of `contract.md` (0, 1, 2; 130 or 143 when SIGINT or SIGTERM
/// stopped a one-off pull; 0 when either ended a watch).
pub(crate) async fn run(args: PullArgs) -> ExitCode {
    let first = if args.watch {
        FirstSignal::WindsDown
    } else {
        FirstSignal::Aborts
    };
    let stop = match Stop::on_signals(first) {
        Ok(stop) => stop,
        Err(e) => {
            crate::cli::log::say!("error: cannot listen for SIGINT and SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = tokio::select! {
        biased;
        started = Session::start(&args, stop.clone()) => started,
        // Nothing is in flight before the first pass: a stop here leaves nothing behind.
        () = stop.wound_down() => return stopped(&stop, args.watch),
    };
    let (session, listing, etag) = match started {
        Ok(started) => started,
        Err(e) => {
            crate::cli::log::say!("{e}");
            return ExitCode::from(2);
        }
    };
    let summary = session.pass(listing, etag).await;
    if !summary.complete {
        return stopped(&stop, args.watch);
    }
    if let Err(e) = crate::cli::print_line(&summary.to_json()) {
        crate::cli::log::say!("error: cannot write the summary to stdout: {e}");
        return ExitCode::FAILURE;
    }
    if args.watch {
        return watch::follow(&session, summary).await;
    }
    if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The status of a run a signal stopped, said on stderr: the signal's (130, 143) for a one-off
/// pull, 0 for a watch, whose stop is its usual end.
fn stopped(stop: &Stop, watching: bool) -> ExitCode {
    let Some(signal) = stop.signal() else {
        return ExitCode::FAILURE;
    };
    if watching {
        crate::cli::log::say!("pull: {} received; the watch ended", signal.name());
        return ExitCode::SUCCESS;
    }
    crate::cli::log::say!(
        "pull: {} received; stopped, no partial file kept (a rerun carries on)",
        signal.name()
    );
    ExitCode::from(signal.exit_status())
}

/// The counts of one pass's summary line, and what a watch resumes from.
#[derive(Debug)]
struct Summary {
    listed: usize,
    downloaded: u64,
    unchanged: u64,
    deleted: u64,
    failed: Vec<(String, String)>,
    bytes: u64,
    /// The etag of the listing the pass mirrored.
    etag: Etag,
    /// That listing's `max_bytes`.
    max_bytes: Option<u64>,
    /// Whether every entry was answered: a stop leaves a pass unfinished.
    complete: bool,
}

impl Summary {
    fn new(listing: &Listing, etag: Etag) -> Self {
        Summary {
            listed: listing.listed,
            downloaded: 0,
            unchanged: 0,
            deleted: 0,
            failed: Vec::new(),
            bytes: 0,
            etag,
            max_bytes: listing.max_bytes,
            complete: true,
        }
    }

    fn to_json(&self) -> String {
        json!({
            "pull": if self.failed.is_empty() { "ok" } else { "partial" },
            "listed": self.listed,
            "downloaded": self.downloaded,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "failed": failed_json(&self.failed),
            "bytes": self.bytes,
        })
        .to_string()
    }
}

/// A `failed` list as the summary and the watch lines print it: `{"path","why"}` objects,
/// sorted.
fn failed_json(failed: &[(String, String)]) -> Vec<serde_json::Value> {
    let mut failed = failed.to_vec();
    failed.sort();
    failed
        .into_iter()
        .map(|(path, why)| json!({"path": path, "why": why}))
        .collect()
}

/// What a run holds from start to end: the capsule, the mirror directory and the options.
#[derive(Debug)]
struct Session {
    remote: Remote,
    dir: Arc<MirrorDir>,
    delete: bool,
    jobs: usize,
    stop: Stop,
}

impl Session {
    /// Checks the arguments, fetches the first listing, opens (or creates) `DIR`, takes its
    /// lock and removes the temporary files a killed run left there.
    ///
    /// # Errors
    /// The refused launch (exit 2): a URL, `--ca` or `DIR` that cannot be used, or no listing.
    async fn start(args: &PullArgs, stop: Stop) -> Result<(Session, Listing, Etag), LaunchError> {
        let origin = Origin::parse(&args.url).map_err(|accepted| {
            LaunchError::command_line(
                format!("URL {:?}: {accepted}", args.url),
                "pass the capsule's url as `resource-plane serve` prints it",
            )
        })?;
        let extra_ca: Vec<&std::path::Path> = args.ca.iter().map(PathBuf::as_path).collect();
        let tls = crate::backends::tls::client_config(&extra_ca).map_err(|e| {
            LaunchError::command_line(format!("--ca: {e}"), "pass PEM certificate files")
        })?;
        let dir_error = |what: String| {
            LaunchError::command_line(
                format!("DIR {}: {what}", args.dir.display()),
                "pass an existing directory, or a new name in an existing directory",
            )
        };
        local::check_usable(&args.dir).map_err(dir_error)?;
        let remote = Remote::new(origin, tls, Duration::from_secs(args.timeout));
        let (listing, etag) = fetch::fetch_listing(&remote).await.map_err(|e| {
            LaunchError::command_line(
                format!("the listing of {}: {e}", remote.origin().display()),
                "check that URL is the capsule's url and that its manifest declares exports.files",
            )
        })?;
        let dir =
            Arc::new(MirrorDir::open_or_create(&args.dir).map_err(|e| dir_error(e.to_string()))?);
        let (locking, names) = (dir.clone(), listing.names.clone());
        let claimed = crate::blocking::run(move || claim(&locking, &names)).await;
        if let Ok(Some(note)) = claimed {
            crate::cli::log::say!("{note}");
        }
        let session = Session {
            remote,
            dir,
            delete: args.delete,
            jobs: usize::from(args.jobs),
            stop,
        };
        Ok((session, listing, etag))
    }

    fn context(&self, max_bytes: Option<u64>, progress: Arc<Progress>) -> Arc<Context> {
        Arc::new(Context {
            remote: self.remote.clone(),
            dir: self.dir.clone(),
            max_bytes,
            progress,
            stop: self.stop.clone(),
        })
    }

    /// Fetches a fresh listing and mirrors it.
    ///
    /// # Errors
    /// [`ListingFetchError`] when there is no listing to be had; nothing is touched then.
    async fn relist(&self) -> Result<Summary, ListingFetchError> {
        let (listing, etag) = fetch::fetch_listing(&self.remote).await?;
        Ok(self.pass(listing, etag).await)
    }

    /// Mirrors `listing` (whose etag is `etag`): `--delete`'s removals, then every entry, then
    /// one retry of the failures a changing file explains. A stop ends it early: entries not
    /// started are left out of the counts, and no retry is made.
    async fn pass(&self, mut listing: Listing, etag: Etag) -> Summary {
        let progress = Progress::new(listing.listed);
        let mut summary = Summary::new(&listing, etag);
        for refused in &listing.refused {
            summary
                .failed
                .push((refused.path.clone(), refused.why.clone()));
            progress.refused();
        }
        if self.delete {
            let (names, deleting) = (std::mem::take(&mut listing.names), self.dir.clone());
            let (deleted, failed) = crate::blocking::run(move || delete_stale(&deleting, &names))
                .await
                .unwrap_or_else(|e| (0, vec![("".into(), format!("delete_failed: {e}"))]));
            summary.deleted = deleted;
            summary.failed.extend(failed);
        }
        let context = self.context(listing.max_bytes, progress.clone());
        let wanted = listing.entries.len();
        let first = fetch::mirror_all(&context, listing.entries, self.jobs, false).await;
        let (retry, settled): (Vec<_>, Vec<_>) = first
            .into_iter()
            .partition(|(_, outcome)| matches!(outcome, Outcome::Failed(why) if why.retry));
        let mut outcomes = settled;
        if !retry.is_empty() {
            if self.stop.winding_down() {
                summary.complete = false;
            } else {
                outcomes.extend(fetch::retry_once(&context, retry, self.jobs).await);
            }
        }
        progress.finish();
        let answered = outcomes
            .iter()
            .filter(|(_, outcome)| !matches!(outcome, Outcome::Stopped))
            .count();
        if answered < wanted {
            summary.complete = false;
        }
        for (path, outcome) in outcomes {
            match outcome {
                Outcome::Unchanged => summary.unchanged += 1,
                Outcome::Downloaded(bytes) => {
                    summary.downloaded += 1;
                    summary.bytes += bytes;
                }
                Outcome::Failed(why) => summary.failed.push((path.to_string(), why.render())),
                Outcome::Stopped => {}
            }
        }
        summary
    }
}

/// Takes the mirror directory's lock for the run and, when no other pull holds it, removes
/// the temporary files a killed run left (any not in `listed`, the paths the listing names);
/// what to say on stderr about it, if anything.
fn claim(dir: &MirrorDir, listed: &std::collections::HashSet<String>) -> Option<String> {
    let sole = match dir.try_lock_sole() {
        Ok(sole) => sole,
        Err(e) => {
            return Some(format!(
                "pull: DIR cannot be locked ({e}); temporary files a killed run left are not removed"
            ));
        }
    };
    let mut note = None;
    if sole {
        let parts = dir.stale_parts(listed);
        let (mut removed, mut kept) = (0_usize, Vec::new());
        for part in &parts {
            match dir.remove(part) {
                Ok(()) => removed += 1,
                Err(e) => kept.push(format!("{}: {e}", local::display(part))),
            }
        }
        if removed > 0 || !kept.is_empty() {
            let mut text =
                format!("pull: removed {removed} temporary file(s) an interrupted run left in DIR");
            for why in kept {
                text.push_str(&format!("; not removed: {why}"));
            }
            note = Some(text);
        }
    }
    if let Err(e) = dir.lock_shared() {
        return Some(format!("pull: DIR cannot be locked: {e}"));
    }
    note
}

/// `--delete`: removes every local regular file the listing does not name (`names`), then the
/// directories that left empty; the count removed and the failures. Runs before the downloads,
/// so a file the listing has where a stale directory stood can land.
fn delete_stale(
    dir: &MirrorDir,
    names: &std::collections::HashSet<String>,
) -> (u64, Vec<(String, String)>) {
    let (mut removed, mut failed) = (Vec::new(), Vec::new());
    for stale in dir.stale_files(names) {
        match dir.remove(&stale) {
            Ok(()) => removed.push(stale),
            Err(e) => failed.push((
                local::display(&stale),
                format!("delete_failed: {}", Why::from(e).render()),
            )),
        }
    }
    dir.prune(&removed);
    (removed.len() as u64, failed)
}
