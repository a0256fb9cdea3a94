"""A task's answer (contract section 3), built from the calls the journal recorded, whichever runner
made them: any runner, on any host, at any time, gets the same answer from the same records.

A call not recorded done counts as not run: nothing is reported completed that the journal does
not hold.  A call the journal holds as sent with no outcome is in doubt when its runner died, or
when the runner that asks sent it and could not record its outcome (``unrecorded``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pooler.journal.records import FlowDoc, PlanCounts, TaskRow
from pooler.journal.work import TaskJournal
from pooler.pool.budget import Budgets, budgets_of, tolerate_of
from pooler.pool.model import Pool
from pooler.run.answer import Collector
from pooler.run.entries import head_of, not_sent
from pooler.statuses import LANDED, CallStatus, StepStatus, TaskStatus, WorkState

#: What ``pooler runs`` says of a task whose every runner died without finishing.
DEAD = TaskStatus.DEAD
#: What the answer of such a task says of it.
DIED = "the run died before it finished (killed, or the machine went down)"


def steps_doc(pool: Pool) -> list[dict[str, Any]]:
    """What the answer needs of each step, kept with the task so ``pooler show`` needs no pool file."""
    return [{"num": s.num, "name": s.name, "unit": s.unit, "command": s.command,
             "over_rows": s.for_each is not None,
             "tolerate": None if s.tolerate is None else s.tolerate.doc()} for s in pool.steps]


def shared_budgets(shared: dict[str, Any]) -> Budgets:
    """The error budgets a task keeps of its pool."""
    return budgets_of(tolerate_of(shared.get("tolerate")),
                      [(int(s["num"]), tolerate_of(s.get("tolerate"))) for s in shared["steps"]])


def task_answer(journal: TaskJournal, task: str, shared: dict[str, Any], *, trip_ms: int = 0,
                interrupted: str | None = None,
                unrecorded: Mapping[tuple[int, int], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The answer of the task from its work rows; ``shared`` is what the task keeps of its pool.
    A task whose runners died (``interrupted`` is ``DIED``) tells the calls they left sent in doubt;
    so does the runner whose journal failed under it, with the in-doubt entries it gives of the
    calls it sent and could not record (``unrecorded``, by step and idx)."""
    by_num: dict[int, list[tuple[Any, ...]]] = {}
    steps = {int(s["num"]): s for s in shared["steps"]}
    unrecorded = unrecorded or {}
    for found in map(list, journal.answer_rows(task)):
        told = unrecorded.get((int(found[0]), int(found[1]))) if found[4] != WorkState.DONE else None
        row = found if told is None else _in_doubt(found, told)
        if told is None and interrupted == DIED and found[4] == WorkState.SENT:
            row = _left(found, steps[int(found[0])])
        if row[13] and row[5] == CallStatus.COMPLETED:
            # Done by an earlier run of the task: not sent in this one, as a single-host run
            # tells a key an earlier run did.
            row[5], row[6] = CallStatus.SKIPPED, {**row[6], "status": CallStatus.SKIPPED}
        by_num.setdefault(int(row[0]), []).append(tuple(row))
    collector = Collector(include_results=bool(shared["options"]["include_results"]))
    total = 0
    for step in shared["steps"]:
        calls = by_num.get(int(step["num"]), [])
        # A step over rows planned with none (an empty file it allows) has no call to count.
        total += len(calls) if step["over_rows"] else max(len(calls), 1)
        if not step["over_rows"]:
            _single(collector, calls)
        else:
            _over_rows(collector, step, calls)
    answer = collector.answer(total=total, task=task, trip_ms=trip_ms, interrupted=interrupted)
    budgets = shared_budgets(shared)
    if budgets.all:
        answer["tolerated"] = budgets.tolerated(journal.budget_counts(task))
    run = journal.run_of(task)
    flows = [f for f in journal.flows(task) if f["run"] == run]
    if flows:
        answer["flow"] = flow_summary(flows)
    return answer


def flow_summary(flows: list[FlowDoc]) -> dict[str, int]:
    """What flow control did in a run, over its runners: the answer's ``flow``."""
    return {"throttled_ms": sum(f["throttled_ms"] for f in flows),
            "highest_width": sum(f["highest"] for f in flows), "final_width": sum(f["final"] for f in flows),
            "busy": sum(f["busy"] for f in flows), "breaker_trips": sum(f["trips"] for f in flows),
            "held_ms": sum(f.get("held_ms", 0) for f in flows),
            "busy_resent": sum(f.get("busy_resent", 0) for f in flows),
            "busy_not_run": sum(f.get("busy_not_run", 0) for f in flows)}


