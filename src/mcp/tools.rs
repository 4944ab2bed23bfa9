//! The agent's tools as an MCP server (D-18.3): `tools/list` offers every granted tool with its
//! description, input and output schemas; `tools/call` runs it through the
//! [`ToolInventory`], so every rule, trace line and session rule of a console call holds.

use crate::refusal::Code;
use crate::tools::{ToolError, ToolInventory};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::sync::Arc;

/// The JSON-RPC code a cancelled call's request is answered with, if the client still listens
/// (it asked for the cancellation, so it normally does not): the LSP's `RequestCancelled`,
/// which MCP clients know.
const REQUEST_CANCELLED: ErrorCode = ErrorCode(-32800);

/// An MCP server offering a capsule's tools. Each request runs in the inventory's session, so
/// a call whose request is cancelled (`notifications/cancelled`) is dropped and recorded as
/// cancelled, and one dropped after the session ended as abandoned (see
/// [`ToolInventory::mark_session_ended`]).
///
/// ```
/// use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink};
/// use resource_plane::mcp::ToolServer;
/// use resource_plane::{Capsule, Manifest};
/// use std::sync::Arc;
///
/// let manifest = Manifest::from_yaml("name: r\nexports: { peer_files: { root: out/ } }");
/// let capsule = Capsule::builder(&manifest.unwrap().manifest)
///     .filesystem(Arc::new(MemoryFilesystem::new()))
///     .trace(Arc::new(RecordingTraceSink::new()))
///     .advertised_url("http://127.0.0.1:41234")
///     .launch()
///     .unwrap();
/// let server = ToolServer::new(capsule.tools().clone());
/// let listed = server.tool_list();
/// assert_eq!(listed.len(), 1);
/// assert_eq!(listed[0].name, "share-file");
/// assert!(listed[0].output_schema.is_some());
/// ```
#[derive(Debug, Clone)]
pub struct ToolServer {
    tools: ToolInventory,
}

impl ToolServer {
    /// A server for `tools`.
    pub fn new(tools: ToolInventory) -> Self {
        ToolServer { tools }
    }

    /// The granted tools as MCP describes them, sorted by name: name, description,
    /// `inputSchema` and `outputSchema` (each the tool's JSON Schema, draft 2020-12).
    pub fn tool_list(&self) -> Vec<Tool> {
        self.tools
            .iter()
            .map(|tool| {
                Tool::new(
                    tool.name(),
                    tool.description().to_owned(),
                    Arc::new(schema_object(tool.input_schema())),
                )
                .with_raw_output_schema(Arc::new(schema_object(tool.output_schema())))
            })
            .collect()
    }

    /// Runs one call: the tool's result as `structuredContent` plus one text block holding
    /// the same JSON; a tool error as `isError: true` with one text block
    /// `{"code":…,"message":…}`.
    ///
    /// # Errors
    /// A protocol error, not a tool error: `-32602` with `data: {"error":"unknown_tool"}` for
    /// a tool this capsule was not granted (MCP's answer to an unknown tool).
    pub async fn call(&self, name: &str, input: Value) -> Result<CallToolResult, ErrorData> {
        if self.tools.get(name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("no tool named {name:?} is granted to this capsule"),
                Some(json!({"error": Code::UnknownTool.as_str()})),
            ));
        }
        Ok(
            match self
                .tools
                .call_with(name, input, self.tools.call_options())
                .await
            {
                Ok(result) => tool_result(result),
                Err(error) => tool_error(&error),
            },
        )
    }
}

/// A schema as the object MCP carries; a schema that is not an object (never the crate's own)
/// becomes the schema that accepts any object.
fn schema_object(schema: Value) -> JsonObject {
    match schema {
        Value::Object(object) => object,
        _ => json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    }
}

fn tool_result(result: Value) -> CallToolResult {
    let text = result.to_string();
    let mut answer = CallToolResult::success(vec![ContentBlock::text(text)]);
    answer.structured_content = Some(result);
    answer
}

fn tool_error(error: &ToolError) -> CallToolResult {
    let body = json!({"code": error.code.as_str(), "message": error.message});
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(super::implementation())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = request
            .arguments
            .map_or(Value::Object(Default::default()), Value::Object);
        // Dropping the call's future is what records it as cancelled (or abandoned).
        tokio::select! {
            answer = self.call(&request.name, input) => answer.map(CallToolResponse::from),
            () = context.ct.cancelled() => Err(ErrorData::new(
                REQUEST_CANCELLED,
                "the call was cancelled",
                None,
            )),
        }
    }
}
