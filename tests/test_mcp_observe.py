"""``pooler mcp --metrics-file --trace``, driven by the MCP SDK's own client: the server's metrics
file read by Prometheus' parser, and one trace per tool call as a real OTLP receiver decodes it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import ROOT, Store, pooler
from mcpkit import checked_session
from promcheck import metrics_files_pass_promtool  # noqa: F401 - autouse: each file passes promtool
from test_metrics_file import samples_of, value
from test_traces import attrs, otlp_receiver

TEST = "MELBIS_AGENT_TEST"


@pytest.mark.process
def test_each_tool_call_of_pooler_mcp_is_one_trace_and_the_metrics_file_counts_its_pools(
        store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    token = tmp_path / "token"
    token.write_text(store.token + "\n", encoding="utf-8")
    metrics = tmp_path / "mcp.prom"
    pool: dict[str, Any] = {"pool": [
        {"name": "first", "unit": TEST, "command": "CmdEcho", "params": {"n": 1}},
        {"unit": TEST, "command": "CmdEcho", "params": {"m": "@first.n"}},
        {"unit": TEST, "command": "CmdFail"}], "stop_on_error": False}

    with otlp_receiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("POOLER_", "OTEL_"))}
        env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "agent-tools"})
        from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415

        params = StdioServerParameters(
            command=sys.executable, cwd=ROOT, env=env,
            args=["-m", "pooler", "mcp", "--store", store.url, "--token-file", str(token), "--out", str(out),
                  "--metrics-file", str(metrics), "--trace"])

        async def scenario() -> None:
            with (tmp_path / "mcp-stderr.log").open("a", encoding="utf-8") as err:
                async with stdio_client(params, errlog=err) as (read, write), \
                        checked_session(read, write) as session:
                    await session.initialize()
                    single = await session.call_tool("tool_run", {"unit": TEST, "command": "CmdEcho",
                                                                  "params": {"alone": True}})
                    assert single.is_error is False
                    pooled = await session.call_tool("tool_pool", pool)
                    assert pooled.is_error is True
                    # The server is running: the file says so, and counts the pool's calls.
                    got = samples_of(metrics.read_text(encoding="utf-8"))
                    assert value(got, "pooler_run_in_progress") == 1
                    assert value(got, "pooler_calls_total", status="completed") == 2
                    assert value(got, "pooler_calls_total", status="failed") == 1

        anyio.run(scenario)
    got = samples_of(metrics.read_text(encoding="utf-8"))
    assert value(got, "pooler_run_in_progress") == 0
    assert value(got, "pooler_calls_total", status="completed", pool="mcp") == 2
    assert value(got, "pooler_run_success") == 0
    spans = receiver.spans
    tools = {s.name: s for s in spans if s.name.startswith("mcp ")}
    assert sorted(tools) == ["mcp tool_pool", "mcp tool_run"]
    assert all(s.parent_span_id == b"" for s in tools.values())
    # One trace per tool call.
    assert tools["mcp tool_run"].trace_id != tools["mcp tool_pool"].trace_id
    assert {s.trace_id for s in spans} == {s.trace_id for s in tools.values()}
    run = next(s for s in spans if s.name == "pooler run")
    assert run.parent_span_id == tools["mcp tool_pool"].span_id
    calls = [s for s in spans if s.name.startswith("call ")]
    assert len(calls) == 3
    assert all(c.trace_id == run.trace_id for c in calls)
    assert attrs(tools["mcp tool_pool"])["pooler.mcp.is_error"] is True
    ops = store.ops()
    # The lone tool_run carries its tool call's span; each pooled call its own.
    lone = tools["mcp tool_run"]
    assert ops[0]["traceparent"].startswith(f"00-{lone.trace_id.hex()}-{lone.span_id.hex()}-")
    heads = {f"00-{c.trace_id.hex()}-{c.span_id.hex()}" for c in calls}
    assert {op["traceparent"].rsplit("-", 1)[0] for op in ops[1:]} <= heads
    assert len(ops) == 4  # CmdFail runs, and refuses


def test_pooler_mcp_refuses_a_metrics_file_it_could_not_write_before_it_serves(
        store: Store, tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / "mcp.prom"
    done = pooler("mcp", "--store", store.url, "--out", str(tmp_path / "out"), "--metrics-file", str(where),
                  env={"POOLER_TOKEN": store.token})
    assert done.returncode == 2
    assert done.stderr == (f"pooler mcp: --metrics-file {where}: the folder {where.parent} does not exist - "
                           "create it (node_exporter's --collector.textfile.directory), or name a file in a "
                           "folder that exists\n")
    assert done.stdout == ""


@pytest.mark.process
def test_a_tool_call_that_carries_the_agent_s_traceparent_joins_its_trace(store: Store,
                                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    token = tmp_path / "token"
    token.write_text(store.token + "\n", encoding="utf-8")
    agent_trace, agent_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with otlp_receiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("POOLER_", "OTEL_"))}
        env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "agent-tools"})
        from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415

        params = StdioServerParameters(
            command=sys.executable, cwd=ROOT, env=env,
            args=["-m", "pooler", "mcp", "--store", store.url, "--token-file", str(token), "--out", str(out),
                  "--trace"])

        async def scenario() -> None:
            with (tmp_path / "mcp-stderr.log").open("a", encoding="utf-8") as err:
                async with stdio_client(params, errlog=err) as (read, write), \
                        checked_session(read, write) as session:
                    await session.initialize()
                    pooled = await session.call_tool(
                        "tool_pool", {"pool": [{"unit": TEST, "command": "CmdEcho"}]},
                        meta={"traceparent": f"00-{agent_trace}-{agent_span}-01"})
                    assert pooled.is_error is False
        anyio.run(scenario)
    tool = next(s for s in receiver.spans if s.name == "mcp tool_pool")
    assert tool.trace_id.hex() == agent_trace
    assert tool.parent_span_id.hex() == agent_span
    assert {s.trace_id.hex() for s in receiver.spans} == {agent_trace}
    assert store.ops()[0]["traceparent"].startswith(f"00-{agent_trace}-")
