"""The store's own flow limits, to try a client against a store that protects itself: a rate
limit (``--rate-limit N``: a token bucket of N calls a second; a call over it is answered 429 with
the wait as ``Retry-After``; ``--rate-limit 30,15@10,30@20``: a limit that changes, counted from
the first call it limits, to try how a client follows a store whose limit drops and rises) and
a crowd that slows it (``--crowd-ms N``: each call takes N ms more for every other call in flight
beside it, as a database under load does).

CmdOps is outside both (as it is outside the faults), so a test reads the ops of a limited store
at any time; what the limit turned away is counted, and logged, here.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pooler.store.faults import exempt


def parse_rate_limit(text: str) -> tuple[tuple[float, float], ...]:
    """``N`` or ``N,M@S,...``: N calls a second, M from S seconds after the first call on (an ``s``
    after S may be written); each rate above 0, the times rising.  Raises ValueError saying what
    is wrong."""
    schedule: list[tuple[float, float]] = []
    for n, part in enumerate(text.split(",")):
        rate_text, at_sign, at_text = part.strip().partition("@")
        if (n == 0) == bool(at_sign):
            raise ValueError(f"{part.strip()!r}: the first rate has no time, each later one an @SECONDS")
        try:
            rate = float(rate_text)
            at = float(at_text.strip().removesuffix("s")) if at_sign else 0.0
        except ValueError:
            raise ValueError(f"{part.strip()!r} is not a number of calls a second (and @SECONDS)") from None
        if not (rate > 0 and math.isfinite(rate)) or not math.isfinite(at):
            raise ValueError(f"{part.strip()!r}: a rate is a number of calls a second above 0")
        if schedule and not at > schedule[-1][0]:
            raise ValueError(f"{part.strip()!r}: each change comes later than the one before it")
        schedule.append((at, rate))
    return tuple(schedule)


class TokenBucket:
    """``rate`` tokens a second, up to ``burst`` kept (a second's worth unless given); a call takes
    one (on the monotonic clock).  ``schedule`` (from ``parse_rate_limit``) changes the rate, and
    the burst with it, at its times counted from the first call."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic,
                 schedule: tuple[tuple[float, float], ...] = ()) -> None:
        self.schedule = schedule or ((0.0, rate),)
        self._burst = burst
        self._clock = clock
        self._first: float | None = None
        self._tokens = self.burst
        self._at = clock()
        self._lock = threading.Lock()

    @property
    def rate(self) -> float:
        """The calls a second allowed now."""
        since = 0.0 if self._first is None else self._clock() - self._first
        return next(rate for at, rate in reversed(self.schedule) if at <= since)

    @property
    def burst(self) -> float:
        return self._burst if self._burst is not None else max(self.rate, 1.0)

    def take(self) -> float:
        """0 when a token was taken; else the seconds until one will be there (none taken)."""
        with self._lock:
            now = self._clock()
            if self._first is None:
                self._first = now
            rate = self.rate
            self._tokens = min(self.burst, self._tokens + (now - self._at) * rate)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / rate


class Flow:
    """The limits of one store: its bucket (None: no rate limit) and its crowd's cost a call."""

    def __init__(self, rate_limit: float | tuple[tuple[float, float], ...] | None = None,
                 crowd_ms: int = 0) -> None:
        schedule = ((0.0, rate_limit),) if isinstance(rate_limit, (int, float)) else (rate_limit or ())
        self.bucket = TokenBucket(schedule[0][1], schedule=schedule) if schedule else None
        self.crowd_ms = crowd_ms
        self.busy = 0
        self._flying = 0
        self._lock = threading.Lock()

    def admit(self, request: dict[str, Any]) -> float:
        """0 when the call may run now; else the seconds it is asked to wait (``Retry-After``)."""
        if self.bucket is None or exempt(request):
            return 0.0
        wait = self.bucket.take()
        if wait:
            with self._lock:
                self.busy += 1
        return wait

    @contextmanager
    def crowded(self, request: dict[str, Any]) -> Iterator[None]:
        """The call in flight: slowed by the others in flight beside it, counted for them."""
        if not self.crowd_ms or exempt(request):
            yield
            return
        with self._lock:
            others = self._flying
            self._flying += 1
        try:
            time.sleep(others * self.crowd_ms / 1000)
            yield
        finally:
            with self._lock:
                self._flying -= 1


def retry_after(seconds: float) -> str:
    """The wait as ``Retry-After`` gives it: decimal seconds, to the millisecond, at least 0.001."""
    return f"{max(seconds, 0.001):.3f}"
