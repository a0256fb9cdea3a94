"""A runner's calls held back before they start: the task's pause (a busy answer's Retry-After,
heard by any runner of the task), the rate an adaptive width learnt (run/flow.py), and their
rate limits (``rate``): each waits for its slot in its step's bucket, which the journal keeps, so
that every runner of a task takes its slots from one bucket; last, its store's rate, a bucket every
task that calls the store shares (run/storerate.py).

The wait is on the runner's own thread, before the call is handed to a worker: the bucket orders
the calls, and the next one waits its turn behind this one.  A wait the run's stop cuts short
sends nothing.  The retries of one call (``retry``) take no slot of their own: their backoff
(or the Retry-After they were answered) already spaces them.
"""

from __future__ import annotations

import threading
import time

from pooler.journal.work import WorkRow, WorkStore
from pooler.pool.rate import Pace
from pooler.run.callplan import Prepared, serial_value
from pooler.run.flow import Flow
from pooler.run.storerate import StorePace

#: The journal's bucket of the task's pause (no step bucket is named so: they are ``pool`` and
#: ``step N``).
PAUSE = "pause"
#: The shortest pause (seconds) a busy answer holds the task for, whatever its Retry-After: about
#: the second a store's rate limit counts calls in, so calls come back to a bucket that has
#: refilled instead of spinning against it on a Retry-After of a millisecond.
MIN_PAUSE = 1.0
#: How long (seconds) a runner trusts what it last read of the task's pause: another runner's
#: pause reaches it this late at most, and a runner with quick calls reads it ten times a second.
PAUSE_READ = 0.1


class Pacer:
    """The waits of one runner's calls."""

    def __init__(self, work: WorkStore, paces: dict[int, Pace], stop: threading.Event, flow: Flow) -> None:
        self.work = work
        self.paces = paces
        #: The runner's slots in its store's rate, when the store has one (``run_task`` sets it).
        self.store: StorePace | None = None
        self.stop = stop
        self.flow = flow
        self._read_at = float("-inf")
        self._paused_until = 0.0

    def wait(self, row: WorkRow, got: Prepared) -> bool:
        """Wait for the call's turn; False when the run stopped meanwhile (the call is not sent).
        A journal that fails raises ``JournalError``, as any of the runner's journal calls."""
        waited = 0.0
        for wait in (self._pause, self.flow.spacing, lambda: self._slot(row, got), self._store_share,
                     self._store_slot):
            seconds = wait()
            if seconds > 0:
                waited += seconds
                if wait == self._pause:
                    self.flow.held(seconds)
                if self.stop.wait(seconds):
                    return False
        self.flow.started(waited)
        return True

    def _pause(self) -> float:
        now = time.monotonic()
        asked = self.flow.pause_asked()
        if asked is not None:
            self.work.hold(PAUSE, asked)
        if asked is not None or now >= self._read_at + PAUSE_READ:
            self._read_at = now
            self._paused_until = now + self.work.held(PAUSE)
        return max(0.0, self._paused_until - now)

    def _slot(self, row: WorkRow, got: Prepared) -> float:
        pace = self.paces.get(row.num) if self.paces else None
        if pace is None:
            return 0.0
        value = serial_value(got.params, pace.rate.key) if pace.rate.key else None
        return self.work.pace(pace.bucket_of(value), pace.rate.interval, pace.rate.tolerance)

    # The store's rate last, once the task's own waits are over: its task's share, then its slot
    # in the store's bucket, taken as near to its start as can be.

    def _store_share(self) -> float:
        return self.store.share() if self.store is not None else 0.0

    def _store_slot(self) -> float:
        return self.store.slot() if self.store is not None else 0.0
