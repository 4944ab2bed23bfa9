//! Where trace lines go (D-6): the `trace.jsonl` file, and the recording and failing doubles.
//!
//! A sink only appends finished lines: the [`Tracer`](crate::trace::Tracer) builds each one
//! (envelope, event id, redaction of tokens, D-6.5) before handing it over, so every sink, the
//! test doubles included, only ever sees redacted lines.

use super::trace_event::TraceLine;
use serde_json::Value;
use std::fmt::Debug;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Mutex;

/// Where finished trace lines go. `append_line` receives one whole line, newline included,
/// already redacted of handle tokens. A sink that cannot take a line says so: the capsule then
/// fails closed, answering `500 io_error` instead of serving a response it could not record.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, TraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::io;
/// use std::sync::{Arc, Mutex};
///
/// /// A runtime's own log pipeline (here, a vector).
/// #[derive(Debug, Default)]
/// struct Pipeline(Mutex<Vec<String>>);
///
/// impl TraceSink for Pipeline {
///     fn append_line(&self, line: &[u8]) -> io::Result<()> {
///         let line = String::from_utf8(line.to_vec())
///             .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
///         self.0.lock().unwrap().push(line);
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// let pipeline = Arc::new(Pipeline::default());
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(pipeline.clone())
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// capsule.router().handle(http::Request::get("/resources/files/nope.md").body(()).unwrap()).await;
/// let lines = pipeline.0.lock().unwrap();
/// assert_eq!(lines.len(), 1);
/// assert!(lines[0].ends_with("}\n") && lines[0].contains(r#""outcome":"not_found""#));
/// # }
/// ```
pub trait TraceSink: Debug + Send + Sync {
    /// Appends `line` atomically: all of it or an error (D-6.4).
    ///
    /// # Errors
    /// Any I/O failure, including a short write; the caller then fails closed.
    fn append_line(&self, line: &[u8]) -> io::Result<()>;

    /// Takes one finished line, with its event typed on request ([`TraceLine::event`]): the
    /// tracer calls this, once per line. The default appends the line's bytes with
    /// [`append_line`](Self::append_line); a sink that forwards events typed (to `tracing`,
    /// to OpenTelemetry) overrides it, and never parses JSON itself. The typed event is read
    /// from the redacted line, so it holds no handle token either (D-6.5).
    ///
    /// ```
    /// use resource_plane::backends::{MemoryFilesystem, TraceEvent, TraceLine, TraceSink};
    /// use resource_plane::{Capsule, Manifest};
    /// use std::io;
    /// use std::sync::{Arc, Mutex};
    ///
    /// /// Keeps each read's outcome, typed.
    /// #[derive(Debug, Default)]
    /// struct Outcomes(Mutex<Vec<(String, String)>>);
    ///
    /// impl TraceSink for Outcomes {
    ///     fn append_line(&self, _line: &[u8]) -> io::Result<()> {
    ///         Ok(())
    ///     }
    ///     fn append(&self, line: TraceLine<'_>) -> io::Result<()> {
    ///         if let TraceEvent::ResourceRead(read) = line.event()? {
    ///             self.0.lock().unwrap().push((read.path.unwrap_or_default(), read.outcome));
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
    /// let outcomes = Arc::new(Outcomes::default());
    /// let capsule = Capsule::builder(&manifest.unwrap().manifest)
    ///     .filesystem(Arc::new(MemoryFilesystem::new()))
    ///     .trace(outcomes.clone())
    ///     .advertised_url("http://127.0.0.1:41234")
    ///     .launch()
    ///     .unwrap();
    /// capsule.router().handle(http::Request::get("/resources/files/a.md").body(()).unwrap()).await;
    /// assert_eq!(*outcomes.0.lock().unwrap(), [("a.md".to_owned(), "not_found".to_owned())]);
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`append_line`](Self::append_line), and an unreadable event
    /// ([`TraceLine::event`]); the caller then fails closed.
    fn append(&self, line: TraceLine<'_>) -> io::Result<()> {
        self.append_line(line.bytes())
    }
}

/// `trace.jsonl`: an `O_APPEND` descriptor, one `write(2)` per line, so that concurrent
/// appenders never interleave and a line is written whole or not at all. It never truncates
/// what the file already holds.
///
/// ```
/// use resource_plane::backends::{JsonlTraceSink, TraceSink};
///
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("trace.jsonl");
/// JsonlTraceSink::open(&path)?.append_line(b"{\"n\":1}\n")?;
/// JsonlTraceSink::open(&path)?.append_line(b"{\"n\":2}\n")?; // appends
/// assert_eq!(std::fs::read_to_string(&path)?, "{\"n\":1}\n{\"n\":2}\n");
///
/// // A trace file with a second name (which could lie inside an export) is refused.
/// std::fs::hard_link(&path, dir.path().join("copy.jsonl"))?;
/// let refused = JsonlTraceSink::open(&path).unwrap_err();
/// assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct JsonlTraceSink {
    fd: OwnedFd,
    /// Held for each append: a short write's fragment is cut off before any other line can
    /// follow it.
    appending: Mutex<()>,
}

