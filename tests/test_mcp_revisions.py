"""``pooler mcp`` to the official SDK client at each revision it speaks: 2025-06-18 (the initialize
handshake) and 2026-07-28 (no handshake, the version in ``_meta`` of every request), over stdio and
over streamable HTTP."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import ROOT, Store
from mcpkit import SERVER, answer_of, http_server, token_file

pytestmark = pytest.mark.process

ECHO = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


@asynccontextmanager
async def client_at(revision: str, server: Any) -> AsyncIterator[Any]:
    """The SDK's ``Client`` speaking ``revision`` to ``server`` (stdio parameters, or a URL and token)."""
    from mcp.client import Client  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415
    from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: PLC0415

    mode = "legacy" if revision != "2026-07-28" else revision
    if isinstance(server, tuple):
        url, token = server
        async with (create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
                    Client(streamable_http_client(url, http_client=http), mode=mode) as client):
            yield client
    else:
        from mcp.client.stdio import stdio_client  # noqa: PLC0415

        # The server's stderr into a file of its own: the SDK's default is the sys.stderr of when it
        # was imported, which under pytest may be a capture with no file descriptor to give a child.
        with tempfile.TemporaryFile("w+") as err:
            async with Client(stdio_client(server, errlog=err), mode=mode) as client:
                yield client


def exercise(revision: str, server: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import mcp.client.session  # noqa: PLC0415

    if revision != "2026-07-28":
        # The SDK's client offers its newest handshake revision; an older client offers its own.
        monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", revision)

    async def scenario() -> dict[str, Any]:
        async with client_at(revision, server) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            listed = answer_of(await client.call_tool("tool_list", {"unit": "MELBIS_AGENT_TEST"}))
            ran = answer_of(await client.call_tool("tool_run", {**ECHO, "params": {"n": 1}}))
            pooled = answer_of(await client.call_tool("tool_pool", {"pool": [{**ECHO, "params": {"n": 2}}]}))
            return {"version": client.session.protocol_version, "tools": tools, "listed": listed["result"],
                    "ran": ran["detail"], "pooled": pooled["steps"][0]["detail"]}
    return anyio.run(scenario)


EXPECTED = {"tools": ["pool_run", "tool_list", "tool_pool", "tool_run"], "listed": True, "ran": {"n": 1},
            "pooled": {"n": 2}}


@pytest.mark.parametrize("revision", ["2025-06-18", "2026-07-28"])
def test_the_sdk_client_at_each_revision_is_served_over_stdio(store: Store, out: Path, revision: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp.client.stdio import StdioServerParameters  # noqa: PLC0415

    params = StdioServerParameters(command=sys.executable, cwd=ROOT, args=[
        *SERVER, "--store", store.url, "--token-file", str(token_file(store, out)), "--out", str(out)])
    assert exercise(revision, params, monkeypatch) == {"version": revision, **EXPECTED}


@pytest.mark.parametrize("revision", ["2025-06-18", "2026-07-28"])
def test_the_sdk_client_at_each_revision_is_served_over_http(store: Store, out: Path, revision: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with http_server(store, out) as server:
        answers = exercise(revision, (server.url, server.token), monkeypatch)
    assert answers == {"version": revision, **EXPECTED}
