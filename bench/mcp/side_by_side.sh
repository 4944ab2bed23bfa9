#!/usr/bin/env bash
# The reference filesystem MCP server (npm @modelcontextprotocol/server-filesystem, pinned in
# bench/mcp/package.json) and resource-plane's /mcp, side by side on the same tree (D-18.4):
#  1. path escapes: a symlink inside the allowed directory pointing out of it (the class of
#     CVE-2025-53109) and an allowed-prefix twin, `data/` allowed and `data-evil/` beside it (the
#     class of CVE-2025-53110); each tried through the reference server's `read_text_file`
#     (the pinned release, and a release from before the fixes to show the checks catch an
#     escape) and through resource-plane's `resources/read` on crafted uris. resource-plane must
#     refuse all: the script fails if it serves one.
#  2. timings on one tree of 10,000 files plus 4 KiB and 1 MiB files: listing, reading 1 MiB,
#     reading 4 KiB, through the reference server's tools, resource-plane's MCP resources and
#     resource-plane's plain HTTP, and reading 4 KiB through the least MCP server D-18 allows
#     (`mcp_floor` of the crate bench/floors: the SDK, a session, the operator read, the answer,
#     its trace line); server CPU (user + system, the process's CPU clock) and wall time per
#     operation, medians over rounds that alternate the cases; printed as a table of ratios.
#
#   bench/mcp/side_by_side.sh [rounds]       (default 7)
#
# RP_BIN names the resource-plane binary to measure (default: this tree's release build, built
# when missing). Needs node (20+), npm and python3; installs the npm packages from the lockfile.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
ROUNDS=${1:-7}
source "$here/servers.sh"
stamp="$here/node_modules/.lock-sha256"
want="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --silent)
  echo "$want" > "$stamp"
fi
ref_new="$here/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
ref_old="$here/node_modules/server-filesystem-prefix/dist/index.js"
v_new="$(node -p "require('$here/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")"
v_old="$(node -p "require('$here/node_modules/server-filesystem-prefix/package.json').version")"

work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

serve() { # WORKDIR: starts resource-plane exporting WORKDIR/data/ read-only; sets url, pid
  local w="$1"
  printf 'name: mcp-bench\nexports:\n  files: { root: data/, mode: read-only }\n' > "$w.yaml"
  "$RP_BIN" serve --workdir "$w" --manifest "$w.yaml" --trace "$w.trace.jsonl" \
    >"$w.ready" 2>"$w.log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do [ -s "$w.ready" ] && break; sleep 0.1; done
  url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$w.ready")"
}

# 1. Path escapes. Everything lies inside resource-plane's workdir, so its Landlock wall
# (D-19) would allow the outside files: a refusal is the export's own path resolution.
esc="$work/esc"
mkdir -p "$esc/data" "$esc/data-evil" "$esc/outside"
echo "inside the allowed directory" > "$esc/data/inside.txt"
echo "SECRET: outside the allowed directory" > "$esc/outside/secret.txt"
echo "SECRET: in the allowed directory's prefix twin" > "$esc/data-evil/secret.txt"
ln -s "$esc/outside/secret.txt" "$esc/data/link-out"
ln -s "$esc/outside" "$esc/data/dir-out"
ln -s "$esc/data-evil/secret.txt" "$esc/data/link-twin"
ln -s "$esc/data-evil" "$esc/data/dir-twin"
serve "$esc"
python3 "$here/mcpbench.py" escapes "reference $v_new=$ref_new" "reference $v_old=$ref_old" \
  -- "$url" "$esc" > "$work/escapes.jsonl"
kill "$pid"

# 2. Timings: 10,000 files in 50 directories, and the files read.
perf="$work/perf"
mkdir -p "$perf/data"
python3 - "$perf/data" <<'PY'
import os, random, string, sys
root = sys.argv[1]
for i in range(10000):
    d = os.path.join(root, "many", "d%02d" % (i % 50))
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "f%05d.txt" % i), "w").write(str(i))
rng = random.Random(7)
text = lambda n: "".join(rng.choice(string.ascii_letters + string.digits + " \n") for _ in range(n))
open(os.path.join(root, "1m.txt"), "w").write(text(1 << 20))
open(os.path.join(root, "4k.txt"), "w").write(text(4096))
open(os.path.join(root, "1m.bin"), "wb").write(rng.randbytes(1 << 20))
open(os.path.join(root, "4k.bin"), "wb").write(rng.randbytes(4096))
PY
serve "$perf"
"$MCP_FLOOR_BIN" "$perf" "$perf.yaml" 127.0.0.1:0 "$perf.floor-trace.jsonl" >"$perf.floor-ready" &
floor_pid=$!
pids+=("$floor_pid")
for _ in $(seq 100); do [ -s "$perf.floor-ready" ] && break; sleep 0.1; done
floor_url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$perf.floor-ready")"
python3 "$here/mcpbench.py" perf "$ref_new" "$url" "$pid" "$perf/data" "$ROUNDS" \
  "$floor_url" "$floor_pid" > "$work/perf.jsonl"

echo "# side_by_side.sh, $(date -u +%Y-%m-%d), $ROUNDS rounds, $(nproc) cores"
echo "# resource-plane: $("$RP_BIN" --version 2>/dev/null || echo "?") ($(git rev-parse --short HEAD 2>/dev/null || echo "?")); reference server: $v_new (escapes also $v_old); node $(node --version)"
python3 "$here/report.py" "$work/escapes.jsonl" "$work/perf.jsonl"
