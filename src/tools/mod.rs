//! The agent's tools and their inventory (D-12): a tool exists only when its grant is declared.
//!
//! | Tool | Registered when the manifest declares | What it does |
//! |---|---|---|
//! | [`share-file`](ShareFile) | `exports.peer_files` | mints a handle for one file under the peer export root, for one named peer |
//! | [`fetch-peer-file`](FetchPeerFile) | `capabilities.peer_fetch` | redeems a peer's handle and lands the file at `peer-in/<handle_id>-<basename>` |
//!
//! A capsule without the grant has no such tool at all: [`ToolInventory::names`] does not list
//! it, and calling it answers `unknown_tool`. `share-file` also needs `capabilities.network`
//! to reach any peer's agent card; without it every mint past input validation is refused
//! `peer_unreachable`.
//!
//! Every tool has a name, a [description](Tool::description) written for the model, and JSON
//! Schemas (draft 2020-12) of its [input](Tool::input_schema) and [output](Tool::output_schema);
//! [`ToolInventory::function_list`] renders the granted tools as the common LLM
//! function-calling list. Beside the JSON form each tool has typed inputs and outputs
//! ([`ShareFileInput`], [`ShareFileOutput`], [`FetchPeerFileInput`], [`FetchPeerFileOutput`])
//! and typed calls ([`ShareFile::share`], [`FetchPeerFile::fetch`]); the JSON call reads its
//! input into the typed form and runs the typed call, so both behave the same.
//!
//! Every attempt past input validation leaves exactly one trace line (D-6, D-9.3), also when it
//! never finishes:
//!
//! * a deadline ([`CallOptions::with_deadline`], [`ToolInventory::call_with_deadline`]) ends
//!   the call with `io_error`, the reason starting `deadline:`;
//! * a call whose future is dropped unfinished records `io_error` with the reason
//!   `cancelled: the call's future was dropped before it finished`, or, once the runtime has
//!   called [`ToolInventory::mark_session_ended`], `abandoned: the session ended before the
//!   call finished`.
//!
//! ```
//! use resource_plane::backends::{ManualClock, MemoryFilesystem, RecordingTraceSink};
//! use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
//! use std::sync::Arc;
//!
//! let manifest = Manifest::from_yaml(
//!     "name: reader\ncapabilities: { peer_fetch: { allow: [\"127.0.0.1\"] } }",
//! ).unwrap().manifest;
//! let capsule = Capsule::launch(
//!     &manifest,
//!     CapsuleConfig::new("http://127.0.0.1:41235").unwrap(),
//!     Backends {
//!         fs: Arc::new(MemoryFilesystem::new()),
//!         clock: Arc::new(ManualClock::new(0)),
//!         keys: None,
//!         trace: Arc::new(RecordingTraceSink::new()),
//!     },
//! ).unwrap();
//! // Only the granted tool exists.
//! assert_eq!(capsule.tools().names(), ["fetch-peer-file"]);
//! let functions = capsule.tools().function_list();
//! assert_eq!(functions[0]["name"], "fetch-peer-file");
//! assert_eq!(functions[0]["parameters"]["required"], serde_json::json!(["peer", "handle"]));
//! ```

mod call;
mod error;
mod fetch_peer_file;
mod share_file;
mod traced;

pub use call::CallOptions;
pub use error::{PeerCode, ToolError, ToolErrorCode};
pub use fetch_peer_file::{
    FetchPeerFile, FetchPeerFileInput, FetchPeerFileOutput, LANDING_DIR, sanitised_basename,
};
pub use share_file::{ShareFile, ShareFileInput, ShareFileOutput, Ttl};

