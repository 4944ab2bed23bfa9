//! The console (`--console`): one JSON request per stdin line, exactly one JSON answer per line
//! on stdout, in order. End of stdin ends the session.

use resource_plane::Capsule;
use resource_plane::refusal::Code;
use resource_plane::tools::ToolError;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Answers one console line.
pub(crate) async fn answer(capsule: &Capsule, line: &str) -> Value {
    let invalid = |why: &str| json!({"ok": false, "error": {"code": Code::InvalidRequest.as_str(), "message": why}});
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
                Err(ToolError { code, message }) => {
                    json!({"ok": false, "error": {"code": code, "message": message}})
                }
            }
        }
        _ => invalid("op must be tools, call or task-complete"),
    }
}

/// Serves the console until end of stdin.
pub(crate) async fn run(capsule: &Capsule) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("console input is not UTF-8 text: {e}");
                let answer = json!({"ok": false, "error": {"code": "invalid_request", "message": "the line is not UTF-8 text"}});
                if write_line(&mut stdout, &answer).await.is_err() {
                    break;
                }
                continue;
            }
        };
        let answer = answer(capsule, &line).await;
        if write_line(&mut stdout, &answer).await.is_err() {
            break;
        }
    }
}

async fn write_line(stdout: &mut tokio::io::Stdout, value: &Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    stdout.write_all(&bytes).await?;
    stdout.flush().await
}
