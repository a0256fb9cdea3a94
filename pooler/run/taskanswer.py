"""A task's answer (contract section 3), built from the calls the journal recorded, whichever runner
made them: any runner, on any host, at any time, gets the same answer from the same records.

A call not recorded done counts as not run: nothing is reported completed that the journal does
not hold.  A call the journal holds as sent with no outcome is in doubt when its runner died, or
when the runner that asks sent it and could not record its outcome (``unrecorded``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, cast

from pooler.journal.documents import Answer, Entry, RowsEntry, StepDoc, TaskDoc
from pooler.journal.records import AnswerRow, FlowDoc, PlanCounts, TaskRow
from pooler.journal.work import TaskJournal
from pooler.pool.budget import Budgets, budgets_of, tolerate_of
from pooler.pool.model import Pool
from pooler.run.answer import Collector
from pooler.run.entries import head_of, not_sent
from pooler.statuses import LANDED, CallStatus, CompareClass, StepStatus, TaskStatus, WorkState

#: What ``pooler runs`` says of a task whose every runner died without finishing.
DEAD = TaskStatus.DEAD
#: What the answer of such a task says of it.
DIED = "the run died before it finished (killed, or the machine went down)"


def steps_doc(pool: Pool) -> list[StepDoc]:
    """What the answer needs of each step, kept with the task so ``pooler show`` needs no pool file."""
    return [{"num": s.num, "name": s.name, "unit": s.unit, "command": s.command,
             "over_rows": s.for_each is not None,
             "tolerate": None if s.tolerate is None else s.tolerate.doc()} for s in pool.steps]


def shared_budgets(shared: TaskDoc) -> Budgets:
    """The error budgets a task keeps of its pool."""
    return budgets_of(tolerate_of(shared.get("tolerate")),
                      [(int(s["num"]), tolerate_of(s.get("tolerate"))) for s in shared["steps"]])


def task_answer(journal: TaskJournal, task: str, shared: TaskDoc, *, trip_ms: int = 0,
                interrupted: str | None = None,
                unrecorded: Mapping[tuple[int, int], Entry] | None = None) -> Answer:
    """The answer of the task from its work rows; ``shared`` is what the task keeps of its pool.
    A task whose runners died (``interrupted`` is ``DIED``) tells the calls they left sent in doubt;
    so does the runner whose journal failed under it, with the in-doubt entries it gives of the
    calls it sent and could not record (``unrecorded``, by step and idx).

    The rows are read once, streamed in file order, and added up as they come: the answer of a
    task of a million calls holds a step's counts and its first failures, never its calls."""
    steps = {int(s["num"]): s for s in shared["steps"]}
    told = unrecorded or {}
    collector = Collector(include_results=bool(shared["options"]["include_results"]))
    total = 0
    rows = (_as_run(found, steps, interrupted, told) for found in journal.answer_rows(task))
    by_num = groupby(rows, key=lambda r: r.num)
    ahead = next(by_num, None)
    for num in sorted(steps):
        while ahead is not None and ahead[0] < num:
            ahead = next(by_num, None)
        calls: Iterator[AnswerRow] = ahead[1] if ahead is not None and ahead[0] == num else iter(())
        # A step over rows planned with none (an empty file it allows) has no call to count.
        total += _over_rows(collector, steps[num], calls) if steps[num]["over_rows"] else max(
            _single(collector, calls), 1)
    answer = collector.answer(total=total, task=task, trip_ms=trip_ms, interrupted=interrupted)
    compared = shared.get("compare")
    if compared:
        _unchanged(answer, compared)
    if shared.get("conflicts"):
        answer["conflicts"] = shared["conflicts"]
    budgets = shared_budgets(shared)
    if budgets.all:
        answer["tolerated"] = budgets.tolerated(journal.budget_counts(task))
    run = journal.run_of(task)
    flows = [f for f in journal.flows(task) if f["run"] == run]
    if flows:
        answer["flow"] = flow_summary(flows)
    return answer


