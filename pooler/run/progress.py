"""What a runner tells its reporter of the task's progress: the run's total, each step's rows done
of its planned ones, and, for a run again, the calls earlier runs did (told as skipped, as the
answer tells them), so that the live view counts every call of the run's total."""

from __future__ import annotations

from pooler.journal.documents import Entry
from pooler.journal.work import TaskJournal
from pooler.pool.model import Step
from pooler.run.callplan import StepPlan
from pooler.run.events import Reporter
from pooler.statuses import LANDED, CallStatus


class Progress:
    """The progress one runner tells."""

    def __init__(self, journal: TaskJournal, task: str, plans: dict[int, StepPlan], reporter: Reporter
                 ) -> None:
        self.journal = journal
        self.task = task
        self.plans = plans
        self.reporter = reporter
        #: Steps over an earlier step's table whose calls this runner has not counted yet.
        self.uncounted: set[int] = set()
        self._rows_total: dict[int, int] = {}
        self._rows_done: dict[int, int] = {}

    def started(self, began: bool) -> None:
        """The run's total and each step's rows as planned now; ``began`` a run again of the task."""
        for num, planned in self.journal.planned(self.task).items():
            if planned.placeholder:
                self.uncounted.add(num)
            elif self.plans[num].over_rows:
                self._rows_total[num] = planned.rows
                self.reporter.rows_progress(self.plans[num].step, 0, planned.rows)
        if began:
            self._done_before()

    def _done_before(self) -> None:
        for row in self.journal.answer_rows(self.task):
            entry = row.entry
            if not row.earlier or entry is None or row.status not in LANDED:
                continue
            self.told(self.plans[row.num].step, {**entry, "status": CallStatus.SKIPPED}, row.num, row.size)

    def counted(self, num: int) -> None:
        """A step over a table whose calls are planned now (by this runner or another): the
        run's total and the step's rows, as they are now."""
        self.uncounted.discard(num)
        planned = self.journal.planned(self.task).get(num)
        self.reporter.calls_planned(self.journal.planned_calls(self.task))
        if planned is not None:
            self._rows_total[num] = planned.rows
            self.reporter.rows_progress(self.plans[num].step, self._rows_done.get(num, 0), planned.rows)

    def told(self, step: Step, entry: Entry, num: int, size: int) -> None:
        """A call has its one status."""
        rows = entry.get("rows")
        if isinstance(rows, list) and len(rows) == 2 and rows[1] - rows[0] + 1 != size:
            # A chunk of a compare's sent rows spans unchanged ones too: its reporters count its size.
            entry = {**entry, "size": size}
        self.reporter.step_finished(step, entry)
        if self.plans[num].over_rows:
            # The live view's bar: the rows this runner has done of the step's planned ones.
            self._rows_done[num] = self._rows_done.get(num, 0) + size
            self.reporter.rows_progress(step, self._rows_done[num], self._rows_total.get(num))
