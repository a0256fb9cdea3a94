"""Raw JSON-RPC at MCP 2026-07-28 over HTTP, for what the SDK client has no verbs for: the Tasks
extension's tools/call answered with a task, tasks/get, tasks/cancel."""

from __future__ import annotations

import itertools
import json
from typing import Any

import requests

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
_ids = itertools.count(1)


def rpc(url: str, token: str, method: str, params: dict[str, Any] | None = None, *, tasks: bool = True,
        name: str | None = None) -> dict[str, Any]:
    """One request at 2026-07-28 (the client's capabilities in ``_meta``, with the Tasks extension
    unless ``tasks`` is false); the JSON-RPC response."""
    capabilities: dict[str, Any] = {"extensions": {TASKS: {}}} if tasks else {}
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities}
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**(params or {}), "_meta": meta}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    answer = requests.post(url, json=body, headers=headers, timeout=120)
    # An error of the request itself comes with a 4xx status and the JSON-RPC error as its body.
    assert answer.status_code == 200 or "error" in answer.json(), answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        for line in answer.text.splitlines():
            if line.startswith("data:"):
                message: dict[str, Any] = json.loads(line[5:])
                if message.get("id") == body["id"]:
                    return message
        raise AssertionError(f"no response in the event stream: {answer.text}")
    found: dict[str, Any] = answer.json()
    return found


def call_tool(url: str, token: str, tool: str, arguments: dict[str, Any], *,
              tasks: bool = True) -> dict[str, Any]:
    return rpc(url, token, "tools/call", {"name": tool, "arguments": arguments}, tasks=tasks, name=tool)
