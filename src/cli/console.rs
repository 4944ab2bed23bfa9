//! The console (`--console`): one JSON request per stdin line, exactly one JSON answer per line
//! on stdout, in order. End of stdin ends the session.

use crate::Capsule;
use crate::refusal::Code;
use crate::tools::ToolError;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The answer to a line that is no request.
fn invalid(why: &str) -> Value {
    json!({"ok": false, "error": {"code": Code::InvalidRequest.as_str(), "message": why}})
}

/// Answers one console line.
pub(crate) async fn answer(capsule: &Capsule, line: &str) -> Value {
    let Ok(request) = serde_json::from_str::<Value>(line) else {
        return invalid("each line must be one JSON object");
    };
    match request.get("op").and_then(Value::as_str) {
        Some("tools") => json!({"ok": true, "result": capsule.tools().names()}),
        Some("task-complete") => {
            json!({"ok": true, "result": {"generation": capsule.task_completed()}})
        }
        Some("call") => {
            let Some(tool) = request.get("tool").and_then(Value::as_str) else {
                return invalid("`call` needs a string `tool`");
            };
            let input = request.get("input").cloned().unwrap_or(Value::Null);
            match capsule.tools().call(tool, input).await {
                Ok(result) => json!({"ok": true, "result": result}),
                Err(ToolError { code, message, .. }) => {
                    json!({"ok": false, "error": {"code": code.as_str(), "message": message}})
                }
            }
        }
        _ => invalid("op must be tools, call or task-complete"),
    }
}

/// Serves the console until end of stdin, or until `stop` turns true (a signal). Stdin is read
/// on its own task while calls run, so that the end of input is seen at once, also during a
/// call that waits on a silent peer (D-15.7).
///
/// * `stop` while a call is in flight: the call still gets its answer (and leaves its trace
///   line) if it finishes within `drain`; no further line is answered.
/// * End of input: the lines read before it are still answered, all within `drain` of the
///   moment input ended, as a session ending on a signal drains.
///
/// A call that outlasts the deadline is abandoned without an answer: the session is ending.
/// The tools are told so first ([`ToolInventory::mark_session_ended`]), so that dropping the
/// call's future records its attempt as abandoned, not cancelled.
///
/// [`ToolInventory::mark_session_ended`]: crate::tools::ToolInventory::mark_session_ended
pub(crate) async fn run(
    capsule: &Capsule,
    mut stop: tokio::sync::watch::Receiver<bool>,
    drain: std::time::Duration,
) {
    let (ended_tx, mut ended) = tokio::sync::watch::channel(None);
    let (lines_tx, mut lines) = tokio::sync::mpsc::channel(QUEUED_LINES);
    let reader = tokio::spawn(read_lines(
        ConsoleLines::new(tokio::io::stdin()),
        lines_tx,
        ended_tx,
    ));
    let mut stdout = tokio::io::stdout();
    loop {
        let next = tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            next = lines.recv() => next,
        };
        let Some(line) = next else { break };
        let line = match line {
            Ok(line) => line,
            Err(why) => {
                tracing::warn!("console input refused: {why}");
                if write_line(&mut stdout, &invalid(why)).await.is_err() {
                    break;
                }
                continue;
            }
        };
        let answering = answer(capsule, &line);
        tokio::pin!(answering);
        let deadline = tokio::select! {
            answer = &mut answering => Ok(answer),
            () = stopped(&mut stop) => Err(tokio::time::Instant::now() + drain),
            at = input_ended(&mut ended) => Err(at + drain),
        };
        let answer = match deadline {
            Ok(answer) => answer,
            Err(deadline) => match tokio::time::timeout_at(deadline, &mut answering).await {
                Ok(answer) => answer,
                Err(_) => {
                    tracing::warn!("a console call outlasted the drain deadline; abandoned");
                    capsule.tools().mark_session_ended();
                    break;
                }
            },
        };
        if write_line(&mut stdout, &answer).await.is_err() {
            break;
        }
        // Past the end of input, what is left is answered only within the deadline.
        if let Some(at) = *ended.borrow()
            && tokio::time::Instant::now() >= at + drain
        {
            tracing::warn!("lines left unanswered past the drain deadline after end of input");
            break;
        }
    }
    reader.abort();
}

/// Lines read ahead of the one being answered. Reading on while a call runs is what lets the
/// end of input be seen; a client that writes faster than calls finish waits on its pipe.
const QUEUED_LINES: usize = 16;

