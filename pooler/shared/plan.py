"""The plan of a shared task: one work row per call, made once by the first runner.

The rows of ``for_each`` files are read here (from the data files the compile step found, by the
same rules as any run) and stored with their calls, so a runner on another host needs no data
file.  A step over an earlier step's table gets one placeholder row; the runner that finds the
earlier step completed puts its calls in its place (from the table rows the journal keeps).  The
fingerprint of the steps makes sure every runner of a task runs the same pool.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from pooler.errors import PoolerError
from pooler.journal.postgres.journal import Planned
from pooler.pool.datafiles import DataFile
from pooler.pool.model import Pool, Step
from pooler.pool.paramplan import ParamsPlan, plan_params
from pooler.pool.references import parse_ref
from pooler.pool.rows import chunks
from pooler.pool.variables import render_key
from pooler.redact import Redactor
from pooler.run.callplan import StepPlan, serial_value
from pooler.run.executor import step_plan
from pooler.run.identity import chunk_key
from pooler.statuses import WorkState

#: The placeholder of a step over an earlier step's table (``idx`` of the row).
PLACEHOLDER = -1


def fingerprint(pool: Pool) -> str:
    """A digest of what the steps do (not where the file lies, nor its options)."""
    steps = [{"num": s.num, "unit": s.unit, "command": s.command, "name": s.name, "params": s.params,
              "key": s.key, "into": s.into, "debug": s.debug,
              "for_each": dataclasses.asdict(s.for_each) if s.for_each else None,
              "retry": dataclasses.asdict(s.retry) if s.retry else None} for s in pool.steps]
    text = json.dumps(steps, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def step_plans(pool: Pool) -> dict[int, StepPlan]:
    """Every step's plan (as the executor makes it), by step number."""
    plans: dict[int, StepPlan] = {}
    known: set[str] = set()
    for step in pool.steps:
        # The calls of a step over rows append to its table files: several runners share the step.
        plans[step.num] = step_plan(step, known, keep_tables=step.for_each is not None)
        if step.name:
            known.add(step.name.lower())
    return plans


def dep_nums(pool: Pool, plan: StepPlan) -> list[int]:
    found = [pool.step_named(name) for name in plan.deps]
    return sorted(s.num for s in found if s is not None)


