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
flight end, the unsent ones are not_run and the ones in doubt are named in the answer.  A process
that does not run the task halts it in the journal, which every runner of it reads before it sends.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from pooler import strictjson
from pooler.errors import PoolerError
from pooler.journal.documents import Answer
from pooler.mcp import doubts, fileplans, pool_run, poolfile
from pooler.mcp.asking import ACCEPT, DECISIONS, DECLINE, Counts, asking, confirmed, counts, declined, unsent
from pooler.mcp.lookup import task_answer
from pooler.mcp.outcome import Outcome, answered
from pooler.mcp.planning import plan_classes, planned
from pooler.mcp.session import pool_task_id
from pooler.run.config import StopSignal
from pooler.run.taskanswer import DEAD, WorkTasks
from pooler.statuses import CallStatus, McpTaskStatus, PlanState, TaskStatus

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns
    from pooler.pool.compiler import Plan

EXTENSION = "io.modelcontextprotocol/tasks"
#: A pool of more calls than this is a task (a step over rows always is).
LONG_CALLS = 50
#: Why a pool stopped when its client cancelled the task: the answer's ``interrupted``.
CANCELLED = "tasks/cancel"
#: Where the resources of a task's calls live (``resources/read``).
CALLS_SCHEME = "pooler://tasks/"
NDJSON = "application/x-ndjson"
#: How often the handle's answer looks whether the journal holds the task yet.
SEEN_EVERY = 0.05


class TaskIdParams(types.RequestParams):
    """The params of tasks/get and tasks/cancel."""

    taskId: str  # noqa: N815 - the wire's name


class UpdateParams(TaskIdParams):
    """The params of tasks/update: the client's answers to the task's input requests, by key."""

    inputResponses: dict[str, Any]  # noqa: N815 - the wire's name


