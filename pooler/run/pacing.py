"""A runner's calls held to their rate limits (``rate``): each waits for its slot in its step's
bucket, which the journal keeps, so that every runner of a task takes its slots from one bucket.

The wait is on the runner's own thread, before the call is handed to a worker: the bucket orders
the calls, and the next one waits its turn behind this one.  A wait the run's stop cuts short
sends nothing.  The retries of one call (``retry``) take no slot of their own: their backoff
already spaces them.
"""

from __future__ import annotations

import threading

from pooler.journal.work import WorkRow, WorkStore
from pooler.pool.rate import Pace
from pooler.run.callplan import Prepared, serial_value


class Pacer:
    """The waits of one runner's calls."""

    def __init__(self, work: WorkStore, paces: dict[int, Pace], stop: threading.Event) -> None:
        self.work = work
        self.paces = paces
        self.stop = stop
        #: Seconds this runner's calls waited for their slots.
        self.waited = 0.0

    def wait(self, row: WorkRow, got: Prepared) -> bool:
        """Wait for the call's slot; False when the run stopped meanwhile (the call is not sent).
        A journal that fails raises ``JournalError``, as any of the runner's journal calls."""
        pace = self.paces.get(row.num)
        if pace is None:
            return True
        value = serial_value(got.params, pace.rate.key) if pace.rate.key else None
        wait = self.work.pace(pace.bucket_of(value), pace.rate.interval, pace.rate.tolerance)
        if wait <= 0:
            return True
        self.waited += wait
        return not self.stop.wait(wait)
