"""What every MCP test goes through: ``pooler mcp`` over stdio or streamable HTTP, or served in the
test's own process (``connect_in_process``), spoken to by the official SDK client, with every
structured answer checked against its tool's output schema.

The SDK client checks only the answers not marked as errors; ``CheckedSession`` checks them all,
with jsonschema, against the schemas the server declared in its tool list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import pytest
from helpers import ROOT, Store
from jsonschema import Draft202012Validator

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.client import ClientSession

SERVER = ["-m", "pooler", "mcp"]

#: Every structured answer checked so far, by tool: the suite's coverage of the output schemas.
CHECKED: dict[str, int] = {}


@cache
def session_class() -> type[ClientSession]:
    """``CheckedSession``: the SDK's client session; every tool answer's structuredContent is
    validated before a test sees it. Made when first asked for, so collecting the tests does not
    import the SDK."""
    import mcp_types as types  # noqa: PLC0415
    from mcp.client import ClientSession  # noqa: PLC0415

    class CheckedSession(ClientSession):
        """The SDK's client session; every tool answer's structuredContent is validated before a test
        sees it."""

        schemas: dict[str, dict[str, Any]]

        async def initialize(self) -> Any:  # type: ignore[override]
            found = await super().initialize()
            self.schemas = {}
            for tool in (await self.list_tools()).tools:
                assert tool.output_schema is not None, f"{tool.name} declares no output schema"
                Draft202012Validator.check_schema(tool.output_schema)
                self.schemas[tool.name] = tool.output_schema
            return found

        async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None,  # type: ignore[override]
                            **kw: Any) -> types.CallToolResult:
            result = await super().call_tool(name, arguments, **kw)
            assert isinstance(result, types.CallToolResult)
            if result.structured_content is not None and name in self.schemas:
                check_answer(self.schemas[name], name, result.structured_content)
            return result

    return CheckedSession


def checked_session(read: Any, write: Any) -> Any:
    """A ``CheckedSession`` on the streams ``read`` and ``write``."""
    return session_class()(read, write)


def check_answer(schema: dict[str, Any], tool: str, answer: Any) -> None:
    errors = sorted(Draft202012Validator(schema).iter_errors(answer), key=lambda e: list(e.path))
    assert not errors, f"{tool} answered outside its output schema: " + "; ".join(
        f"{'/'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors)
    CHECKED[tool] = CHECKED.get(tool, 0) + 1


def token_file(store: Store, out: Path) -> Path:
    path = out.parent / "token"
    path.write_text(store.token + "\n", encoding="utf-8")
    return path


def stdio_args(store: Store, out: Path, extra: tuple[str, ...]) -> list[str]:
    """The arguments of ``pooler mcp`` over stdio for ``store``, its store folder ``out``, and ``extra``."""
    return ["--store", store.url, "--token-file", str(token_file(store, out)), "--out", str(out), *extra]


@asynccontextmanager
async def connect(store: Store, out: Path, *extra: str,
                  env: Mapping[str, str] | None = None) -> AsyncIterator[Any]:
    """A pooler mcp process on stdio, initialized, speaking to ``store``; ``env``: its whole
    environment (the SDK's default keeps only a few variables, HOME among them)."""
    from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415

    params = StdioServerParameters(
        command=sys.executable, cwd=ROOT, env=dict(env) if env is not None else None,
        args=[*SERVER, *stdio_args(store, out, extra)])
    with (out.parent / "mcp-stderr.log").open("a", encoding="utf-8") as err:
        async with stdio_client(params, errlog=err) as (read, write), checked_session(read, write) as session:
            await session.initialize()
            yield session


#: Seconds the server in the test's process has to end once its client has closed its side (it ends
#: at once: its pending handlers are cancelled, their threads left to finish).
STOP_WITHIN = 30


@asynccontextmanager
async def connect_in_process(store: Store, out: Path, *extra: str,
                             env: Mapping[str, str] | None = None) -> AsyncIterator[Any]:
    """``pooler mcp`` as ``connect`` starts it, served in the test's own process: the tools the
    command makes of the same arguments (``prepare``), on the stdio process's environment (the SDK's
    default), served by the code that serves stdio, over the SDK's memory streams to the same
    ``CheckedSession``. A process costs over a second of CPU (importing the SDK and pooler), so
    this is for every test whose behaviour is not the process's own. ``env``: the whole
    environment the command is given, as ``connect``'s.

    An exception of the server fails the test (its handlers' exceptions end it), and the tools are
    closed, as the command closes them, once the server has ended."""
    from mcp.client.stdio import get_default_environment  # noqa: PLC0415
    from mcp.shared.memory import create_client_server_memory_streams  # noqa: PLC0415

    from pooler.cli.commands.mcp_cmd import prepare  # noqa: PLC0415
    from pooler.mcp.server import serve_streams  # noqa: PLC0415

    with (out.parent / "mcp-stderr.log").open("a", encoding="utf-8") as err:
        environ = get_default_environment() if env is None else env
        serving = prepare(stdio_args(store, out, extra), stderr=err, environ=environ)
        assert serving.listen is None, "connect_in_process serves as stdio does; start_http serves --http"
        try:
            async with create_client_server_memory_streams() as ((read, write), (server_read, server_write)):
                ended = anyio.Event()

                async def serve() -> None:
                    try:
                        await serve_streams(serving.tools, server_read, server_write, serving.suite,
                                            raise_exceptions=True)
                    finally:
                        ended.set()

                async with anyio.create_task_group() as group:
                    group.start_soon(serve)
                    try:
                        async with checked_session(read, write) as session:
                            await session.initialize()
                            yield session
                    finally:
                        # The end of the server's input, as closing a process's stdin is.
                        await write.aclose()
                        with anyio.fail_after(STOP_WITHIN):
                            await ended.wait()
        finally:
            # Off the event loop: close waits for a pool still finishing, whose threads may need the
            # loop (progress) until they see the session gone.
            await anyio.to_thread.run_sync(serving.tools.close)


@dataclass
class HttpServer:
    """A running ``pooler mcp --http`` process."""

    url: str
    token: str
    proc: subprocess.Popen[str]
    #: The token line it printed ("token: ..."), or None when the token came from a file.
    printed: str | None

    def stop(self) -> str:
        """Stop it (SIGTERM) and give what it wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def start_http(store: Store, out: Path, *extra: str, token: str | None = None,
               token_mode: int = 0o600) -> HttpServer:
    """``pooler mcp --http 127.0.0.1:0`` for ``store``; with ``token`` its --http-token-file holds it."""
    args = [sys.executable, *SERVER, "--http", "127.0.0.1:0", "--store", store.url,
            "--token-file", str(token_file(store, out)), "--out", str(out), *extra]
    if token is not None:
        path = out.parent / "http-token"
        path.write_text(token + "\n", encoding="utf-8")
        path.chmod(token_mode)
        args += ["--http-token-file", str(path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLER_")}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=env)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"pooler mcp --http did not start: {url!r} {err}")
    printed = None
    if token is None:
        printed = proc.stdout.readline().strip()
        token = printed.removeprefix("token: ")
    return HttpServer(url=url, token=token, proc=proc, printed=printed)


@contextmanager
def http_server(store: Store, out: Path, *extra: str, token: str | None = None) -> Iterator[HttpServer]:
    server = start_http(store, out, *extra, token=token)
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def connect_http(server: HttpServer, token: str | None = None) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client on ``server``, with its bearer token."""
    headers = {"Authorization": f"Bearer {token if token is not None else server.token}"}
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415
    from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: PLC0415

    async with (create_mcp_http_client(headers=headers) as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                checked_session(read, write) as session):
        await session.initialize()
        yield session


def answer_of(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON answer: one text block, and the same object as structuredContent."""
    import mcp_types as types  # noqa: PLC0415

    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    parsed: dict[str, Any] = json.loads(block.text)
    assert result.structured_content == parsed
    return parsed


def text_of(result: types.CallToolResult) -> str:
    """A refusal as text: one text block, no JSON beside it, marked as an error."""
    import mcp_types as types  # noqa: PLC0415

    assert result.is_error is True
    assert result.structured_content is None
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# The MCP Inspector's command line (npm @modelcontextprotocol/inspector), installed under tests/.node:
# 0.15.0, whose --tool-arg converts a value only for a single declared type, and 0.21.2 (as
# inspector-http), the first line of releases whose CLI sends HTTP headers (--header), so it can
# give the token.  Both run on the Node.js 22 that npm's node package installs beside them.

NODE_DIR = ROOT / "tests" / ".node"
REQUIRE_INSPECTOR = "POOLER_REQUIRE_INSPECTOR"
INSTALL = ("npm install --prefix tests/.node --no-audit --no-fund node@22 "
           "@modelcontextprotocol/inspector@0.15.0 inspector-http@npm:@modelcontextprotocol/inspector@0.21.2")
INSPECTORS = {"0.15.0": "@modelcontextprotocol/inspector", "0.21.2": "inspector-http"}


def inspector(version: str) -> list[str]:
    """The command that runs that Inspector's CLI; skips (or fails, when required) without it."""
    modules = NODE_DIR / "node_modules"
    cli = modules / INSPECTORS[version] / "cli" / "build" / "cli.js"
    # The binary of npm's node package (its .bin link is made by an install script npm may hold back).
    node = modules / "node" / "bin" / "node"
    if not cli.is_file() or not node.is_file():
        why = f"the MCP Inspector {version} is not installed in {NODE_DIR} - {INSTALL}"
        if os.environ.get(REQUIRE_INSPECTOR) == "1":
            pytest.fail(f"{why}; {REQUIRE_INSPECTOR}=1 asks for these tests to run")
        pytest.skip(why)
    return [str(node), str(cli), "--cli"]
