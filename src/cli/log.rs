//! Stderr for people, written so that it can never stop the process: a log line or a refusal
//! that cannot be written (stderr closed, a broken pipe, a full disk) is dropped. `eprintln!`
//! panics on such a write, and `tracing-subscriber` reports its own write failures with
//! `eprintln!`, so a warning logged from the console, a listener shard or a request would
//! otherwise take that thread down with it.

use std::io::Write;

/// Stderr as a `tracing` writer that reports every write as done. What could not be written is
/// gone; the caller goes on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LossyStderr;

impl Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut held) = HELD.lock()
            && let Some(held) = held.as_mut()
        {
            if held.len() + buf.len() <= MAX_HELD_BYTES {
                held.extend_from_slice(buf);
            }
            return Ok(buf.len());
        }
        let _ = std::io::stderr().lock().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Log lines held back while the first line of stderr is reserved (`--console mcp`, whose
/// ready line must come first there); `None`: not held.
static HELD: std::sync::Mutex<Option<Vec<u8>>> = std::sync::Mutex::new(None);

/// The most log bytes held back; more are dropped (a launch logs a few lines).
const MAX_HELD_BYTES: usize = 64 * 1024;

/// Holds log lines back until [`release`]: the next line on stderr is reserved.
pub(crate) fn hold() {
    if let Ok(mut held) = HELD.lock() {
        held.get_or_insert_with(Vec::new);
    }
}

/// Writes the log lines held back, in order, and stops holding.
pub(crate) fn release() {
    let held = HELD.lock().ok().and_then(|mut held| held.take());
    if let Some(held) = held {
        let _ = std::io::stderr().lock().write_all(&held);
    }
}

/// Writes one line to stderr, dropping it if stderr cannot take it. Log lines held back are
/// written first, so the order stays what happened.
pub(crate) fn line(text: std::fmt::Arguments<'_>) {
    release();
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(text)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `eprintln!` that never panics: see [`line`].
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::log::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// Installs the `tracing` subscriber: human-readable lines on [`LossyStderr`] through
/// `filter`, colour only for a person at a terminal who has not asked for none (`NO_COLOR`).
pub(crate) fn init(filter: tracing_subscriber::EnvFilter) {
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    tracing_subscriber::fmt()
        .with_writer(|| LossyStderr)
        .log_internal_errors(false)
        .with_ansi(colour)
        .with_env_filter(filter)
        .init();
}
