"""``pooler mcp``: the engine as an MCP server over stdio (or streamable HTTP, ``--http``), with
tool_list, tool_run and tool_pool.

Store calls block, so every tool call runs in a worker thread and the event loop stays free for
the protocol (pings, cancellation, progress).  A tool_pool the client cancels (its
``notifications/cancelled``) starts no further step; the steps already in flight finish.  A client
that goes away without cancelling leaves its pool running to its end, recorded in the journal,
where ``tool_pool {"task": ...}`` finds it.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from pooler.client.http import ToolRunClient
from pooler.errors import PoolerError
from pooler.journal.documents import Answer, Entry
from pooler.mcp import conformance, pool_run
from pooler.mcp.http import Listen, serve_http
from pooler.mcp.monitor import ToolWatch
from pooler.mcp.outcome import Outcome, problems_text, refused
from pooler.mcp.plans import DEFAULT_TTL
from pooler.mcp.schemas import TOOLS
from pooler.mcp.tasks import EXTENSION, NDJSON, TaskCalls, TaskIdParams, UpdateParams, declared
from pooler.mcp.tool_pool import PoolRuns
from pooler.mcp.tool_run import StoreCalls
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.events import CallEnd, Reporter
from pooler.run.storerate import StoreRate
from pooler.version import __version__

if TYPE_CHECKING:
    # The SDK's own names for the two ends its transports hand to Server.run.
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

log = logging.getLogger("pooler.mcp")

#: The tools whose call may be answered with a task (the Tasks extension, pooler/mcp/tasks.py).
LONG_TOOLS = ("pool_run", "tool_pool")

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
                 journal: str | None = None, *, pinned: bool = False,
                 plan_ttl: float = DEFAULT_TTL, watch: ToolWatch | None = None,
                 store_rate: StoreRate | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.redactor = redactor
        self.watch = watch
        self.calls = StoreCalls(client, out)
        self.pools = PoolRuns(client, out, task, redactor, journal=journal, plan_ttl=plan_ttl,
                              store_rate=store_rate, environ=environ)
        self.tasks = TaskCalls(self.pools, self.call)
        #: The operator named the task (``--task``): every session shares it.
        self.pinned = pinned
        self._sessions: dict[str, str] = {}
        self._sessions_lock = threading.Lock()

    def session_task(self, session: str | None) -> str:
        """The task of one client's session: the process's over stdio, one of its own over HTTP."""
        if session is None or self.pinned:
            return self.pools.task
        with self._sessions_lock:
            found = self._sessions.get(session)
            if found is None:
                found = self._sessions[session] = f"{self.pools.task}-{len(self._sessions) + 1}"
            return found

    def call(self, name: str, arguments: Mapping[str, Any], *, reporter: Reporter | None = None,
             stop: threading.Event | None = None, session: str | None = None,
             in_doubt: str | None = None, traceparent: str | None = None,
             resume: str | None = None) -> Outcome:
        """``in_doubt``: what the client said of the calls in doubt (retry, skip), when it was asked;
        ``traceparent``: the agent's trace, from the request's ``_meta``; ``resume``: a pool task
        whose runner died, run again from its journal (tasks/update)."""
        if self.watch is None:
            return self._call(name, arguments, reporter, stop=stop, session=session, in_doubt=in_doubt,
                              resume=resume)
        return self.watch.call(name, lambda heard: self._call(
            name, arguments, heard, stop=stop, session=session, in_doubt=in_doubt, resume=resume),
            reporter, traceparent)

    def _call(self, name: str, arguments: Mapping[str, Any], reporter: Reporter | None, *,
              stop: threading.Event | None, session: str | None, in_doubt: str | None = None,
              resume: str | None = None) -> Outcome:
        try:
            if resume is not None:
                outcome = pool_run.take_up(self.pools, resume, reporter=reporter, stop=stop,
                                           in_doubt=in_doubt)
            elif name == "tool_list":
                outcome = self.calls.tool_list(arguments)
            elif name == "tool_run":
                outcome = self.calls.tool_run(arguments)
            elif name == "pool_run":
                outcome = pool_run.call(self.pools, arguments, session_task=self.session_task(session),
                                        reporter=reporter, stop=stop, in_doubt=in_doubt)
            else:
                outcome = self.pools.call(arguments, session_task=self.session_task(session),
                                          reporter=reporter, stop=stop)
        except PoolerError as exc:
            outcome = refused(problems_text(exc.problems()))
        except Exception as exc:
            # The agent gets a refusal and the server stays up; the traceback goes to stderr.
            log.exception("internal error in %s", name)
            outcome = refused(f"pooler: internal error: {type(exc).__name__}: {exc}")
        return outcome.redacted(self.redactor)

    def close(self) -> None:
        """Stops the tasks as SIGTERM stops a run, waits for a pool still finishing its calls in
        flight, then lets go of the journal."""
        self.tasks.close()
        self.pools.close()
        self.calls.client.close()
        if self.watch is not None:
            self.watch.close()


#: Seconds between two progress notifications of a step over rows.
ROWS_EVERY = 0.5


class Progress:
    """Tells the MCP client how far a pool has got, when it asked to be told (a progress token):
    the calls done of the pool's calls, and a step over rows by its rows."""

    def __init__(self, session: ServerSession, token: anyio.lowlevel.EventLoopToken) -> None:
        self._session = session
        self._token = token
        self._lock = threading.Lock()
        self._done = 0
        self._total: int | None = None
        self._rows_told = 0.0

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

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        return None

    def step_finished(self, step: Step, result: Entry) -> None:
        with self._lock:
            self._done += 1
            done = self._done
        if step.for_each is None:
            status = result.get("status")
            self._send(done, f"step {step.num} {step.label} {step.unit}.{step.command}: {status}")

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        # A step over rows tells its rows, not each call: at most twice a second, and its last row.
        now = time.monotonic()
        with self._lock:
            if now - self._rows_told < ROWS_EVERY and done != total:
                return
            self._rows_told = now
            calls = self._done
        of = "" if total is None else f" of {total}"
        self._send(calls, f"step {step.num} {step.label} {step.unit}.{step.command}: {done}{of} rows done")

    def calls_planned(self, total: int) -> None:
        with self._lock:
            self._total = total

    def pool_finished(self, answer: Answer) -> None:
        return None


