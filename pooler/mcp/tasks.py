"""The Tasks extension of MCP 2026-07-28 (``io.modelcontextprotocol/tasks``): a long ``pool_run`` or
``tool_pool`` (a pool, or the commit of a plan) is answered with a task handle at once, and the
client polls it with ``tasks/get``.

The handle is the journal's task id (the pool task the call runs as), not something this process
keeps: ``tasks/get`` reads the task from the journal, so any ``pooler mcp`` process of the same
journal answers for it - a second server, or this one restarted.  Only a client that declares the
extension on its request gets a handle; every other client gets the answer when the pool ends, as
before.

A call may take long when a step runs over rows, or when it makes more than ``LONG_CALLS`` calls.
``tasks/cancel`` stops the pool as SIGTERM stops ``pooler run``: nothing new is sent, the calls in
flight end, the unsent ones are not_run and the ones in doubt are named in the answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from pooler.errors import PoolerError
from pooler.mcp import pool_run
from pooler.mcp.lookup import task_answer
from pooler.mcp.outcome import Outcome
from pooler.mcp.session import pool_task_id
from pooler.run.config import StopSignal
from pooler.run.taskanswer import DEAD, WorkTasks
from pooler.statuses import PlanState, TaskStatus

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns
    from pooler.pool.compiler import Plan

EXTENSION = "io.modelcontextprotocol/tasks"
#: A pool of more calls than this is a task (a step over rows always is).
LONG_CALLS = 50
#: Why a pool stopped when its client cancelled the task: the answer's ``interrupted``.
CANCELLED = "tasks/cancel"
#: How often the handle's answer looks whether the journal holds the task yet.
SEEN_EVERY = 0.05


class TaskIdParams(types.RequestParams):
    """The params of tasks/get and tasks/cancel."""

    taskId: str  # noqa: N815 - the wire's name


def declared(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared the extension on this request (a 2026-07-28 client)."""
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return extensions is not None and EXTENSION in extensions


def poll_interval(planned: int) -> int:
    """Milliseconds between two polls: a task of more calls takes longer, and is asked less often."""
    return 1000 if planned < 1_000 else 2000 if planned < 10_000 else 5000


def _stamp(text: str | None) -> str:
    if text:
        return text.replace(" ", "T") + ("" if text.endswith("Z") or "+" in text else "Z")
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_long(plan: Plan) -> bool:
    return any(step.for_each is not None for step in plan.pool.steps) or len(plan.pool.steps) > LONG_CALLS