def _unchanged(answer: Answer, compared: Mapping[str, Mapping[str, int]]) -> None:
    """The compares' counts in the answer: beside the counts of calls, the rows left unsent as
    unchanged; in each step's entry, its rows by class, and its message saying the unchanged."""
    answer["unchanged"] = sum(int(c[CompareClass.UNCHANGED]) for c in compared.values())
    for entry in answer["steps"]:
        found = compared.get(str(entry["num"]))
        if found is None:
            continue
        # A compare is a step over rows': its one entry is its summary.
        cast(RowsEntry, entry)["compare"] = dict(found)
        if found[CompareClass.UNCHANGED]:
            entry["message"] = f"{entry['message']}; {found[CompareClass.UNCHANGED]:,} unchanged, not sent"


def flow_summary(flows: list[FlowDoc]) -> dict[str, int]:
    """What flow control did in a run, over its runners: the answer's ``flow``."""
    return {"throttled_ms": sum(f["throttled_ms"] for f in flows),
            "highest_width": sum(f["highest"] for f in flows), "final_width": sum(f["final"] for f in flows),
            "busy": sum(f["busy"] for f in flows), "breaker_trips": sum(f["trips"] for f in flows),
            "held_ms": sum(f.get("held_ms", 0) for f in flows),
            "busy_resent": sum(f.get("busy_resent", 0) for f in flows),
            "busy_not_run": sum(f.get("busy_not_run", 0) for f in flows)}


def _left(row: AnswerRow, step: StepDoc) -> AnswerRow:
    """A call a dead runner sent with no answer recorded: in doubt, as the run left it."""
    of = head_of(step)
    if row.first is not None and row.size > 1:
        of["rows"] = [row.first, row.first if row.last is None else row.last]
    elif row.first is not None:
        of["row"] = row.first
    entry = not_sent(of, CallStatus.IN_DOUBT, row.key, f"sent, and {DIED} with no answer recorded: it may "
                     "or may not have been carried out", step_id=row.step_id)
    return _in_doubt(row, entry.copy())


def _in_doubt(row: AnswerRow, entry: Entry) -> AnswerRow:
    """An answer row of a call not recorded done, told in doubt with ``entry``."""
    return dataclasses.replace(row, state=WorkState.DONE, status=CallStatus.IN_DOUBT, entry=entry, doubt=None,
                               earlier=False)


def _doubt(collector: Collector, row: AnswerRow) -> None:
    if row.entry is not None:
        # A call in doubt with nothing done about it is listed too, as the run on SQLite lists it.
        collector.add_in_doubt(row.entry, row.doubt, row.doubted or row.step_id)


def _as_run(row: AnswerRow, steps: dict[int, StepDoc], interrupted: str | None,
            unrecorded: Mapping[tuple[int, int], Entry]) -> AnswerRow:
    """A work row as this run tells it: one this runner sent and could not record, or one a dead
    runner left sent, is in doubt; one done by an earlier run of the task is skipped, as a
    single-host run tells a key an earlier run did."""
    told = unrecorded.get((row.num, row.idx)) if row.state != WorkState.DONE else None
    if told is not None:
        row = _in_doubt(row, told)
    elif interrupted == DIED and row.state == WorkState.SENT:
        row = _left(row, steps[row.num])
    if row.earlier and row.status == CallStatus.COMPLETED and row.entry is not None:
        skipped: Entry = {**row.entry, "status": CallStatus.SKIPPED}
        row = dataclasses.replace(row, status=CallStatus.SKIPPED, entry=skipped)
    return row


def _single(collector: Collector, calls: Iterator[AnswerRow]) -> int:
    """The calls of a step of one call told; how many work rows it has."""
    count = 0
    for row in calls:
        count += 1
        if row.state == WorkState.DONE and row.entry is not None:
            collector.add(row.entry)
            _doubt(collector, row)
    return count


