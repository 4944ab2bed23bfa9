"""Side by side: the reference filesystem MCP server and resource-plane's /mcp (D-18.4).

Driven by bench/mcp/side_by_side.sh, which lays out the trees and starts the servers; this file
holds the clients and the measurements. Standard library only, on purpose: the clients are the
least a client can be (one JSON-RPC message per request, no schema validation), so the wall time
measured is the server's and the transport's, not a client library's parsing.

  mcpbench.py escapes  REF_JS_LABEL=REF_JS ... -- RP_URL ROOT   (path-escape checks, JSON lines)
  mcpbench.py perf     REF_JS RP_URL RP_PID DATA_DIR ROUNDS FLOOR_URL FLOOR_PID
                                                                (timings, JSON lines)
  mcpbench.py ab       RP_URL RP_PID FLOOR_URL FLOOR_PID ROUNDS BATCH
                                      (4 KiB reads only: resource-plane and the floor, a table)

Server CPU is user + system time of the server's process (all its threads, the ended ones
too), exact, from its CPU-time clock (`cpu_seconds`), read before and after a batch of
requests. Each round runs every measurement once, in an order rotated from round to round,
and the report takes medians over rounds.
"""

import base64
import json
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PROTOCOL = "2025-06-18"
# The newest protocol the SDK speaks: no sessions, every request carries its own version.
STATELESS = "2026-07-28"


def cpu_seconds(pid):
    """User + system CPU seconds of the process `pid`, all its threads, the ones that have
    ended included, exact to the nanosecond: the process's CPU-time clock (what
    `clock_getcpuclockid(3)` names for a pid, read with `clock_gettime`). `/proc/<pid>/stat`
    holds the same sum in clock ticks, but the kernel charges a tick to whichever thread runs
    when the timer fires, so over a batch of 50 ticks it varies by about 14%."""
    # Linux's clock id for a process's CPU time: the pid complemented, shifted past the three
    # clock bits, CPUCLOCK_SCHED (2) in them.
    return time.clock_gettime(((~pid) << 3) | 2)


class StdioServer:
    """The reference server: `node index.js DIR` speaking newline-delimited JSON-RPC."""

    def __init__(self, js, allowed):
        self.proc = subprocess.Popen(
            ["node", js, allowed],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.pid = self.proc.pid
        self.next_id = 0
        init = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "mcpbench", "version": "0"},
            },
        )
        self.server_info = init["result"]["serverInfo"]
        self.notify("notifications/initialized")
        tools = {t["name"] for t in self.request("tools/list", {})["result"]["tools"]}
        # `read_text_file` since 2025.7.x; `read_file` before (kept since as a deprecated alias).
        self.read_tool = "read_text_file" if "read_text_file" in tools else "read_file"
        # The server asks the client for its roots after `initialized` when the client declares
        # the capability; this client declares none, so the command-line directory stands.

    def send(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def request(self, method, params):
        self.next_id += 1
        want = self.next_id
        self.send({"jsonrpc": "2.0", "id": want, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the reference server closed its stdout")
            message = json.loads(line)
            if message.get("id") == want and ("result" in message or "error" in message):
                return message
            # A request from the server (roots/list) or a notification: not ours; answer the
            # request with an empty result so the server is not left waiting.
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}})

    def call(self, tool, arguments):
        """tools/call: (served, text of the first content block or the error)."""
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "error" in reply:
            return False, reply["error"].get("message", "")
        result = reply["result"]
        content = result.get("content") or [{}]
        first = content[0]
        text = first.get("text") or first.get("data") or first.get("resource", {}).get("blob", "")
        return not result.get("isError", False), text

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