@dataclass(frozen=True)
class Question:
    """A task held before it runs until the client says what to do with its calls in doubt."""

    key: str
    name: str
    arguments: Mapping[str, Any]
    session: str | None
    message: str
    traceparent: str | None = None
    #: A task taken up from its journal (tasks/update of a task whose runner died): its pool task.
    resume: str | None = None
    #: The commit of a long plan, asked to be confirmed before the journal holds its task.
    confirm: Counts | None = None
    since: str = ""


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
        #: Tasks waiting for the client's word on their calls in doubt, and how often each was asked.
        self._questions: dict[str, Question] = {}
        self._asked: dict[str, int] = {}
        #: Tasks that ended before the journal held them (a declined commit), as tasks/get gives them.
        self._settled: dict[str, dict[str, Any]] = {}

    def long_task(self, name: str, arguments: Mapping[str, Any], session_task: str) -> str | None:
        """The journal task a call that may take long runs as; None when it runs as a plain call
        (short, a dry run, a plan, a lookup, or refused - the plain call gives the refusal)."""
        try:
            if isinstance(arguments.get("plan_id"), str):
                # A commit: the plan's own pool and task; a plan committed already answers as before.
                row = self.pools.plans().get(arguments["plan_id"])
                if row is None or row.state != PlanState.PLANNED or len(arguments) != 1:
                    return None
                plan, task = planned(self.pools, row)
            elif name == "pool_run":
                if arguments.get("plan"):
                    return None
                plan, task, dry_run = poolfile.load(self.pools, arguments, session_task)
                if dry_run:
                    return None
            elif name == "tool_pool" and not {"plan", "plan_id"} & set(arguments) and \
                    {k for k, v in arguments.items() if v is not None} != {"task"}:
                plan, task = self.pools.load(arguments, session_task)
            else:
                return None
        except PoolerError:
            return None
        return pool_task_id(task, plan.pool) if is_long(plan) else None

    def _launch(self, task_id: str, name: str, arguments: Mapping[str, Any], session: str | None, *,
                in_doubt: str | None = None, traceparent: str | None = None,
                resume: str | None = None) -> list[Outcome]:
        stop = StopSignal()
        outcome: list[Outcome] = []

        def work() -> None:
            outcome.append(self._call(name, arguments, stop=stop, session=session, in_doubt=in_doubt,
                                      traceparent=traceparent, resume=resume))

        thread = threading.Thread(target=work, name=f"pooler mcp task {task_id}")
        self._stops[task_id], self._threads[task_id] = stop, thread
        thread.start()
        return outcome

    def _doubtful(self, task_id: str, name: str, arguments: Mapping[str, Any]) -> str | None:
        """What to ask of a task taken up with calls an earlier run left in doubt, with what their
        steps' probes say of them now; None when there are none (or it runs now, or the tool
        settles them its own way)."""
        journal = self.pools.journal()
        row = WorkTasks(journal).task(task_id)
        counts = journal.plan_counts(task_id)
        if name != "pool_run" or row is None or row.status == TaskStatus.RUNNING or counts is None \
                or not counts.in_doubt or self.running_here(task_id):
            return None
        named = doubts.in_doubt(journal, task_id)
        plan = pool_run.plan_of(self.pools, task_id, arguments)
        probes = doubts.probe_all(self.pools.client, journal, task_id, plan, named)
        return self.pools.redactor.text(doubts.question(task_id, counts.in_doubt, named, probes))

    async def start(self, task_id: str, name: str, arguments: Mapping[str, Any], session: str | None, *,
                    traceparent: str | None = None) -> dict[str, Any] | Outcome:
        """Run the call in a thread of its own; the task handle once the journal holds the task,
        or the call's own answer when it ended first (refused before it began).  A task taken up
        with calls in doubt waits for the client's word on them (``input_required``)."""
        message = await anyio.to_thread.run_sync(self._doubtful, task_id, name, arguments)
        if message is not None:
            self._asked[task_id] = self._asked.get(task_id, 0) + 1
            self._questions[task_id] = Question(f"in-doubt-{self._asked[task_id]}", name, arguments, session,
                                                message, traceparent)
            return {"resultType": "task", **self.get(task_id)}
        self._settled.pop(task_id, None)
        asked = await anyio.to_thread.run_sync(self._confirming, name, arguments)
        if asked is not None:
            self._asked[task_id] = self._asked.get(task_id, 0) + 1
            self._questions[task_id] = Question(f"confirm-{self._asked[task_id]}", name, arguments, session,
                                                asked.message, traceparent, confirm=asked, since=_stamp(None))
            return {"resultType": "task", **self.get(task_id)}
        outcome = self._launch(task_id, name, arguments, session, traceparent=traceparent)
        await self._journaled(task_id)
        if self.pools.journal().task(task_id) is None and outcome:
            return outcome[0]
        return {"resultType": "task", **self.get(task_id)}

    async def _journaled(self, task_id: str) -> None:
        """Until the journal holds the task this process runs, or its call ended first: a handle
        is given only once a tasks/get of it resolves (the extension's rule)."""
        thread = self._threads[task_id]
        journal = self.pools.journal()
        while thread.is_alive() and journal.task(task_id) is None:
            await anyio.sleep(SEEN_EVERY)

    def _confirming(self, name: str, arguments: Mapping[str, Any]) -> Counts | None:
        """What to confirm of the commit of a plan of more than ``LONG_CALLS`` calls; else None."""
        plan_id = arguments.get("plan_id")
        if not isinstance(plan_id, str):
            return None
        try:
            row = self.pools.plans().get(plan_id)
            if row is None or row.state != PlanState.PLANNED:
                return None
            plan, _ = planned(self.pools, row)
            classes = plan_classes(self.pools, plan_id)
            # A pool file's plan: its calls as its file counts them (a step over rows is many).
            calls_by = fileplans.calls_of(self.pools, plan_id) if fileplans.is_file_plan(row) else None
        except PoolerError:
            return None
        asked = counts(plan, plan_id, classes, calls_by=calls_by)
        return asked if asked.calls > LONG_CALLS else None

    def running_here(self, task_id: str) -> bool:
        thread = self._threads.get(task_id)
        return thread is not None and thread.is_alive()

    def get(self, task_id: str) -> dict[str, Any]:
        """The task as tasks/get gives it, from the journal."""
        if task_id in self._settled:
            return self._settled[task_id]
        journal = self.pools.journal()
        view = WorkTasks(journal)
        row = view.task(task_id)
        question = self._questions.get(task_id)
        if row is None and question is not None and question.confirm is not None:
            # Asked before it was planned: the plan's calls, none sent.
            pending = {**unsent(task_id, question.confirm, question.since, question.since),
                       "pollIntervalMs": poll_interval(question.confirm.calls)}
            return asking(question.key, question.message, question.confirm is not None, pending)
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
            found["counts"] = dataclasses.asdict(counts)
        if question is not None:
            return asking(question.key, question.message, question.confirm is not None, found)
        if here or (row.status == TaskStatus.RUNNING):
            text = counts.text() if counts is not None else "planning"
            return {**found, "status": McpTaskStatus.WORKING, "statusMessage": text}
        answer = task_answer(view, task_id, running_here=here)
        if row.status == DEAD:
            # The pool task is named after the session's task: given as task, the same call joins it.
            session = task_id.rsplit("-", 1)[0]
            message = (f"{counts.text() if counts else ''} - the run died before it finished (its server was "
                       f"killed, or its machine went down): tasks/update of it takes the task up in this "
                       f"server, as does the tool called again with the same arguments and task {session}; "
                       "it sends only what did not land.")
            return {**found, "status": McpTaskStatus.COMPLETED, "statusMessage": message.lstrip(" -"),
                    "result": _call_result(answer, task_id)}
        halted = journal.work(task_id, CANCELLED).open_counts()[2]
        cancelled = CANCELLED in (answer.get("interrupted"), halted)
        status = McpTaskStatus.CANCELLED if cancelled else McpTaskStatus.COMPLETED
        message = f"{counts.text()}" if counts is not None else str(answer.get("status"))
        result = {**found, "status": status, "statusMessage": message}
        if status == McpTaskStatus.COMPLETED:
            result["result"] = _call_result(answer, task_id)
        return result

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> None:
        """The client's word on the calls in doubt: the task runs, retrying or skipping them."""
        question = self._questions.get(task_id)
        if question is None:
            # A task whose runner died is taken up; an answer to no open question is ignored
            # otherwise, as the extension lets a server do.
            await self._take_up(task_id)
            return
        if question.confirm is not None and question.key in responses:
            await self._confirmed(task_id, question, confirmed(responses[question.key]))
            return
        answer = responses.get(question.key)
        content = answer.get("content") if isinstance(answer, dict) else None
        decision = content.get("decision") if isinstance(content, dict) else None
        if answer is None:
            return
        if not isinstance(answer, dict) or answer.get("action") != "accept" or decision not in DECISIONS:
            raise MCPError(types.INVALID_PARAMS, f"{question.key} takes {{\"action\": \"accept\", "
                                                 f"\"content\": {{\"decision\": \"retry\"}}}} or \"skip\" - "
                                                 "tasks/cancel leaves the task as it is.")
        del self._questions[task_id]
        self._launch(task_id, question.name, question.arguments, question.session, in_doubt=decision,
                     traceparent=question.traceparent, resume=question.resume)

    async def _confirmed(self, task_id: str, question: Question, word: bool | None) -> None:
        """The client's word on a long commit: sent, or ended with nothing sent."""
        if word is None:
            raise MCPError(types.INVALID_PARAMS, f"{question.key} takes {ACCEPT} to send the calls, or "
                                                 f"{DECLINE} to send nothing.")
        del self._questions[task_id]
        if not word:
            self._settled[task_id] = self._declined(task_id, question)
            return
        outcome = self._launch(task_id, question.name, question.arguments, question.session,
                               traceparent=question.traceparent)
        await self._journaled(task_id)
        if self.pools.journal().task(task_id) is None and outcome:
            # Refused before it began (the plan expired, or its files changed): the task ends so.
            self._settled[task_id] = {**self._declined(task_id, question), "status": McpTaskStatus.COMPLETED,
                                      "statusMessage": outcome[0].text, "result": _plain(outcome[0])}

    def _declined(self, task_id: str, question: Question) -> dict[str, Any]:
        assert question.confirm is not None
        return {**declined(task_id, question.confirm, question.since, _stamp(None)),
                "pollIntervalMs": poll_interval(question.confirm.calls)}

    async def _take_up(self, task_id: str) -> None:
        """Run again, in this server, a task whose runner died, from the pool its journal keeps;
        a task taken up with calls in doubt first asks what to do with them."""
        if self.running_here(task_id) or not await anyio.to_thread.run_sync(self._dead, task_id):
            return
        try:
            await anyio.to_thread.run_sync(pool_run.stored, self.pools, task_id)
        except PoolerError as exc:
            raise MCPError(types.INVALID_PARAMS, f"task {task_id} cannot be taken up from its journal: "
                                                 f"{exc} Call the tool again with its arguments and task "
                                                 f"{task_id.rsplit('-', 1)[0]}.") from exc
        message = await anyio.to_thread.run_sync(self._doubtful, task_id, poolfile.TOOL, {})
        if message is not None:
            self._asked[task_id] = self._asked.get(task_id, 0) + 1
            self._questions[task_id] = Question(f"in-doubt-{self._asked[task_id]}", poolfile.TOOL, {}, None,
                                                message, resume=task_id)
            return
        outcome = self._launch(task_id, poolfile.TOOL, {}, None, resume=task_id)
        thread = self._threads[task_id]
        # Answered once the run has joined the task, or told why it could not.
        while thread.is_alive() and await anyio.to_thread.run_sync(self._dead, task_id):
            await anyio.sleep(SEEN_EVERY)
        if not thread.is_alive() and outcome and await anyio.to_thread.run_sync(self._dead, task_id):
            raise MCPError(types.INVALID_PARAMS, f"task {task_id} was not taken up: {outcome[0].text}")

    def _dead(self, task_id: str) -> bool:
        row = WorkTasks(self.pools.journal()).task(task_id)
        return row is not None and row.status == DEAD

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """Stop the task as SIGTERM stops ``pooler run``, wait for its calls in flight, tell it."""
        self.get(task_id)
        question = self._questions.get(task_id)
        if question is not None and question.confirm is not None:
            await self._confirmed(task_id, question, False)
            return self.get(task_id)
        if self._questions.pop(task_id, None) is not None:
            found = self.get(task_id)
            return {**found, "status": McpTaskStatus.CANCELLED,
                    "statusMessage": f"cancelled before it was taken up: {found['statusMessage']}"}
        stop = self._stops.get(task_id)
        if stop is not None and self.running_here(task_id):
            stop.request(CANCELLED)
            thread = self._threads[task_id]
            while thread.is_alive():
                await anyio.sleep(SEEN_EVERY)
            return self.get(task_id)
        if self.get(task_id)["status"] != McpTaskStatus.WORKING:
            return self.get(task_id)
        # Run by another process: halted in the journal, its runners send nothing new (a claim
        # and a send both look at the halt), and end once their calls in flight have.
        journal = self.pools.journal()
        await anyio.to_thread.run_sync(journal.work(task_id, CANCELLED).halt, CANCELLED)
        while (found := await anyio.to_thread.run_sync(self.get, task_id))["status"] == McpTaskStatus.WORKING:
            await anyio.sleep(SEEN_EVERY * 4)
        return found

    def read(self, uri: str) -> str:
        """The resource ``calls_uri`` names: every failed and in-doubt call of the task, from the
        journal, one JSON object a line."""
        task_id = uri.removeprefix(CALLS_SCHEME).removesuffix("/failed-or-in-doubt.jsonl")
        journal = self.pools.journal()
        if not uri.startswith(CALLS_SCHEME) or uri != calls_uri(task_id) or journal.task(task_id) is None:
            raise MCPError(types.INVALID_PARAMS, f"no resource {uri} - a task's result links the resource of "
                                                 "its failed and in-doubt calls.")
        lines = [strictjson.dumps({**row.entry, "status": row.status}, ensure_ascii=False)
                 for row in journal.answer_rows(task_id)
                 if row.status in (CallStatus.FAILED, CallStatus.IN_DOUBT) and row.entry is not None]
        return "".join(f"{line}\n" for line in lines)

    def close(self) -> None:
        """The server stops: its tasks stop as ``pooler run`` does on SIGTERM."""
        for stop in self._stops.values():
            stop.request("SIGTERM")
        deadline = time.monotonic() + 600
        for thread in self._threads.values():
            thread.join(max(0.0, deadline - time.monotonic()))


