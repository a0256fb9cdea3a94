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

from pooler.errors import JournalError, PoolerError
from pooler.journal.work import OverTable
from pooler.pool.model import Pool, Step
from pooler.pool.paramplan import ParamsPlan, plan_params
from pooler.pool.references import parse_ref
from pooler.pool.rows import chunks, row_encoder
from pooler.pool.variables import key_filler, render_key
from pooler.redact import Redactor
from pooler.run.callplan import StepPlan, serial_value
from pooler.run.compare import Classified
from pooler.run.config import step_plan
from pooler.run.identity import chunk_key
from pooler.statuses import WorkState

#: The placeholder of a step over an earlier step's table (``idx`` of the row).
PLACEHOLDER = -1


def fingerprint(pool: Pool) -> str:
    """A digest of what the steps do (not where the file lies, nor its options)."""
    steps = [{"num": s.num, "unit": s.unit, "command": s.command, "name": s.name, "params": s.params,
              "key": s.key, "into": s.into, "debug": s.debug,
              "for_each": dataclasses.asdict(s.for_each) if s.for_each else None,
              "retry": dataclasses.asdict(s.retry) if s.retry else None,
              # Only where given: the fingerprint of a task planned before chunk_row stays its own.
              **({"chunk_row": s.chunk_row} if s.chunk_row is not None else {})} for s in pool.steps]
    text = json.dumps(steps, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: The steps whose plans were made last, and their plans: the runner that plans a task and then
#: runs it compiles its steps once (a pool of 2,000 steps with references compiles in tenths of
#: a second).  Plans are only read, so two users of one list of steps may share them.
_LAST: list[tuple[list[Step], dict[int, StepPlan]]] = []


def step_plans(pool: Pool) -> dict[int, StepPlan]:
    """Every step's plan (as the executor makes it), by step number."""
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is pool.steps:
        return last[1]
    plans = _step_plans(pool)
    _LAST[:] = [(pool.steps, plans)]
    return plans


def _step_plans(pool: Pool) -> dict[int, StepPlan]:
    plans: dict[int, StepPlan] = {}
    known: set[str] = set()
    for step in pool.steps:
        # The calls of a step over rows append to its table files: several runners share the step.
        plans[step.num] = step_plan(step, known, keep_tables=step.for_each is not None)
        if step.name:
            known.add(step.name.lower())
    return plans


def step_numbers(pool: Pool) -> dict[str, int]:
    """Each named step's number by its name in lower case (names are not told apart by case)."""
    return {s.name.lower(): s.num for s in reversed(pool.steps) if s.name}


class Planner:
    """Makes the work rows of a task (and, later, of a step over an earlier step's table)."""

    def __init__(self, pool: Pool, task: str, variables: Mapping[str, Any], sample: int | None, *,
                 redactor: Redactor | None = None, beyond: bool = True,
                 compared: Mapping[int, Classified] | None = None) -> None:
        self.pool = pool
        #: The steps whose compare classified their rows: only the rows they send are planned.
        self.compared = dict(compared or {})
        self.task = task
        self.variables = dict(variables)
        self.sample = sample
        #: The rows after the sample are planned too, ``beyond`` it (False: left out, for a plan
        #: made before every row was planned, which is widened from its files).
        self.beyond = beyond
        #: Masks each call's key as the journal keeps keys; without it the plan holds no keys.
        self.redactor = redactor
        self.plans = step_plans(pool)
        #: Each step's params with templates only: a reference stays its text (its step has not
        #: run).  Walked when a serialize_on value is first asked of the step, not for every step.
        self._texts: dict[int, ParamsPlan] = {}
        #: Each row's JSON as COPY takes it: text, encoded here rather than by a dumper a value;
        #: ASCII, as psycopg's dumper wrote it, whatever the database's encoding.
        self._dumps = row_encoder(ascii_only=True)
        self._dep_texts: dict[int, str] = {}
        self._numbers: dict[str, int] | None = None
        opts = pool.options
        self.serialize_on = opts.serialize_on if opts.mode == "parallel" else None
        self.serial_by_reference = serial_by_reference(pool, self.plans)

    def rows_of(self, step: Step, data: Iterable[Any], *, first: int = 0, idx: int = 0
                ) -> Iterator[tuple[Any, ...]]:
        """The calls of a step over rows: one per row, or one per chunk.  ``data`` starts at row
        ``first`` of the source and its calls are numbered from ``idx`` (both 0 but for the rows
        after those a plan holds already).  The rows after the sample (which counts from the
        source's first row) are planned ``beyond`` it: a run that asks for them releases them,
        and needs no data file for it; a chunk never reaches over the sample's end."""
        fe = step.for_each
        assert fe is not None
        keep = self.compared.get(step.num)
        if keep is not None:
            yield from self._sent_rows(step, data, keep, first, idx)
            return
        source: Iterator[Any] = iter(data)
        parts: list[tuple[Iterator[Any], str]] = [(source, WorkState.READY)]
        if self.sample is not None:
            # islice stops at the sample's end; the same iterator then goes on beyond it.
            parts = [(islice(source, max(self.sample - first, 0)), WorkState.READY)]
            if self.beyond:
                parts.append((source, WorkState.BEYOND))
        for rows, state in parts:
            if fe.chunk:
                for part in chunks(rows, fe.chunk):
                    yield self.call(step, idx, (first, first + len(part) - 1, len(part)), part, state=state)
                    first += len(part)
                    idx += 1
                continue
            one = self.caller(step, state)
            for row in rows:
                yield one(idx, first, row, None)
                first += 1
                idx += 1

    def _sent_rows(self, step: Step, data: Iterable[Any], keep: Classified, first: int, idx: int
                   ) -> Iterator[tuple[Any, ...]]:
        """``rows_of`` for a step whose compare classified its rows: only the rows it sends, each
        call (or chunk) under its rows' own numbers in the file, a chunk cut from sent rows alone
        and never across the sample's end."""
        fe = step.for_each
        assert fe is not None
        part: list[tuple[int, Any]] = []
        part_state = str(WorkState.READY)
        for index, row in enumerate(data, first):
            if not keep.sends(index):
                continue
            state = str(WorkState.READY if self.sample is None or index < self.sample else WorkState.BEYOND)
            if state == WorkState.BEYOND and not self.beyond:
                break
            if not fe.chunk:
                yield self.call(step, idx, (index, None, 1), row, state=state)
                idx += 1
                continue
            if part and (state != part_state or len(part) == fe.chunk):
                yield self._sent_chunk(step, idx, part, part_state)
                idx += 1
                part = []
            part.append((index, row))
            part_state = state
        if part:
            yield self._sent_chunk(step, idx, part, part_state)

    def _sent_chunk(self, step: Step, idx: int, part: list[tuple[int, Any]], state: str) -> tuple[Any, ...]:
        rows = [row for _, row in part]
        return self.call(step, idx, (part[0][0], part[-1][0], len(part)), rows, state=state)

    def split(self, at: int, num: int, *, idx: int, next_idx: int, first: int, data: list[Any]
              ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """A chunk planned beyond the sample that a wider sample cuts at row ``at``: the part
        before it (released, under its idx) and the part after it (still beyond, under ``next_idx``)."""
        step = self.plans[num].step
        head, tail = data[:at - first], data[at - first:]
        return (self.call(step, idx, (first, at - 1, len(head)), head),
                self.call(step, next_idx, (at, at + len(tail) - 1, len(tail)), tail, state=WorkState.BEYOND))

    def key_of(self, plan: StepPlan, row: dict[str, Any]) -> str | None:
        """The key of the call of ``row`` alone (a step keyed per row, or one row of a chunk), as
        the journal keeps it; None when the plan makes none."""
        return self._key(plan, (0, None, 1), row)[0]

    def call_row(self, step: Step, idx: int, first: int, part: list[Any]) -> tuple[Any, ...]:
        """The work row of the chunk of ``part`` from row ``first`` (beyond the sample when it
        starts after it)."""
        state = WorkState.BEYOND if self.sample is not None and first >= self.sample else WorkState.READY
        return self.call(step, idx, (first, first + len(part) - 1, len(part)), part, state=state)

    def single(self, step: Step) -> tuple[Any, ...]:
        """The work row of a step that is no step over rows: one call."""
        return self.call(step, 0, (None, None, 1), None)

    def placeholder(self, step: Step, *, again: bool = False) -> tuple[Any, ...]:
        """The work row that stands for the calls of a step over an earlier step's table.  One a
        run again puts back (``again``) starts at the table's first row (``row_first`` 0): its
        calls are made again from every row, but for the keys of those the step keeps; the first
        one's (None) plans the rows after those the plan holds."""
        return (self.task, step.num, PLACEHOLDER, "expand", 0 if again else None, None, 1, None,
                self._deps(step.num), None, None, None, WorkState.READY)

    def over_tables(self) -> list[OverTable]:
        """The steps over an earlier step's table, in step order, with the placeholder a run
        again puts back for each (``pooler.journal.work.plan_again``)."""
        out = []
        for step in self.pool.steps:
            fe = step.for_each
            source = self.pool.step_named(fe.step) if fe is not None and fe.step else None
            if source is not None:
                out.append(OverTable(step.num, source.num, self.placeholder(step, again=True)))
        return out

    def call(self, step: Step, idx: int, rows: tuple[int | None, int | None, int], data: Any,
             key: str | None = None, *, state: str = WorkState.READY) -> tuple[Any, ...]:
        """A call's COPY values; ``rows``: its first and last row (None: no chunk) and its size;
        ``key``: its first row's key as the check filled it (None: filled here); ``state``: ready,
        or beyond the sample."""
        plan = self.plans[step.num]
        first, last, size = rows
        text = None if data is None else self._dumps(data)
        if data is not None:
            self._no_secret(step, first, data, text)
        serial = self._serial(plan, data, last is not None) if self.serialize_on else None
        key_text, planned = self._key(plan, rows, data, key)
        if step.num in self.serial_by_reference:
            planned = None
        return (self.task, step.num, idx, "call", first, last, size, text, self._deps(step.num), serial,
                key_text, planned, str(state))

    def caller(self, step: Step, state: str = WorkState.READY
               ) -> Callable[[int, int, dict[str, Any], str | None], tuple[Any, ...]]:
        """``call`` for the rows of a step over a file, a call a row, with what is the same for
        every row looked up once; it takes the call's ``idx``, the row's number, the row and its
        key as the check filled it (None: filled here, by the check's own filler)."""
        if self.serialize_on is not None or self.redactor is None or not isinstance(step.key, str):
            return lambda idx, index, row, key: self.call(step, idx, (index, None, 1), row, key, state=state)
        task, num, deps, state = self.task, step.num, self._deps(step.num), str(state)
        dumps, mask, redactor = self._dumps, self.redactor.text, self.redactor
        fill, scope = key_filler(step.key), dict(self.variables)

        def one(idx: int, index: int, row: dict[str, Any], key: str | None) -> tuple[Any, ...]:
            text = dumps(row)
            if redactor.in_json_text(text):
                self._no_secret(step, index, row)
            if key is None:
                scope["row"] = row
                try:
                    key = fill(scope)
                except PoolerError:
                    # As ``_key`` leaves it: the runner makes the key, and tells what is wrong.
                    return (task, num, idx, "call", index, None, 1, text, deps, None, None, None, state)
            # As ``call`` makes it: no serial, the key masked and known.
            return (task, num, idx, "call", index, None, 1, text, deps, None, mask(key), True, state)

        return one

    def _no_secret(self, step: Step, first: int | None, data: Any, text: str | None = None) -> None:
        """Refuse a row that holds a secret's value (the token, a secret variable): the plan keeps
        its rows in the journal, which never holds a secret, and a masked row would send ``***``
        to the store.  So on every journal, SQLite too: a later run (or a runner on another host)
        sends the rows the plan holds, never a file read again.  ``text``: the row's JSON, made
        already (a row whose text holds no secret is not looked at again)."""
        if not self.redactor or (text is not None and not self.redactor.in_json_text(text)):
            return
        if self.redactor.value(data) is not data:
            fe = step.for_each
            source = fe.file if fe is not None and fe.file else "the rows"
            raise JournalError(
                f"row {(first or 0) + 1} of {source} of step {step.num} holds the value of a secret (the "
                "token or a secret variable), and a task keeps its rows in the journal, which never holds a "
                "secret - keep the secret out of the data file.")

    def _deps(self, num: int) -> str:
        """The step's dependencies as COPY's text of an ``int4[]``, made once a step."""
        found = self._dep_texts.get(num)
        if found is None:
            if self._numbers is None:
                # Looked up by name once for the pool: a pool of many steps plans in linear time.
                self._numbers = step_numbers(self.pool)
            deps = sorted(self._numbers[n] for n in self.plans[num].deps if n in self._numbers)
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

    def text_params(self, step: Step) -> ParamsPlan:
        """A step's params with references kept as their text (a saved plan's, before any step runs)."""
        found = self._texts.get(step.num)
        if found is None:
            found = self._texts[step.num] = plan_params(step.params, (), step)
        return found

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
            params = self.text_params(plan.step).fill(scope, {})
            if plan.chunk_field is not None:
                params = plan.chunk_params(params, data, self.variables)
        except PoolerError:
            return None
        value = serial_value(params, self.serialize_on)
        return None if value is None else serial_digest(value)


def serial_digest(value: str) -> str:
    """What a work row keeps of a serialize_on value: equal values, equal digests, no value."""
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def serial_by_reference(pool: Pool, plans: Mapping[int, StepPlan]) -> frozenset[int]:
    """The steps whose ``serialize_on`` value is a reference to an earlier step: it is known only
    to the runner that resolves a call's params, which gates the call with it (never the claim).
    ``plans``: the pool's step plans, as ``step_plans`` made them."""
    opts = pool.options
    if opts.mode != "parallel" or opts.serialize_on is None:
        return frozenset()
    return frozenset(s.num for s in pool.steps if _by_reference(plans[s.num], opts.serialize_on))


def _by_reference(plan: StepPlan, path: str) -> bool:
    """Whether the step's ``serialize_on`` value is a reference to an earlier step."""
    raw = serial_value(plan.step.params, path)
    if raw is None:
        return False
    text = json.loads(raw)
    parsed = parse_ref(text) if isinstance(text, str) else None
    return parsed is not None and parsed[0].lower() in plan.deps
