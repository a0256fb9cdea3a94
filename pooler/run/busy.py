"""A call the store turned away as busy, sent again: answered busy (429, 503 with Retry-After),
behind the task's pause and under the same key, while its step's patience (``busy_for``) lasts;
refused with a refusal its step names as busy (``retry.refusals``), under its key's next round,
within its attempts.  Neither was carried out, so sending it again is safe.  A call still busy
when its patience runs out stays not run, and the task stops: the store has been busy that long,
and ``pooler redrive`` sends what is left once it is not."""

from __future__ import annotations

import time
from dataclasses import replace

from pooler.journal.work import BUSY, WorkRow, WorkStore
from pooler.pool.model import Pool
from pooler.run.callplan import Outcome, Prepared
from pooler.run.flow import Flow, still_busy


class SendAgain:
    """What one runner sends again of the calls the store turned away as busy."""

    def __init__(self, pool: Pool, work: WorkStore, flow: Flow, task: str) -> None:
        self.pool = pool
        self.work = work
        self.flow = flow
        self.task = task
        #: Why the task stopped: a call stayed busy past its patience (None: it did not).
        self.down: str | None = None

    def epoch(self, row: WorkRow, got: Prepared, outcome: Outcome, stopping: bool) -> int | None:
        """The fencing epoch to send the call again under, or None: it is recorded as the outcome
        says (``stopping``: the run stops, nothing more is sent).  A journal that fails raises
        ``JournalError``, as any of the runner's journal calls."""
        got.carried = True
        if outcome.next_round:
            return None if stopping else self._next_round(row, got)
        now = time.monotonic()
        if got.busy_since is None:
            got.busy_since = now
        patience = self.pool.patience(outcome.call.plan.step)
        if stopping or self.down is not None or now - got.busy_since >= patience:
            self.flow.busy_ended(resent=False)
            if not stopping and self.down is None:
                self.down = still_busy(patience, self.task)
                self.work.halt(self.down)
            return None
        self.flow.busy_ended(resent=True)
        return got.epoch

    def _next_round(self, row: WorkRow, got: Prepared) -> int | None:
        """Gated again under the key's next round, so the journal keeps the round it goes under
        (the store may keep the refusal under the one it answered)."""
        if got.epoch is None:
            return None
        got.ids = replace(got.ids, round=got.ids.round + 1)
        ids = got.ids
        epoch = self.work.gate(replace(row, epoch=got.epoch), ids.key, ids.step_id or "", ids.round)
        return None if epoch == BUSY else epoch
