"""Checks a running capsule's agent card with the A2A Python SDK (`a2a-sdk`), as A2A clients read it.

Usage: a2a_card_check.py BASE_URL

BASE_URL is the capsule's listener (`http://127.0.0.1:PORT`). The card must pass:

* the SDK's A2A 1.0 model: the client's own card resolver (`A2ACardResolver`, which parses the
  card into the protobuf `AgentCard`), then `validate_proto_required_fields`; and a strict parse
  of the card without its 0.3-only fields, so a misspelt 1.0 field is not silently ignored;
* the SDK's A2A 0.3 model, `a2a.compat.v0_3.types.AgentCard` (pydantic), as it is and, on the
  card without its 1.0-only `supportedInterfaces`, with extra fields refused.

Then a JSON-RPC call to the card's `url` must get a JSON-RPC error object the 0.3 model
accepts (`JSONRPCErrorResponse`, code -32601) with status 200, and a POST to the card its own
405. Prints one line per check and exits 1 at the first failure.
"""

import asyncio
import json
import sys
import urllib.error
import urllib.request

import httpx
from google.protobuf.json_format import ParseDict

from a2a.client.card_resolver import A2ACardResolver
from a2a.compat.v0_3 import types as v03
from a2a.types.a2a_pb2 import AgentCard as AgentCardV10
from a2a.utils.proto_utils import validate_proto_required_fields

CARD_PATH = "/.well-known/agent-card.json"
# Fields only A2A 0.3 defines; a 1.0 reader drops them (the SDK's resolver maps them).
ONLY_V03 = ("url", "protocolVersion", "preferredTransport", "additionalInterfaces")
# Fields only A2A 1.0 defines; a 0.3 reader ignores them.
ONLY_V10 = ("supportedInterfaces",)


def request(method, url, body=None):
    """(status, headers, body bytes) of one request, whatever the status."""
    data = body.encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers, answer.read()


def check(ok, what, detail=""):
    if not ok:
        print(f"FAIL: {what} {detail}")
        sys.exit(1)
    print(f"ok: {what}")


async def resolve_v10(base):
    async with httpx.AsyncClient() as client:
        return await A2ACardResolver(client, base).get_agent_card()


def strict(model_class):
    """The 0.3 model refusing fields it does not define, so a misspelt field fails."""
    return type(
        "Strict" + model_class.__name__,
        (model_class,),
        {"model_config": {**model_class.model_config, "extra": "forbid"}},
    )


def main(base):
    base = base.rstrip("/")
    status, headers, body = request("GET", base + CARD_PATH)
    check(status == 200, "GET the card answers 200", status)
    check(headers.get("content-type") == "application/json", "the card is application/json")
    card = json.loads(body)

    # A2A 1.0: the SDK's own client path, then its required-field validation.
    v10 = asyncio.run(resolve_v10(base))
    validate_proto_required_fields(v10)
    check(v10.name == card["name"], "1.0: the SDK's resolver reads the card", v10.name)
    check(len(v10.skills) >= 1, "1.0: at least one skill")
    check(
        [i.protocol_binding for i in v10.supported_interfaces] == ["JSONRPC"],
        "1.0: one JSON-RPC interface",
    )
    only_v10 = {k: v for k, v in card.items() if k not in ONLY_V03}
    validate_proto_required_fields(ParseDict(only_v10, AgentCardV10(), ignore_unknown_fields=False))
    check(True, "1.0: strict parse, every field known, every required field present")

    # A2A 0.3: the compat pydantic model, extra fields refused.
    v03_only = {k: v for k, v in card.items() if k not in ONLY_V10}
    v03.AgentCard.model_validate(card)
    v03_card = strict(v03.AgentCard).model_validate(v03_only)
    check(v03_card.protocol_version == "0.3.0", "0.3: protocolVersion 0.3.0", v03_card.protocol_version)
    check(v03_card.url == card["supportedInterfaces"][0]["url"], "0.3: url is the JSON-RPC interface's")
    check(len(v03_card.skills) >= 1, "0.3: at least one skill")

    # The advertised JSON-RPC URL answers a JSON-RPC error, never a bare 404.
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}})
    status, headers, body = request("POST", card["url"], call)
    check(status == 200, "POST to the JSON-RPC url answers 200", status)
    check(headers.get("content-type") == "application/json", "the JSON-RPC answer is application/json")
    error = v03.JSONRPCErrorResponse.model_validate_json(body)
    check(error.error.code == -32601, "the JSON-RPC answer is error -32601", body)
    check(
        json.loads(body)
        == {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": "this capsule serves files only"}},
        "the JSON-RPC error object is exactly the documented one",
        body,
    )

    # The card's own 405.
    status, headers, body = request("POST", base + CARD_PATH, "{}")
    check(status == 405 and headers.get("allow") == "GET", "POST to the card answers 405, allow: GET", status)
    check("/resources" not in json.loads(body)["message"], "the card's 405 is about the card", body)
    print("a2a-sdk: the card validates with the 1.0 and 0.3 models")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
