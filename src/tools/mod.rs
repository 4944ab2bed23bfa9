//! The agent's tools and their inventory (D-12): a tool exists only when its grant is declared.

mod fetch_peer_file;
mod share_file;

pub use fetch_peer_file::{FetchPeerFile, LANDING_DIR, sanitised_basename};
pub use share_file::ShareFile;

use crate::refusal::Code;

/// The trace `reason` of a call abandoned before it finished (its future dropped when the
/// session ended past the drain deadline): its line records `io_error` with this reason.
pub(crate) const ABANDONED: &str = "abandoned: the session ended before the call finished";
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, so [`Tool`] stays dyn-compatible.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// A tool's refusal: `{"code","message"}`. The message never holds a token, a host path or file
/// contents.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolError {
    /// A code of `contract.md`'s tool vocabulary, a peer's own code, or `http_<status>`.
    pub code: String,
    /// Human-readable text.
    pub message: String,
}

impl ToolError {
    /// The error for a fixed code, with its fixed message.
    pub fn of(code: Code) -> Self {
        ToolError {
            code: code.as_str().to_owned(),
            message: code.message().to_owned(),
        }
    }
}

/// One agent-loop tool.
pub trait Tool: Debug + Send + Sync {
    /// The name the model sees.
    fn name(&self) -> &'static str;

    /// Runs the tool on a JSON input.
    fn call(&self, input: Value) -> ToolFuture<'_>;
}

/// The tools a capsule's model can see.
#[derive(Debug, Clone, Default)]
pub struct ToolInventory {
    tools: BTreeMap<&'static str, Arc<dyn Tool>>,
}

impl ToolInventory {
    /// Adds a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name(), tool);
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.keys().copied().collect()
    }

    /// The tool called `name`, if granted.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Calls `name` with `input`.
    ///
    /// # Errors
    /// `unknown_tool` when the capsule was not granted `name`; otherwise the tool's own errors.
    pub async fn call(&self, name: &str, input: Value) -> Result<Value, ToolError> {
        match self.tools.get(name) {
            Some(tool) => tool.call(input).await,
            None => Err(ToolError::of(Code::UnknownTool)),
        }
    }
}

/// A required, non-empty (after trimming) string field of a tool input.
pub(crate) fn required_string(input: &Value, field: &str) -> Result<String, ToolError> {
    match input.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        _ => Err(ToolError {
            code: Code::InvalidInput.as_str().to_owned(),
            message: format!("`{field}` must be a non-empty string"),
        }),
    }
}
