//! `resource-plane pull URL DIR [--delete] [--jobs N]` (D-16, `contract.md`): mirrors a
//! capsule's operator plane into a local directory.
//!
//! One run: check that `DIR` can be used, fetch and judge the listing ([`listing`]), create
//! `DIR` when missing, remove stale files (`--delete`), then for each entry compare the local
//! copy's sha256 and download it when it differs or is missing, `--jobs` at a time. A download
//! is written only when its body's sha256 equals the listing's hash and the `etag`'s. Entries
//! that failed in a way a changing file explains (404, 413, a hash, etag or size mismatch, a
//! broken connection, a 5xx) are reported on stderr and retried once against a *fresh listing*
//! (re-reading against the old one could only fail again for a file that changed); one
//! re-listing serves every retry. The last stdout line is the summary; the exit status is 0
//! when nothing failed, 1 when something did (`"pull":"partial"`), and 2, with
//! `error[E-CLI-001]` and a hint on stderr and nothing on stdout, when the listing cannot be
//! had or `DIR` cannot be used.

mod listing;
mod local;
mod remote;

use crate::manifest::LaunchError;
use listing::{Entry, EntryPath, Listing};
use local::{LocalError, LocalState, MirrorDir};
use remote::{Origin, Remote, RemoteError};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

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
}

/// Why one entry did not land: `<code>: <text>` in the summary, and whether a file that
/// changed since the listing explains it (then it is retried once).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Why {
    code: String,
    text: String,
    retry: bool,
}

impl Why {
    fn new(code: impl Into<String>, text: impl Into<String>) -> Self {
        Why {
            code: code.into(),
            text: text.into(),
            retry: false,
        }
    }

    fn retryable(code: impl Into<String>, text: impl Into<String>) -> Self {
        Why {
            retry: true,
            ..Why::new(code, text)
        }
    }

    fn render(&self) -> String {
        format!("{}: {}", self.code, self.text)
    }
}

impl From<LocalError> for Why {
    fn from(e: LocalError) -> Self {
        Why::new(e.code, e.text)
    }
}

fn unreachable(e: &RemoteError) -> Why {
    Why::retryable("unreachable", e.to_string())
}

/// What became of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Unchanged,
    Downloaded(u64),
    Failed(Why),
}

/// Runs `pull`.
pub(crate) async fn run(args: PullArgs) -> ExitCode {
    match pull(args).await {
        Ok(summary) => {
            let code = if summary.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            };
            if let Err(e) = super::print_line(&summary.to_json()) {
                super::log::say!("error: cannot write the summary to stdout: {e}");
                return ExitCode::FAILURE;
            }
            code
        }
        Err(e) => {
            super::log::say!("{e}");
            ExitCode::from(2)
        }
    }
}

/// The counts of the last stdout line.
#[derive(Debug, Default)]
struct Summary {
    listed: usize,
    downloaded: u64,
    unchanged: u64,
    deleted: u64,
    failed: Vec<(String, String)>,
    bytes: u64,
}

impl Summary {
    fn to_json(&self) -> String {
        let mut failed = self.failed.clone();
        failed.sort();
        let failed: Vec<_> = failed
            .into_iter()
            .map(|(path, why)| json!({"path": path, "why": why}))
            .collect();
        json!({
            "pull": if failed.is_empty() { "ok" } else { "partial" },
            "listed": self.listed,
            "downloaded": self.downloaded,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "failed": failed,
            "bytes": self.bytes,
        })
        .to_string()
    }
}

