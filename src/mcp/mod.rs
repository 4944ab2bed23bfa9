//! The MCP face (D-18): the capsule's export as MCP resources over Streamable HTTP at `/mcp`,
//! and the agent's tools as an MCP server over stdio, both through `rmcp`, the official Rust
//! SDK of the Model Context Protocol. Built with the `mcp` feature (on by default).
//!
//! * [`McpService`]: the endpoint at `/mcp` (a `tower::Service`; [`Router::with_mcp`] mounts
//!   it beside the planes): each exported file is a resource, read through the operator plane
//!   itself, so every rule, refusal and trace line of an HTTP read holds.
//! * [`ToolServer`]: `tools/list` and `tools/call` over the capsule's [`ToolInventory`]
//!   (the binary's `serve --console mcp` runs it on stdin/stdout).
//! * [`ExportChanges`]: where subscriptions learn of change.
//!
//! Protocol versions: every version the SDK knows, 2025-06-18 and 2025-11-25 among them, and
//! its newest.
//!
//! [`ToolInventory`]: crate::tools::ToolInventory
//! [`Router::with_mcp`]: crate::http::Router::with_mcp

mod changes;
mod cursor;
mod event_stream;
mod http;
mod mime;
mod resources;
mod tools;

pub use changes::{ChangeNotice, ExportChanges};
pub use http::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, MCP_PATH, McpBody,
    McpConfig, McpService, WithMcp,
};
pub use tools::ToolServer;

/// The implementation this server names in `initialize`: the crate's name and version.
fn implementation() -> rmcp::model::Implementation {
    rmcp::model::Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
}
