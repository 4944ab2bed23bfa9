#!/usr/bin/env bash
# MCP clients nobody here wrote, against the real binary (D-18.4): the MCP Inspector CLI over
# HTTP and stdio, the MCP conformance suite's server scenarios that need no reference-server
# fixture, and the Python SDK's client. Installs what it needs under .ci/ (npm packages from
# the pinned lockfile, a venv with `mcp` pinned) and reuses them on the next run.
# Usage: .ci/mcp/check.sh BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"

# npm packages: reinstalled only when the lockfile changed.
stamp="$here/node_modules/.lock-sha256"
want="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --silent)
  echo "$want" > "$stamp"
fi
MCP_SDK=mcp==2.3.0
venv="$here/../mcp-venv"
if [ "$("$venv/bin/pip" show mcp 2>/dev/null | sed -n 's/^Version: //p')" != "${MCP_SDK#*==}" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$MCP_SDK"
fi

work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/w/out"
python3 - "$work/w/out" <<'PY'
import os, sys
root = sys.argv[1]
for i in range(10000):
    d = os.path.join(root, "d%02d" % (i % 50))
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "f%05d.txt" % i), "w").write(str(i))
open(os.path.join(root, "notes.txt"), "w").write("h\u00e9llo\n")
open(os.path.join(root, "blob.bin"), "wb").write(bytes(range(256)) * 8)
PY
printf 'name: mcp-check\nexports:\n  files: { root: out/, mode: read-only }\n  peer_files: { root: out/ }\ncapabilities:\n  network: { allow: ["127.0.0.1"] }\n' > "$work/m.yaml"
"$bin" serve --workdir "$work/w" --manifest "$work/m.yaml" --trace "$work/trace.jsonl" \
  >"$work/ready" 2>"$work/log" &
pid=$!
for _ in $(seq 50); do [ -s "$work/ready" ] && break; sleep 0.1; done
url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/ready")"
echo "serving $url"

passed=0
failed=0
check() { # NAME COMMAND...: runs it, counts it
  local name="$1"; shift
  if "$@" >"$work/out" 2>&1; then passed=$((passed + 1)); echo "ok: $name"
  else failed=$((failed + 1)); echo "FAILED: $name"; tail -20 "$work/out"; fi
}
# The inspector reads its own package.json relative to the working directory.
inspector() { (cd "$here/node_modules" && ./.bin/mcp-inspector-cli --cli "$@"); }
# The suite writes its results under the working directory.
conformance() { (cd "$work" && "$here/node_modules/.bin/conformance" "$@"); }
has() { # PATTERN COMMAND...: the command succeeds and its output holds PATTERN
  local pattern="$1"; shift
  "$@" >"$work/has" 2>&1 && grep -q -- "$pattern" "$work/has" || { cat "$work/has"; return 1; }
}
check "inspector resources/list (HTTP)" has '"nextCursor"' inspector "$url/mcp" --transport http --method resources/list
check "inspector resources/read (HTTP)" has '"text": "héllo' inspector "$url/mcp" --transport http --method resources/read --uri "$url/resources/files/notes.txt"
check "inspector resources/templates/list (HTTP)" has 'resources/files/{+path}' inspector "$url/mcp" --transport http --method resources/templates/list
for scenario in server-initialize resources-list; do
  check "conformance $scenario" has 'Passed: 1/1, 0 failed' conformance server --url "$url/mcp" --scenario "$scenario"
done
check "python mcp client" "$venv/bin/python" "$here/python_client.py" "$url" "$work/w/out"
grep '^ok: ' "$work/out" | sed 's/^/  python: /' || true
stdio=("$bin" serve --workdir "$work/w" --manifest "$work/m.yaml" --trace "$work/stdio.jsonl" --console=mcp)
check "inspector tools/list (stdio)" has '"outputSchema"' inspector "${stdio[@]}" --method tools/list
check "inspector tools/call (stdio)" has '"isError": true' inspector "${stdio[@]}" --method tools/call --tool-name share-file --tool-arg path=../escape --tool-arg peer=127.0.0.1:9
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
