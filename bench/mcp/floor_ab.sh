#!/usr/bin/env bash
# resource-plane's 4 KiB `resources/read` beside the least MCP server D-18 allows (`mcp_floor`,
# the crate bench/floors) and beside resource-plane's own HTTP read of the same file, alone:
# the three alternate and nothing else runs between them (side_by_side.sh runs the reference
# server and 10,000-file listings in between). Server CPU per request from the process's CPU
# clock, medians over rounds; prints a markdown table and resource-plane's ratio to the floor.
#
#   bench/mcp/floor_ab.sh [rounds] [batch]     (default 8 rounds of 3,000 requests)
#
# Both servers put up the Landlock wall D-19 asks for. MANY=1 exports 10,000 more files beside
# the one read; NO_WALL=1 runs both without the wall (`--no-confine`, MCP_FLOOR_WALL=none).
# The floor sits on the crate's own listener, as `/mcp` does; EDGE=hyper puts it on a bare
# hyper accept loop with only the hardening D-18.2 names (MCP_FLOOR_EDGE=hyper; see
# mcp_floor's doc).
# RP_BIN names the resource-plane binary (default: this tree's release build, built when
# missing). Needs python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
ROUNDS=${1:-8}
BATCH=${2:-3000}
source "$here/servers.sh"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# The workdir is $work/w; the traces lie outside it, as `serve` requires.
mkdir -p "$work/w/data"
head -c 4096 /dev/urandom > "$work/w/data/4k.bin"
if [ -n "${MANY:-}" ]; then
  python3 - "$work/w/data" <<'PY'
import os, sys
for i in range(10000):
    d = os.path.join(sys.argv[1], "many", "d%02d" % (i % 50))
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "f%05d.txt" % i), "w").write(str(i))
PY
fi
printf 'name: floor-ab\nexports:\n  files: { root: data/, mode: read-only }\n' > "$work/m.yaml"
"$RP_BIN" serve --workdir "$work/w" --manifest "$work/m.yaml" --trace "$work/rp.jsonl" \
  ${NO_WALL:+--no-confine} >"$work/rp.ready" 2>"$work/rp.log" &
rp_pid=$!
pids+=("$rp_pid")
MCP_FLOOR_WALL=${NO_WALL:+none} MCP_FLOOR_EDGE=${EDGE:-crate} "$MCP_FLOOR_BIN" "$work/w" "$work/m.yaml" \
  127.0.0.1:0 "$work/floor.jsonl" >"$work/floor.ready" &
floor_pid=$!
pids+=("$floor_pid")
for _ in $(seq 100); do [ -s "$work/rp.ready" ] && [ -s "$work/floor.ready" ] && break; sleep 0.1; done
url_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$1"; }
echo "# floor_ab.sh, $(date -u +%Y-%m-%d), $(nproc) cores, resource-plane $(git rev-parse --short HEAD 2>/dev/null || echo "?")${MANY:+, 10,000 more files exported}${NO_WALL:+, no Landlock wall}${EDGE:+, the floor on the $EDGE listener}"
python3 "$here/mcpbench.py" ab "$(url_of "$work/rp.ready")" "$rp_pid" \
  "$(url_of "$work/floor.ready")" "$floor_pid" "$ROUNDS" "$BATCH"
