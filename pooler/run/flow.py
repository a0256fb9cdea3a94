"""Flow control of one runner: how many calls it has in flight, what holds new calls back, and
when a store that looks down stops it - so a nightly import does not swamp a shop its customers
are using, and a store that goes away costs one clear stop, not thousands of failures.

- **A pause**: a busy answer (429, or 503 with ``Retry-After``) holds back every new call of the
  task until the wait it asked for is over, not only the call that got it (the runner publishes
  it in the journal, ``Pacer``, so every runner of the task pauses).
- **A width that adapts** (``adaptive: true``) follows the store's limit with two numbers, both
  AIMD (additive increase, multiplicative decrease, as TCP Reno and Netflix's concurrency-limits
  ``AIMDLimit`` are):
  - *a rate* calls start at, learnt from busy answers, because a store's rate limit is about calls
    a second, which a width alone does not bound when calls are quick.  Until the first busy
    answer there is none.  A busy answer sets it to ``RATE_BACKOFF`` of what the store carried in
    the last second (at the first one, over up to ``BURST_WINDOW`` seconds, as a bucket's burst
    may have filled the last second); busy answers that go on within ``RATE_SETTLES`` of the last
    cut cut deeper each time, so that a limit that halves is followed within a second or two.  While
    answers are clean it rises by ``RATE_STEP`` of itself a second, faster the longer they stay
    clean (``RATE_HASTENS``): just under the limit it creeps (a store's bucket fills again, and
    the next busy answer is seconds away), and a limit that rose is found again within seconds;
  - *a width*: it starts at 2, grows by one call each time a whole window of answers came back
    clean, and is cut by ``BACKOFF`` on a busy answer or a gateway's answer, never below what
    carries the learnt rate at the recent latency (``HEADROOM`` x rate x the median of the last
    ``RECENT`` clean answers' seconds: Little's law), so a store whose calls take 200 ms is not
    held under its limit by a width that rate would not need.
  Latency alone never cuts either: only a busy or a gateway's answer does.  A store that answers
  cleanly is not asking for less, and the time a call takes grows with a loaded store's normal
  work and with this machine's own load (a client on a busy host sees every answer late); a rule
  that cut when answers came slower than twice the quickest recent one held a 20 ms store at half
  its limit.  Latency is used only together with busy answers, to size the width a cut leaves.
  The answers of calls started before the last cut are cut for once, and so are the busy answers
  of calls sent while the task was asked to pause (a runner on a busy machine hears a pause late):
  they say nothing new, and cut deeper for each they would hold a loaded client far under the
  store's limit.  It never passes ``max_concurrency`` nor a configured ``rate`` (the journal's
  bucket still holds every call).
- **The breaker** (``breaker``, pool/breaker.py) counts the requests in a row that never reached
  the store or got a gateway's answer; at ``after`` it trips, and the runner stops starting calls
  and tries the store (runner.py).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import astuple, dataclass

from pooler.journal.records import FlowDoc, FlowEvent
from pooler.pool.breaker import BreakerRule

#: The share of the width kept after a cut.
BACKOFF = 0.7
#: The share of the learnt rate kept after a busy answer: under the store's rate, its bucket fills
#: again, and the rate climbs back to it before it answers busy again.
RATE_BACKOFF = 0.9
#: The share of itself the learnt rate rises by each second its answers are clean ...
RATE_STEP = 0.05
#: ... and faster the longer they stay clean: after this many seconds without a cut, twice as
#: fast, and so on, so that a limit that rose is found again within seconds.
RATE_HASTENS = 5.0
#: Cuts of the learnt rate within this many seconds of each other are one episode: each cuts deeper.
RATE_SETTLES = 1.0
#: The first busy answer's rate is what the store carried over at most this many seconds, not the
#: last one alone: the burst a store's bucket answers at once weighs less.
BURST_WINDOW = 5.0
#: The learnt rate grows to at most this many times what the store carried in the last second.
RATE_AHEAD = 2.0
#: Clean answers remembered for the recent latency.
RECENT = 50
#: The width kept after a cut is at least this many times what carries the learnt rate at the
#: recent latency (Little's law: calls in flight = calls a second x seconds a call).
HEADROOM = 1.5
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


@dataclass(slots=True)
class _Second:
    """What a runner's calls did in one wall-clock second; its record's ``seconds`` keeps it as a
    list, in this order (``_FlowRecord``)."""

    second: int
    started: int = 0
    busy: int = 0
    gateway: int = 0
    down: int = 0
    waited_ms: int = 0
    #: The width at the end of the second.
    width: int = 0


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
        #: Seconds each recent clean answer took (what sizes the width for the learnt rate).
        self._took: deque[float] = deque(maxlen=RECENT)
        self._cut_at = float("-inf")
        self._grown_at = 0.0
        #: When busy answers last cut the learnt rate, and how many cuts in a row (each deeper).
        self._rate_cut_at = float("-inf")
        self._deeper = 0
        self._paused_until = 0.0
        self._asked: float | None = None
        self._next_start = 0.0
        self.learnt: float | None = None
        #: When the clean answers of the last second, and of the last ``BURST_WINDOW`` seconds, came.
        self._landed: deque[float] = deque()
        self._landed_long: deque[float] = deque()
        self._first_clean: float | None = None
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
        self._seconds: dict[int, _Second] = {}

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
            row.started += 1
            if waited > 0:
                ms = round(waited * 1000)
                self.throttled_ms += ms
                row.waited_ms += ms

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
            row.busy += busy
            row.gateway += gateway
            row.down += down
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
        paused_until = self._paused_until
        if busy:
            self.busy += 1
            if retry_after is not None and now + retry_after > self._paused_until:
                if self._paused_until <= now:
                    held = HELD.format(self.held_ms / 1000) if self.held_ms else ""
                    told.append(("pause", PAUSING.format(retry_after) + held))
                self._paused_until = now + retry_after
                self._asked = self._paused_until
        elif not gateway:
            self._landed.append(now)
            self._landed_long.append(now)
            if self._first_clean is None:
                self._first_clean = now
        while self._landed and self._landed[0] < now - 1.0:
            self._landed.popleft()
        while self._landed_long and self._landed_long[0] < now - BURST_WINDOW:
            self._landed_long.popleft()
        if self.adaptive:
            if not busy and not gateway:
                self._took.append(ms / 1000)
            began = now - ms / 1000 if since is None else since
            told += self._adapt(busy=busy, gateway=gateway, began=began, paused_until=paused_until)
        return told

    def _count_down(self, down: bool) -> list[tuple[str, str]]:
        self.down_row = self.down_row + 1 if down else 0
        if self.breaker is None or self.tripped or self.down_row < self.breaker.after:
            return []
        self.tripped = True
        self.trips += 1
        return [("breaker open", OPEN.format(self.down_row, self.breaker.wait))]

    def _adapt(self, *, busy: bool, gateway: bool, began: float,
               paused_until: float) -> list[tuple[str, str]]:
        if busy or gateway:
            if began < self._cut_at:
                return []  # started before the last cut: the cut has answered it already
            if busy and began < paused_until:
                # Sent while the task was asked to pause (a runner hears a pause at its next call,
                # later on a busy machine): its busy answer is the one the pause answers.
                return []
            return [("cut", self._cut(busy=busy))]
        self._clean += 1
        if self._clean >= self.width:
            self._clean = 0
            if self.limit < self.cap:
                self.limit = min(float(self.cap), self.limit + 1)
                self.highest = max(self.highest, self.width)
        if self.learnt is not None:
            now = self._clock()
            hasten = 1.0 + (now - self._cut_at) / RATE_HASTENS
            grown = self.learnt + (now - self._grown_at) * self.learnt * RATE_STEP * hasten
            # Not past twice what the store carried in the last second: a rate the calls do not
            # reach (the width, or too few calls, holds them) tells nothing of the store's.
            self.learnt = max(self.learnt, min(grown, RATE_AHEAD * len(self._landed)))
            self._grown_at = now
        self._second().width = self.width
        return []

    def _cut(self, *, busy: bool) -> str:
        now = self._clock()
        self._clean = 0
        self._cut_at = self._grown_at = now
        if busy:
            # What the store carried in the last second bounds its rate: calls started after a cut
            # that are answered busy again cut again, each time the store says so.
            achieved = float(max(len(self._landed), 1))
            if self.learnt is None and self._first_clean is not None:
                # The first busy answer of the run: a store's bucket holds a burst, which the last
                # second may have emptied; over a few seconds, the burst weighs less.
                span = min(BURST_WINDOW, max(1.0, now - self._first_clean))
                achieved = max(1.0, min(achieved, len(self._landed_long) / span))
            self._deeper = self._deeper + 1 if now < self._rate_cut_at + RATE_SETTLES else 1
            self._rate_cut_at = now
            self.learnt = max(1.0, min(self.learnt or achieved, achieved) * RATE_BACKOFF ** self._deeper)
        # Never below what carries the learnt rate: a rate limit is the rate's to follow, and a
        # width that held the calls back under it would waste what the store allows.
        self.limit = max(1.0, min(self.limit, max(self.limit * BACKOFF, self._carries())))
        self._second().width = self.width
        why = "the store is busy" if busy else "a gateway answered"
        told = f"throttling to {self.width} at once: {why}"
        if busy and self.learnt is not None:
            told += f"; {self.learnt:.1f} calls a second"
        return told

    def _carries(self) -> float:
        """The width that carries the learnt rate at the recent latency, with headroom (0: no rate
        learnt yet, or no clean answer to time)."""
        if self.learnt is None or not self._took:
            return 0.0
        took = sorted(self._took)[len(self._took) // 2]
        return math.ceil(self.learnt * took * HEADROOM)

    def _second(self) -> _Second:
        """This second's row of the record (the lock held)."""
        second = int(self._wall())
        row = self._seconds.get(second)
        if row is None:
            row = self._seconds[second] = _Second(second, width=self.width)
        return row

    # What it did

    def worth_keeping(self, paced: bool) -> bool:
        """Whether the record tells anything: flow control was asked for, or it acted."""
        return paced or self.adaptive or bool(self.events or self.throttled_ms or self.busy or self.held_ms)

    def doc(self, runner: str) -> FlowDoc:
        with self._lock:
            seconds = [list(astuple(r)) for _, r in sorted(self._seconds.items())]
            return {"run": 0, "runner": runner, "seconds": seconds, "events": list(self.events),
                    "throttled_ms": self.throttled_ms, "highest": self.highest, "final": self.width,
                    "busy": self.busy, "trips": self.trips, "held_ms": self.held_ms,
                    "busy_resent": self.busy_resent, "busy_not_run": self.busy_not_run}
