"""Flow control of a run: how fast calls start and how many are in flight, so a nightly import
does not swamp a shop its customers are using.

- **A rate limit** (``rate:``, ``--rate``) is a bucket the task's journal keeps for every runner
  alike (``WorkStore.pace``); here only the wait it gives is kept, to be told.
- **A pause** on a busy answer (429, or 503 with ``Retry-After``) holds back every new call of
  this runner until the wait is over, not only the call that got it.
- **A width that adapts** (``adaptive: true``) is an AIMD limiter, as TCP Reno and Netflix's
  concurrency-limits ``AIMDLimit`` are: it grows by one call each time a whole window of answers
  came back clean and quick, and is cut by a factor on a busy answer, a gateway's answer, or an
  answer slower than twice the quickest recent ones (the latency guard of TCP Vegas, without
  its per-packet bookkeeping).  AIMD rather than a gradient limiter: its one signal a window is
  easy to follow in the report, it needs no estimate of the queue, and against a store that
  answers 429 (a clear loss) it is what converges fastest.  Busy answers also teach it the
  store's own rate: each cuts the rate it paces calls at to a share of what it achieved in the
  last second, and clean windows raise it again by a step, so a store that limits its callers
  sees few 429s.  It never passes ``max_concurrency`` nor a configured rate.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: The share of the width (and of the learnt rate) kept after a cut.
BACKOFF = 0.7
#: An answer this many times slower than the quickest recent ones counts as a sign of strain.
SLOW = 2.0
#: Answers remembered for the quickest recent one.
RECENT = 50
#: Calls a second the learnt rate rises by after each clean window.
RATE_STEP = 1.0


@dataclass(frozen=True)
class Rate:
    """``rate: {per_second, burst, key}``: a token bucket over calls started."""

    per_second: float
    burst: int = 1
    #: A dotted path into the call's params: a bucket a value of it.
    key: str | None = None

    @property
    def interval(self) -> float:
        return 1.0 / self.per_second

    @property
    def tolerance(self) -> float:
        """The seconds of calls that may start at once (the burst, as GCRA counts it)."""
        return (self.burst - 1) / self.per_second


class Flow:
    """What holds back the calls of one runner: the pause a busy answer asked for, the adaptive
    width and the rate it learnt; and what it did, for the answer (``throttled_ms``, widths)."""

    def __init__(self, cap: int, *, adaptive: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        self.adaptive = adaptive
        self._clock = clock
        self._lock = threading.Lock()
        self.limit = float(min(cap, 2) if adaptive else cap)
        self.highest = int(self.limit)
        self._clean = 0
        self._quick: deque[float] = deque(maxlen=RECENT)
        self._paused_until = 0.0
        self._next_start = 0.0
        self.learnt: float | None = None
        self._done: deque[float] = deque()
        #: Milliseconds calls waited before they started (pauses, the rate), all told.
        self.throttled_ms = 0
        self.busy = 0
        self.cuts = 0

    @property
    def width(self) -> int:
        """The calls this runner may have in flight now."""
        return max(1, min(self.cap, int(self.limit)))

    def wait_before(self) -> float:
        """The seconds a call about to start waits: a pause, and the learnt rate's spacing (the
        slot taken as it is told)."""
        with self._lock:
            now = self._clock()
            start = max(now, self._paused_until)
            if self.learnt is not None:
                start = max(start, self._next_start)
                self._next_start = start + 1.0 / self.learnt
            return start - now

    def waited(self, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                self.throttled_ms += round(seconds * 1000)

    def answered(self, ms: float, *, busy: bool, strained: bool, retry_after: float | None) -> str | None:
        """An answer's lesson: the width (and rate) grown or cut; what was done, told as a line
        when the flow changed for the worse (None otherwise)."""
        with self._lock:
            now = self._clock()
            if not busy:
                self._done.append(now)
            while self._done and self._done[0] < now - 1.0:
                self._done.popleft()
            if busy:
                self.busy += 1
                if retry_after is not None:
                    self._paused_until = max(self._paused_until, now + retry_after)
            quickest = min(self._quick) if self._quick else None
            self._quick.append(ms)
            slow = quickest is not None and ms > SLOW * max(quickest, 1.0)
            if not self.adaptive:
                waits = busy and retry_after
                return f"backing off {retry_after:g} s: the store asked to wait" if waits else None
            if busy or strained or slow:
                return self._cut(busy=busy, slow=slow, retry_after=retry_after)
            self._clean += 1
            if self._clean >= self.width:
                self._clean = 0
                if self.limit < self.cap:
                    self.limit = min(float(self.cap), self.limit + 1)
                    self.highest = max(self.highest, self.width)
                if self.learnt is not None:
                    self.learnt += RATE_STEP
            return None

    def _cut(self, *, busy: bool, slow: bool, retry_after: float | None) -> str:
        self._clean = 0
        self.cuts += 1
        self.limit = max(1.0, self.limit * BACKOFF)
        why = "the store is busy" if busy else ("answers slowed down" if slow else "a gateway answered")
        if busy:
            achieved = max(len(self._done), 1)
            self.learnt = max(1.0, min(self.learnt or achieved, achieved) * BACKOFF)
        told = f"throttling to {self.width} at once: {why}"
        if self.learnt is not None and busy:
            told += f"; {self.learnt:.1f} calls a second"
        if retry_after:
            told += f"; waiting {retry_after:g} s as it asked"
        return told


@dataclass(frozen=True)
class BreakerRule:
    """``breaker: {after, wait}``: after ``after`` calls in a row that never reached the store or
    got a gateway's answer, no call starts while the store is tried (``tool_list``, no side
    effect) for up to ``wait`` seconds."""

    after: int = 5
    wait: float = 60.0


class Breaker:
    """Counts the calls in a row that found the store down; trips at the rule's ``after``."""

    def __init__(self, rule: BreakerRule) -> None:
        self.rule = rule
        self.row = 0
        self.trips = 0
        self._lock = threading.Lock()

    def answered(self, *, down: bool) -> bool:
        """One more call's ending; whether the breaker trips now."""
        with self._lock:
            self.row = self.row + 1 if down else 0
            if self.row >= self.rule.after:
                self.row = 0
                self.trips += 1
                return True
            return False