class HttpMcp:
    """resource-plane's /mcp: one POST per JSON-RPC message, in one session."""

    def __init__(self, url):
        self.endpoint = f"{url}/mcp"
        self.session = None
        self.next_id = 0
        init, headers = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "mcpbench", "version": "0"},
                },
            }
        )
        self.session = headers.get("Mcp-Session-Id")
        self.server_info = init["result"]["serverInfo"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message, version=PROTOCOL, extra=None):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": version,
            **(extra or {}),
        }
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        request = urllib.request.Request(
            self.endpoint, data=json.dumps(message).encode(), headers=headers, method="POST"
        )
        with urllib.request.urlopen(request) as response:
            body = response.read()
            kind = response.headers.get("Content-Type", "")
            if "id" not in message:
                return None, response.headers
            if kind.startswith("text/event-stream"):
                # The answer is the data of the event whose JSON carries our id.
                for event in body.split(b"\n\n"):
                    data = b"\n".join(
                        line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")
                    )
                    if data:
                        parsed = json.loads(data)
                        if parsed.get("id") == message["id"]:
                            return parsed, response.headers
                raise RuntimeError("no answer in the event stream")
            return json.loads(body), response.headers

    def request(self, method, params):
        self.next_id += 1
        reply, _ = self.post(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        return reply

    def read(self, uri):
        """resources/read: (served, bytes or the error)."""
        reply = self.request("resources/read", {"uri": uri})
        if "error" in reply:
            return False, reply["error"]
        content = reply["result"]["contents"][0]
        if "blob" in content:
            return True, base64.b64decode(content["blob"])
        return True, content["text"].encode()

    def list_all(self):
        """Every page of resources/list: (resources, pages)."""
        cursor, count, pages = None, 0, 0
        while True:
            reply = self.request("resources/list", {"cursor": cursor} if cursor else {})
            pages += 1
            count += len(reply["result"]["resources"])
            cursor = reply["result"].get("nextCursor")
            if not cursor:
                return count, pages


class StatelessMcp(HttpMcp):
    """An MCP endpoint (resource-plane's /mcp, or the floor's) at protocol 2026-07-28: no
    initialize, no session; each request names its method (and, for a read, its uri) in
    headers and its version in `_meta`."""

    def __init__(self, url):
        self.endpoint = f"{url}/mcp"
        self.session = None
        self.next_id = 0
        self.meta = {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "mcpbench", "version": "0"},
        }

    def request(self, method, params):
        self.next_id += 1
        headers = {"Mcp-Method": method}
        if method == "resources/read":
            headers["Mcp-Name"] = params["uri"]
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   "params": {**params, "_meta": self.meta}}
        reply, _ = self.post(message, STATELESS, headers)
        return reply


def http_get(url):
    with urllib.request.urlopen(url) as response:
        return response.read()


def file_uri(url, path):
    return f"{url}/resources/files/{urllib.parse.quote(path)}"


# ---------------------------------------------------------------- path escapes


