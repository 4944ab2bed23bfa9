"""Tables from mcpbench.py's JSON lines: report.py ESCAPES.jsonl PERF.jsonl.

Exits non-zero when resource-plane served any escape attempt (or refused the control read)."""

import json
import sys

escapes = [json.loads(line) for line in open(sys.argv[1])]
perf = [json.loads(line) for line in open(sys.argv[2])]

print("\n## Path escapes (outside file read through each server)\n")
print("| server | class | attempt | outcome | detail |")
print("| --- | --- | --- | --- | --- |")
bad = False
for e in escapes:
    detail = e["detail"].replace("|", "/").replace("\n", " ")
    print(f"| {e['server']} | {e['class']} | {e['how']} | **{e['outcome']}** | {detail} |")
    if e["server"].startswith("resource-plane"):
        want = "served" if e["class"] == "control" else "refused"
        bad |= e["outcome"] != want

cases = {p["case"]: p for p in perf if "case" in p}
versions = next(p["versions"] for p in perf if "versions" in p)
# Each group's baseline: resource-plane's plain HTTP answer for the same thing.
baseline = {
    "list": "list/rp http GET /resources/files",
    "1m": "1m/rp http GET 1m.bin",
    "4k": None,  # per file type, below
}
def base_of(name):
    group = name.split("/", 1)[0]
    if group == "4k":
        return "4k/rp http GET 4k.txt" if name.endswith("txt") or "txt " in name else "4k/rp http GET 4k.bin"
    return baseline[group]