class TaskCalls:
    """The tasks this process runs, and the answers of any task of the journal."""

    def __init__(self, pools: PoolRuns, call: Callable[..., Outcome]) -> None:
        self.pools = pools
        self._call = call
        self._stops: dict[str, StopSignal] = {}
        self._threads: dict[str, threading.Thread] = {}

    def long_task(self, name: str, arguments: Mapping[str, Any], session_task: str) -> str | None:
        """The journal task a call that may take long runs as; None when it runs as a plain call
        (short, a dry run, a plan, a lookup, or refused - the plain call gives the refusal)."""
        try:
            if name == "pool_run":
                plan, task, dry_run = pool_run.load(self.pools, arguments, session_task)
                if dry_run:
                    return None
            elif name == "tool_pool" and isinstance(arguments.get("plan_id"), str):
                # A commit: the plan's own pool and task; a plan committed already answers as before.
                row = self.pools.plans().get(arguments["plan_id"])
                if row is None or row.state != PlanState.PLANNED or len(arguments) != 1:
                    return None
                plan, task = self.pools.load(row.arguments, row.task)
            elif name == "tool_pool" and not {"plan", "plan_id"} & set(arguments) and \
                    {k for k, v in arguments.items() if v is not None} != {"task"}:
                plan, task = self.pools.load(arguments, session_task)
            else:
                return None
        except PoolerError:
            return None
        return pool_task_id(task, plan.pool) if is_long(plan) else None

    async def start(self, task_id: str, name: str, arguments: Mapping[str, Any], session: str | None
                    ) -> dict[str, Any] | Outcome:
        """Run the call in a thread of its own; the task handle once the journal holds the task,
        or the call's own answer when it ended first (refused before it began)."""
        stop = StopSignal()
        outcome: list[Outcome] = []

        def work() -> None:
            outcome.append(self._call(name, arguments, stop=stop, session=session))

        thread = threading.Thread(target=work, name=f"pooler mcp task {task_id}")
        self._stops[task_id], self._threads[task_id] = stop, thread
        thread.start()
        journal = self.pools.journal()
        # The handle is given only once a tasks/get of it resolves (the extension's rule).
        while thread.is_alive() and journal.task(task_id) is None:
            await anyio.sleep(SEEN_EVERY)
        if journal.task(task_id) is None and outcome:
            return outcome[0]
        return {"resultType": "task", **self.get(task_id)}

    def running_here(self, task_id: str) -> bool:
        thread = self._threads.get(task_id)
        return thread is not None and thread.is_alive()

    def get(self, task_id: str) -> dict[str, Any]:
        """The task as tasks/get gives it, from the journal."""
        journal = self.pools.journal()
        view = WorkTasks(journal)
        row = view.task(task_id)
        if row is None:
            raise MCPError(types.INVALID_PARAMS, f"no task {task_id} in the journal {journal.where()} - a "
                                                 "task id comes from a tools/call answered with a task.")
        counts = journal.plan_counts(task_id)
        here = self.running_here(task_id)
        found: dict[str, Any] = {
            "taskId": task_id, "createdAt": _stamp(row.started), "lastUpdatedAt": _stamp(row.finished),
            "ttlMs": None, "pollIntervalMs": poll_interval(counts.planned if counts else 0),
        }
        if counts is not None:
            found["counts"] = {"planned": counts.planned, "completed": counts.completed,
                               "failed": counts.failed, "in_doubt": counts.in_doubt,
                               "skipped": counts.skipped, "not_run": counts.not_run}
        if here or (row.status == TaskStatus.RUNNING):
            text = counts.text() if counts is not None else "planning"
            return {**found, "status": "working", "statusMessage": text}
        answer = task_answer(view, task_id, running_here=here)
        if row.status == DEAD:
            # The pool task is named after the session's task: given as task, the same call joins it.
            session = task_id.rsplit("-", 1)[0]
            message = (f"{counts.text() if counts else ''} - the run died before it finished (its server was "
                       f"killed, or its machine went down): call the tool again with the same arguments and "
                       f"task {session} to take the task up; it sends only what did not land.")
            return {**found, "status": "completed", "statusMessage": message.lstrip(" -"),
                    "result": _call_result(answer)}
        status = "cancelled" if answer.get("interrupted") == CANCELLED else "completed"
        message = f"{counts.text()}" if counts is not None else str(answer.get("status"))
        result = {**found, "status": status, "statusMessage": message}
        if status == "completed":
            result["result"] = _call_result(answer)
        return result

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """Stop the task as SIGTERM stops ``pooler run``, wait for its calls in flight, tell it."""
        self.get(task_id)
        stop = self._stops.get(task_id)
        if stop is None or not self.running_here(task_id):
            found = self.get(task_id)
            if found["status"] == "working":
                raise MCPError(types.INVALID_PARAMS, f"task {task_id} runs in another pooler mcp process - "
                                                     "cancel it there (tasks/get tells its progress here).")
            return found
        stop.request(CANCELLED)
        thread = self._threads[task_id]
        while thread.is_alive():
            await anyio.sleep(SEEN_EVERY)
        return self.get(task_id)

    def close(self) -> None:
        """The server stops: its tasks stop as ``pooler run`` does on SIGTERM."""
        for stop in self._stops.values():
            stop.request("SIGTERM")
        deadline = time.monotonic() + 600
        for thread in self._threads.values():
            thread.join(max(0.0, deadline - time.monotonic()))


def _call_result(answer: dict[str, Any]) -> dict[str, Any]:
    from pooler.mcp.outcome import answered  # noqa: PLC0415

    outcome = answered(answer, is_error=answer.get("result") is not True)
    result = types.CallToolResult(content=[types.TextContent(text=outcome.text)],
                                  structured_content=outcome.answer, is_error=outcome.is_error)
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")
