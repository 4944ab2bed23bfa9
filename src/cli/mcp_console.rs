//! `serve --console mcp` (D-18.3): stdin and stdout are an MCP server offering the capsule's
//! tools. stdout carries only MCP messages; logs and the ready line go to stderr.

use crate::Capsule;
use crate::mcp::ToolServer;
use rmcp::ServiceExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// Serves MCP on stdin/stdout until end of input, or until `stop` turns true (a signal).
///
/// * End of input: the session is marked ended at once (a call dropped from then on is recorded
///   as abandoned), and calls in flight get the SDK's drain to answer, as the JSON console's
///   lines get `drain`.
/// * `stop`: calls in flight get `drain` to finish, then the server is cancelled and what is
///   left is dropped (recorded as abandoned).
///
/// A call cancelled by the client (`notifications/cancelled`) is dropped and recorded as
/// cancelled ([`ToolServer`]).
pub(crate) async fn run(
    capsule: &Capsule,
    mut stop: tokio::sync::watch::Receiver<bool>,
    drain: Duration,
) {
    let tools = capsule.tools().clone();
    let marked = tools.clone();
    let input = EndOfInput {
        inner: tokio::io::stdin(),
        at_end: Some(Box::new(move || marked.mark_session_ended())),
    };
    let cancel = CancellationToken::new();
    let starting =
        ToolServer::new(tools.clone()).serve_with_ct((input, tokio::io::stdout()), cancel.clone());
    let running = tokio::select! {
        running = starting => running,
        _ = stop.wait_for(|stop| *stop) => {
            cancel.cancel();
            return;
        }
    };
    let running = match running {
        Ok(running) => running,
        Err(e) => {
            // The client left or spoke no MCP before `initialize` completed.
            tracing::warn!("the MCP console did not start: {e}");
            return;
        }
    };
    let token = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => return,
        _ = stop.wait_for(|stop| *stop) => {}
    }
    tools.mark_session_ended();
    if tokio::time::timeout(drain, &mut waiting).await.is_err() {
        tracing::warn!("an MCP call outlasted the drain deadline; abandoned");
        token.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), waiting).await;
    }
}

/// A reader that runs `at_end` once, the first time it reports end of input.
struct EndOfInput<R> {
    inner: R,
    at_end: Option<Box<dyn FnOnce() + Send>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for EndOfInput<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && buf.filled().len() == before
            && buf.remaining() > 0
            && let Some(at_end) = self.at_end.take()
        {
            at_end();
        }
        polled
    }
}
