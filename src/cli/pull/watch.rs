//! `pull --watch` (D-17.3): after the first pass, follows the export's watch stream
//! (`GET URL/resources/files?watch=1`, Server-Sent Events) and applies each change as a pass
//! would, so the mirror stays current without re-listing.
//!
//! The mirror is always at one listing, named by its etag: the first pass's, then each applied
//! event's. The stream is opened with `Last-Event-ID: <that etag>`, so the server sends the
//! changes since it. A `change` event is applied only when its `from` is that etag (anything
//! else would skip or repeat changes); its added and modified files are fetched with the same
//! verification and atomic writes as a pass, and its removed files are deleted only with
//! `--delete`. Each applied event prints one line,
//! `{"watch":"<etag>","downloaded":N,"deleted":N,"failed":[…]}`.
//!
//! A dropped stream (closed, broken, silent past the idle limit, not a `200` event stream) is
//! reopened from the last applied event after a backoff (250 ms doubling to 30 s, back to the
//! start once an event applies or after a stream that stayed open a minute). A `reset`, a
//! `listing` naming another listing than the mirror's, or an event that cannot be applied (not
//! its shape, a `from` that is not the mirror's, an `id` that is not its `etag`, a line or event
//! over the limits) leads to a full pass instead, printed as a watch line with its etag, and the
//! stream is reopened from there after the same backoff.
//! SIGINT or SIGTERM end the watch once the files in flight have landed; a second signal drops
//! them (their temporary files with them).

use super::change::{self, Batch};
use super::etag::Etag;
use super::fetch::{self, Outcome};
use super::local::MirrorDir;
use super::progress::{Progress, printable};
use super::remote::{Answer, RemoteError};
use super::sse::{self, Parser};
use super::{Session, Summary, failed_json};
use crate::wire::header::{EVENT_STREAM, LAST_EVENT_ID};
use serde_json::json;
use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

/// The most a stream line or one event's data may hold: 16 MiB, about 100,000 changes. A
/// larger event is not read: a full pass (whose listing may reach 256 MiB) replaces it.
const LIMITS: sse::Limits = sse::Limits {
    line: 16 * 1024 * 1024,
    event: 16 * 1024 * 1024,
};

/// The least time the stream may stay silent before it is taken for dead: three of the
/// server's 15 s keep-alives (D-17.3). `--timeout` raises it.
const IDLE_FLOOR: Duration = Duration::from_secs(45);

/// The first wait before a stream is reopened, doubled at each failure in a row.
const BACKOFF_FIRST: Duration = Duration::from_millis(250);

/// The longest wait before a stream is reopened.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How long a stream must have stayed open for its end to count as the server's usual cut
/// (D-17.3 ends streams after an hour) rather than a failure: the next wait is the first again.
const HEALTHY: Duration = Duration::from_secs(60);

/// The waits between attempts to reopen the stream.
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Self {
        Backoff {
            next: BACKOFF_FIRST,
        }
    }

    /// The wait before the next attempt; the one after it is twice as long, up to the most.
    fn next(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        wait
    }

    fn reset(&mut self) {
        self.next = BACKOFF_FIRST;
    }
}

/// Why a stream was left.
#[derive(Debug)]
enum Left {
    /// A signal: the watch ends.
    Stopped,
    /// The stream cannot go on; reopen it from the mirror's etag.
    Dropped(StreamError),
    /// The mirror cannot follow the stream from here; a full pass, then reopen.
    Relist(Reason),
    /// Stdout is gone: nobody reads the lines.
    NoStdout(std::io::Error),
}

/// Why a stream was dropped.
#[derive(Debug)]
enum StreamError {
    Remote(RemoteError),
    Status(http::StatusCode),
    NotAStream,
    Ended,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Remote(e) => write!(f, "{e}"),
            StreamError::Status(status) => write!(f, "HTTP {}", status.as_u16()),
            StreamError::NotAStream => f.write_str("the answer is not text/event-stream"),
            StreamError::Ended => f.write_str("the server ended the stream"),
        }
    }
}

