"""Flow control of one runner: how many calls it has in flight, what holds new calls back, and
when a store that looks down stops it - so a nightly import does not swamp a shop its customers
are using, and a store that goes away costs one clear stop, not thousands of failures.

- **A pause**: a busy answer (429, or 503 with ``Retry-After``) holds back every new call of the
  task until the wait it asked for is over, not only the call that got it (the runner publishes
  it in the journal, ``Pacer``, so every runner of the task pauses).
- **A width that adapts** (``adaptive: true``) is an AIMD limiter, as TCP Reno and Netflix's
  concurrency-limits ``AIMDLimit`` are: it starts at 2, grows by one call each time a whole
  window of answers came back clean and quick, and is cut by ``BACKOFF`` on a busy answer, a
  gateway's answer, or an answer slower than ``SLOW`` times the quickest recent ones (the latency
  guard of TCP Vegas, without its per-packet bookkeeping).  AIMD rather than a gradient limiter:
  its one signal a window is easy to follow in the report, it needs no estimate of the queue, and
  against a store that answers 429 (a clear loss) it is what converges fastest.  A window's
  answers are cut for once: answers of calls started before the last cut say nothing new.
  Busy answers also teach it the store's own rate, since a store's rate limit is about calls a
  second, which a width alone does not bound when calls are quick: each cut sets the rate calls
  start at to a share of what was achieved in the last second, and each clean window raises it by
  ``RATE_STEP``.  It never passes ``max_concurrency`` nor a configured ``rate`` (the journal's
  bucket still holds every call).
- **The breaker** (``breaker``, pool/breaker.py) counts the requests in a row that never reached
  the store or got a gateway's answer; at ``after`` it trips, and the runner stops starting calls
  and tries the store (runner.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from pooler.journal.records import FlowDoc, FlowEvent
from pooler.pool.breaker import BreakerRule

#: The share of the width (and of the learnt rate) kept after a cut.
BACKOFF = 0.7
#: An answer this many times slower than the quickest recent ones is a sign of strain ...
SLOW = 2.0
#: ... once it is slower than this (ms): below it, a store is quick whatever the ratio.
QUICK_MS = 20.0
#: Answers remembered for the quickest recent one.
RECENT = 50
#: The share of itself the learnt rate rises by after each clean window (at least a call a second).
RATE_STEP = 0.05
#: Seconds after a cut of the learnt rate before busy answers cut it again: a store's bucket
#: needs that long to show what the new rate does.
RATE_SETTLES = 1.0
#: How the answer and the message of a task the breaker stopped begin.
STORE_DOWN = "the store looks down"
#: ... and of a task stopped because a call stayed busy longer than its ``busy_for``.
STILL_BUSY = "the store stayed busy"
#: What the live view and the plain lines tell as the flow changes.
PAUSING = "pausing every new call for {:g} s: the store asked to wait (Retry-After)"
#: ... and, once the task has been held before, for how long in all.
HELD = "; the task held {:.1f} s so far"
OPEN = ("{} calls in a row did not reach the store: no call starts while it is tried with tool_list "
        "(up to {:g} s)")


def still_busy(patience: float, task: str) -> str:
    """Why a task stopped when a call was still answered busy after its patience."""
    return (f"{STILL_BUSY}: a call was still answered busy after {patience:g} s (retry busy_for: "
            f"{patience:g}); it and the calls not started are not run - `pooler redrive {task}` (or the same "
            f"--task {task}) sends them")


class Flow:
    """What holds back the calls of one runner, and what it did (for the answer and the report).
    ``attempted`` is called from the worker threads; the rest from the runner's."""

    def __init__(self, cap: int, *, adaptive: bool, breaker: BreakerRule | None,
                 tell: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.cap = cap
        self.adaptive = adaptive
        self.breaker = breaker
        self._tell = tell
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self.limit = float(min(cap, 2) if adaptive else cap)
        self.highest = self.width
        self._clean = 0
        self._quick: deque[float] = deque(maxlen=RECENT)
        self._cut_at = float("-inf")
        self._rate_cut_at = float("-inf")
        self._paused_until = 0.0
        self._asked: float | None = None
        self._next_start = 0.0
        self.learnt: float | None = None
        self._landed: deque[float] = deque()
        self.throttled_ms = 0
        self.busy = 0
        #: Milliseconds the runner's calls were held behind the task's pause (busy answers).
        self.held_ms = 0
        #: Calls answered busy sent again, and those left not run when their patience ran out.
        self.busy_resent = 0
        self.busy_not_run = 0
        #: Requests in a row that found the store down, and whether the breaker is open.
        self.down_row = 0
        self.tripped = False
        self.trips = 0
        #: The store answered in this run: a request that cannot reach it now may be the start of
        #: its going down (a store never reached is a wrong address, told call by call).
        self.reached = False
        self.events: list[FlowEvent] = []
        self._seconds: dict[int, list[int]] = {}

    @property
    def width(self) -> int:
        """The calls this runner may have in flight now."""
        return max(1, min(self.cap, int(self.limit)))

    # The runner's thread

    def pause_asked(self) -> float | None:
        """Seconds of pause a busy answer asked for since the last look (to publish), or None."""
        with self._lock:
            asked, self._asked = self._asked, None
            return None if asked is None else max(0.0, asked - self._clock())

    def spacing(self) -> float:
        """The seconds a call about to start waits for the rate the width learnt (its slot taken)."""
        with self._lock:
            if self.learnt is None:
                return 0.0
            now = self._clock()
            start = max(now, self._next_start)
            self._next_start = start + 1.0 / self.learnt
            return start - now

    def started(self, waited: float) -> None:
        """A call started after waiting ``waited`` seconds (its rate's slot, a pause, the spacing)."""
        with self._lock:
            row = self._second()
            row[1] += 1
            if waited > 0:
                ms = round(waited * 1000)
                self.throttled_ms += ms
                row[5] += ms

    def held(self, seconds: float) -> None:
        """The runner held its next call ``seconds`` behind the task's pause."""
        with self._lock:
            self.held_ms += round(seconds * 1000)

    def busy_ended(self, *, resent: bool) -> None:
        """A call answered busy is sent again (``resent``), or left not run (its patience ran out)."""
        with self._lock:
            if resent:
                self.busy_resent += 1
            else:
                self.busy_not_run += 1

    def closed(self, line: str) -> None:
        """The store answered again: the breaker closes, the width starts low again."""
        with self._lock:
            self.tripped = False
            self.down_row = 0
            if self.adaptive:
                self.limit = float(min(self.cap, 2))
        self.event("store back", line)

    def event(self, what: str, line: str) -> None:
        with self._lock:
            self.events.append({"at": round(self._wall(), 3), "what": what, "line": line})
        self._tell(line)

    def holds_back(self) -> bool:
        """Whether a call that never reached the store goes back among those not started rather
        than failing: the breaker is open, or the store that answered this run has stopped
        answering (the breaker counts towards opening)."""
        with self._lock:
            return self.breaker is not None and (self.tripped or (self.reached and self.down_row > 0))

    # The workers' threads

    def attempted(self, *, ms: float, busy: bool = False, gateway: bool = False, down: bool = False,
                  retry_after: float | None = None, since: float | None = None) -> None:
        """One request's lesson: an answer that took ``ms`` (or none: ``down``, it never reached
        the store); ``since``: when the call's first try began (its retries teach nothing new
        after a cut it was in flight for).  A request whose answer was lost is no lesson."""
        with self._lock:
            row = self._second()
            row[2] += busy
            row[3] += gateway
            row[4] += down
            told = self._count_down(down or gateway)
            if not down:
                told += self._answered(ms, busy=busy, gateway=gateway, retry_after=retry_after, since=since)
        for what, line in told:
            self.event(what, line)

    def _answered(self, ms: float, *, busy: bool, gateway: bool, retry_after: float | None,
                  since: float | None) -> list[tuple[str, str]]:
        told: list[tuple[str, str]] = []
        now = self._clock()
        self.reached = self.reached or not gateway
        if busy:
            self.busy += 1
            if retry_after is not None and now + retry_after > self._paused_until:
                if self._paused_until <= now:
                    held = HELD.format(self.held_ms / 1000) if self.held_ms else ""
                    told.append(("pause", PAUSING.format(retry_after) + held))
                self._paused_until = now + retry_after
                self._asked = self._paused_until
        else:
            self._landed.append(now)
        while self._landed and self._landed[0] < now - 1.0:
            self._landed.popleft()
        quickest = min(self._quick) if self._quick else None
        self._quick.append(ms)
        slow = quickest is not None and ms > SLOW * max(quickest, QUICK_MS)
        if self.adaptive:
            began = now - ms / 1000
            told += self._adapt(busy=busy, gateway=gateway, slow=slow,
                                began=began if since is None else since)
        return told

    def _count_down(self, down: bool) -> list[tuple[str, str]]:
        self.down_row = self.down_row + 1 if down else 0
        if self.breaker is None or self.tripped or self.down_row < self.breaker.after:
            return []
        self.tripped = True
        self.trips += 1
        return [("breaker open", OPEN.format(self.down_row, self.breaker.wait))]

    def _adapt(self, *, busy: bool, gateway: bool, slow: bool, began: float) -> list[tuple[str, str]]:
        if busy or gateway or slow:
            if began < self._cut_at:
                return []  # started before the last cut: the cut has answered it already
            return [("cut", self._cut(busy=busy, slow=slow))]
        self._clean += 1
        if self._clean >= self.width:
            self._clean = 0
            if self.limit < self.cap:
                self.limit = min(float(self.cap), self.limit + 1)
                self.highest = max(self.highest, self.width)
            if self.learnt is not None:
                self.learnt += max(1.0, self.learnt * RATE_STEP)
        self._second()[6] = self.width
        return []

    def _cut(self, *, busy: bool, slow: bool) -> str:
        self._clean = 0
        self._cut_at = self._clock()
        self.limit = max(1.0, self.limit * BACKOFF)
        self._second()[6] = self.width
        why = "the store is busy" if busy else ("answers slowed down" if slow else "a gateway answered")
        told = f"throttling to {self.width} at once: {why}"
        if busy and self._clock() >= self._rate_cut_at + RATE_SETTLES:
            self._rate_cut_at = self._clock()
            achieved = max(len(self._landed), 1)
            self.learnt = max(1.0, min(self.learnt or achieved, achieved) * BACKOFF)
        if busy and self.learnt is not None:
            told += f"; {self.learnt:.1f} calls a second"
        return told

    def _second(self) -> list[int]:
        """This second's row of the record (the lock held)."""
        second = int(self._wall())
        row = self._seconds.get(second)
        if row is None:
            row = self._seconds[second] = [second, 0, 0, 0, 0, 0, self.width]
        return row

    # What it did

    def worth_keeping(self, paced: bool) -> bool:
        """Whether the record tells anything: flow control was asked for, or it acted."""
        return paced or self.adaptive or bool(self.events or self.throttled_ms or self.busy or self.held_ms)

    def doc(self, runner: str) -> FlowDoc:
        with self._lock:
            seconds = [list(r) for _, r in sorted(self._seconds.items())]
            return {"run": 0, "runner": runner, "seconds": seconds, "events": list(self.events),
                    "throttled_ms": self.throttled_ms, "highest": self.highest, "final": self.width,
                    "busy": self.busy, "trips": self.trips, "held_ms": self.held_ms,
                    "busy_resent": self.busy_resent, "busy_not_run": self.busy_not_run}
