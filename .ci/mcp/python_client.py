"""The Python MCP SDK's client (PyPI `mcp`) against a running capsule's /mcp (D-18.4).

Usage: python_client.py URL EXPORT_DIR

Pages through every resource and compares them with `GET URL/resources/files` (same paths,
same sha256), reads a text and a binary file and compares their bytes with the files on disk,
then subscribes to a file, rewrites it, and requires `notifications/resources/updated` for it
within 1 s. Prints one line per check and exits non-zero on the first failure.
"""

import asyncio
import base64
import hashlib
import json
import os
import sys
import time
import urllib.request

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PaginatedRequestParams


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


async def main(url, export):
    listing = json.load(urllib.request.urlopen(f"{url}/resources/files"))
    expected = {e["path"]: e["sha256"] for e in listing["entries"]}
    updates = asyncio.Queue()

    async def on_message(message):
        method = getattr(message, "method", None)
        params = getattr(message, "params", None)
        if method == "notifications/resources/updated":
            await updates.put((time.monotonic(), str(params.uri)))

    async with streamable_http_client(f"{url}/mcp") as (read, write, *_):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            print(f"ok: initialize negotiated {init.protocol_version}")
            seen = {}
            cursor = None
            pages = 0
            while True:
                page = await session.list_resources(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                pages += 1
                for resource in page.resources:
                    if resource.name in seen:
                        fail(f"{resource.name} listed twice")
                    seen[resource.name] = resource.meta["sha256"]
                cursor = page.next_cursor
                if not cursor:
                    break
            if seen != expected:
                fail(f"resources differ from the listing: {len(seen)} vs {len(expected)}")
            print(f"ok: {len(seen)} resources in {pages} pages, same paths and sha256 as the listing")

            by_name = {r: f"{url}/resources/files/{urllib.request.quote(r)}" for r in seen}
            for name, kind in (("notes.txt", "text"), ("blob.bin", "blob")):
                result = await session.read_resource(by_name[name])
                content = result.contents[0]
                got = content.text.encode() if kind == "text" else base64.b64decode(content.blob)
                with open(os.path.join(export, name), "rb") as f:
                    if got != f.read():
                        fail(f"{name}: the bytes read differ from the file")
                if content.meta["sha256"] != hashlib.sha256(got).hexdigest():
                    fail(f"{name}: _meta.sha256 is not the sha256 of the bytes")
                print(f"ok: read {name} as {kind}, byte-identical, sha256 in _meta")

            # The 2025 subscription (the SDK warns that 2026-07-28 replaced it with listen).
            await session.subscribe_resource(by_name["notes.txt"])
            await asyncio.sleep(0.3)
            latencies = []
            for round_ in range(5):
                written = time.monotonic()
                with open(os.path.join(export, "notes.txt"), "w") as f:
                    f.write(f"changed {round_}\n")
                try:
                    at, uri = await asyncio.wait_for(updates.get(), timeout=1.0)
                except asyncio.TimeoutError:
                    fail("no notifications/resources/updated within 1 s of a write")
                if uri != by_name["notes.txt"]:
                    fail(f"update for {uri}, not the subscribed file")
                latencies.append(at - written)
                await asyncio.sleep(0.3)
                while not updates.empty():
                    updates.get_nowait()
            latencies.sort()
            print(f"ok: updates within 1 s of each write, median {latencies[2] * 1000:.0f} ms")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2]))
    print("python mcp client: all checks passed")
