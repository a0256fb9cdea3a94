"""The plan of a shared task: one work row per call, made once by the first runner.

The rows of ``for_each`` files are stored with their calls, so a runner on another host needs no
data file; they come from the compile step's own pass over each file (``shared/planpass.py``).  A
step over an earlier step's table gets one placeholder row; the runner that finds the earlier step
completed puts its calls in its place (from the table rows the journal keeps).  The
fingerprint of the steps makes sure every runner of a task runs the same pool.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from pooler.errors import PoolerError
from pooler.pool.model import Pool, Step
from pooler.pool.paramplan import ParamsPlan, plan_params
from pooler.pool.references import parse_ref
from pooler.pool.rows import chunks, row_encoder
from pooler.pool.variables import render_key
from pooler.redact import Redactor
from pooler.run.callplan import StepPlan, serial_value
from pooler.run.executor import step_plan
from pooler.run.identity import chunk_key

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

    def __init__(self, pool: Pool, task: str, variables: Mapping[str, Any], sample: int | None, *,
                 redactor: Redactor | None = None) -> None:
        self.pool = pool
        self.task = task
        self.variables = dict(variables)
        self.sample = sample
        #: Masks each call's key as the journal keeps keys; without it the plan holds no keys.
        self.redactor = redactor
        self.plans = step_plans(pool)
        #: Every step's params with templates only: a reference stays its text (its step has not run).
        self.texts: dict[int, ParamsPlan] = {s.num: plan_params(s.params, (), s) for s in pool.steps}
        #: Each row's JSON as COPY takes it: text, encoded here rather than by a dumper a value;
        #: ASCII, as psycopg's dumper wrote it, whatever the database's encoding.
        self._dumps = row_encoder(ascii_only=True)
        self._dep_texts: dict[int, str] = {}
        opts = pool.options
        self.serialize_on = opts.serialize_on if opts.mode == "parallel" else None

    def rows_of(self, step: Step, data: Iterable[Any], *, first: int = 0, idx: int = 0
                ) -> Iterator[tuple[Any, ...]]:
        """The calls of a step over rows: one per row, or one per chunk.  ``data`` starts at row
        ``first`` of the source and its calls are numbered from ``idx`` (both 0 but for the rows
        a sampled plan did not hold); the sample counts from the source's first row."""
        fe = step.for_each
        assert fe is not None
        source: Iterator[Any] = iter(data)
        if self.sample is not None:
            source = islice(source, max(self.sample - first, 0))
        if fe.chunk:
            for num, part in enumerate(chunks(source, fe.chunk), start=idx):
                yield self.call(step, num, (first, first + len(part) - 1, len(part)), part)
                first += len(part)
            return
        for num, row in enumerate(source, start=idx):
            yield self.call(step, num, (first, None, 1), row)
            first += 1

    def single(self, step: Step) -> tuple[Any, ...]:
        """The work row of a step that is no step over rows: one call."""
        return self.call(step, 0, (None, None, 1), None)

    def placeholder(self, step: Step) -> tuple[Any, ...]:
        """The work row that stands for the calls of a step over an earlier step's table."""
        return (self.task, step.num, PLACEHOLDER, "expand", None, None, 1, None, self._deps(step.num), None,
                None, None)

    def call(self, step: Step, idx: int, rows: tuple[int | None, int | None, int], data: Any,
             key: str | None = None) -> tuple[Any, ...]:
        """A call's COPY values; ``rows``: its first and last row (None: no chunk) and its size;
        ``key``: its first row's key as the check filled it (None: filled here)."""
        plan = self.plans[step.num]
        first, last, size = rows
        serial = self._serial(plan, data, last is not None) if self.serialize_on else None
        return (self.task, step.num, idx, "call", first, last, size,
                None if data is None else self._dumps(data), self._deps(step.num), serial,
                *self._key(plan, rows, data, key))

    def caller(self, step: Step) -> Callable[[int, int, dict[str, Any], str | None], tuple[Any, ...]]:
        """``call`` for the rows of a step over a file, a call a row, with what is the same for
        every row looked up once; it takes the call's ``idx``, the row's number, the row and its
        key as the check filled it."""
        if self.serialize_on is not None or self.redactor is None or not isinstance(step.key, str):
            return lambda idx, index, row, key: self.call(step, idx, (index, None, 1), row, key)
        task, num, deps = self.task, step.num, self._deps(step.num)
        dumps, mask = self._dumps, self.redactor.text

        def one(idx: int, index: int, row: dict[str, Any], key: str | None) -> tuple[Any, ...]:
            if key is None:
                return self.call(step, idx, (index, None, 1), row)
            # As ``call`` makes it: no serial, the key masked and known.
            return (task, num, idx, "call", index, None, 1, dumps(row), deps, None, mask(key), True)

        return one

    def _deps(self, num: int) -> str:
        """The step's dependencies as COPY's text of an ``int4[]``, made once a step."""
        found = self._dep_texts.get(num)
        if found is None:
            deps = dep_nums(self.pool, self.plans[num])
            found = self._dep_texts[num] = "{" + ",".join(map(str, deps)) + "}"
        return found

    def _key(self, plan: StepPlan, rows: tuple[int | None, int | None, int], data: Any,
             filled: str | None = None) -> tuple[str | None, bool | None]:
        """The call's key as a runner makes it (a key holds only ``${row...}`` and variables), and
        whether it is known here, so the claim that hands the call out can move it to sent in the
        same round trip; (None, True): no key; (None, None): none made here (the runner makes it,
        and tells what is wrong with it).  ``filled``: the first row's key, filled already."""
        first, last, _ = rows
        if self.redactor is None:
            return None, None
        if plan.step.key is None:
            return None, True
        if filled is not None:
            key = filled
        else:
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
