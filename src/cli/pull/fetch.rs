//! Getting files: the listing, and each entry compared with its local copy and downloaded
//! when it differs, verified against the listed sha256 and the etag before it is written.

use super::etag::Etag;
use super::listing::{self, Entry, EntryPath, Listing};
use super::local::{LocalError, LocalState, MirrorDir};
use super::progress::{Ended, Progress, printable};
use super::remote::{Answer, Remote, RemoteError};
use super::stop::Stop;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;

/// Why one entry did not land: `<code>: <text>` in the summary, and whether a file that
/// changed since the listing explains it (then it is retried once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Why {
    pub(crate) code: String,
    pub(crate) text: String,
    pub(crate) retry: bool,
}

impl Why {
    pub(crate) fn new(code: impl Into<String>, text: impl Into<String>) -> Self {
        Why {
            code: code.into(),
            text: text.into(),
            retry: false,
        }
    }

    pub(crate) fn retryable(code: impl Into<String>, text: impl Into<String>) -> Self {
        Why {
            retry: true,
            ..Why::new(code, text)
        }
    }

    pub(crate) fn render(&self) -> String {
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
pub(crate) enum Outcome {
    /// The local copy already had the listed sha256.
    Unchanged,
    /// Downloaded, verified and written: this many bytes.
    Downloaded(u64),
    /// Not written, and why.
    Failed(Why),
    /// Dropped by a stop before it ended: nothing written, its temporary file removed.
    Stopped,
}

impl Outcome {
    /// How progress counts it: `None` for an entry a stop dropped, which is not done.
    fn ended(&self) -> Option<Ended> {
        match self {
            Outcome::Unchanged => Some(Ended::Unchanged),
            Outcome::Downloaded(_) => Some(Ended::Downloaded),
            Outcome::Failed(_) => Some(Ended::Failed),
            Outcome::Stopped => None,
        }
    }
}

/// What every download of one pass or one watched batch needs.
#[derive(Debug)]
pub(crate) struct Context {
    /// The capsule.
    pub(crate) remote: Remote,
    /// The mirror directory.
    pub(crate) dir: Arc<MirrorDir>,
    /// The export's `max_bytes` as its last listing stated it: a larger file is never served.
    pub(crate) max_bytes: Option<u64>,
    /// The progress line.
    pub(crate) progress: Arc<Progress>,
    /// When to stop starting files, and when to drop the ones in flight.
    pub(crate) stop: Stop,
}

/// Mirrors `entries`, `jobs` at a time; the outcomes in no particular order. Before the
/// `last` attempt, a failure that will be retried is not counted as done. Once the stop winds
/// down no entry is started: those not started have no outcome; one dropped by an abort has
/// [`Outcome::Stopped`].
pub(crate) async fn mirror_all(
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
                if context.stop.winding_down() {
                    break;
                }
                let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                let Some(entry) = next else { break };
                let outcome = tokio::select! {
                    biased;
                    outcome = mirror_one(&context, &entry) => outcome,
                    // Dropping the download drops its temporary file, which removes itself.
                    () = context.stop.aborted() => Outcome::Stopped,
                };
                if (last || !matches!(&outcome, Outcome::Failed(why) if why.retry))
                    && let Some(ended) = outcome.ended()
                {
                    context.progress.done(ended);
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
            Err(e) => crate::cli::log::say!("pull: a download worker failed: {e}"),
        }
    }
    // Entries a failed worker took with it are failures, never silently left out (D-16: exit 0
    // only when nothing failed). Entries no worker started (a stop) are not among them.
    for (path, _) in &all {
        unanswered.remove(path);
    }
    if let Ok(mut queue) = queue.lock() {
        for entry in queue.by_ref() {
            unanswered.remove(&entry.path);
        }
    }
    all.extend(unanswered.into_iter().map(|path| {
        let why = Why::new("io_error", "a download worker failed before answering");
        (path, Outcome::Failed(why))
    }));
    all
}

/// The retry of D-16: one fresh listing, then each entry again against its fresh entry.
pub(crate) async fn retry_once(
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
        Ok((fresh, _)) => fresh,
        Err(e) => {
            return first_whys
                .into_iter()
                .map(|(path, why)| {
                    let why = Why {
                        text: format!("{}; the fresh listing failed: {e}", why.text),
                        ..why
                    };
                    context.progress.done(Ended::Failed);
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
                if let Some(ended) = outcome.ended() {
                    context.progress.done(ended);
                }
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
pub(crate) async fn mirror_one(context: &Arc<Context>, entry: &Entry) -> Outcome {
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
        .get(&target, &[])
        .await
        .map_err(|e| unreachable(&e))?;
    let status = answer.status.as_u16();
    if status != 200 {
        return Err(refused(status, answer.refusal_code().await));
    }
    let mtime_ms = judge_head(&answer, entry)?;
    write_body(context, entry, &mut answer, mtime_ms).await
}

/// Why a read answered `status` (with the refusal `code` its body named) brought no file, and
/// whether a file that changed since the listing may explain it.
fn refused(status: u16, code: Option<String>) -> Why {
    let said = code.map(|c| format!(" {c}")).unwrap_or_default();
    match status {
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
        500..=599 => Why::retryable(format!("http_{status}"), format!("the server failed{said}")),
        _ => Why::new(format!("http_{status}"), format!("refused{said}")),
    }
}

/// Judges a `200`'s head against `entry`: its etag must be the listed sha256's and its
/// declared length the listed size. The file's `mtime_ms`: the answer's, else the listed one.
///
/// # Errors
/// `etag_mismatch` or `size_mismatch`.
fn judge_head(answer: &Answer, entry: &Entry) -> Result<i64, Why> {
    match answer.headers.get(http::header::ETAG) {
        Some(etag) if crate::wire::etag::names_body(etag.as_bytes(), &entry.sha256) => {}
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
    Ok(answer
        .headers
        .get(crate::wire::header::MTIME_MS)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(entry.mtime_ms))
}

/// Streams `answer`'s body into a temporary file beside `entry`'s place, and puts it in place
/// with `mtime_ms` only when it is exactly the listed size and sha256; the bytes written.
///
/// # Errors
/// `size_mismatch`, `sha256_mismatch`, `unreachable`, `local_path_refused` or `io_error`.
async fn write_body(
    context: &Arc<Context>,
    entry: &Entry,
    answer: &mut Answer,
    mtime_ms: i64,
) -> Result<u64, Why> {
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

/// Why there is no listing to be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListingFetchError {
    /// No answer came.
    Remote(RemoteError),
    /// An answer other than `200`, with the refusal code its body named.
    Status {
        status: http::StatusCode,
        code: Option<String>,
    },
    /// Longer than [`listing::LISTING_MAX_BYTES`].
    TooLong,
    /// The answer's `etag` is not the sha256 of its body (D-17.1): the body cannot be trusted.
    EtagMismatch,
    /// Not a listing.
    NotAListing(listing::ListingError),
}

impl std::fmt::Display for ListingFetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListingFetchError::Remote(e) => write!(f, "{e}"),
            ListingFetchError::Status { status, code } => {
                write!(f, "HTTP {}", status.as_u16())?;
                if let Some(code) = code {
                    write!(f, " {code}")?;
                }
                if status.is_redirection() {
                    f.write_str(" (a redirect, which pull does not follow)")?;
                }
                Ok(())
            }
            ListingFetchError::TooLong => write!(
                f,
                "longer than the {} bytes a listing may have",
                listing::LISTING_MAX_BYTES
            ),
            ListingFetchError::EtagMismatch => {
                f.write_str("its etag is not the sha256 of its body")
            }
            ListingFetchError::NotAListing(e) => write!(f, "{e}"),
        }
    }
}

/// Fetches and judges the listing; with it, its etag: the answer's `etag` header as written,
/// or, from a server that sends none, the tag of the body's sha256 (the one D-17.1 gives).
///
/// # Errors
/// [`ListingFetchError`]: unreachable, not `200`, over [`listing::LISTING_MAX_BYTES`], an
/// `etag` naming another body, or not a listing.
pub(crate) async fn fetch_listing(remote: &Remote) -> Result<(Listing, Etag), ListingFetchError> {
    let mut answer = remote
        .get(&remote.origin().listing_target(), &[])
        .await
        .map_err(ListingFetchError::Remote)?;
    let status = answer.status;
    if status != http::StatusCode::OK {
        let code = answer.refusal_code().await;
        return Err(ListingFetchError::Status { status, code });
    }
    let sent = answer.headers.get(http::header::ETAG).cloned();
    let body = answer
        .read_capped(listing::LISTING_MAX_BYTES)
        .await
        .map_err(ListingFetchError::Remote)?
        .ok_or(ListingFetchError::TooLong)?;
    let own = Etag::of_body(&crate::hex::encode(&Sha256::digest(&body)));
    let etag = match sent {
        None => own,
        Some(sent) => {
            let sent = sent
                .to_str()
                .ok()
                .and_then(Etag::parse)
                .ok_or(ListingFetchError::EtagMismatch)?;
            if !sent.same(&own) {
                return Err(ListingFetchError::EtagMismatch);
            }
            sent
        }
    };
    let listing = listing::parse(&body).map_err(ListingFetchError::NotAListing)?;
    Ok((listing, etag))
}