use crate::refusal::Code;
pub(crate) use call::SessionEnd;
use serde_json::{Value, json};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The `$schema` of every tool schema.
pub const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// A boxed future, so [`Tool`] stays dyn-compatible: what [`Tool::call_with`] returns.
///
/// ```
/// use resource_plane::Code;
/// use resource_plane::tools::{ToolError, ToolFuture};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let refused: ToolFuture<'static> = Box::pin(async { Err(ToolError::of(Code::InvalidInput)) });
/// assert_eq!(refused.await.unwrap_err().code, Code::InvalidInput);
/// # }
/// ```
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// One agent-loop tool: a name, a description and JSON Schemas for the model, and a call on
/// JSON. The crate's tools come from [`Capsule::tools`](crate::Capsule::tools); a runtime may
/// [`register`](ToolInventory::register) its own beside them, listed and called the same way.
///
/// ```
/// use resource_plane::tools::{CallOptions, SCHEMA_DIALECT, Tool, ToolFuture, ToolInventory};
/// use serde_json::{Value, json};
/// use std::sync::Arc;
///
/// /// A runtime's own tool.
/// #[derive(Debug)]
/// struct WhoAmI;
///
/// impl Tool for WhoAmI {
///     fn name(&self) -> &'static str { "who-am-i" }
///     fn description(&self) -> &str { "Returns this capsule's name. Takes no input." }
///     fn input_schema(&self) -> Value { json!({"$schema": SCHEMA_DIALECT, "type": "object"}) }
///     fn output_schema(&self) -> Value {
///         json!({"$schema": SCHEMA_DIALECT, "type": "object", "required": ["name"]})
///     }
///     fn call_with(&self, _input: Value, _options: CallOptions) -> ToolFuture<'_> {
///         Box::pin(async { Ok(json!({"name": "reporter"})) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut tools = ToolInventory::default();
/// tools.register(Arc::new(WhoAmI));
/// assert_eq!(tools.function_list()[0]["parameters"], json!({"type": "object"}));
/// assert_eq!(tools.call("who-am-i", json!({})).await.unwrap()["name"], "reporter");
/// # }
/// ```
pub trait Tool: Any + Debug + Send + Sync {
    /// The name the model sees.
    fn name(&self) -> &'static str;

    /// What the tool does, when to use it and what it never does: written for the model.
    fn description(&self) -> &str;

    /// The JSON Schema (draft 2020-12) of the input [`call`](Self::call) accepts.
    fn input_schema(&self) -> Value;

    /// The JSON Schema (draft 2020-12) of a successful call's result.
    fn output_schema(&self) -> Value;

    /// Runs the tool on a JSON input with `options`. A tool honours the options' deadline.
    fn call_with(&self, input: Value, options: CallOptions) -> ToolFuture<'_>;

    /// Runs the tool on a JSON input, without a deadline.
    fn call(&self, input: Value) -> ToolFuture<'_> {
        self.call_with(input, CallOptions::default())
    }

    /// The tool as one entry of an LLM function-calling list:
    /// `{"name","description","parameters"}`, `parameters` being the input schema without its
    /// `$schema` (which some model APIs refuse).
    fn function(&self) -> Value {
        let mut parameters = self.input_schema();
        if let Some(schema) = parameters.as_object_mut() {
            schema.shift_remove("$schema");
        }
        json!({
            "name": self.name(),
            "description": self.description(),
            "parameters": parameters,
        })
    }
}