/// Why the mirror needs a full pass.
#[derive(Debug)]
enum Reason {
    Reset,
    Listing(Etag),
    Unreadable(sse::SseError),
    BadEvent(&'static str, change::EventError),
    IdIsNotEtag,
    NotFromHere(Etag),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Reset => {
                f.write_str("the server no longer remembers the mirror's listing (reset)")
            }
            Reason::Listing(etag) => {
                write!(f, "the export is at {etag}, not at the mirror's listing")
            }
            Reason::Unreadable(e) => write!(f, "the stream cannot be read: {e}"),
            Reason::BadEvent(kind, e) => write!(f, "a `{kind}` event cannot be applied: {e}"),
            Reason::IdIsNotEtag => f.write_str("a `change` event's id is not its etag"),
            Reason::NotFromHere(from) => {
                write!(
                    f,
                    "a `change` event applies to {from}, not to the mirror's listing"
                )
            }
        }
    }
}

/// What the mirror is at.
#[derive(Debug)]
struct At {
    etag: Etag,
    max_bytes: Option<u64>,
}

/// Follows the watch stream from the first pass's listing until a signal: exit status 0, or 1
/// when stdout can no longer be written.
pub(super) async fn follow(session: &Session, first: Summary) -> ExitCode {
    let mut at = At {
        etag: first.etag,
        max_bytes: first.max_bytes,
    };
    let mut backoff = Backoff::new();
    loop {
        if session.stop.winding_down() {
            return super::stopped(&session.stop, true);
        }
        let wait = match stream(session, &mut at, &mut backoff).await {
            Left::Stopped => return super::stopped(&session.stop, true),
            Left::NoStdout(e) => {
                crate::cli::log::say!("error: cannot write to stdout: {e}");
                return ExitCode::FAILURE;
            }
            Left::Dropped(why) => {
                crate::cli::log::say!("pull: watch: {why}; reopening from {}", at.etag);
                backoff.next()
            }
            Left::Relist(why) => {
                crate::cli::log::say!("pull: watch: {why}; listing again");
                match session.relist().await {
                    Ok(summary) => {
                        if summary.complete {
                            let line = line(
                                &summary.etag,
                                summary.downloaded,
                                summary.deleted,
                                &summary.failed,
                            );
                            if let Err(e) = crate::cli::print_line(&line) {
                                crate::cli::log::say!("error: cannot write to stdout: {e}");
                                return ExitCode::FAILURE;
                            }
                        }
                        at = At {
                            etag: summary.etag,
                            max_bytes: summary.max_bytes,
                        };
                    }
                    Err(e) => crate::cli::log::say!("pull: watch: the listing: {e}"),
                }
                backoff.next()
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = session.stop.wound_down() => {}
        }
    }
}

/// One stream: opened from `at`, read and applied until it is left.
async fn stream(session: &Session, at: &mut At, backoff: &mut Backoff) -> Left {
    let mut answer = match open(session, at).await {
        Ok(answer) => answer,
        Err(left) => return left,
    };
    answer.set_idle_timeout(IDLE_FLOOR.max(session.remote.timeout()));
    let opened_at = std::time::Instant::now();
    let mut parser = Parser::new(LIMITS);
    let mut events = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            () = session.stop.wound_down() => return Left::Stopped,
            chunk = answer.chunk() => chunk,
        };
        let chunk = match chunk {
            Ok(Some(chunk)) => chunk,
            ended => {
                if opened_at.elapsed() >= HEALTHY {
                    backoff.reset();
                }
                return Left::Dropped(match ended {
                    Err(e) => StreamError::Remote(e),
                    Ok(_) => StreamError::Ended,
                });
            }
        };
        if let Err(e) = parser.feed(&chunk, &mut events) {
            return Left::Relist(Reason::Unreadable(e));
        }
        for event in events.drain(..) {
            if let Some(left) = follow_event(session, at, backoff, &event).await {
                return left;
            }
        }
    }
}

