# Sourced by the MCP bench scripts from the repository root: builds what they measure.
# Sets RP_BIN (this tree's release build unless RP_BIN names another) and MCP_FLOOR_BIN (the
# least MCP server D-18 allows; the floors are a crate of their own, see
# bench/floors/Cargo.toml).
if [ -z "${RP_BIN:-}" ]; then
  cargo build --release --quiet --bin resource-plane
  RP_BIN="$PWD/target/release/resource-plane"
fi
cargo build --release --quiet --manifest-path bench/floors/Cargo.toml --target-dir target/floors \
  --bin mcp_floor
MCP_FLOOR_BIN="$PWD/target/floors/release/mcp_floor"