/// The tools a capsule's model can see, and the session their calls belong to: only the tools
/// the manifest grants, called by name with JSON (as a model calls them) or through their
/// typed form.
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::tools::{FetchPeerFile, ShareFile};
/// use resource_plane::{Capsule, Code, Manifest};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manifest = Manifest::from_yaml("name: r\nexports: { peer_files: { root: out/ } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let tools = capsule.tools();
/// assert_eq!(tools.names(), ["share-file"]);
/// assert!(tools.typed::<ShareFile>().is_some() && tools.typed::<FetchPeerFile>().is_none());
///
/// let ungranted = tools.call("fetch-peer-file", serde_json::json!({})).await.unwrap_err();
/// assert_eq!(ungranted.code, Code::UnknownTool);
/// let empty = tools.call("share-file", serde_json::json!({"path": "", "peer": "x"})).await;
/// assert_eq!(empty.unwrap_err().code, Code::InvalidInput);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolInventory {
    tools: BTreeMap<&'static str, Arc<dyn Tool>>,
    session: SessionEnd,
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

    /// The granted tools, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// The granted tool of type `T`, for its typed calls: `typed::<ShareFile>()`.
    pub fn typed<T: Tool>(&self) -> Option<&T> {
        self.tools
            .values()
            .find_map(|tool| (tool.as_ref() as &dyn Any).downcast_ref::<T>())
    }

    /// The granted tools as an LLM function-calling list, sorted by name: a JSON array of
    /// `{"name","description","parameters"}` (see [`Tool::function`]). Empty when nothing is
    /// granted.
    pub fn function_list(&self) -> Value {
        Value::Array(self.tools.values().map(|tool| tool.function()).collect())
    }

    /// Options for a typed call in this inventory's session (so that a call dropped after
    /// [`mark_session_ended`](Self::mark_session_ended) is recorded as abandoned).
    pub fn call_options(&self) -> CallOptions {
        CallOptions::new().in_session(&self.session)
    }

    /// Records that the session has ended: a call of this inventory whose future is dropped
    /// from now on, before it finished, records the reason `abandoned: the session ended before
    /// the call finished` (until then, `cancelled: …`). Call it before dropping the calls still
    /// in flight when the session ends; it does not end them by itself.
    pub fn mark_session_ended(&self) {
        self.session.mark();
    }

    /// Calls `name` with `input`.
    ///
    /// # Errors
    /// `unknown_tool` when the capsule was not granted `name`; otherwise the tool's own errors.
    pub async fn call(&self, name: &str, input: Value) -> Result<Value, ToolError> {
        self.call_with(name, input, CallOptions::default()).await
    }

    /// Calls `name` with `input`, ending it past `deadline` (see [`CallOptions`]).
    ///
    /// # Errors
    /// As [`call`](Self::call); `io_error` when the deadline passes first.
    pub async fn call_with_deadline(
        &self,
        name: &str,
        input: Value,
        deadline: Duration,
    ) -> Result<Value, ToolError> {
        self.call_with(name, input, CallOptions::new().with_deadline(deadline))
            .await
    }

    /// Calls `name` with `input` and `options`, in this inventory's session.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    pub async fn call_with(
        &self,
        name: &str,
        input: Value,
        options: CallOptions,
    ) -> Result<Value, ToolError> {
        match self.tools.get(name) {
            Some(tool) => {
                tool.call_with(input, options.in_session(&self.session))
                    .await
            }
            None => Err(ToolError::of(Code::UnknownTool)),
        }
    }
}

/// A required text field, trimmed: non-empty after trimming (D-9.1, D-10.1).
///
/// # Errors
/// `invalid_input`, naming the field.
pub(crate) fn checked_text(text: &str, field: &str) -> Result<String, ToolError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ToolError::new(
            Code::InvalidInput,
            format!("`{field}` must be a non-empty string"),
        ));
    }
    Ok(text.to_owned())
}

/// A text field of a JSON input as the typed input holds it: a string as written, anything
/// else (absent, a number, null) as empty, which [`checked_text`] refuses with the same code
/// and message as an empty string.
pub(crate) fn json_text(input: &Value, field: &str) -> String {
    match input.get(field) {
        Some(Value::String(text)) => text.clone(),
        _ => String::new(),
    }
}

/// A JSON input must be an object.
///
/// # Errors
/// `invalid_input` with its fixed message.
pub(crate) fn json_object(input: &Value) -> Result<(), ToolError> {
    if input.is_object() {
        Ok(())
    } else {
        Err(ToolError::of(Code::InvalidInput))
    }
}