def _left(row: list[Any], step: dict[str, Any]) -> list[Any]:
    """A call a dead runner sent with no answer recorded: in doubt, as the run left it."""
    key, first, last = row[14], row[15], row[16]
    of = head_of(step)
    if first is not None and int(row[3]) > 1:
        of["rows"] = [first, last]
    elif first is not None:
        of["row"] = first
    entry = not_sent(of, CallStatus.IN_DOUBT, key, f"sent, and {DIED} with no answer recorded: it may or "
                     "may not have been carried out", step_id=row[9])
    return _in_doubt(row, dict(entry))


def _in_doubt(row: list[Any], entry: dict[str, Any]) -> list[Any]:
    """An answer row of a call not recorded done, told in doubt with ``entry``."""
    return [*row[:4], WorkState.DONE, CallStatus.IN_DOUBT, entry, None, row[8], *row[9:13], False, *row[14:]]


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
    if not calls:
        # Planned with no rows (an empty source it allows): nothing to do, and nothing left undone.
        collector.close_rows(int(step["num"]), status=CallStatus.COMPLETED, rows_total=0, whole=True)
        return
    # A placeholder counts once it is done: its step could not read the table it runs over.
    real = [r for r in calls if r[2] == "call" or r[4] == WorkState.DONE]
    rows_total = sum(int(r[3]) for r in real) if real else None
    blocked = [r for r in real if r[4] == WorkState.DONE and r[5] == CallStatus.NOT_RUN]
    if real and len(blocked) == len(real):
        why = (blocked[0][6] or {}).get("message", "")
        if all(r[2] != "call" for r in real):
            # A step over a table never written: its rows were never counted.
            rows_total = None
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
    # A call set aside not run (by a redrive that left it) keeps the step from being whole.
    whole = bool(real) and done == len(real) and not blocked
    # The step's wall time in this run: from its first call sent to its last answer.
    sent = [int(r[11]) for r in real if r[11] is not None and r[12] is not None and not r[13]]
    trip = max(int(r[12]) for r in real if r[12] is not None) - min(sent) if sent else None
    if CallStatus.IN_DOUBT in statuses:
        status = CallStatus.IN_DOUBT
    elif CallStatus.FAILED in statuses:
        status = CallStatus.FAILED
    elif whole:
        status = CallStatus.COMPLETED
    elif statuses & set(LANDED):
        # Cut short (a signal, a stop): rows that landed make it partial, not "not run".
        status = StepStatus.PARTIAL
    else:
        status = CallStatus.NOT_RUN
    collector.close_rows(int(step["num"]), status=status, rows_total=rows_total, whole=whole,
                         detail=detail if status == CallStatus.COMPLETED else None, trip_ms=trip)


def answer_so_far(journal: TaskJournal, task: str, *, died: bool = False) -> dict[str, Any] | None:
    """The answer so far of a task still running (built from its calls), or of one whose runners
    ``died``; None for a task that finished (its recorded answer is whole) or one planned before
    tasks kept work rows."""
    state = journal.answer_state(task)
    if state is None or state[0] is None or (state[1] != TaskStatus.RUNNING and not state[2]):
        return None
    return task_answer(journal, task, state[0], interrupted=DIED if died else None)


class WorkTasks:
    """The tasks of a journal as ``TaskView`` tells them (``pooler.journal.api``): a task none of
    whose runners is alive is ``dead``; the answer of one still running, or dead, is built from
    its calls, whole, from any host."""

    def __init__(self, journal: TaskJournal) -> None:
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
        row = self.journal.task(task_id)
        died = row is not None and not running_here and self._told(row).status == DEAD
        found = answer_so_far(self.journal, task_id, died=died)
        if found is None:
            return self.journal.answer(task_id)
        if live and row is not None and row.status == TaskStatus.RUNNING and (
                running_here or self.journal.live_runners(task_id)):
            # A run still going: nothing it did is its answer yet, as the single-host engine told it.
            found = {**found, "result": False, "status": TaskStatus.RUNNING}
        return found

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        return self.journal.plan_counts(task_id)

    def where(self) -> str:
        return self.journal.where()

    def close(self) -> None:
        self.journal.close()