def escapes(refs, url, root):
    """Each escape class through each server; prints one JSON line per attempt."""
    secret = {
        "symlink-out": open(f"{root}/outside/secret.txt", "rb").read(),
        "symlink-twin": open(f"{root}/data-evil/secret.txt", "rb").read(),
        "prefix-twin": open(f"{root}/data-evil/secret.txt", "rb").read(),
    }
    # Attempts at the reference server: (class, how, path given to read_text_file).
    ref_attempts = [
        ("symlink-out", "file symlink data/link-out -> outside/secret.txt", f"{root}/data/link-out"),
        ("symlink-out", "dir symlink data/dir-out -> outside/", f"{root}/data/dir-out/secret.txt"),
        ("symlink-twin", "file symlink data/link-twin -> data-evil/secret.txt", f"{root}/data/link-twin"),
        ("symlink-twin", "dir symlink data/dir-twin -> data-evil/", f"{root}/data/dir-twin/secret.txt"),
        ("prefix-twin", "absolute path into data-evil/", f"{root}/data-evil/secret.txt"),
        ("prefix-twin", "data/../data-evil/", f"{root}/data/../data-evil/secret.txt"),
    ]
    base = f"{url}/resources/files"
    rp_attempts = [
        ("symlink-out", "file symlink link-out", f"{base}/link-out"),
        ("symlink-out", "dir symlink dir-out/", f"{base}/dir-out/secret.txt"),
        ("symlink-twin", "file symlink link-twin", f"{base}/link-twin"),
        ("symlink-twin", "dir symlink dir-twin/", f"{base}/dir-twin/secret.txt"),
        ("prefix-twin", "../data-evil/ literal", f"{base}/../data-evil/secret.txt"),
        ("prefix-twin", "%2e%2e/data-evil/", f"{base}/%2e%2e/data-evil/secret.txt"),
        ("prefix-twin", "..%2fdata-evil%2f (one segment)", f"{base}/..%2fdata-evil%2fsecret.txt"),
        ("prefix-twin", "absolute path in the uri", f"{base}/{root}/data-evil/secret.txt"),
        ("prefix-twin", "%2f-absolute path", f"{base}/%2f{root.lstrip('/')}/data-evil/secret.txt"),
        ("prefix-twin", "uri prefix twin /resources/files-evil/", f"{url}/resources/files-evil/secret.txt"),
        ("prefix-twin", "uri prefix twin /resources/files../", f"{url}/resources/files../data-evil/secret.txt"),
        ("prefix-twin", "file:// uri of the twin", f"file://{root}/data-evil/secret.txt"),
    ]
    for label, js in refs:
        server = StdioServer(js, f"{root}/data")
        for cls, how, path in ref_attempts:
            served, text = server.call(server.read_tool, {"path": path})
            leaked = served and secret[cls].decode() in text
            print(json.dumps({"server": f"{label} ({server.read_tool})", "class": cls,
                              "how": how, "outcome": "served" if leaked else "refused",
                              "detail": "" if leaked else str(text)[:120]}))
        server.close()
    mcp = HttpMcp(url)
    for cls, how, uri in rp_attempts:
        served, got = mcp.read(uri)
        leaked = served and secret[cls] in got
        detail = "" if served else f"{got.get('code')} {json.dumps(got.get('data'))}"
        if served and not leaked:
            detail = "served other bytes"
        print(json.dumps({"server": "resource-plane /mcp", "class": cls, "how": how,
                          "outcome": "served" if leaked else "refused", "detail": detail}))
    # Control: a file inside the allowed directory is served by all, so a refusal above is a
    # refusal of the escape, not of every read.
    for label, js in refs:
        server = StdioServer(js, f"{root}/data")
        served, _ = server.call(server.read_tool, {"path": f"{root}/data/inside.txt"})
        print(json.dumps({"server": f"{label} ({server.read_tool})", "class": "control", "how": "data/inside.txt",
                          "outcome": "served" if served else "refused", "detail": ""}))
        server.close()
    served, _ = mcp.read(f"{base}/inside.txt")
    print(json.dumps({"server": "resource-plane /mcp", "class": "control", "how": "inside.txt",
                      "outcome": "served" if served else "refused", "detail": ""}))


# ---------------------------------------------------------------- timings


