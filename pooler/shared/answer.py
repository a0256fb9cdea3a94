"""A shared task's answer (contract §3), built from the calls the journal recorded, whichever runner
made them: any runner, on any host, at any time, gets the same answer from the same records.

A call not recorded done counts as not run: nothing is reported completed that the journal does
not hold.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.schema import SQL
from pooler.journal.records import PlanCounts, TaskRow
from pooler.pool.model import Pool
from pooler.run.answer import Collector
from pooler.run.entries import head_of
from pooler.run.taskview import DEAD
from pooler.statuses import LANDED, CallStatus, TaskStatus, WorkState


def steps_doc(pool: Pool) -> list[dict[str, Any]]:
    """What the answer needs of each step, kept with the task so ``pooler show`` needs no pool file."""
    return [{"num": s.num, "name": s.name, "unit": s.unit, "command": s.command,
             "over_rows": s.for_each is not None} for s in pool.steps]


def task_answer(journal: PgJournal, task: str, shared: dict[str, Any], *, trip_ms: int = 0,
                interrupted: str | None = None) -> dict[str, Any]:
    """The answer of the task from its work rows; ``shared`` is what the task keeps of its pool."""
    by_num: dict[int, list[tuple[Any, ...]]] = {}
    for *row, earlier in journal.query(SQL["answer_rows"], (task, task)):
        if earlier and row[5] == CallStatus.COMPLETED:
            # Done by an earlier run of the task: not sent in this one, as a single-host run
            # tells a key an earlier run did.
            row[5], row[6] = CallStatus.SKIPPED, {**row[6], "status": CallStatus.SKIPPED}
        by_num.setdefault(int(row[0]), []).append(tuple(row))
    collector = Collector(include_results=bool(shared["options"]["include_results"]))
    total = 0
    for step in shared["steps"]:
        calls = by_num.get(int(step["num"]), [])
        total += max(len(calls), 1)
        if not step["over_rows"]:
            _single(collector, calls)
        else:
            _over_rows(collector, step, calls)
    return collector.answer(total=total, task=task, trip_ms=trip_ms, interrupted=interrupted)


def _doubt(collector: Collector, row: tuple[Any, ...]) -> None:
    entry, doubt, doubted, step_id = row[6], row[7], row[8], row[9]
    if entry is not None:
        # A call in doubt with nothing done about it is listed too, as the run on SQLite lists it.
        collector.add_in_doubt(entry, doubt, doubted or step_id)


def _single(collector: Collector, calls: list[tuple[Any, ...]]) -> None:
    for row in calls:
        if row[4] == WorkState.DONE and row[6] is not None:
            collector.add(row[6])
            _doubt(collector, row)


def _over_rows(collector: Collector, step: dict[str, Any], calls: list[tuple[Any, ...]]) -> None:
    collector.open_rows(head_of(step))
    # A placeholder counts once it is done: its step could not read the table it runs over.
    real = [r for r in calls if r[2] == "call" or r[4] == WorkState.DONE]
    rows_total = sum(int(r[3]) for r in real) if real else None
    blocked = [r for r in real if r[4] == WorkState.DONE and r[5] == CallStatus.NOT_RUN]
    if real and len(blocked) == len(real):
        why = (blocked[0][6] or {}).get("message", "")
        collector.close_rows(int(step["num"]), status=CallStatus.NOT_RUN, rows_total=rows_total, whole=False,
                             why=why,
                             calls=len(real))
        return
    statuses = set()
    detail: Any = None
    last = -1
    done = 0
    for row in real:
        if row[4] != WorkState.DONE:
            continue
        done += 1
        status = row[5]
        if status == CallStatus.NOT_RUN:
            continue
        statuses.add(status)
        collector.add_row(row[6], int(row[3]))
        _doubt(collector, row)
        if status in LANDED and int(row[1]) > last:
            last, detail = int(row[1]), row[10]
    whole = bool(real) and done == len(real)
    if CallStatus.IN_DOUBT in statuses:
        status = CallStatus.IN_DOUBT
    elif CallStatus.FAILED in statuses:
        status = CallStatus.FAILED
    elif whole:
        status = CallStatus.COMPLETED
    else:
        status = CallStatus.NOT_RUN
    collector.close_rows(int(step["num"]), status=status, rows_total=rows_total, whole=whole,
                         detail=detail if status == CallStatus.COMPLETED else None)


def shared_answer_of(journal: Any, task: str) -> dict[str, Any] | None:
    """The answer so far of a shared task still running (built from its calls); None for a task
    that finished (its recorded answer is whole) or one that is not shared."""
    from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415

    if not isinstance(journal, PgJournal):
        return None
    rows = journal.query(SQL["answer_state"], (task,))
    if not rows or rows[0][0] is None or (rows[0][1] != TaskStatus.RUNNING and not rows[0][2]):
        return None
    return task_answer(journal, task, rows[0][0])


class PgTasks:
    """The tasks of a PostgreSQL journal as ``TaskView`` tells them (``pooler.journal.api``)."""

    def __init__(self, journal: PgJournal) -> None:
        self.journal = journal

    def _told(self, row: TaskRow) -> TaskRow:
        if row.status != TaskStatus.RUNNING or self.journal.live_runners(row.id):
            return row
        return dataclasses.replace(row, status=DEAD)

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        return [self._told(r) for r in self.journal.tasks(limit)]

    def task(self, task_id: str) -> TaskRow | None:
        row = self.journal.task(task_id)
        return None if row is None else self._told(row)

    def answer(self, task_id: str, *, live: bool = False, running_here: bool = False
               ) -> dict[str, Any] | None:
        # Built from its calls while it runs (or after its runners died): whole, from any host.
        return shared_answer_of(self.journal, task_id) or self.journal.answer(task_id)

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        return self.journal.plan_counts(task_id)

    def where(self) -> str:
        return self.journal.where()

    def close(self) -> None:
        self.journal.close()