/// Opens the watch stream from `at`'s listing.
///
/// # Errors
/// How the stream was left before it opened: stopped, or dropped (no answer, not `200`, not
/// an event stream).
async fn open(session: &Session, at: &At) -> Result<Answer, Left> {
    let remote = &session.remote;
    let target = remote.origin().watch_target();
    let headers = [
        (LAST_EVENT_ID, at.etag.as_str()),
        (http::header::ACCEPT, EVENT_STREAM),
    ];
    let opened = tokio::select! {
        biased;
        () = session.stop.wound_down() => return Err(Left::Stopped),
        opened = remote.get(&target, &headers) => opened,
    };
    let answer = opened.map_err(|e| Left::Dropped(StreamError::Remote(e)))?;
    if answer.status != http::StatusCode::OK {
        return Err(Left::Dropped(StreamError::Status(answer.status)));
    }
    let is_stream = answer
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(EVENT_STREAM));
    if !is_stream {
        return Err(Left::Dropped(StreamError::NotAStream));
    }
    Ok(answer)
}

/// Follows one event: applies a `change` that follows from `at`, checks a `listing` names
/// `at`'s listing; `Some` when the stream is to be left.
async fn follow_event(
    session: &Session,
    at: &mut At,
    backoff: &mut Backoff,
    event: &sse::Event,
) -> Option<Left> {
    match event.kind.as_str() {
        "change" => {
            let batch = match judge(event, at) {
                Ok(batch) => batch,
                Err(why) => return Some(Left::Relist(why)),
            };
            if let Some(line) = apply(session, at, batch).await {
                if let Err(e) = crate::cli::print_line(&line) {
                    return Some(Left::NoStdout(e));
                }
                backoff.reset();
            }
            session.stop.winding_down().then_some(Left::Stopped)
        }
        "listing" => match change::parse_tag(&event.data) {
            Ok(etag) if etag.same(&at.etag) => None,
            Ok(etag) => Some(Left::Relist(Reason::Listing(etag))),
            Err(e) => Some(Left::Relist(Reason::BadEvent("listing", e))),
        },
        "reset" => Some(Left::Relist(Reason::Reset)),
        // Event types this client does not know are not its business.
        _ => None,
    }
}

/// A `change` event's batch, when the mirror can apply it: its data is a batch, its `id` (when
/// it has one) names the same listing as its `etag`, and its `from` is the mirror's listing.
/// The batch's etag is then the event's `id` as written, which a reopened stream sends back.
fn judge(event: &sse::Event, at: &At) -> Result<Batch, Reason> {
    let mut batch = change::parse_change(&event.data).map_err(|e| Reason::BadEvent("change", e))?;
    if let Some(id) = &event.id {
        match Etag::parse(id) {
            Some(id) if id.same(&batch.etag) => batch.etag = id,
            _ => return Err(Reason::IdIsNotEtag),
        }
    }
    if !batch.from.same(&at.etag) {
        return Err(Reason::NotFromHere(batch.from));
    }
    Ok(batch)
}

/// Applies `batch`: its removals (with `--delete`), then its files, `--jobs` at a time; moves
/// `at` to its etag and returns its line. `None` when a stop left it unfinished: `at` stays,
/// so a later run resumes before it.
async fn apply(session: &Session, at: &mut At, batch: Batch) -> Option<String> {
    let mut failed: Vec<(String, String)> =
        batch.refused.into_iter().map(|r| (r.path, r.why)).collect();
    let mut deleted = 0_u64;
    if session.delete && !batch.removes.is_empty() {
        let (dir, removes) = (session.dir.clone(), batch.removes);
        match crate::blocking::run(move || remove_all(&dir, &removes)).await {
            Ok((count, failures)) => {
                deleted = count;
                failed.extend(failures);
            }
            Err(e) => failed.push((String::new(), format!("delete_failed: {e}"))),
        }
    }
    let wanted = batch.puts.len();
    let progress = Progress::new(wanted);
    let context = session.context(at.max_bytes, progress.clone());
    let outcomes = fetch::mirror_all(&context, batch.puts, session.jobs, true).await;
    progress.finish();
    let mut downloaded = 0_u64;
    let mut answered = 0_usize;
    for (path, outcome) in outcomes {
        match outcome {
            Outcome::Unchanged => answered += 1,
            Outcome::Downloaded(_) => {
                answered += 1;
                downloaded += 1;
            }
            Outcome::Failed(why) => {
                answered += 1;
                failed.push((path.to_string(), why.render()));
            }
            Outcome::Stopped => {}
        }
    }
    if answered < wanted {
        crate::cli::log::say!(
            "pull: watch: stopped with {} of {wanted} files of the change to {} not fetched",
            wanted - answered,
            printable(batch.etag.as_str())
        );
        return None;
    }
    let line = line(&batch.etag, downloaded, deleted, &failed);
    at.etag = batch.etag;
    Some(line)
}