async fn pull(args: PullArgs) -> Result<Summary, LaunchError> {
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
    let mut listing = fetch_listing(&remote).await.map_err(|e| {
        LaunchError::command_line(
            format!("the listing of {}: {e}", remote.origin().display()),
            "check that URL is the capsule's url and that its manifest declares exports.files",
        )
    })?;
    let dir = MirrorDir::open_or_create(&args.dir).map_err(|e| dir_error(e.to_string()))?;

    let progress = Progress::new(listing.listed);
    let mut summary = Summary {
        listed: listing.listed,
        ..Summary::default()
    };
    for refused in &listing.refused {
        summary
            .failed
            .push((refused.path.clone(), refused.why.clone()));
        progress.refused();
    }
    let dir = Arc::new(dir);
    if args.delete {
        let (names, deleting) = (std::mem::take(&mut listing.names), dir.clone());
        let (deleted, failed) = crate::blocking::run(move || delete_stale(&deleting, &names))
            .await
            .unwrap_or_else(|e| (0, vec![("".into(), format!("delete_failed: {e}"))]));
        summary.deleted = deleted;
        summary.failed.extend(failed);
    }
    let context = Arc::new(Context {
        remote,
        dir,
        max_bytes: listing.max_bytes,
        progress: progress.clone(),
    });
    let jobs = usize::from(args.jobs);
    let first = mirror_all(&context, listing.entries, jobs, false).await;
    let (retry, settled): (Vec<_>, Vec<_>) = first
        .into_iter()
        .partition(|(_, outcome)| matches!(outcome, Outcome::Failed(why) if why.retry));
    let mut outcomes = settled;
    if !retry.is_empty() {
        outcomes.extend(retry_once(&context, retry, jobs).await);
    }
    progress.finish();
    for (path, outcome) in outcomes {
        match outcome {
            Outcome::Unchanged => summary.unchanged += 1,
            Outcome::Downloaded(bytes) => {
                summary.downloaded += 1;
                summary.bytes += bytes;
            }
            Outcome::Failed(why) => summary.failed.push((path.to_string(), why.render())),
        }
    }
    Ok(summary)
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

/// What every download needs.
#[derive(Debug)]
struct Context {
    remote: Remote,
    dir: Arc<MirrorDir>,
    max_bytes: Option<u64>,
    progress: Arc<Progress>,
}

/// Mirrors `entries`, `jobs` at a time; the outcomes in no particular order. Before the
/// `last` attempt, a failure that will be retried is not counted as done.
async fn mirror_all(
    context: &Arc<Context>,
    entries: Vec<Entry>,
    jobs: usize,
    last: bool,
) -> Vec<(EntryPath, Outcome)> {
    let mut unanswered: std::collections::HashSet<EntryPath> =
        entries.iter().map(|entry| entry.path.clone()).collect();
    let queue = Arc::new(Mutex::new(entries.into_iter()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..jobs {
        let queue = queue.clone();
        let context = context.clone();
        workers.spawn(async move {
            let mut outcomes = Vec::new();
            loop {
                let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                let Some(entry) = next else { break };
                let outcome = mirror_one(&context, &entry).await;
                if last || !matches!(&outcome, Outcome::Failed(why) if why.retry) {
                    context.progress.done(&outcome);
                }
                outcomes.push((entry.path, outcome));
            }
            outcomes
        });
    }
    let mut all = Vec::new();
    while let Some(done) = workers.join_next().await {
        match done {
            Ok(outcomes) => all.extend(outcomes),
            // A worker that panicked took its entries' outcomes with it; the process would
            // have printed the panic. Nothing else can end a worker.
            Err(e) => super::log::say!("pull: a download worker failed: {e}"),
        }
    }
    // Entries a failed worker took with it are failures, never silently left out (D-16: exit 0
    // only when nothing failed).
    for (path, _) in &all {
        unanswered.remove(path);
    }
    all.extend(unanswered.into_iter().map(|path| {
        let why = Why::new("io_error", "a download worker failed before answering");
        (path, Outcome::Failed(why))
    }));
    all
}

/// The retry of D-16: one fresh listing, then each entry again against its fresh entry.
async fn retry_once(
    context: &Arc<Context>,
    failed: Vec<(EntryPath, Outcome)>,
    jobs: usize,
) -> Vec<(EntryPath, Outcome)> {
    let first_whys: HashMap<EntryPath, Why> = failed
        .into_iter()
        .filter_map(|(path, outcome)| match outcome {
            Outcome::Failed(why) => Some((path, why)),
            _ => None,
        })
        .collect();
    let mut paths: Vec<&EntryPath> = first_whys.keys().collect();
    paths.sort();
    for path in paths {
        context.progress.note(&format!(
            "pull: {}: {}; retrying once against a fresh listing",
            printable(path.as_str()),
            first_whys[path].render()
        ));
    }
    let retried = |why: Why| Why {
        text: format!("{} (after one retry)", why.text),
        retry: false,
        ..why
    };
    let fresh = match fetch_listing(&context.remote).await {
        Ok(fresh) => fresh,
        Err(e) => {
            return first_whys
                .into_iter()
                .map(|(path, why)| {
                    let why = Why {
                        text: format!("{}; the fresh listing failed: {e}", why.text),
                        ..why
                    };
                    context.progress.done(&Outcome::Failed(why.clone()));
                    (path, Outcome::Failed(why))
                })
                .collect();
        }
    };
    let mut fresh_entries: HashMap<EntryPath, Entry> = fresh
        .entries
        .into_iter()
        .map(|entry| (entry.path.clone(), entry))
        .collect();
    let mut again = Vec::new();
    let mut outcomes = Vec::new();
    for (path, why) in first_whys {
        match fresh_entries.remove(&path) {
            Some(entry) => again.push(entry),
            None => {
                let outcome = Outcome::Failed(Why::new(
                    "vanished",
                    format!("no longer listed after {}", why.render()),
                ));
                context.progress.done(&outcome);
                outcomes.push((path, outcome));
            }
        }
    }
    for (path, outcome) in mirror_all(context, again, jobs, true).await {
        let outcome = match outcome {
            Outcome::Failed(why) => Outcome::Failed(retried(why)),
            other => other,
        };
        outcomes.push((path, outcome));
    }
    outcomes
}

/// One entry: unchanged when the local copy's sha256 is the listed one, else downloaded.
async fn mirror_one(context: &Arc<Context>, entry: &Entry) -> Outcome {
    let dir = context.dir.clone();
    let (path, size) = (entry.path.clone(), entry.size);
    let state = crate::blocking::run(move || dir.state(&path, size)).await;
    match state {
        Ok(Ok(LocalState::Hashed(hash))) if hash == entry.sha256 => Outcome::Unchanged,
        Ok(Ok(_)) => match download(context, entry).await {
            Ok(bytes) => Outcome::Downloaded(bytes),
            Err(why) => Outcome::Failed(why),
        },
        Ok(Err(e)) => Outcome::Failed(e.into()),
        Err(e) => Outcome::Failed(Why::new("io_error", format!("local check: {e}"))),
    }
}

/// Downloads `entry` into place; the bytes written.
///
/// # Errors
/// Why nothing was written: `too_large`, `not_found`, `http_<status>`, `etag_mismatch`,
/// `size_mismatch`, `sha256_mismatch`, `unreachable`, `local_path_refused` or `io_error`.
async fn download(context: &Arc<Context>, entry: &Entry) -> Result<u64, Why> {
    if let Some(max) = context.max_bytes
        && entry.size > max
    {
        return Err(Why::new(
            "too_large",
            format!(
                "listed at {} bytes, over the export's max_bytes of {max}",
                entry.size
            ),
        ));
    }
    let target = context.remote.origin().file_target(&entry.path);
    let mut answer = context
        .remote
        .get(&target)
        .await
        .map_err(|e| unreachable(&e))?;
    let status = answer.status.as_u16();
    if status != 200 {
        let code = answer.refusal_code().await;
        let said = code.map(|c| format!(" {c}")).unwrap_or_default();
        return Err(match status {
            404 => Why::retryable(
                "not_found",
                format!("the file vanished after the listing (404{said})"),
            ),
            413 => Why::retryable(
                "too_large",
                format!("the file grew past the export's max_bytes after the listing (413{said})"),
            ),
            300..=399 => Why::new(
                format!("http_{status}"),
                "a redirect, which pull does not follow",
            ),
            500..=599 => {
                Why::retryable(format!("http_{status}"), format!("the server failed{said}"))
            }
            _ => Why::new(format!("http_{status}"), format!("refused{said}")),
        });
    }
    let expected_etag = format!("\"sha256:{}\"", entry.sha256);
    match answer.headers.get(http::header::ETAG) {
        Some(etag) if etag.as_bytes() == expected_etag.as_bytes() => {}
        Some(_) => {
            return Err(Why::retryable(
                "etag_mismatch",
                "the etag is not the listed sha256 (the file changed after the listing)",
            ));
        }
        None => return Err(Why::new("etag_mismatch", "the answer carries no etag")),
    }
    if let Some(length) = answer.content_length()
        && length != entry.size
    {
        return Err(Why::retryable(
            "size_mismatch",
            format!("{length} bytes served, {} listed", entry.size),
        ));
    }
    let mtime_ms = answer
        .headers
        .get("x-murmur-mtime-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(entry.mtime_ms);

    let dir = context.dir.clone();
    let path = entry.path.clone();
    let mut temp = crate::blocking::run(move || dir.begin(&path))
        .await
        .map_err(|e| Why::new("io_error", format!("create: {e}")))??;
    let mut file = tokio::fs::File::from_std(
        temp.take_file()
            .ok_or_else(|| Why::new("io_error", "the temporary file is not open"))?,
    );
    let mut hasher = Sha256::new();
    let mut written: u64 = 0;
    let write_error =
        |e: std::io::Error| Why::new("io_error", format!("write {}: {e}", entry.path));
    while let Some(chunk) = answer.chunk().await.map_err(|e| unreachable(&e))? {
        written += chunk.len() as u64;
        if written > entry.size {
            return Err(Why::retryable(
                "size_mismatch",
                format!("more than the {} bytes listed were served", entry.size),
            ));
        }
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(write_error)?;
        context.progress.bytes(chunk.len() as u64);
    }
    file.flush().await.map_err(write_error)?;
    if written != entry.size {
        return Err(Why::retryable(
            "size_mismatch",
            format!("{written} bytes served, {} listed", entry.size),
        ));
    }
    let hash = crate::hex::encode(&hasher.finalize());
    if hash != entry.sha256 {
        return Err(Why::retryable(
            "sha256_mismatch",
            "the body's sha256 is not the listed one (nor the etag's)",
        ));
    }
    temp.put_back(file.into_std().await);
    crate::blocking::run(move || temp.commit(mtime_ms))
        .await
        .map_err(|e| Why::new("io_error", format!("commit: {e}")))??;
    Ok(written)
}

/// Fetches and judges the listing.
///
/// # Errors
/// A message when there is no listing to be had: unreachable, not `200`, over
/// [`listing::LISTING_MAX_BYTES`], or not a listing.
async fn fetch_listing(remote: &Remote) -> Result<Listing, String> {
    let mut answer = remote
        .get(&remote.origin().listing_target())
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status;
    if status != http::StatusCode::OK {
        let redirect = status.is_redirection();
        let code = answer.refusal_code().await;
        let mut message = format!("HTTP {}", status.as_u16());
        if let Some(code) = code {
            message.push(' ');
            message.push_str(&code);
        }
        if redirect {
            message.push_str(" (a redirect, which pull does not follow)");
        }
        return Err(message);
    }
    let body = answer
        .read_capped(listing::LISTING_MAX_BYTES)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "longer than the {} bytes a listing may have",
                listing::LISTING_MAX_BYTES
            )
        })?;
    listing::parse(&body).map_err(|e| e.to_string())
}

/// A path as it may be shown on a terminal: control characters escaped.
fn printable(path: &str) -> String {
    path.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// The progress line on stderr, drawn only when stderr is a terminal.
#[derive(Debug)]
struct Progress {
    terminal: bool,
    total: usize,
    done: AtomicU64,
    downloaded: AtomicU64,
    unchanged: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
    finished: AtomicBool,
    drawn: Mutex<()>,
}

impl Progress {
    fn new(total: usize) -> Arc<Self> {
        let progress = Arc::new(Progress {
            terminal: std::io::stderr().is_terminal(),
            total,
            done: AtomicU64::new(0),
            downloaded: AtomicU64::new(0),
            unchanged: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            drawn: Mutex::new(()),
        });
        if progress.terminal {
            let ticker = progress.clone();
            tokio::spawn(async move {
                while !ticker.finished.load(Ordering::Relaxed) {
                    ticker.draw("");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
        progress
    }

    fn done(&self, outcome: &Outcome) {
        self.done.fetch_add(1, Ordering::Relaxed);
        let counter = match outcome {
            Outcome::Unchanged => &self.unchanged,
            Outcome::Downloaded(_) => &self.downloaded,
            Outcome::Failed(_) => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn refused(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    fn bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    fn draw(&self, end: &str) {
        use std::io::Write;
        let _guard = self.drawn.lock();
        // The ticker's last tick may come after the final line: it draws nothing then.
        if end.is_empty() && self.finished.load(Ordering::Relaxed) {
            return;
        }
        let line = format!(
            "\r\x1b[Kpull: {}/{} files, {} downloaded, {} unchanged, {} failed, {} bytes{end}",
            self.done.load(Ordering::Relaxed),
            self.total,
            self.downloaded.load(Ordering::Relaxed),
            self.unchanged.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        );
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(line.as_bytes());
        let _ = stderr.flush();
    }

    /// A report line on stderr (whether or not it is a terminal), above the progress line.
    fn note(&self, text: &str) {
        let _guard = self.drawn.lock();
        if self.terminal {
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), b"\r\x1b[K");
        }
        super::log::say!("{text}");
    }

    /// Draws the final count and ends the line.
    fn finish(&self) {
        {
            let _guard = self.drawn.lock();
            self.finished.store(true, Ordering::Relaxed);
        }
        if self.terminal {
            self.draw("\n");
        }
    }
}
