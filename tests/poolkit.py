"""Helpers of the executor's tests: pools built in code, run against a real store, and a reporter
that records what it hears."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from helpers import STORE_TOKEN, Store

from pooler.client.http import ToolRunClient
from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal
from pooler.pool.model import ForEach, Options, Pool, Retry, Step
from pooler.run.config import RunConfig
from pooler.run.events import CallEnd
from pooler.run.executor import run_pool

TEST = "MELBIS_AGENT_TEST"


def step(unit: str, command: str, params: dict[str, Any] | None = None, *, name: str = "",
         key: str | None = None, into: str | None = None, retry: Retry | None = None,
         for_each: ForEach | None = None, debug: bool = False) -> dict[str, Any]:
    return {"unit": unit, "command": command, "params": params or {}, "name": name, "key": key,
            "into": into, "retry": retry, "for_each": for_each, "debug": debug}


def echo(params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    return step(TEST, "CmdEcho", params, **kw)


def make_pool(folder: Path, steps: list[dict[str, Any]], **options: Any) -> Pool:
    """A pool as the loader would give it, its file in ``folder`` (data files are read from there)."""
    built = [Step(num=i, **s) for i, s in enumerate(steps, start=1)]
    return Pool(file=str(folder / "pool.yaml"), steps=built, options=Options(**options),
                options_set=frozenset(options))


def run(pool: Pool, store: Store | str, out: Path, *, journal: Journal | None = None,
        reporter: Any = None, stop: threading.Event | None = None, token: str = STORE_TOKEN,
        **config: Any) -> dict[str, Any]:
    url = store if isinstance(store, str) else store.url
    with ToolRunClient(url, token, read_timeout=config.pop("read_timeout", 30.0)) as client:
        return run_pool(pool, client, RunConfig(out=out, **config), journal=journal,
                        reporter=reporter, stop=stop)


def ops_of(store: Store, command: str | None = None) -> list[dict[str, Any]]:
    """The store's operations (CmdOps adds none), of one command if given."""
    return [op for op in store.ops() if command is None or op["command"] == command]


def statuses(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(num, row or None, status) of every listed call, as the answer orders them."""
    return [(e["num"], e.get("row"), e["status"]) for e in answer["steps"]]


class Recorder:
    """A reporter that keeps every event (thread-safe: parallel runs call it from threads)."""

    def __init__(self, on_finish: Any = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.on_finish = on_finish

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        self.events.append(("pool_started", task_id, total))

    def step_started(self, step: Step, call: int) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.events.append(("step_started", step.num, call))

    def call_ended(self, step: Step, end: CallEnd, result: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(("call_ended", step.num, end.number, end.kind, end.attempts))

    def step_finished(self, step: Step, result: dict[str, Any]) -> None:
        with self.lock:
            if result["status"] not in ("skipped", "not_run") and "time" in result:
                self.running -= 1
            self.events.append(("step_finished", step.num, result["status"]))
        if self.on_finish is not None:
            self.on_finish(step, result)

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        self.events.append(("rows_progress", step.num, done, total))

    def calls_planned(self, total: int) -> None:
        self.events.append(("calls_planned", total))

    def pool_finished(self, answer: dict[str, Any]) -> None:
        self.events.append(("pool_finished", answer["status"]))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]
