//! The MCP face (D-18): the capsule's export as MCP resources over Streamable HTTP at `/mcp`,
//! and the agent's tools as an MCP server over stdio, both through `rmcp`, the official Rust
//! SDK of the Model Context Protocol. Built with the `mcp` feature (on by default).
//!
//! * [`ToolServer`]: `tools/list` and `tools/call` over the capsule's [`ToolInventory`]
//!   (the binary's `serve --console mcp` runs it on stdin/stdout).
//!
//! Protocol versions: every version the SDK knows, 2025-06-18 and 2025-11-25 among them, and
//! its newest.
//!
//! [`ToolInventory`]: crate::tools::ToolInventory

mod tools;

pub use tools::ToolServer;

/// The implementation this server names in `initialize`: the crate's name and version.
fn implementation() -> rmcp::model::Implementation {
    rmcp::model::Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
}
