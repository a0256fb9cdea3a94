"""The calls of a step over an earlier step's table, made by the runner that claims its
placeholder once that step is done, from the rows the journal keeps of the table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pooler.journal.work import KEY_COLUMN, TaskJournal, WorkRow, WorkStore
from pooler.pool.compiler import empty_source
from pooler.pool.model import Pool, Step
from pooler.run.config import RunConfig
from pooler.run.progress import Progress
from pooler.run.rulings import table_to_read
from pooler.run.unsent import Unsent
from pooler.run.workplan import PLACEHOLDER, Planner


def table_calls(pool: Pool, step: Step, placeholder: WorkRow, work: WorkStore, planner: Planner
                ) -> list[tuple[Any, ...]] | str:
    """The work rows of ``step``'s calls, or the problem that fails it (its table missing, or
    empty where the step does not allow it)."""
    fe = step.for_each
    assert fe is not None
    assert fe.step is not None
    source = pool.step_named(fe.step)
    assert source is not None
    names, _ = work.table(source.num, None)
    name, problem = table_to_read(step, source.label, names)
    if problem is not None:
        return problem
    assert name is not None
    _, data = work.table(source.num, name)
    if not data and not fe.allow_empty:
        # An empty feed must not pass for a completed import, as an empty file would not.
        return empty_source(step, f"the table of step {fe.step}").message
    held = work.planned(step.num)
    if placeholder.row_first == 0:
        # Put back by a run again that sent the source step again: every row of its table as it
        # is now, but for the calls whose key the step keeps (done, or in doubt).
        kept = work.kept_keys(step.num)
        return [c for c in planner.rows_of(step, data, idx=held.next_idx)
                if c[KEY_COLUMN] is None or c[KEY_COLUMN] not in kept]
    # The calls a sampled plan made of the table stay, and its rows after them are planned.
    return list(planner.rows_of(step, data[held.rows:], first=held.rows, idx=held.next_idx))


def expand(row: WorkRow, step: Step, *, pool: Pool, task: str, journal: TaskJournal, work: WorkStore,
           config: RunConfig, unsent: Unsent, progress: Progress) -> None:
    """The placeholder ``row`` of ``step`` put in its calls' place, or the step failed on it (its
    table missing, or empty where the step does not allow it)."""
    # The task's sample as it is now (a full run may have widened it since this runner joined).
    shared = journal.shared(task)
    sample = None if shared is None else shared.get("sample")
    planner = Planner(pool, task, config.variables, sample, redactor=config.redactor)
    calls = table_calls(pool, step, row, work, planner)
    if isinstance(calls, str):
        failed = unsent.broken_table(row, calls)
        assert failed.entry is not None
        work.done(replace(row, idx=PLACEHOLDER), failed.status, failed.entry, None, doubt=None,
                  halt=failed.halt, judge=failed.judge)
        return
    if work.expand(row, calls):
        progress.counted(row.num)
