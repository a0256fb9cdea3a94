"""A runner's calls held back before they start: the task's pause (a busy answer's Retry-After, heard
by any runner of the task), the rate an adaptive width learnt (run/flow.py), and their rate limits
(``rate``): each takes its slot in its step's bucket, which the journal keeps, so that every runner
of a task takes its slots from one bucket; last, its store's rate (run/storerate.py): its task's
share of the store, then its slot in the bucket every task that calls the store shares.

The pause, the learnt rate and the task's share of its store are waited for on the runner's own
thread, before the call is handed to a worker. The slots (the step's, then the store's) are taken on
the thread that sends the call, as the last thing before its first byte (the client's
``before_send``), once it is due (``Pacer.take``): the time a busy machine takes to hand a call
over, connect it and wake its thread comes before the slot, not between the slot and the store, so
the calls reach the store spaced as the bucket spaced them. The runner hands the next call of a
bucket over once this one has started (or one slot's interval later): one call at a time waits for
its slot, and the next waits its turn behind it. A wait the run's stop cuts short sends nothing. The
retries of one call (``retry``) take no slot of their own: their backoff (or the Retry-After they
were answered) already spaces them.
"""

from __future__ import annotations

import threading
import time

from pooler.errors import JournalError
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
#: How often (seconds) the runner looks at the run's stop while the call before waits to start.
STOP_LOOK = 0.02


class Unstarted(Exception):
    """A call did not start: the run stopped while it waited for its slot, or the journal failed as
    it took it (``Pacer.failed``).  Nothing of it was sent."""


class Start:
    """One call's start, on the thread that sends it: called as the last thing before the first
    byte of its first request, it takes the call's slot and waits for it (``Unstarted`` when the
    run stops meanwhile).  ``close`` ends it when the call ends without writing a byte."""

    def __init__(self, pacer: Pacer, row: WorkRow, got: Prepared, pace: Pace | None, waited: float) -> None:
        self._pacer = pacer
        self._row = row
        self._got = got
        self.pace = pace
        self._waited = waited
        #: Set once the call has its slot and went, or will not go.
        self.over = threading.Event()

    def __call__(self) -> None:
        if self.over.is_set():
            return
        try:
            try:
                seconds = self._pacer.take(self._row, self._got, self.pace)
            except JournalError as exc:
                self._pacer.failed = exc
                raise Unstarted from exc
            self._pacer.flow.started(self._waited + seconds)
        finally:
            self.over.set()

    def close(self) -> None:
        """The call ended; one that wrote nothing (it never reached the store) started all the same."""
        if not self.over.is_set():
            self._pacer.flow.started(self._waited)
            self.over.set()


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
        #: The last call handed over that takes a slot.
        self._last: Start | None = None
        #: How the journal failed as a call took its slot (on a worker: the runner tells it).
        self.failed: JournalError | None = None

    def wait(self, row: WorkRow, got: Prepared) -> Start | None:
        """Wait for the call's turn, on the runner's thread: its start, to call as its first byte
        goes; None when the run stopped meanwhile (the call is not sent).  A journal that fails
        raises ``JournalError``, as any of the runner's journal calls."""
        waited = 0.0
        for wait in (self._pause, self.flow.spacing, self._store_share):
            seconds = wait()
            if seconds > 0:
                waited += seconds
                if wait == self._pause:
                    self.flow.held(seconds)
                if self.stop.wait(seconds):
                    return None
        pace = self.paces.get(row.num) if self.paces else None
        if pace is None and self.store is None:
            start = Start(self, row, got, None, waited)
            start.close()
            return start
        before, self._last = self._last, None
        if before is not None and not self._after(before, pace):
            return None
        self._last = start = Start(self, row, got, pace, waited)
        return start

    def _after(self, before: Start, pace: Pace | None) -> bool:
        """Until the call handed over before this one started, or for one slot's interval at most
        (a call slow to connect does not hold the others up); False when the run stopped."""
        until = time.monotonic() + self._interval(before.pace or pace)
        while not before.over.wait(min(STOP_LOOK, max(0.0, until - time.monotonic()))):
            if self.stop.is_set():
                return False
            if time.monotonic() >= until:
                break
        return not self.stop.is_set()

    def _interval(self, pace: Pace | None) -> float:
        if pace is not None:
            return pace.rate.interval
        return self.store.rate.interval if self.store is not None else 0.0

    def _store_share(self) -> float:
        return self.store.share() if self.store is not None else 0.0

    def _pause(self) -> float:
        now = time.monotonic()
        asked = self.flow.pause_asked()
        if asked is not None:
            self.work.hold(PAUSE, asked)
        if asked is not None or now >= self._read_at + PAUSE_READ:
            self._read_at = now
            self._paused_until = now + self.work.held(PAUSE)
        return max(0.0, self._paused_until - now)

    def take(self, row: WorkRow, got: Prepared, pace: Pace | None) -> float:
        """On the sending thread: the call's slot in its bucket, taken once it is due; the seconds
        it waited (``Unstarted`` when the run stopped meanwhile).

        The slot is reserved when the call goes, not before it waits: a thread that wakes late on a
        busy machine takes a later slot and moves the bucket on with it, where a slot reserved
        ahead would leave the calls behind it as close to its late start as to their own."""
        began = time.monotonic()
        if pace is not None:
            value = serial_value(got.params, pace.rate.key) if pace.rate.key else None
            bucket = pace.bucket_of(value)
            while (ahead := self.work.held(bucket) - pace.rate.interval - pace.rate.tolerance) > 0:
                if self.stop.wait(ahead):
                    raise Unstarted
            # Another runner of the task may have taken it meanwhile: then the next one is this call's.
            seconds = self.work.pace(bucket, pace.rate.interval, pace.rate.tolerance)
            if seconds > 0 and self.stop.wait(seconds):
                raise Unstarted
        # The store's slot last, once the task's own rate let the call go: as near its start as can be.
        if self.store is not None and (seconds := self.store.slot()) > 0 and self.stop.wait(seconds):
            raise Unstarted
        return time.monotonic() - began
