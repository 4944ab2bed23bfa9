//! A tool call's one trace line (D-6, D-9.3): owed from the moment the call is past its input
//! validation, so that a call dropped unfinished still leaves it, then written once from the
//! call's outcome; a call whose line cannot be written fails closed (D-6.4).

use super::ToolError;
use crate::refusal::Code;
use crate::trace::{OwedLine, TraceEvent, Tracer};

/// The line one call of `tool` owes until it writes its own.
pub(crate) struct CallLine<'t, E: TraceEvent, F: FnOnce() -> E> {
    tool: &'static str,
    tracer: &'t Tracer,
    owed: OwedLine<'t, E, F>,
}

impl<'t, E: TraceEvent, F: FnOnce() -> E> CallLine<'t, E, F> {
    /// Owes a line of `tool` on `tracer`: the one `unfinished` builds, written if the call is
    /// dropped before [`write`](Self::write).
    pub(crate) fn owe(tool: &'static str, tracer: &'t Tracer, unfinished: F) -> Self {
        CallLine {
            tool,
            tracer,
            owed: OwedLine::new(tracer, unfinished),
        }
    }

    /// Writes `line`, the call's own, instead of the owed one.
    ///
    /// # Errors
    /// `io_error` when the trace cannot be written (D-6.4): the call must then fail.
    pub(crate) fn write(self, line: &E) -> Result<(), ToolError> {
        self.owed.settle();
        self.tracer.emit(line).map_err(|e| {
            tracing::error!("trace write failed, refusing {}: {e}", self.tool);
            ToolError::of(Code::IoError)
        })
    }
}
