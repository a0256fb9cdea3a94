"""tool_pool as ``pooler mcp`` serves it (seed tool_pool.md, with execute_tool_batch.md's options).

Keys need a task that outlives one call, or a second identical call could not skip what the first
one landed.  By default every call of one client's session shares one task: over stdio the
process's, named when it starts (``mcp-<date>-<time>-<pid>``), over HTTP one per session
(``mcp-<date>-<time>-<pid>-<n>``), so two agents never skip each other's keys.  An agent that
wants its keys to hold across sessions and restarts names its own with the ``task`` argument (and
an operator can pin one for every session with ``--task``).  The journal lives inside the store
folder: ``<out>/.pooler/journal.sqlite``; so do the plans (``pooler.mcp.plans``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.errors import InputError
from pooler.journal.documents import Answer
from pooler.journal.opening import open_journal
from pooler.journal.work import TaskJournal
from pooler.mcp.arguments import check_names, check_task, confine, optional
from pooler.mcp.lookup import task_answer
from pooler.mcp.outcome import Outcome, answered, with_notes
from pooler.mcp.planning import commit, make_plan
from pooler.mcp.plans import DEFAULT_TTL, PlanStore
from pooler.mcp.schemas import MAX_POOL_STEPS
from pooler.mcp.session import as_session, pool_task, pool_task_id, run_session_pool
from pooler.mcp.tool_run import confine_jsonl_fields
from pooler.pool.compiler import Plan, plan_for_tool_pool
from pooler.pool.loader import load_pool_value
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.config import RunConfig
from pooler.run.events import Reporter
from pooler.run.storerate import StoreRate
from pooler.run.taskanswer import WorkTasks

#: The batch options of execute_tool_batch, with the kind each one takes.
OPTIONS: dict[str, type] = {"mode": str, "max_concurrency": int, "serialize_on": str,
                            "stop_on_error": bool, "include_results": bool, "tolerate": dict,
                            "rate": dict, "adaptive": bool, "breaker": dict, "retry": dict}

NESTED_NAMES = frozenset({"tool_pool"})

#: What the journal records as the pool file of every tool_pool call (no such file is written).
#: Placed in the store folder, whose path is resolved when the server starts, so a task named by
#: an agent is known as the same pool whatever folder a later server process starts in.
POOL_FILE = "tool_pool"


def too_many(count: int) -> InputError:
    return InputError(
        f"A tool_pool call takes at most {MAX_POOL_STEPS} steps; this one has {count} - split the work "
        f"into calls of up to {MAX_POOL_STEPS} steps (with keys, calling one again skips what landed)."
    )


def nested(num: int) -> InputError:
    return InputError(
        f"Step {num} is itself a tool_pool - a pool does not run pools: put its steps into this pool, "
        "or make a separate tool_pool call."
    )


def over_rows(step: Step) -> InputError:
    # A tool_pool plan has no step over rows, so none with compare: pool_run is where its counts are.
    also = (" A step with compare: goes in a pool file: pool_run with plan: true plans it, counting its rows "
            "new, changed and unchanged, and pool_run with its plan_id commits it."
            if step.compare is not None else "")
    return InputError(
        f"Step {step.num} runs over rows (for_each) - a tool_pool call runs one call per step, at most "
        f"{MAX_POOL_STEPS}; list the calls as steps, or run the pool file with `pooler run`.{also}"
    )


def _names_a_pool(step: Mapping[str, Any]) -> bool:
    words = (step.get("unit"), step.get("command"))
    return any(isinstance(w, str) and w.strip().lower() in NESTED_NAMES for w in words) or any(
        k in step for k in ("pool", "pool_source"))


def check_raw_steps(steps: Any, out: Path) -> None:
    """What is refused on the list as given, before the loader builds anything from it."""
    if not isinstance(steps, list):
        return
    if len(steps) > MAX_POOL_STEPS:
        raise too_many(len(steps))
    for num, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            continue
        if _names_a_pool(step):
            raise nested(num)
        confine(step.get("params_source"), out, f"params_source of step {num}")
        confine_jsonl_fields(step.get("params"), out, f"step {num} params")


def check_loaded(pool: Pool) -> None:
    """The same limits on the steps as loaded (a pool_source file is only seen here)."""
    if len(pool.steps) > MAX_POOL_STEPS:
        raise too_many(len(pool.steps))
    for step in pool.steps:
        if step.unit.strip().lower() in NESTED_NAMES or step.command.strip().lower() in NESTED_NAMES:
            raise nested(step.num)
        if step.for_each is not None:
            raise over_rows(step)


class PoolRuns:
    """Runs tool_pool calls one at a time against one store, under one journal.

    One at a time: pools share the step table files of the store folder and the journal's keys, so
    two at once would trip over both.  Looking up a task's answer takes no turn.
    """

    def __init__(self, client: ToolRunClient, out: Path, task: str, redactor: Redactor, *,
                 journal: str | None = None, plan_ttl: float = DEFAULT_TTL,
                 store_rate: StoreRate | None = None, environ: Mapping[str, str] | None = None) -> None:
        #: The environment the pools' variables are read from (the server's, unless its caller
        #: names another).
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        #: The journal the pools run under (a PostgreSQL one shares them with other runners).
        self.spec = journal
        #: The store's rate (its ``rate`` in stores.yaml, ``--store-rate``), which every pool of the
        #: server holds with every other task that calls the store.
        self.store_rate = store_rate
        self.client = client
        self.out = out
        self.task = task
        self.redactor = redactor
        self.plan_ttl = plan_ttl
        self.journal_path = out / ".pooler" / "journal.sqlite"
        self._journal: TaskJournal | None = None
        self._plans: PlanStore | None = None
        self._lock = threading.Lock()
        self._open = threading.Lock()
        #: The tasks a pool of this process runs now (the session's task and its pool task):
        #: their calls in flight are not in doubt.
        self.running: set[str] = set()
        #: The pool task each session task of this process ran its latest pool as.
        self.latest: dict[str, str] = {}

    def close(self) -> None:
        with self._lock, self._open:
            if self._plans is not None:
                self._plans.close()
                self._plans = None
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    def journal(self) -> TaskJournal:
        with self._open:
            if self._journal is None:
                self._journal = open_journal(self.spec or str(self.journal_path))
            return self._journal

    def plans(self) -> PlanStore:
        if self.spec is None:
            # The plans are kept in the journal's file: made (and marked as a journal) first.
            self.journal()
        with self._open:
            if self._plans is None:
                if self.spec is not None:
                    # A PostgreSQL journal: the plans stay in the store folder's own file.
                    open_journal(str(self.journal_path)).close()
                self._plans = PlanStore(self.journal_path)
            return self._plans

    def load(self, arguments: Mapping[str, Any], session_task: str | None = None,
             tools: list[dict[str, Any]] | None = None) -> tuple[Plan, str]:
        """The plan and its task, with every refusal that comes before the first step."""
        session_task = session_task or self.task
        check_names("tool_pool", arguments)
        task = optional(arguments, "task", str, "tool_pool")
        task = check_task(task, session_task) if task is not None else session_task
        value: dict[str, Any] = {}
        for name, kind in OPTIONS.items():
            if optional(arguments, name, kind, "tool_pool") is not None:
                value[name] = arguments[name]
        # null counts as unnamed, so {"pool": null, "pool_source": "x"} is not "both".
        for name in ("pool", "pool_source"):
            if arguments.get(name) is not None:
                value[name] = arguments[name]
        check_raw_steps(value.get("pool"), self.out)
        source = value.get("pool_source")
        if source is not None and not isinstance(source, str):
            raise InputError("pool_source is the path of a JSON file holding the list of steps - "
                             "give it as a string.")
        confine(source, self.out, "pool_source")
        # Relative paths in the steps start from the store folder: the loader keeps it as the
        # pool's base, and the executor reads the files the steps name from there.
        pool = load_pool_value(value, file=str(self.out / POOL_FILE), base=self.out, partial=True)
        check_loaded(pool)
        # The compile step of every other way to run a pool, with the seed's words of data.
        return plan_for_tool_pool(pool, tools), task

    def call(self, arguments: Mapping[str, Any], *, session_task: str | None = None,
             reporter: Reporter | None = None, stop: threading.Event | None = None) -> Outcome:
        """tool_pool: a run, a plan, a commit, or a task looked up, by the arguments given."""
        session_task = session_task or self.task
        check_names("tool_pool", arguments)
        if optional(arguments, "plan_id", str, "tool_pool") is not None:
            return commit(self, arguments, reporter=reporter, stop=stop)
        if optional(arguments, "plan", bool, "tool_pool"):
            return make_plan(self, arguments, session_task)
        given = {k for k, v in arguments.items() if v is not None}
        if given == {"task"}:
            return self.lookup(check_task(optional(arguments, "task", str, "tool_pool"), session_task))
        plan, task = self.load(arguments, session_task)
        answer = self.execute(plan, task, reporter=reporter, stop=stop)
        return answered(answer, is_error=answer.get("result") is not True)

    def task_answer(self, task: str) -> Answer:
        """The task's answer so far, from the journal (see ``pooler.mcp.lookup``): a session's
        task tells its latest pool task, named as the session's; a pool task tells itself."""
        # The server's journal, open as long as it serves: read, not closed.
        journal = self.journal()
        pooled = pool_task(journal, task, self.latest.get(task))
        if pooled is None:
            return task_answer(WorkTasks(journal), task, running_here=task in self.running)
        answer = task_answer(WorkTasks(journal), pooled, running_here=bool({task, pooled} & self.running))
        return as_session(answer, task)

    def lookup(self, task: str) -> Outcome:
        answer = self.task_answer(task)
        return answered(answer, is_error=answer.get("result") is not True)

    def execute(self, plan: Plan, task: str, *, reporter: Reporter | None = None,
                stop: threading.Event | None = None, config: RunConfig | None = None) -> Answer:
        """The pool's answer, run under ``task``, one pool at a time; ``config``: pool_run's, else
        tool_pool's."""
        with self._lock:
            pooled = pool_task_id(task, plan.pool)
            self.running |= {task, pooled}
            self.latest[task] = pooled
            try:
                # Every tool_pool call is a new pool (the seed: "the next pool overwrites these
                # files"), even when the session's keys carry over from an earlier call.  The plan
                # is checked by the seed's words already (an @word naming no step goes as data).
                if config is None:
                    config = RunConfig(out=self.out, task_id=task, redactor=self.redactor, clear_tables=True,
                                       checked=True)
                config = replace(config, store_rate=self.store_rate)
                answer = run_session_pool(plan, self.client, config, self.journal(),
                                          reporter=reporter, stop=stop)
                return with_notes(answer, plan)
            finally:
                self.running -= {task, pooled}
