"""The MCP Inspector's command line (``npx @modelcontextprotocol/inspector --cli``) against ``pooler
mcp``, over stdio and over streamable HTTP: it fills tool arguments from ``--tool-arg key=value``
text, and 0.15.0 converts a value to a list, object, number or boolean only when the input schema
declares that one type.

Installed by .ci/run (see ``mcpkit.INSTALL``); skipped with the reason without it, failed instead
when POOLER_REQUIRE_INSPECTOR=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store
from mcpkit import SERVER, HttpServer, check_answer, http_server, inspector, token_file

from pooler.mcp.schemas import TOOLS

# Every test here talks to `pooler mcp` as an MCP client does: a server process of its own.
pytestmark = pytest.mark.process

POOL_ARG = "pool=" + json.dumps([
    {"name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
     "params": {"skey": "EUR", "name": "Euro", "multiplex": 44.2}},
    {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"id": "@cur.id"}}])
RUN_ARGS = ["--tool-arg", "unit=MELBIS_AGENT_TEST", "--tool-arg", "command=CmdEcho",
            "--tool-arg", 'params={"n": 7, "tags": ["a", "b"]}', "--tool-arg", "debug=true"]
SCHEMAS = {t.name: t.output_schema for t in TOOLS}


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def call(target: list[str], version: str, tool: str, *args: str) -> dict[str, Any]:
    """One tools/call through the Inspector's CLI; its JSON result, checked against the schema."""
    argv = [*inspector(version), *target, "--method", "tools/call", "--tool-name", tool, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["isError"] is False, result
    schema = SCHEMAS[tool]
    assert schema is not None
    check_answer(schema, tool, result["structuredContent"])
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    answer: dict[str, Any] = result["structuredContent"]
    return answer


def stdio_target(store: Store, out: Path) -> list[str]:
    return [sys.executable, *SERVER, "--store", store.url, "--token-file", str(token_file(store, out)),
            "--out", str(out)]


def http_target(server: HttpServer) -> list[str]:
    return [server.url, "--transport", "http", "--header", f"Authorization: Bearer {server.token}"]


def check_answers(store: Store, pooled: dict[str, Any], ran: dict[str, Any]) -> None:
    assert pooled["result"] is True, pooled
    cur, echo = pooled["steps"]
    assert isinstance(cur["detail"]["id"], int)
    assert echo["detail"] == {"id": cur["detail"]["id"]}
    assert ran["detail"] == {"n": 7, "tags": ["a", "b"]}
    assert {"sql", "sql_ms"} <= set(ran["time"])
    commands = [(op["unit"], op["command"]) for op in store.ops()]
    assert commands == [("MELBIS_AGENT_CURRENCY", "CmdAdd"), ("MELBIS_AGENT_TEST", "CmdEcho"),
                        ("MELBIS_AGENT_TEST", "CmdEcho")]


def test_the_inspector_015_sends_a_list_to_tool_pool_and_params_to_tool_run_over_stdio(
        store: Store, out: Path) -> None:
    target = stdio_target(store, out)
    pooled = call(target, "0.15.0", "tool_pool", "--tool-arg", POOL_ARG)
    ran = call(target, "0.15.0", "tool_run", *RUN_ARGS)
    check_answers(store, pooled, ran)


def test_the_inspector_sends_a_list_to_tool_pool_and_params_to_tool_run_over_http(store: Store,
                                                                                 out: Path) -> None:
    with http_server(store, out) as server:
        pooled = call(http_target(server), "0.21.2", "tool_pool", "--tool-arg", POOL_ARG)
        ran = call(http_target(server), "0.21.2", "tool_run", *RUN_ARGS)
    check_answers(store, pooled, ran)


def test_the_inspector_without_the_token_is_turned_away_with_401(store: Store, out: Path) -> None:
    with http_server(store, out) as server:
        # 0.15.0 sends no headers at all: it is any client that does not have the token.
        done = subprocess.run([*inspector("0.15.0"), server.url, "--transport", "http", "--method",
                               "tools/list"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                              check=False)
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert ('Streamable HTTP error: Error POSTing to endpoint: {"error": "invalid_token", '
            '"error_description": "pooler mcp needs Authorization: Bearer <token> on every request') in said
    assert store.ops() == []
