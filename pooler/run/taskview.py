"""A task as the journal and the lock tell it: alive or dead, and a dead run's partial answer.

A run killed with SIGKILL (or a crash, a power cut) never writes its answer and leaves its task
``running`` in the journal. The journal knows which process makes each run of a task
(``Journal.live_runs``): a task none of whose runs is alive on this machine is dead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pooler.journal.records import PlanCounts, TaskRow
from pooler.journal.sqlite.journal import Journal
from pooler.run.answer import Collector
from pooler.run.entries import Entry, head, head_of, not_sent
from pooler.run.plancount import plan_counts
from pooler.statuses import CallStatus, RecordStatus, StepStatus, TaskStatus, final_status

#: What ``pooler runs`` says of a task whose run died without finishing.
DEAD = TaskStatus.DEAD
DIED = "the run died before it finished (killed, or the machine went down)"


def told(row: TaskRow, journal: Journal) -> TaskRow:
    """The row with ``running`` replaced by ``dead`` when no run of the task is alive."""
    if row.status != TaskStatus.RUNNING or journal.live_runs(row.id):
        return row
    return dataclasses.replace(row, status=DEAD)


#: What a call sent by a run still going on, with no answer yet, is told.
IN_FLIGHT = "sent, and no answer recorded yet: the run is still going - ask again for its answer"


def partial_answer(journal: Journal, row: TaskRow, *, live: bool = False) -> dict[str, Any]:
    """The answer of the task's last run as far as the journal recorded it.

    A call recorded as sent with no answer is in doubt: the run died while it was in flight, or
    (``live``: the run still goes on) its answer has not come yet - either way nobody knows yet
    whether the store carried it out.
    """
    records = [r for r in journal.calls(row.id) if r["run"] == row.runs]
    heads: dict[int, Entry] = {}
    for rec in records:
        entry = rec["result"] or {}
        if entry.get("unit"):
            heads.setdefault(rec["num"], head_of(entry))
    collector = Collector()
    over_rows: dict[int, list[str]] = {}
    for rec in records:
        entry = dict(rec["result"] or {})
        status = final_status(rec["status"])
        if not entry or rec["status"] == RecordStatus.SENT:
            entry = dict(not_sent(heads.get(rec["num"]) or head(rec["num"], "", "", ""), status, rec["key"],
                                  IN_FLIGHT if live else f"sent, and {DIED} with no answer recorded: it may "
                                  "or may not have been carried out", step_id=rec["step_id"]))
            if rec["row"] is not None:
                entry["row"] = rec["row"]
        entry["status"] = status
        if rec["row"] is None:
            collector.add(entry)
        else:
            collector.add_row(entry, len(range(entry["rows"][0], entry["rows"][1] + 1))
                              if isinstance(entry.get("rows"), list) else 1)
            over_rows.setdefault(rec["num"], []).append(entry["status"])
        if status == CallStatus.IN_DOUBT:
            collector.add_in_doubt(entry, "left", rec["step_id"])
    for num, statuses in over_rows.items():
        bad = next((s for s in (CallStatus.IN_DOUBT, CallStatus.FAILED) if s in statuses), None)
        collector.close_rows(num, status=bad or StepStatus.PARTIAL, rows_total=None, whole=False)
    answer = collector.answer(total=len(records), task=row.id, trip_ms=0,
                              interrupted=None if live else DIED)
    del answer["time"]
    if live:
        answer["result"] = False
        answer["status"] = TaskStatus.RUNNING
    return answer


class SqliteTasks:
    """The tasks of a SQLite journal as ``TaskView`` tells them (``pooler.journal.api``)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        return [told(r, self.journal) for r in self.journal.tasks(limit)]

    def task(self, task_id: str) -> TaskRow | None:
        row = self.journal.task(task_id)
        return None if row is None else told(row, self.journal)

    def answer(self, task_id: str, *, live: bool = False, running_here: bool = False
               ) -> dict[str, Any] | None:
        row = self.journal.task(task_id)
        if row is None:
            return None
        if running_here:
            # Its own run is not counted among the live ones: it is this process.
            return partial_answer(self.journal, row, live=True)
        row = told(row, self.journal)
        if row.status == DEAD:
            # No answer was written: the calls the journal holds are the run's partial answer.
            return partial_answer(self.journal, row)
        if row.status != TaskStatus.RUNNING:
            found = self.journal.answer(task_id)
            if found is not None:
                return found
        return partial_answer(self.journal, row, live=True) if live else None

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        return plan_counts(self.journal, task_id)

    def where(self) -> str:
        return str(self.journal.path)

    def close(self) -> None:
        self.journal.close()
