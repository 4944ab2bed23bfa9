//! The progress line on stderr (drawn only when stderr is a terminal) and report lines above it.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A path as it may be shown on a terminal: control characters escaped.
pub(crate) fn printable(path: &str) -> String {
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
pub(crate) struct Progress {
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
    /// A progress line for `total` entries, redrawn every 200 ms when stderr is a terminal.
    pub(crate) fn new(total: usize) -> Arc<Self> {
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

    /// Counts one entry that ended as `ended`.
    pub(crate) fn done(&self, ended: Ended) {
        let counter = match ended {
            Ended::Unchanged => &self.unchanged,
            Ended::Downloaded => &self.downloaded,
            Ended::Failed => &self.failed,
        };
        self.done.fetch_add(1, Ordering::Relaxed);
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an entry the listing's own rules refused.
    pub(crate) fn refused(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts bytes downloaded.
    pub(crate) fn bytes(&self, n: u64) {
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
    pub(crate) fn note(&self, text: &str) {
        let _guard = self.drawn.lock();
        if self.terminal {
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), b"\r\x1b[K");
        }
        crate::cli::log::say!("{text}");
    }

    /// Draws the final count and ends the line.
    pub(crate) fn finish(&self) {
        {
            let _guard = self.drawn.lock();
            self.finished.store(true, Ordering::Relaxed);
        }
        if self.terminal {
            self.draw("\n");
        }
    }
}

/// How an entry ended, as progress counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The local copy already had the listed sha256.
    Unchanged,
    /// Downloaded, verified and written.
    Downloaded,
    /// Not written.
    Failed,
}