/// Deletes the removed files that are here, then the directories they left empty; the count
/// deleted and the failures (`delete_failed: …`).
fn remove_all(
    dir: &MirrorDir,
    removes: &[super::listing::EntryPath],
) -> (u64, Vec<(String, String)>) {
    let (mut removed, mut failed) = (Vec::new(), Vec::new());
    for path in removes {
        match dir.remove_if_present(path) {
            Ok(true) => removed.push(
                path.components()
                    .map(|c| c.as_bytes().to_vec())
                    .collect::<Vec<_>>(),
            ),
            Ok(false) => {}
            Err(e) => failed.push((path.to_string(), format!("delete_failed: {e}"))),
        }
    }
    dir.prune(&removed);
    (removed.len() as u64, failed)
}

/// One watch line, naming the listing by its opaque etag (`sha256:<hex>`, as the stream's
/// event ids do), whether it came from an event or from a listing's quoted `etag` header.
fn line(etag: &Etag, downloaded: u64, deleted: u64, failed: &[(String, String)]) -> String {
    json!({
        "watch": etag.opaque(),
        "downloaded": downloaded,
        "deleted": deleted,
        "failed": failed_json(failed),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_its_most_and_starts_over() {
        let mut backoff = Backoff::new();
        let waits: Vec<u128> = (0..10).map(|_| backoff.next().as_millis()).collect();
        assert_eq!(
            waits,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        backoff.reset();
        assert_eq!(backoff.next(), BACKOFF_FIRST);
    }

    fn event(id: Option<&str>, from: &str, etag: &str) -> sse::Event {
        sse::Event {
            kind: "change".into(),
            id: id.map(Into::into),
            data: json!({"from": from, "etag": etag, "generation": 0, "changes": []}).to_string(),
        }
    }

    #[test]
    fn a_change_applies_only_from_the_mirrors_listing_and_under_its_own_id() {
        let at = At {
            etag: Etag::parse("\"sha256:a\"").unwrap(),
            max_bytes: None,
        };
        let batch = judge(&event(Some("sha256:b"), "sha256:a", "\"sha256:b\""), &at).unwrap();
        assert_eq!(
            batch.etag.as_str(),
            "sha256:b",
            "the id as written goes back"
        );
        let batch = judge(&event(None, "\"sha256:a\"", "\"sha256:b\""), &at).unwrap();
        assert_eq!(batch.etag.as_str(), "\"sha256:b\"");
        assert!(matches!(
            judge(&event(None, "\"sha256:z\"", "\"sha256:b\""), &at),
            Err(Reason::NotFromHere(_))
        ));
        assert!(matches!(
            judge(
                &event(Some("\"sha256:c\""), "\"sha256:a\"", "\"sha256:b\""),
                &at
            ),
            Err(Reason::IdIsNotEtag)
        ));
        let mut bad = event(None, "\"sha256:a\"", "\"sha256:b\"");
        bad.data = "{not json".into();
        assert!(matches!(
            judge(&bad, &at),
            Err(Reason::BadEvent("change", _))
        ));
    }
}
