"""The store's own flow limits, to try a client against a store that protects itself: a rate
limit (``--rate-limit N``: a token bucket of N calls a second; a call over it is answered 429 with
the wait as ``Retry-After``) and a crowd that slows it (``--crowd-ms N``: each call takes N ms more
for every other call in flight beside it, as a database under load does).

CmdOps is outside both (as it is outside the faults), so a test reads the ops of a limited store
at any time; what the limit turned away is counted, and logged, here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pooler.store.faults import exempt


class TokenBucket:
    """``rate`` tokens a second, up to ``burst`` kept; a call takes one (on the monotonic clock)."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(rate, 1.0)
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """0 when a token was taken; else the seconds until one will be there (none taken)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.rate


class Flow:
    """The limits of one store: its bucket (None: no rate limit) and its crowd's cost a call."""

    def __init__(self, rate_limit: float | None = None, crowd_ms: int = 0) -> None:
        self.bucket = TokenBucket(rate_limit) if rate_limit else None
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