def perf(ref_js, url, rp_pid, data, rounds, floor_url, floor_pid):
    ref = StdioServer(ref_js, data)
    mcp = HttpMcp(url)
    floor = HttpMcp(floor_url)
    stateless = StatelessMcp(url)
    floor_stateless = StatelessMcp(floor_url)
    ref_pid = ref.pid
    files = f"{url}/resources/files"

    def ref_tree():
        served, text = ref.call("directory_tree", {"path": data})
        assert served and text.count('"file"') >= 10000, text[:200]

    def ref_list_dirs():
        # list_directory over every directory: what a client of a tools-only server does to
        # enumerate a tree it cannot list recursively in one flat call.
        total = 0
        for d in ["", *(f"many/d{i:02d}" for i in range(50))]:
            served, text = ref.call("list_directory", {"path": f"{data}/{d}".rstrip("/")})
            assert served, text
            total += text.count("[FILE]")
        assert total >= 10000, total

    def rp_mcp_list():
        count, pages = mcp.list_all()
        assert count >= 10000 and pages >= 10, (count, pages)

    def rp_http_list():
        doc = json.loads(http_get(files))
        assert len(doc["entries"]) >= 10000

    def ref_read(tool, name, size):
        def run():
            served, text = ref.call(tool, {"path": f"{data}/{name}"})
            assert served and len(text) >= size, (tool, name, len(text))
        return run

    def rp_mcp_read(name, size, client=mcp, base=url):
        uri = file_uri(base, name)

        def run():
            served, got = client.read(uri)
            assert served and len(got) == size, (name, got if not served else len(got))
        return run

    def rp_http_read(name, size):
        target = f"{files}/{name}"

        def run():
            assert len(http_get(target)) == size
        return run

    def rp_http_missing():
        # The HTTP request around a read, with no file to read: what a 4 KiB GET costs
        # beyond the read itself.
        try:
            http_get(f"{files}/no-such-file")
        except urllib.error.HTTPError as refused:
            assert refused.code == 404, refused.code
        else:
            raise AssertionError("a missing file was served")

    def rp_mcp_floor(method, client=mcp):
        # The SDK's own cost of one request, with next to nothing to do: what every
        # resources/read pays before it reads.
        def run():
            reply = client.request(method, {})
            assert "result" in reply, reply
        return run

    def rp_mcp_refused_read():
        # resources/read of a uri that is not this server's: everything the SDK does for a
        # read request (its parse of this request shape, the session, the spawned handler,
        # the answer) with nothing read or encoded.
        foreign = "http://elsewhere.invalid/resources/files/4k.bin"

        def run():
            reply = mcp.request("resources/read", {"uri": foreign})
            assert reply["error"]["code"] == -32002, reply
        return run

    MiB, KiB = 1 << 20, 4096
    # name: (server pid, one operation, operations per batch). A batch holds 0.2 s or more of
    # the server's CPU on the machine this was written on (20 clock ticks, when CPU was read in
    # ticks), so the rounds' medians are not a handful of requests.
    cases = {
        "list/ref directory_tree": (ref_pid, ref_tree, 6),
        "list/ref list_directory x51": (ref_pid, ref_list_dirs, 10),
        "list/rp mcp resources/list (all pages)": (rp_pid, rp_mcp_list, 3),
        "list/rp http GET /resources/files": (rp_pid, rp_http_list, 20),
        "1m/ref read_text_file 1m.txt": (ref_pid, ref_read("read_text_file", "1m.txt", MiB), 30),
        "1m/ref read_media_file 1m.bin": (ref_pid, ref_read("read_media_file", "1m.bin", MiB), 30),
        "1m/rp mcp resources/read 1m.bin (blob)": (rp_pid, rp_mcp_read("1m.bin", MiB), 60),
        "1m/rp mcp resources/read 1m.txt (text)": (rp_pid, rp_mcp_read("1m.txt", MiB), 60),
        "1m/rp http GET 1m.bin": (rp_pid, rp_http_read("1m.bin", MiB), 200),
        "4k/ref read_text_file 4k.txt": (ref_pid, ref_read("read_text_file", "4k.txt", KiB), 500),
        "4k/rp mcp resources/read 4k.bin (blob)": (rp_pid, rp_mcp_read("4k.bin", KiB), 2000),
        "4k/rp mcp resources/read 4k.txt (text)": (rp_pid, rp_mcp_read("4k.txt", KiB), 2000),
        "4k/rp http GET 4k.bin": (rp_pid, rp_http_read("4k.bin", KiB), 2000),
        "4k/rp http GET 4k.txt": (rp_pid, rp_http_read("4k.txt", KiB), 2000),
        "4k/rp http GET 404": (rp_pid, rp_http_missing, 2000),
        "4k/rp mcp ping (floor)": (rp_pid, rp_mcp_floor("ping"), 2000),
        "4k/rp mcp resources/templates/list (floor)": (rp_pid, rp_mcp_floor("resources/templates/list"), 2000),
        "4k/rp mcp resources/read refused (floor)": (rp_pid, rp_mcp_refused_read(), 2000),
        f"4k/rp mcp {STATELESS} resources/read 4k.bin (blob)":
            (rp_pid, rp_mcp_read("4k.bin", KiB, stateless), 2000),
        f"4k/rp mcp {STATELESS} resources/read 4k.txt (text)":
            (rp_pid, rp_mcp_read("4k.txt", KiB, stateless), 2000),
        f"4k/rp mcp {STATELESS} resources/templates/list (floor)":
            (rp_pid, rp_mcp_floor("resources/templates/list", stateless), 2000),
        # The least MCP server D-18 allows (bench/floors, mcp_floor): the SDK, a session, the
        # operator read, the answer and its trace line, and nothing else.
        "4k/floor mcp resources/read 4k.bin (blob)":
            (floor_pid, rp_mcp_read("4k.bin", KiB, floor, floor_url), 2000),
        "4k/floor mcp resources/read 4k.txt (text)":
            (floor_pid, rp_mcp_read("4k.txt", KiB, floor, floor_url), 2000),
        "4k/floor mcp ping": (floor_pid, rp_mcp_floor("ping", floor), 2000),
        f"4k/floor mcp {STATELESS} resources/read 4k.bin (blob)":
            (floor_pid, rp_mcp_read("4k.bin", KiB, floor_stateless, floor_url), 2000),
        f"4k/floor mcp {STATELESS} resources/read 4k.txt (text)":
            (floor_pid, rp_mcp_read("4k.txt", KiB, floor_stateless, floor_url), 2000),
    }
    names = list(cases)
    # A warm-up round, not recorded: page cache, the servers' caches, the JIT.
    for name in names:
        cases[name][1]()
    samples = {name: {"wall": [], "cpu": []} for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            pid, op, batch = cases[name]
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            for _ in range(batch):
                op()
            t1, c1 = time.perf_counter(), cpu_seconds(pid)
            samples[name]["wall"].append((t1 - t0) / batch)
            samples[name]["cpu"].append((c1 - c0) / batch)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    for name in names:
        wall, cpu = samples[name]["wall"], samples[name]["cpu"]
        print(json.dumps({"case": name, "batch": cases[name][2], "rounds": rounds,
                          "wall_ms": statistics.median(wall) * 1e3,
                          "cpu_ms": statistics.median(cpu) * 1e3,
                          "cpu_ms_min": min(cpu) * 1e3, "cpu_ms_max": max(cpu) * 1e3}))
    print(json.dumps({"versions": {"reference": ref.server_info, "resource-plane": mcp.server_info}}))
    ref.close()


def ab(url, rp_pid, floor_url, floor_pid, rounds, batch):
    """resource-plane's HTTP read, its `resources/read` and the least MCP server's of the same
    4 KiB file, alternating, nothing else running between them: server CPU per request, medians
    over rounds, as a markdown table."""
    mcp, floor = HttpMcp(url), HttpMcp(floor_url)
    target = f"{url}/resources/files/4k.bin"

    def read(client, base):
        uri = file_uri(base, "4k.bin")

        def run():
            served, got = client.read(uri)
            assert served and len(got) == 4096, got if not served else len(got)
        return run

    def get():
        assert len(http_get(target)) == 4096

    cases = {
        "rp http GET 4k.bin": (rp_pid, get),
        "rp mcp resources/read 4k.bin": (rp_pid, read(mcp, url)),
        "floor mcp resources/read 4k.bin": (floor_pid, read(floor, floor_url)),
    }
    names = list(cases)
    for _, op in cases.values():
        for _ in range(100):
            op()
    cpu = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            pid, op = cases[name]
            c0 = cpu_seconds(pid)
            for _ in range(batch):
                op()
            cpu[name].append((cpu_seconds(pid) - c0) / batch)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    med = {name: statistics.median(cpu[name]) * 1e3 for name in names}
    http, ours, least = med[names[0]], med[names[1]], med[names[2]]
    print(f"| {rounds} rounds of {batch} | server CPU ms | / HTTP GET |")
    print("| --- | ---: | ---: |")
    for name in names:
        print(f"| {name} | {med[name]:.4f} | {med[name] / http:.2f}x |")
    print(f"\nresource-plane / the least MCP server: **{ours / least:.2f}x**")


if __name__ == "__main__":
    if sys.argv[1] == "escapes":
        split = sys.argv.index("--")
        refs = [tuple(arg.split("=", 1)) for arg in sys.argv[2:split]]
        escapes(refs, sys.argv[split + 1], sys.argv[split + 2])
    elif sys.argv[1] == "perf":
        perf(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6]),
             sys.argv[7], int(sys.argv[8]))
    elif sys.argv[1] == "ab":
        ab(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
           int(sys.argv[7]))
    else:
        sys.exit(__doc__)