def calls_uri(task_id: str) -> str:
    """The resource of every failed and in-doubt call of a task, one JSON object a line."""
    return f"{CALLS_SCHEME}{task_id}/failed-or-in-doubt.jsonl"


def _call_result(answer: Answer, task_id: str) -> dict[str, Any]:
    """The tool's result a finished task carries: the pool's answer, and when its steps left out
    failed or in-doubt calls (more than fit), a link to the resource that lists them all."""
    outcome = answered(answer, is_error=answer.get("result") is not True)
    content: list[types.ContentBlock] = [types.TextContent(text=outcome.text)]
    steps: Sequence[Mapping[str, Any]] = answer.get("steps", [])
    omitted = sum(int(step.get("failures_omitted") or 0) for step in steps)
    if omitted:
        content.append(types.ResourceLink(
            uri=calls_uri(task_id), name="failed-or-in-doubt", mime_type=NDJSON,
            description=f"Every failed and in-doubt call of task {task_id} ({omitted:,} left out of the "
                        "answer), one JSON object a line, from the journal."))
    result = types.CallToolResult(content=content, structured_content=outcome.answer,
                                  is_error=outcome.is_error)
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def _plain(outcome: Outcome) -> dict[str, Any]:
    result = types.CallToolResult(content=[types.TextContent(text=outcome.text)],
                                  structured_content=outcome.answer, is_error=outcome.is_error)
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")
