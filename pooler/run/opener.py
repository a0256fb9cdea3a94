"""Opens a step's calls when the scheduler starts it: one call, or one per row or chunk of its
rows, taken from the task's recorded plan, else from its data file or the table of an earlier
step; and how many calls a step over rows stands for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, NoReturn

from pooler.errors import InputError, Problem
from pooler.pool.compiler import Plan, empty_source
from pooler.pool.model import Step
from pooler.pool.rows import count_rows, iter_rows
from pooler.run.callplan import Call, StepPlan
from pooler.run.rulings import table_to_read
from pooler.run.scheduler import StepRun
from pooler.run.tables import TableWriter


def _raise(problem: Problem) -> NoReturn:
    raise InputError(problem.message, file=problem.file, line=problem.line, column=problem.column,
                     step=problem.step, path=problem.path, source_line=problem.source_line)


#: A planned row: its number, its data, and whether a new plan found it done already.
Planned = tuple[int, dict[str, Any], bool]


def _not_empty(step: Step, rows: Iterator[Planned], source: str) -> Iterator[Planned]:
    """The rows, or the step's failure when there are none (read lazily, as the rows are)."""
    first = next(rows, None)
    if first is None:
        _raise(empty_source(step, source))
    yield first
    yield from rows


def count_planned(run: StepRun, rows: int | None, sample: int | None) -> None:
    if rows is None:
        return
    if sample is not None:
        rows = min(rows, sample)
    run.rows_total = rows
    chunk = run.plan.step.for_each.chunk if run.plan.step.for_each else None
    run.planned = math.ceil(rows / chunk) if chunk else rows


@dataclass
class CallOpener:
    """Opens a step's calls when it starts: one call, or one per row or chunk of its data."""

    compiled: Plan
    writer: TableWriter
    sample: int | None
    #: Where a chunk an earlier run of the task sent ends: see ``CallRunner.recorded_span``.
    recorded: Callable[[StepPlan, int, Any], int | None]
    #: The rows of a step from the task's recorded plan, or None when it has none for the step.
    planned: Callable[[int], Iterator[Planned] | None] = lambda num: None

    def __call__(self, run: StepRun, by_name: dict[str, StepRun]) -> Iterator[Call]:
        plan = run.plan
        fe = plan.step.for_each
        if fe is None:
            return iter([Call(plan)])
        data = self.compiled.data.get(plan.step.num)
        rows: Iterator[Planned] | None = self.planned(plan.step.num)
        source = f"the file {data.path}" if data is not None else f"the table of step {fe.step}"
        if rows is None:
            if data is not None:
                read = data.iter_rows()
            else:
                path = self._table_of(run, by_name)
                count_planned(run, count_rows(path, "jsonl"), self.sample)
                read = iter_rows(path, "jsonl")
            rows = ((i, row, False) for i, row in enumerate(read))
        if not fe.allow_empty:
            rows = _not_empty(plan.step, rows, source)
        if self.sample is not None:
            rows = islice(rows, self.sample)
        if fe.chunk:
            return self._chunked(plan, rows, fe.chunk)
        return (Call(plan, row=i, data=row) for i, row, _ in rows)

    def _chunked(self, plan: StepPlan, rows: Iterator[Planned], size: int) -> Iterator[Call]:
        """Chunks of ``size`` rows, but a chunk the task sent before is cut as it was then, and a
        chunk never reaches over a row a new plan found done (those are one skipped call a run)."""
        item = next(rows, None)
        while item is not None:
            first, row, done = item
            if done:
                last = first
                item = next(rows, None)
                while item is not None and item[2] and item[0] == last + 1:
                    last = item[0]
                    item = next(rows, None)
                yield Call(plan, row=first, last=last, size=last - first + 1, done=True)
                continue
            recorded = self.recorded(plan, first, row)
            want = size if recorded is None or recorded < first else recorded - first + 1
            part, last = [row], first
            item = next(rows, None)
            while item is not None and len(part) < want and not item[2] and item[0] == last + 1:
                part.append(item[1])
                last = item[0]
                item = next(rows, None)
            yield Call(plan, row=first, last=last, data=part, size=len(part))

    def _table_of(self, run: StepRun, by_name: dict[str, StepRun]) -> Path:
        step = run.plan.step
        fe = step.for_each
        assert fe is not None
        assert fe.step is not None
        source = by_name.get(fe.step.lower())
        if source is None:
            _raise(step.problem(f"for_each.step of step {step.num} names no earlier step: {fe.step}.",
                                "for_each", "step"))
        table, problem = table_to_read(step, source.plan.step.label, sorted(source.tables))
        if problem is not None:
            _raise(step.problem(problem, "for_each"))
        assert table is not None
        path = self.writer.path_for(source.plan.prefix, table)
        if not path.is_file():
            _raise(step.problem(
                f"step {step.num} reads the table {table} of step {source.plan.step.label}, whose file "
                f"{path} is gone.", "for_each"))
        return path