def _result(outcome: Outcome) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=outcome.text)],
                                structured_content=outcome.answer, is_error=outcome.is_error)


def cancelled_by_client(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client sent ``notifications/cancelled`` for this request.

    A request is also cancelled when its session ends (the client disconnected, or deleted its HTTP
    session); only the client's own cancel stops its pool.
    """
    channel = getattr(ctx.session, "_request_outbound", None)
    asked = getattr(channel, "cancel_requested", None)
    return isinstance(asked, anyio.Event) and asked.is_set()


def session_of(ctx: ServerRequestContext[Any]) -> str | None:
    """The HTTP session a request belongs to (None over stdio, where the process is the session)."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    found = headers.get("mcp-session-id")
    return str(found) if found else None


def traceparent_of(ctx: ServerRequestContext[Any]) -> str | None:
    """The W3C ``traceparent`` of the agent's trace, when its request carried one in ``_meta``."""
    meta = (ctx.params or {}).get("_meta")
    found = meta.get("traceparent") if isinstance(meta, dict) else None
    return found if isinstance(found, str) else None


def build_server(tools: PoolerTools, *, suite: bool = False) -> Server[Any]:
    """The MCP server: the tools' declarations and one handler that runs them in threads; with
    ``suite``, the conformance suite's own tools beside them (``--conformance-tools``)."""
    offered = TOOLS + (conformance.TOOLS if suite else ())
    names = {t.name for t in offered}

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(offered))

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(types.INVALID_PARAMS,
                           f"Unknown tool [{params.name}] - this server has: {', '.join(sorted(names))}.")
        if params.name in conformance.HANDLERS:
            return await conformance.HANDLERS[params.name](ctx)
        if params.name in LONG_TOOLS and declared(ctx):
            session = session_of(ctx)
            long = functools.partial(tools.tasks.long_task, params.name, params.arguments or {},
                                     tools.session_task(session))
            task_id = await anyio.to_thread.run_sync(long)
            if task_id is not None:
                started = await tools.tasks.start(task_id, params.name, params.arguments or {}, session,
                                                  traceparent=traceparent_of(ctx))
                if isinstance(started, Outcome):
                    return _result(started.redacted(tools.redactor))
                # The extension's CreateTaskResult, in place of the tool's result.
                return cast(types.CallToolResult, started)
        stop = threading.Event()
        progress = Progress(ctx.session, anyio.lowlevel.current_token())
        run = functools.partial(tools.call, params.name, params.arguments or {}, reporter=progress, stop=stop,
                                session=session_of(ctx), traceparent=traceparent_of(ctx))
        try:
            outcome = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            if cancelled_by_client(ctx):
                stop.set()
            raise
        return _result(outcome)

    async def get_task(ctx: ServerRequestContext[Any], params: TaskIdParams) -> dict[str, Any]:
        found = await anyio.to_thread.run_sync(tools.tasks.get, params.taskId)
        return {"resultType": "complete", **found}

    async def cancel_task(ctx: ServerRequestContext[Any], params: TaskIdParams) -> dict[str, Any]:
        return {"resultType": "complete", **await tools.tasks.cancel(params.taskId)}

    async def update_task(ctx: ServerRequestContext[Any], params: UpdateParams) -> dict[str, Any]:
        await tools.tasks.update(params.taskId, params.inputResponses)
        return {"resultType": "complete"}

    async def read_resource(ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        text = await anyio.to_thread.run_sync(tools.tasks.read, str(params.uri))
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=params.uri, mime_type=NDJSON, text=tools.redactor.text(text))])

    server = Server("pooler", version=__version__, title="pooler", instructions=INSTRUCTIONS,
                    on_list_tools=list_tools, on_call_tool=call_tool, on_read_resource=read_resource)
    server.add_request_handler("tasks/get", TaskIdParams, get_task)
    server.add_request_handler("tasks/cancel", TaskIdParams, cancel_task)
    server.add_request_handler("tasks/update", UpdateParams, update_task)
    server.extensions[EXTENSION] = {}
    return server