/// Reads `input` into `lines` until its end (or a read error, or the receiver gone), then
/// records when it ended in `ended`.
async fn read_lines<R: tokio::io::AsyncRead + Unpin>(
    mut input: ConsoleLines<R>,
    lines: tokio::sync::mpsc::Sender<Result<String, &'static str>>,
    ended: tokio::sync::watch::Sender<Option<tokio::time::Instant>>,
) {
    loop {
        match input.next_line().await {
            Ok(Some(line)) => {
                if lines.send(line).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("console input failed: {e}");
                break;
            }
        }
    }
    ended.send_replace(Some(tokio::time::Instant::now()));
}

/// Resolves with the moment input ended, once it has.
async fn input_ended(
    ended: &mut tokio::sync::watch::Receiver<Option<tokio::time::Instant>>,
) -> tokio::time::Instant {
    match ended.wait_for(Option::is_some).await {
        Ok(at) => at.unwrap_or_else(tokio::time::Instant::now),
        // The reader is gone without a word: input is over.
        Err(_) => tokio::time::Instant::now(),
    }
}

/// The longest console line read: a tool call is a few hundred bytes, and a line is held whole
/// before it is parsed.
const MAX_LINE_BYTES: usize = 1 << 20;

/// Console lines, `\n` or `\r\n` ended (an unterminated last line counts), each held whole up
/// to [`MAX_LINE_BYTES`]: a longer one is skipped to its end and refused, so memory stays
/// bounded whatever stdin brings. Cancel-safe: a line read in part is kept for the next call.
struct ConsoleLines<R> {
    reader: BufReader<R>,
    pending: Vec<u8>,
    too_long: bool,
}

impl<R: tokio::io::AsyncRead + Unpin> ConsoleLines<R> {
    fn new(input: R) -> Self {
        ConsoleLines {
            reader: BufReader::new(input),
            pending: Vec::new(),
            too_long: false,
        }
    }

    /// The next line: its text, or why it is refused (too long, not UTF-8); `None` at end of
    /// input.
    ///
    /// # Errors
    /// The read's error.
    async fn next_line(&mut self) -> std::io::Result<Option<Result<String, &'static str>>> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                if self.pending.is_empty() && !self.too_long {
                    return Ok(None);
                }
                return Ok(Some(self.take_line()));
            }
            let end = available.iter().position(|b| *b == b'\n');
            let taken = end.map_or(available.len(), |at| at + 1);
            if !self.too_long {
                if self.pending.len() + taken > MAX_LINE_BYTES + 2 {
                    self.too_long = true;
                    self.pending = Vec::new();
                } else {
                    self.pending.extend_from_slice(&available[..taken]);
                }
            }
            self.reader.consume(taken);
            if end.is_some() {
                return Ok(Some(self.take_line()));
            }
        }
    }

    fn take_line(&mut self) -> Result<String, &'static str> {
        let mut line = std::mem::take(&mut self.pending);
        if std::mem::take(&mut self.too_long) {
            return Err("the line is over 1 MiB");
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        if line.len() > MAX_LINE_BYTES {
            return Err("the line is over 1 MiB");
        }
        String::from_utf8(line).map_err(|_| "the line is not UTF-8 text")
    }
}

/// Resolves once `stop` is true (or its sender is gone), holding no borrow of it afterwards.
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

async fn write_line(stdout: &mut tokio::io::Stdout, value: &Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    stdout.write_all(&bytes).await?;
    stdout.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all_lines(input: &[u8]) -> Vec<Result<String, &'static str>> {
        let mut lines = ConsoleLines::new(input);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn lines_end_at_lf_or_crlf_and_an_unterminated_last_line_counts() {
        assert_eq!(
            all_lines(b"a\nb\r\n\n c \nlast").await,
            [Ok("a"), Ok("b"), Ok(""), Ok(" c "), Ok("last")].map(|l| l.map(str::to_owned))
        );
        assert!(all_lines(b"").await.is_empty());
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_refused_whole_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_LINE_BYTES];
        input.extend_from_slice(b"\r\n");
        input.extend(vec![b'y'; MAX_LINE_BYTES + 1]);
        input.extend_from_slice(b"\n{\"op\":\"tools\"}\n");
        input.extend(vec![b'z'; 3 * MAX_LINE_BYTES]);
        // Lengths only: a failure must not print megabytes of line.
        let lines: Vec<Result<usize, &str>> = all_lines(&input)
            .await
            .into_iter()
            .map(|line| line.map(|text| text.len()))
            .collect();
        let too_long = Err("the line is over 1 MiB");
        assert_eq!(lines, [Ok(MAX_LINE_BYTES), too_long, Ok(14), too_long]);
    }

    #[tokio::test]
    async fn a_line_that_is_not_utf8_is_refused_and_the_next_one_read() {
        assert_eq!(
            all_lines(b"\xff\xfe\nok\n").await,
            [Err("the line is not UTF-8 text"), Ok("ok".to_owned())]
        );
    }
}
