"""tool_pool as ``pooler mcp`` serves it (seed tool_pool.md, with execute_tool_batch.md's options).

Keys need a task that outlives one call, or a second identical call could not skip what the first
one landed.  By default every call of one server process shares one task, named when the process
starts (``mcp-<date>-<time>-<pid>``); an agent that wants its keys to hold across restarts of the
server names its own with the ``task`` argument (and an operator can pin one with ``--task``).
The journal lives inside the store folder: ``<out>/.pooler/journal.sqlite``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.errors import InputError
from pooler.mcp.arguments import check_names, check_task, confine, optional
from pooler.mcp.outcome import Outcome, answered
from pooler.mcp.schemas import MAX_POOL_STEPS
from pooler.mcp.tool_run import confine_jsonl_fields
from pooler.pool.compiler import Plan, compile_pool
from pooler.pool.loader import load_pool_value
from pooler.pool.model import Pool
from pooler.redact import Redactor
from pooler.run.events import Reporter
from pooler.run.executor import RunConfig, run_plan
from pooler.run.journal import Journal

#: The batch options of execute_tool_batch, with the kind each one takes.
OPTIONS: dict[str, type] = {"mode": str, "max_concurrency": int, "serialize_on": str,
                            "stop_on_error": bool, "include_results": bool}

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


def over_rows(num: int) -> InputError:
    return InputError(
        f"Step {num} runs over rows (for_each) - a tool_pool call runs one call per step, at most "
        f"{MAX_POOL_STEPS}; list the calls as steps, or run the pool file with `pooler run`."
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
            raise over_rows(step.num)


class PoolRuns:
    """Runs tool_pool calls one at a time against one store, under one journal."""

    def __init__(self, client: ToolRunClient, out: Path, task: str, redactor: Redactor, *,
                 journal: str | None = None) -> None:
        #: A PostgreSQL journal: each pool runs as a shared task (see ``run``).
        self.shared_journal = journal
        self.client = client
        self.out = out
        self.task = task
        self.redactor = redactor
        self.journal_path = out / ".pooler" / "journal.sqlite"
        self._journal: Journal | None = None
        # Pools share the step table files and the journal's keys: two at once would trip over both.
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    def load(self, arguments: Mapping[str, Any]) -> tuple[Plan, str]:
        """The plan and its task, with every refusal that comes before the first step."""
        check_names("tool_pool", arguments)
        task = optional(arguments, "task", str, "tool_pool")
        task = check_task(task, self.task) if task is not None else self.task
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
        return compile_pool(pool, values={}, seed_words=True), task

    def run(self, arguments: Mapping[str, Any], *, reporter: Reporter | None = None,
            stop: threading.Event | None = None) -> Outcome:
        plan, task = self.load(arguments)
        if self.shared_journal is not None:
            from pooler.mcp.shared import run_shared_pool  # noqa: PLC0415 - psycopg only when asked for

            with self._lock:
                config = RunConfig(out=self.out, task_id=task, redactor=self.redactor)
                answer = run_shared_pool(plan.pool, self.client, config, self.shared_journal,
                                         reporter=reporter, stop=stop)
            return answered(answer, is_error=answer.get("result") is not True)
        with self._lock:
            if self._journal is None:
                self._journal = Journal(self.journal_path)
            # Every tool_pool call is a new pool (the seed: "the next pool overwrites these
            # files"), even when the session's task carries its keys over from an earlier call.
            config = RunConfig(out=self.out, task_id=task, redactor=self.redactor, clear_tables=True)
            answer = run_plan(plan, self.client, config, journal=self._journal, reporter=reporter,
                              stop=stop)
        return answered(answer, is_error=answer.get("result") is not True)