async def serve(tools: PoolerTools, suite: bool = False) -> None:
    async with stdio_server() as (read, write):
        await serve_streams(tools, read, write, suite)


async def serve_streams(tools: PoolerTools, read: ReadStream[SessionMessage | Exception],
                        write: WriteStream[SessionMessage], suite: bool = False, *,
                        raise_exceptions: bool = False) -> None:
    """One client on one pair of streams, until it closes its side: stdio's, or the SDK's memory
    streams of a test in the same process. ``raise_exceptions``: an exception of a handler ends the
    server (and fails the test) instead of only becoming the client's error answer."""
    server = build_server(tools, suite=suite)
    await server.run(read, write, server.create_initialization_options(), raise_exceptions=raise_exceptions)


async def serve_over_http(tools: PoolerTools, listen: Listen, sock: socket.socket, suite: bool = False
                          ) -> None:
    server = build_server(tools, suite=suite)
    # A session the SDK lets go (deleted by its client, or idle) takes no pool with it: the pools
    # run to their end in their own threads.  The SDK's Host and Origin checks are off: the gate
    # (pooler/mcp/gate.py) makes them after the token, admitting the hosts of --allow-origin too.
    app = server.streamable_http_app(
        host=listen.host, transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    await serve_http(app, listen, sock)
