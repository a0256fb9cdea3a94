"""``pooler mcp``: the engine as an MCP server over stdio, with tool_list, tool_run and tool_pool.

Store calls block, so every tool call runs in a worker thread and the event loop stays free for
the protocol (pings, cancellation, progress).  A cancelled tool_pool starts no further step; the
steps already in flight finish.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

import pooler
from pooler.cli.commands.common import Context, add_store_options, make_client
from pooler.cli.commands.monitoring import add_monitoring_options, start_tracing
from pooler.client.http import ToolRunClient
from pooler.errors import PoolerError
from pooler.exits import ExitStatus
from pooler.mcp.arguments import check_task
from pooler.mcp.monitor import ToolWatch
from pooler.mcp.outcome import Outcome, problems_text, refused
from pooler.mcp.schemas import TOOLS
from pooler.mcp.tool_pool import PoolRuns
from pooler.mcp.tool_run import StoreCalls
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.events import CallEnd, Reporter
from pooler.run.journal_api import JOURNAL_ENV
from pooler.shared.schema import is_postgres

log = logging.getLogger("pooler.mcp")

INSTRUCTIONS = (
    "Runs the AI tools of one store. tool_list shows the tools, their commands and fields; tool_run "
    "carries out one command; tool_pool carries out many in one call. Tables come back as files with "
    "their first rows; relative paths are taken from the server's store folder."
)


def session_task() -> str:
    """The task of this server process: keyed steps of its tool_pool calls run once within it."""
    return f"mcp-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


class PoolerTools:
    """The three tools, synchronous: each call gives an ``Outcome`` and never raises a PoolerError."""

    def __init__(self, client: ToolRunClient, out: Path, task: str, redactor: Redactor,
                 journal: str | None = None, *, watch: ToolWatch | None = None) -> None:
        self.redactor = redactor
        self.watch = watch
        self.calls = StoreCalls(client, out)
        self.pools = PoolRuns(client, out, task, redactor, journal=journal)

    def call(self, name: str, arguments: Mapping[str, Any], *, reporter: Reporter | None = None,
             stop: threading.Event | None = None) -> Outcome:
        if self.watch is None:
            return self._call(name, arguments, reporter, stop)
        return self.watch.call(name, lambda heard: self._call(name, arguments, heard, stop), reporter)

    def _call(self, name: str, arguments: Mapping[str, Any], reporter: Reporter | None,
              stop: threading.Event | None) -> Outcome:
        try:
            if name == "tool_list":
                outcome = self.calls.tool_list(arguments)
            elif name == "tool_run":
                outcome = self.calls.tool_run(arguments)
            else:
                outcome = self.pools.run(arguments, reporter=reporter, stop=stop)
        except PoolerError as exc:
            outcome = refused(problems_text(exc.problems()))
        except Exception as exc:
            # The agent gets a refusal and the server stays up; the traceback goes to stderr.
            log.exception("internal error in %s", name)
            outcome = refused(f"pooler: internal error: {type(exc).__name__}: {exc}")
        return outcome.redacted(self.redactor)

    def close(self) -> None:
        """Waits for a pool still finishing its calls in flight, then lets go of the journal."""
        self.pools.close()
        self.calls.client.close()
        if self.watch is not None:
            self.watch.close()


class Progress:
    """Tells the MCP client how far a pool has got, when it asked to be told (a progress token)."""

    def __init__(self, session: ServerSession, token: anyio.lowlevel.EventLoopToken) -> None:
        self._session = session
        self._token = token
        self._lock = threading.Lock()
        self._done = 0
        self._total: int | None = None

    def _send(self, done: int, message: str) -> None:
        try:
            anyio.from_thread.run(self._session.report_progress, float(done),
                                  float(self._total) if self._total else None, message, token=self._token)
        except Exception:
            # Progress is a courtesy: a closed session must not stop a pool.
            log.debug("progress not sent", exc_info=True)

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        with self._lock:
            self._total = total
        self._send(0, f"task {task_id}: {total} calls")

    def step_started(self, step: Step, call: int) -> None:
        return None

    def call_ended(self, step: Step, end: CallEnd, result: dict[str, Any]) -> None:
        return None

    def step_finished(self, step: Step, result: dict[str, Any]) -> None:
        with self._lock:
            self._done += 1
            done = self._done
        self._send(done, f"step {step.num} {step.label} {step.unit}.{step.command}: {result.get('status')}")

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        return None

    def calls_planned(self, total: int) -> None:
        with self._lock:
            self._total = total

    def pool_finished(self, answer: dict[str, Any]) -> None:
        return None


def _result(outcome: Outcome) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=outcome.text)],
                                structured_content=outcome.answer, is_error=outcome.is_error)


def build_server(tools: PoolerTools) -> Server[Any]:
    """The MCP server: the three tools' declarations and one handler that runs them in threads."""
    names = {t.name for t in TOOLS}

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(types.INVALID_PARAMS,
                           f"Unknown tool [{params.name}] - this server has: {', '.join(sorted(names))}.")
        stop = threading.Event()
        progress = Progress(ctx.session, anyio.lowlevel.current_token())
        run = functools.partial(tools.call, params.name, params.arguments or {}, reporter=progress, stop=stop)
        try:
            outcome = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            stop.set()
            raise
        return _result(outcome)

    return Server("pooler", version=pooler.__version__, title="pooler",
                  instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(tools: PoolerTools) -> None:
    server = build_server(tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pooler mcp",
        description="Serve tool_list, tool_run and tool_pool to an MCP client (an agent) over stdio.",
    )
    add_store_options(parser)
    parser.add_argument("--out", metavar="DIR", default="out",
                        help="the store folder: tables, jobs and the journal go here, and relative paths "
                             "in calls are taken from here (default ./out)")
    parser.add_argument("--task", metavar="ID",
                        help="the task keyed steps are remembered under (default: a new one per process)")
    parser.add_argument("--journal", metavar="URL",
                        help="a PostgreSQL journal, postgresql://... (env POOLER_JOURNAL); default: "
                             "<out>/.pooler/journal.sqlite")
    add_monitoring_options(parser, what="server")
    return parser


def main(argv: list[str]) -> int:
    """Run the server until the client closes stdin; 2 when the store or a flag is wrong."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pooler mcp: %(message)s")
    # stdout is the protocol's wire: every word for people goes to stderr, which MCP clients log.
    ctx = Context(stdout=sys.stderr, stderr=sys.stderr, environ=os.environ)
    try:
        client: ToolRunClient = make_client(args, ctx)
        task = session_task()
        if args.task is not None:
            task = check_task(args.task, task)
        tracing = start_tracing(args, ctx)
    except PoolerError as exc:
        sys.stderr.write(f"pooler mcp: {exc.render()}\n")
        return ExitStatus.REFUSED
    spec = args.journal or os.environ.get(JOURNAL_ENV)
    if spec is not None and not is_postgres(spec):
        sys.stderr.write("pooler mcp: --journal takes a PostgreSQL URL (postgresql://...); the SQLite "
                         "journal lives in <out>/.pooler/journal.sqlite\n")
        return ExitStatus.REFUSED
    if tracing is not None:
        client.call_headers = tracing.headers
    watch = None
    if tracing is not None or args.metrics_file:
        watch = ToolWatch(ctx.redactor, client.label, metrics_file=args.metrics_file, tracing=tracing,
                          warn=ctx.note)
    tools = PoolerTools(client, Path(args.out).expanduser().resolve(), task, ctx.redactor, journal=spec,
                        watch=watch)
    try:
        anyio.run(serve, tools)
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    finally:
        tools.close()
    return ExitStatus.OK