impl JsonlTraceSink {
    /// Opens (creating with mode 0600) `path` for appending. The descriptor itself must then be
    /// a regular file with a single link: `O_NONBLOCK` keeps a FIFO from hanging the open (it
    /// fails with `ENXIO` instead), and a hard link made after any check on the path is still
    /// seen, since another name for the trace could lie where an export serves it (D-1.10).
    ///
    /// # Errors
    /// The OS error of the open; `InvalidInput` when the file is not a regular file or has
    /// other links.
    pub fn open(path: &Path) -> io::Result<Self> {
        use rustix::fs::{FileType, Mode, OFlags, fstat, open};
        let fd = open(
            path,
            OFlags::WRONLY
                | OFlags::APPEND
                | OFlags::CREATE
                | OFlags::CLOEXEC
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK,
            Mode::from_raw_mode(0o600),
        )?;
        let stat = fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        if stat.st_nlink != 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} hard links; another may lie inside the workdir",
                    stat.st_nlink
                ),
            ));
        }
        Ok(JsonlTraceSink {
            fd,
            appending: Mutex::new(()),
        })
    }
}

impl TraceSink for JsonlTraceSink {
    fn append_line(&self, line: &[u8]) -> io::Result<()> {
        // One write(2): with O_APPEND the kernel places the whole buffer at the end atomically
        // with respect to other appenders. A short write is an error, not a retry, so a line is
        // never split around another writer's line.
        let _appending = self
            .appending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let written = rustix::io::write(&self.fd, line)?;
        if written == line.len() {
            Ok(())
        } else {
            // A full disk or a file size limit: the line's first bytes are the file's last.
            // Cut them off, so the trace stays one JSON object per line (D-6.1) and a later
            // line, if any fits, does not start mid-fragment. No other append of this sink
            // can have come after them (the lock); the file is this session's alone.
            if let Ok(stat) = rustix::fs::fstat(&self.fd) {
                let end = u64::try_from(stat.st_size).unwrap_or(0);
                let _ = rustix::fs::ftruncate(&self.fd, end.saturating_sub(written as u64));
            }
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short trace write: {written} of {} bytes", line.len()),
            ))
        }
    }
}

/// Keeps every line in memory: the test double, with which a test asserts the trace line each
/// request or tool call left, and can make the disk "fill up" mid-session.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/a.md", "hello", 0);
/// let trace = Arc::new(RecordingTraceSink::new());
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(fs)
///     .trace(trace.clone())
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let router = capsule.router();
/// let read = || router.handle(http::Request::get("/resources/files/a.md").body(()).unwrap());
/// assert_eq!(read().await.status(), 200);
/// assert_eq!(trace.events()[0]["event_type"], "resource_read");
///
/// trace.fail_from_now();
/// assert_eq!(read().await.status(), 500, "no response leaves without its trace line");
/// assert_eq!(trace.lines().len(), 1);
/// # }
/// ```
#[derive(Debug, Default)]
pub struct RecordingTraceSink {
    lines: Mutex<Vec<String>>,
    /// Every write fails once set (a full disk from then on).
    failing: std::sync::atomic::AtomicBool,
}

impl RecordingTraceSink {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every later write fail, as a disk that just filled up would.
    pub fn fail_from_now(&self) {
        self.failing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every line so far, without the trailing newline.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every line so far, parsed.
    pub fn events(&self) -> Vec<Value> {
        self.lines()
            .iter()
            .map(|l| serde_json::from_str(l).expect("trace lines are JSON"))
            .collect()
    }
}

impl TraceSink for RecordingTraceSink {
    fn append_line(&self, line: &[u8]) -> io::Result<()> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "the recorder was told to fail",
            ));
        }
        let text =
            std::str::from_utf8(line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let text = text.strip_suffix('\n').ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "trace line without newline")
        })?;
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text.to_owned());
        Ok(())
    }
}

/// A sink whose every write fails, as a full disk would: what a test uses to show that a
/// capsule fails closed, answering `500 io_error` rather than serving without a trace line.
///
/// ```
/// use resource_plane::backends::{FailingTraceSink, MemoryFilesystem, TraceSink};
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert!(FailingTraceSink.append_line(b"{}\n").is_err());
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { files: { root: out, mode: read-only } }");
/// let fs = Arc::new(MemoryFilesystem::new());
/// fs.add_file("out/a.md", "hello", 0);
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(fs)
///     .trace(Arc::new(FailingTraceSink))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let request = http::Request::get("/resources/files/a.md").body(()).unwrap();
/// let response = capsule.router().handle(request).await;
/// assert_eq!(response.status(), 500);
/// assert!(!String::from_utf8_lossy(&response.body().bytes()).contains("hello"));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct FailingTraceSink;

impl TraceSink for FailingTraceSink {
    fn append_line(&self, _line: &[u8]) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            "trace sink refuses",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_sink_reports_error() {
        assert!(FailingTraceSink.append_line(b"{}\n").is_err());
    }

    #[test]
    fn recorder_refuses_a_line_without_newline_and_fails_when_told() {
        let sink = RecordingTraceSink::new();
        sink.append_line(b"{\"a\":1}\n").unwrap();
        assert_eq!(
            sink.append_line(b"{}").unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        sink.fail_from_now();
        assert!(sink.append_line(b"{}\n").is_err());
        assert_eq!(sink.lines(), ["{\"a\":1}"]);
    }
    #[test]
    fn jsonl_sink_appends_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let sink = JsonlTraceSink::open(&path).unwrap();
        sink.append_line(b"{\"a\":1}\n").unwrap();
        let again = JsonlTraceSink::open(&path).unwrap();
        again.append_line(b"{\"b\":2}\n").unwrap();
        sink.append_line(b"{\"c\":3}\n").unwrap();
        #[allow(clippy::disallowed_methods)]
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
    }
}
