"""A runner's flow against a store's rate limit on a clock of its own: the store's real token bucket
(``pooler.store.flow.TokenBucket``, with a schedule) answers each request at once, busy or clean,
and a clean answer comes back ``latency`` seconds after it left.  The calls start as the runner
starts them (``Flow.width``, the pause a busy answer asked for, ``Flow.spacing``) and a busy call is
sent again after its Retry-After or its turn at the learnt rate, as ``run/call.py`` does, so the
rules of ``run/flow.py`` are tried over thousands of answers in a moment, the same way each time."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from pooler.run.flow import Flow
from pooler.store.flow import TokenBucket

#: A clean answer's time beyond the store's latency (the client and the wire); a busy answer's time.
OVERHEAD = 0.003
BUSY_TOOK = 0.001


@dataclass
class Simulated:
    """What the store saw: per second of its clock, the calls carried out and the busy answers."""

    flow: Flow
    done: list[float] = field(default_factory=list)
    busy: list[float] = field(default_factory=list)
    #: The learnt rate and the width after each answer: (time, rate or None, width).
    trace: list[tuple[float, float | None, int]] = field(default_factory=list)

    def busy_share(self) -> float:
        return len(self.busy) / max(1, len(self.done) + len(self.busy))

    def carried(self, start: float, end: float) -> int:
        return sum(1 for t in self.done if start <= t < end)

    def busy_in(self, start: float, end: float) -> int:
        return sum(1 for t in self.busy if start <= t < end)

    def rate_at(self, when: float) -> float | None:
        return next((rate for t, rate, _ in reversed(self.trace) if t <= when), None)


def simulate(calls: int, latency: float, schedule: tuple[tuple[float, float], ...], *, cap: int = 16,
             adaptive: bool = True) -> Simulated:
    """``calls`` calls of ``latency`` seconds against a store limited by ``schedule`` (seconds after
    its first call, calls a second), the first call at 0."""
    now = [0.0]
    flow = Flow(cap, adaptive=adaptive, breaker=None, tell=lambda line: None, clock=lambda: now[0],
                wall=lambda: now[0])
    bucket = TokenBucket(schedule[0][1], clock=lambda: now[0], schedule=schedule)
    seen = Simulated(flow)
    order = itertools.count()
    events: list[tuple[float, int, str, float, float]] = []  # (at, order, what, first try, sent)
    left, flying, free_at, paused_until = calls, 0, 0.0, 0.0

    def send(first: float) -> None:
        wait = bucket.take()
        if wait:
            seen.busy.append(now[0])
            heapq.heappush(events, (now[0] + BUSY_TOOK, next(order), "busy", first, wait))
        else:
            seen.done.append(now[0])
            heapq.heappush(events, (now[0] + latency + OVERHEAD, next(order), "clean", first, now[0]))

    def start() -> None:
        """The runner's loop: calls start while the width allows, each after its waits."""
        nonlocal left, flying, free_at, paused_until
        while left and flying < flow.width and free_at <= now[0]:
            asked = flow.pause_asked()
            if asked is not None:
                paused_until = max(paused_until, now[0] + asked)
            if paused_until > now[0]:
                free_at = paused_until
                heapq.heappush(events, (free_at, next(order), "wake", 0.0, 0.0))
                return
            wait = flow.spacing()
            left, flying = left - 1, flying + 1
            if wait > 0:
                free_at = now[0] + wait
                heapq.heappush(events, (free_at, next(order), "start", 0.0, 0.0))
                return
            send(now[0])

    start()
    while events:
        now[0], _, what, first, other = heapq.heappop(events)
        if what == "start":
            send(now[0])
        elif what == "busy":
            flow.attempted(ms=BUSY_TOOK * 1000, busy=True, retry_after=other, since=first)
            heapq.heappush(events, (now[0] + max(other, flow.spacing()), next(order), "again", first, 0.0))
        elif what == "again":
            send(first)
        else:
            flow.attempted(ms=(now[0] - other) * 1000, since=first)
            flying -= 1
        if what in ("busy", "clean"):
            seen.trace.append((now[0], flow.learnt, flow.width))
        start()
    return seen