@dataclass
class _Rows:
    """What the calls of a step over rows add up to, as they stream past."""

    every: int = 0
    real: int = 0
    rows_total: int = 0
    calls: int = 0
    done: int = 0
    blocked: int = 0
    why: str = ""
    statuses: set[str] = field(default_factory=set)
    detail: Any = None
    last: int = -1
    first_sent: int | None = None
    last_done: int | None = None


def _over_rows(collector: Collector, step: StepDoc, calls: Iterator[AnswerRow]) -> int:
    """The step's calls added up, and its one entry made; how many work rows it has."""
    num = int(step["num"])
    collector.open_rows(head_of(step))
    n = _Rows()
    for row in calls:
        n.every += 1
        # A placeholder counts once it is done: its step could not read the table it runs over.
        if row.kind != "call" and row.state != WorkState.DONE:
            continue
        n.real += 1
        n.rows_total += row.size
        n.calls += row.kind == "call"
        if row.done_ms is not None:
            n.last_done = max(n.last_done or 0, int(row.done_ms))
            if row.sent_ms is not None and not row.earlier:
                sent = int(row.sent_ms)
                n.first_sent = sent if n.first_sent is None else min(n.first_sent, sent)
        if row.state != WorkState.DONE:
            continue
        n.done += 1
        status = row.status
        if status == CallStatus.NOT_RUN:
            if n.blocked == 0:
                n.why = "" if row.entry is None else row.entry.get("message", "")
            n.blocked += 1
            continue
        if status is None or row.entry is None:
            # Not a call's outcome: the journal records a done call's status and entry together.
            continue
        n.statuses.add(status)
        collector.add_row(row.entry, row.size)
        _doubt(collector, row)
        if status in LANDED and row.idx > n.last:
            n.last, n.detail = row.idx, row.detail
    if not n.every:
        # Planned with no rows (an empty source it allows): nothing to do, and nothing left undone.
        collector.close_rows(num, status=CallStatus.COMPLETED, rows_total=0, whole=True)
        return 0
    rows_total = n.rows_total if n.real else None
    if n.real and n.blocked == n.real:
        # Every call it has is blocked (nothing was added up): not run, with the reason.
        collector.close_rows(num, status=CallStatus.NOT_RUN, rows_total=None if n.calls == 0 else rows_total,
                             whole=False, why=n.why, calls=n.real)
        return n.every
    # A call set aside not run (by a redrive that left it) keeps the step from being whole.
    whole = bool(n.real) and n.done == n.real and not n.blocked
    # The step's wall time in this run: from its first call sent to its last answer.
    trip = None if n.first_sent is None or n.last_done is None else n.last_done - n.first_sent
    if CallStatus.IN_DOUBT in n.statuses:
        status = CallStatus.IN_DOUBT
    elif CallStatus.FAILED in n.statuses:
        status = CallStatus.FAILED
    elif whole:
        status = CallStatus.COMPLETED
    elif n.statuses & set(LANDED):
        # Cut short (a signal, a stop): rows that landed make it partial, not "not run".
        status = StepStatus.PARTIAL
    else:
        status = CallStatus.NOT_RUN
    collector.close_rows(num, status=status, rows_total=rows_total, whole=whole,
                         detail=n.detail if status == CallStatus.COMPLETED else None, trip_ms=trip)
    return n.every


def answer_so_far(journal: TaskJournal, task: str, *, died: bool = False) -> Answer | None:
    """The answer so far of a task still running (built from its calls), or of one whose runners
    ``died``; None for a task that finished (its recorded answer is whole) or one planned before
    tasks kept work rows."""
    state = journal.answer_state(task)
    if state is None or state.shared is None or (state.status != TaskStatus.RUNNING and not state.unanswered):
        return None
    return task_answer(journal, task, state.shared, interrupted=DIED if died else None)


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
               ) -> Answer | None:
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