print("\n## Timings (per operation, medians over rounds; ratios against the named baseline)\n")
print("| case | server CPU ms | wall ms | CPU ratio | wall ratio | baseline |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for name, p in cases.items():
    b = cases[base_of(name)]
    print(f"| {name} | {p['cpu_ms']:.3f} | {p['wall_ms']:.3f} | "
          f"{p['cpu_ms'] / b['cpu_ms']:.2f}x | {p['wall_ms'] / b['wall_ms']:.2f}x | {b['case']} |")

print("\n## Targets of issue 23 (server CPU; MCP over HTTP of the same resource-plane)\n")
print("A 4 KiB read's target is 1.5x the HTTP read; where the least MCP server D-18 allows "
      "(`mcp_floor`, measured in the same run) already costs more than that, the target moves "
      "to that floor, held as the bench's other floors are: at most 1.05x it. The last two "
      "columns give the floor's own ratio and resource-plane's ratio to the floor.\n")
print("| target | ratio | limit | met | floor / HTTP GET | ratio to the floor |")
print("| --- | ---: | ---: | --- | ---: | ---: |")
for label, num, den, least in [
    ("4 KiB resources/read (blob) / HTTP GET", "4k/rp mcp resources/read 4k.bin (blob)", "4k/rp http GET 4k.bin",
     "4k/floor mcp resources/read 4k.bin (blob)"),
    ("4 KiB resources/read (text) / HTTP GET", "4k/rp mcp resources/read 4k.txt (text)", "4k/rp http GET 4k.txt",
     "4k/floor mcp resources/read 4k.txt (text)"),
    ("4 KiB resources/read (blob), 2026-07-28 / HTTP GET", "4k/rp mcp 2026-07-28 resources/read 4k.bin (blob)", "4k/rp http GET 4k.bin",
     "4k/floor mcp 2026-07-28 resources/read 4k.bin (blob)"),
    ("4 KiB resources/read (text), 2026-07-28 / HTTP GET", "4k/rp mcp 2026-07-28 resources/read 4k.txt (text)", "4k/rp http GET 4k.txt",
     "4k/floor mcp 2026-07-28 resources/read 4k.txt (text)"),
    ("all pages of resources/list (10,000) / one HTTP listing", "list/rp mcp resources/list (all pages)", "list/rp http GET /resources/files",
     None),
]:
    r = cases[num]["cpu_ms"] / cases[den]["cpu_ms"]
    if least is None:
        print(f"| {label} | {r:.2f}x | 1.5x | {'yes' if r <= 1.5 else '**no**'} | — | — |")
        continue
    f = cases[least]["cpu_ms"] / cases[den]["cpu_ms"]
    limit = 1.5 if f <= 1.5 else 1.05 * f
    print(f"| {label} | {r:.2f}x | {limit:.2f}x | {'yes' if r <= limit else '**no**'} | "
          f"{f:.2f}x | {r / f:.2f}x |")

print("\n## The SDK's floor, in the same run (server CPU / HTTP GET 4k.bin)\n")
print("Every MCP request pays the SDK's Streamable HTTP machinery (a POST parsed as JSON-RPC, "
      "a spawned handler, and in a session the session's worker and an SSE answer) before any "
      "handler work: `ping` and `resources/templates/list` measure that floor; a 2026-07-28 "
      "request has no session and no `ping`, so its floor is `resources/templates/list`.\n")
print("| request | CPU ratio | above the floor (ms) |")
print("| --- | ---: | ---: |")
http_4k = cases["4k/rp http GET 4k.bin"]["cpu_ms"]
floor = cases["4k/rp mcp ping (floor)"]["cpu_ms"]
http_404 = cases["4k/rp http GET 404"]["cpu_ms"]
print(f"| rp http GET 404 (the HTTP request around a read) | {http_404 / http_4k:.2f}x | — |")
print(f"| rp http GET 4k.bin | 1.00x | — |")
stateless_floor = cases["4k/rp mcp 2026-07-28 resources/templates/list (floor)"]["cpu_ms"]
for name in ["4k/rp mcp ping (floor)", "4k/rp mcp resources/templates/list (floor)",
             "4k/rp mcp resources/read refused (floor)",
             "4k/rp mcp resources/read 4k.bin (blob)", "4k/rp mcp resources/read 4k.txt (text)",
             "4k/rp mcp 2026-07-28 resources/templates/list (floor)",
             "4k/rp mcp 2026-07-28 resources/read 4k.bin (blob)",
             "4k/rp mcp 2026-07-28 resources/read 4k.txt (text)"]:
    c = cases[name]["cpu_ms"]
    under = stateless_floor if "2026-07-28" in name else floor
    print(f"| {name.split('/', 1)[1]} | {c / http_4k:.2f}x | {c - under:.3f} |")
read = http_4k - http_404
refused = cases["4k/rp mcp resources/read refused (floor)"]["cpu_ms"]
print(f"\nThe read itself over HTTP (GET 4k.bin - GET 404): {read:.3f} ms. "
      f"`ping` plus that read: {(floor + read) / http_4k:.2f}x the HTTP read. "
      f"The SDK's floor for a read request (a `resources/read` of a uri that is not this "
      f"server's, refused before anything is read: the same request parsed, dispatched and "
      f"answered) plus that read: {(refused + read) / http_4k:.2f}x. Above that floor, a read "
      f"spends {cases['4k/rp mcp resources/read 4k.bin (blob)']['cpu_ms'] - refused - read:.3f} ms "
      f"(blob) and {cases['4k/rp mcp resources/read 4k.txt (text)']['cpu_ms'] - refused - read:.3f} ms "
      f"(text) on its answer: the 4 KiB encoded (base64 or JSON-escaped), the larger event written.")

print("\n## The least MCP server D-18 allows, in the same run (server CPU)\n")
print("`mcp_floor` (bench/floors): the SDK's Streamable HTTP service with its local sessions, "
      "on the capsule's listener as `/mcp` is (the crate's own edge and every rule it keeps), "
      "the endpoint's Origin and body checks and an in-flight budget at their least, serve's "
      "Landlock wall (D-19), one single-threaded runtime, the operator read (D-2.6's probe and "
      "reopen, one read, sha256), the answer D-18.2 describes and one trace line; no router, "
      "hash cache, listing or change feed.\n")
print("| request | floor CPU ms | resource-plane CPU ms | resource-plane / floor | floor / HTTP GET |")
print("| --- | ---: | ---: | ---: | ---: |")
for least, ours, den in [
    ("4k/floor mcp resources/read 4k.bin (blob)", "4k/rp mcp resources/read 4k.bin (blob)", "4k/rp http GET 4k.bin"),
    ("4k/floor mcp resources/read 4k.txt (text)", "4k/rp mcp resources/read 4k.txt (text)", "4k/rp http GET 4k.txt"),
    ("4k/floor mcp ping", "4k/rp mcp ping (floor)", "4k/rp http GET 4k.bin"),
    ("4k/floor mcp 2026-07-28 resources/read 4k.bin (blob)",
     "4k/rp mcp 2026-07-28 resources/read 4k.bin (blob)", "4k/rp http GET 4k.bin"),
    ("4k/floor mcp 2026-07-28 resources/read 4k.txt (text)",
     "4k/rp mcp 2026-07-28 resources/read 4k.txt (text)", "4k/rp http GET 4k.txt"),
]:
    f, o, d = cases[least]["cpu_ms"], cases[ours]["cpu_ms"], cases[den]["cpu_ms"]
    print(f"| {least.split('/', 1)[1].replace('floor mcp ', '')} | {f:.3f} | {o:.3f} | "
          f"{o / f:.2f}x | {f / d:.2f}x |")

print("\n## Against the reference server (CPU ratio reference / resource-plane, same operation)\n")
print("| operation | reference | resource-plane | CPU ratio | wall ratio |")
print("| --- | --- | --- | ---: | ---: |")
for label, ref, rp in [
    ("list 10,000 files", "list/ref directory_tree", "list/rp mcp resources/list (all pages)"),
    ("list 10,000 files", "list/ref directory_tree", "list/rp http GET /resources/files"),
    ("read 1 MiB binary", "1m/ref read_media_file 1m.bin", "1m/rp mcp resources/read 1m.bin (blob)"),
    ("read 1 MiB binary", "1m/ref read_media_file 1m.bin", "1m/rp http GET 1m.bin"),
    ("read 1 MiB text", "1m/ref read_text_file 1m.txt", "1m/rp mcp resources/read 1m.txt (text)"),
    ("read 4 KiB text", "4k/ref read_text_file 4k.txt", "4k/rp mcp resources/read 4k.txt (text)"),
]:
    a, b = cases[ref], cases[rp]
    print(f"| {label} | {ref.split('/', 1)[1]} | {rp.split('/', 1)[1]} | "
          f"{a['cpu_ms'] / b['cpu_ms']:.2f}x | {a['wall_ms'] / b['wall_ms']:.2f}x |")
print(f"\nservers: {json.dumps(versions)}")
if bad:
    print("\nFAILED: resource-plane served an escape attempt or refused the control read")
    sys.exit(1)
