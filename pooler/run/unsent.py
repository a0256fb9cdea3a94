"""How a runner ends a call without sending it: one found in doubt (weighed by ``--in-doubt``),
one whose step cannot run (a step it refers to did not complete), and a step over a table that
cannot be read.  Each ends as a ``Settled`` the journal records."""

from __future__ import annotations

import time
from dataclasses import replace

from pooler.journal.documents import Entry
from pooler.journal.work import Settled, WorkRow
from pooler.pool.budget import stopping
from pooler.pool.model import Pool
from pooler.run.callplan import Call, StepPlan
from pooler.run.config import RunConfig
from pooler.run.entries import not_run, not_sent
from pooler.run.identity import run_of_step_id
from pooler.run.rulings import BY_EXPIRED_RUNNER, rule_in_doubt
from pooler.statuses import CallStatus


def call_of(plan: StepPlan, row: WorkRow) -> Call:
    """The call a work row stands for."""
    if row.row_last is not None:
        return Call(plan, row=row.row_first, last=row.row_last, data=row.data, size=row.size)
    return Call(plan, row=row.row_first, data=row.data)


class Unsent:
    """The endings of calls not sent, for the runner of ``pool`` in run ``run`` of its task."""

    def __init__(self, pool: Pool, plans: dict[int, StepPlan], config: RunConfig, run: int) -> None:
        self.pool = pool
        self.budgets = pool.budgets()
        self.plans = plans
        self.config = config
        self.run = run
        #: When (``time.monotonic``) the request of each call found in doubt that goes to its probe
        #: left, by (step, idx), as the journal told it: what the probe's answer proves depends on it.
        self.left: dict[tuple[int, int], float] = {}

    def _head(self, row: WorkRow) -> Entry:
        return call_of(self.plans[row.num], row).head()

    def on_doubt(self, row: WorkRow, expired: bool) -> Settled | None:
        """A call sent and never recorded, by a runner whose lease expired or by an earlier run of
        the task: the task's --in-doubt policy, by the rule a single-host run follows.  A call
        without a key an earlier run left in doubt is sent again, as a new call: nothing tells the
        store it is a repeat, nor lets a run tell it from a new one.  A call a runner of an earlier
        run left sent (a runner killed, the task run again) is that earlier run's."""
        sent_in = None if row.step_id is None else run_of_step_id(row.step_id)
        if expired and sent_in is not None and sent_in < self.run:
            expired = False
        if row.key_text is None and not expired:
            return None
        if self.config.probe and self.plans[row.num].probe is not None:
            # Its step's probe tells whether it landed: the call goes to the runner, probed first.
            if row.sent_age is not None:
                self.left[(row.num, row.idx)] = time.monotonic() - row.sent_age
            return None
        ruling = rule_in_doubt(self._head(row), self.plans[row.num].step, row.key_text, row.step_id,
                               self.config.in_doubt, sender=BY_EXPIRED_RUNNER if expired else "")
        if ruling is None:
            return None
        halt, judge = stopping(self.budgets, self.pool.options.stop_on_error, row.num, ruling.status,
                               forced=ruling.halt, reason=f"step {row.num} in doubt")
        return Settled(ruling.status, self.config.redactor.value(ruling.entry), doubt=ruling.action,
                       halt=halt, judge=judge)

    def on_blocked(self, row: WorkRow, dep: int, status: str) -> Settled:
        step = self.plans[dep].step
        entry = not_run(self._head(row), self.plans[row.num].step.key, step.name, step.num, status)
        return Settled(CallStatus.NOT_RUN, self.config.redactor.value(entry))

    def broken_table(self, row: WorkRow, problem: str) -> Settled:
        """A step over a table that cannot be read: one failed call at its first row, as a step
        whose data broke."""
        entry = not_sent(self._head(replace(row, row_first=0)), CallStatus.FAILED, None, problem)
        halt, judge = stopping(self.budgets, self.pool.options.stop_on_error, row.num, CallStatus.FAILED)
        return Settled(CallStatus.FAILED, self.config.redactor.value(entry), halt=halt, judge=judge)