class Planner:
    """Makes the work rows of a task (and, later, of a step over an earlier step's table)."""

    def __init__(self, pool: Pool, task: str, variables: Mapping[str, Any], sample: int | None,
                 data: Mapping[int, DataFile] | None = None, *, redactor: Redactor | None = None) -> None:
        self.pool = pool
        self.task = task
        self.variables = dict(variables)
        self.sample = sample
        #: Masks each call's key as the journal keeps keys; without it the plan holds no keys.
        self.redactor = redactor
        #: The data file of every step over a file, as the compile step found it (variables filled
        #: in its name, its delimiter and encoding); only the runner that plans the task has them.
        self.data = dict(data or {})
        self.plans = step_plans(pool)
        #: Every step's params with templates only: a reference stays its text (its step has not run).
        self.texts: dict[int, ParamsPlan] = {s.num: plan_params(s.params, (), s) for s in pool.steps}
        opts = pool.options
        self.serialize_on = opts.serialize_on if opts.mode == "parallel" else None

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """Every work row of the task, in file order (COPY values)."""
        for step in self.pool.steps:
            plan = self.plans[step.num]
            deps = dep_nums(self.pool, plan)
            fe = step.for_each
            if fe is None:
                yield self._row(plan, 0, (None, None, 1), None, deps)
            elif fe.file:
                yield from self.rows_of(step, self.data[step.num].iter_rows())
            else:
                yield self._placeholder(step.num, deps)

    def rows_of(self, step: Step, data: Iterable[Any], *, first: int = 0, idx: int = 0
                ) -> Iterator[tuple[Any, ...]]:
        """The calls of a step over rows: one per row, or one per chunk.  ``data`` starts at row
        ``first`` of the source and its calls are numbered from ``idx`` (both 0 but for the rows
        a plan made before every row was planned did not hold).  The rows after the sample (which
        counts from the source's first row) are planned too, ``beyond`` it: a full run of the task
        releases them, and needs no data file for it; a chunk never reaches over the sample's end."""
        plan = self.plans[step.num]
        deps = dep_nums(self.pool, plan)
        fe = step.for_each
        assert fe is not None
        source: Iterator[Any] = iter(data)
        parts: list[tuple[Iterator[Any], str]] = [(source, WorkState.READY)]
        if self.sample is not None:
            # islice stops at the sample's end; the same iterator then goes on beyond it.
            parts = [(islice(source, max(self.sample - first, 0)), WorkState.READY),
                     (source, WorkState.BEYOND)]
        for rows, state in parts:
            if fe.chunk:
                for part in chunks(rows, fe.chunk):
                    yield self._row(plan, idx, (first, first + len(part) - 1, len(part)), part, deps,
                                    state=state)
                    first += len(part)
                    idx += 1
                continue
            for row in rows:
                yield self._row(plan, idx, (first, None, 1), row, deps, state=state)
                first += 1
                idx += 1

    def split(self, at: int, num: int, *, idx: int, next_idx: int, first: int, data: list[Any]
              ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """A chunk planned beyond the sample that a wider sample cuts at row ``at``: the part
        before it (released, under its idx) and the part after it (still beyond, under ``next_idx``)."""
        plan = self.plans[num]
        deps = dep_nums(self.pool, plan)
        head, tail = data[:at - first], data[at - first:]
        return (self._row(plan, idx, (first, at - 1, len(head)), head, deps),
                self._row(plan, next_idx, (at, at + len(tail) - 1, len(tail)), tail, deps,
                          state=WorkState.BEYOND))

    def key_of(self, plan: StepPlan, row: dict[str, Any]) -> str | None:
        """The key of the call of ``row`` alone (a step keyed per row, or one row of a chunk), as
        the journal keeps it; None when the plan makes none."""
        return self._key(plan, (0, None, 1), row)[0]

    def call_row(self, plan: StepPlan, idx: int, first: int, part: list[Any], deps: list[int]
                 ) -> tuple[Any, ...]:
        """The work row of the chunk of ``part`` from row ``first`` (beyond the sample when it
        starts after it)."""
        state = WorkState.BEYOND if self.sample is not None and first >= self.sample else WorkState.READY
        return self._row(plan, idx, (first, first + len(part) - 1, len(part)), part, deps, state=state)

    def rows_beyond(self, planned: Mapping[int, Planned]) -> Iterator[tuple[Any, ...]]:
        """The work rows a sampled plan lacks, up to this planner's sample: the rows of each data
        file after those planned, and a placeholder again for each step over a table whose calls
        were made (it takes the table's rows after those, once its step is done)."""
        for step in self.pool.steps:
            fe = step.for_each
            if fe is None:
                continue
            held = planned.get(step.num, Planned(0, 0, False))
            if fe.file:
                rows = islice(self.data[step.num].iter_rows(), held.rows, None)
                yield from self.rows_of(step, rows, first=held.rows, idx=held.next_idx)
            elif not held.placeholder:
                deps = dep_nums(self.pool, self.plans[step.num])
                yield self._placeholder(step.num, deps)

    def _placeholder(self, num: int, deps: list[int]) -> tuple[Any, ...]:
        return (self.task, num, PLACEHOLDER, "expand", None, None, 1, None, deps, None, None, None,
                WorkState.READY)

    def _row(self, plan: StepPlan, idx: int, rows: tuple[int | None, int | None, int], data: Any,
             deps: list[int], *, state: str = WorkState.READY) -> tuple[Any, ...]:
        """A call's COPY values; ``rows``: its first and last row (None: no chunk) and its size."""
        from psycopg.types.json import Json  # noqa: PLC0415

        first, last, size = rows
        serial = self._serial(plan, data, last is not None) if self.serialize_on else None
        return (self.task, plan.step.num, idx, "call", first, last, size,
                None if data is None else Json(data), deps, serial, *self._key(plan, rows, data), str(state))

    def _key(self, plan: StepPlan, rows: tuple[int | None, int | None, int], data: Any
             ) -> tuple[str | None, bool | None]:
        """The call's key as a runner makes it (a key holds only ``${row...}`` and variables), and
        whether it is known here, so the claim that hands the call out can move it to sent in the
        same round trip; (None, True): no key; (None, None): none made here (the runner makes it,
        and tells what is wrong with it)."""
        first, last, _ = rows
        if self.redactor is None:
            return None, None
        if plan.step.key is None:
            return None, True
        scope = dict(self.variables)
        if data is not None:
            scope["row"] = data[0] if last is not None else data
        try:
            key = render_key(plan.step.key, scope)
        except PoolerError:
            return None, None
        if last is not None:
            key = chunk_key(key, first or 0, last)
        return self.redactor.text(key), True

    def _serial(self, plan: StepPlan, data: Any, chunked: bool) -> str | None:
        """A digest of the call's serialize_on value: equal values, equal digests, no value stored."""
        assert self.serialize_on is not None
        scope: dict[str, Any] = dict(self.variables)
        if data is not None:
            scope["row"] = data[0] if chunked else data
        # References are not filled here (their steps have not run): the params are filled with
        # templates only, and a serialize_on value that is a reference has no digest (such calls
        # are not kept apart); the other values of the params do not matter.
        if _by_reference(plan, self.serialize_on):
            return None
        try:
            params = self.texts[plan.step.num].fill(scope, {})
        except PoolerError:
            return None
        if plan.chunk_field is not None:
            params = {**params, plan.chunk_field: data}
        value = serial_value(params, self.serialize_on)
        return None if value is None else hashlib.sha256(value.encode()).hexdigest()[:32]


def _by_reference(plan: StepPlan, path: str) -> bool:
    """Whether the step's ``serialize_on`` value is a reference to an earlier step."""
    raw = serial_value(plan.step.params, path)
    if raw is None:
        return False
    text = json.loads(raw)
    parsed = parse_ref(text) if isinstance(text, str) else None
    return parsed is not None and parsed[0].lower() in plan.deps
