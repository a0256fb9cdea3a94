"""A total deadline for every call: one thread cuts the connection of a call that outlives it.

A read timeout bounds each wait for a byte, not the whole answer: a store that drips one
byte every half second keeps a call (and a run waiting on it, and a SIGTERM waiting for calls in
flight) going for as long as it drips.  Each call registers a ``Watch``; the connection urllib3
picks for it is attached to the watch as the request starts (``watched`` wraps the pool's
connection class), and when the deadline passes the watchdog shuts that socket down, so the
blocked read returns at once.  The client then sees ``watch.fired`` and reports a timeout.

One heap and one daemon thread per client; a call costs a push and a flag, no thread of its own.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from typing import Any

_current = threading.local()


class Watch:
    """One call's deadline and the connection it was sent on."""

    __slots__ = ("conn", "deadline", "done", "fired", "seconds", "sent")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.conn: Any = None
        self.done = False
        self.fired = False
        #: The request is out: from then on the deadline holds (sending has the socket's timeouts).
        self.sent = False


class Watchdog:
    """Fires the watches whose deadline passed before they were finished."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Watch]] = []
        self._live = 0
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        #: Which thread is the watchdog's: one that sees another number was stopped, and ends.
        self._generation = 0

    def start(self, seconds: float) -> Watch:
        """Watch the calling thread's next request: its whole answer is due ``seconds`` after the
        request has been sent (counted from now until then)."""
        watch = Watch(seconds)
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, args=(self._generation,),
                                                name="pooler-deadline", daemon=True)
                self._thread.start()
            if len(self._heap) > 64 and len(self._heap) > 2 * self._live:
                # Finished watches wait in the heap until their deadline: drop them now and then.
                self._heap = [item for item in self._heap if not item[2].done]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (watch.deadline, next(self._seq), watch))
            self._live += 1
            if self._heap[0][2] is watch:
                self._cond.notify()
        _current.watch = watch
        return watch

    def finish(self, watch: Watch) -> None:
        _current.watch = None
        with self._cond:
            if not watch.done:
                watch.done = True
                self._live -= 1

    def stop(self) -> None:
        """The thread ends (a client closed; a process that makes many clients keeps none of their
        threads). A call started after this starts another."""
        with self._cond:
            self._generation += 1
            self._thread = None
            self._cond.notify_all()

    def _run(self, generation: int) -> None:
        while True:
            with self._cond:
                while not self._heap and generation == self._generation:
                    self._cond.wait()
                if generation != self._generation:
                    return
                due, _, watch = self._heap[0]
                if watch.done:
                    heapq.heappop(self._heap)
                    continue
                if watch.deadline > due:
                    # Its clock started again once the request was sent.
                    heapq.heapreplace(self._heap, (watch.deadline, next(self._seq), watch))
                    continue
                now = time.monotonic()
                if due > now:
                    self._cond.wait(due - now)
                    continue
                if not watch.sent:
                    # Still sending (a big upload): the deadline is for the answer.
                    watch.deadline = now + watch.seconds
                    continue
                heapq.heappop(self._heap)
                watch.fired = True
                conn = watch.conn
            _cut(conn)


def _cut(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def watched(base: type[Any]) -> type[Any]:
    """``base`` (urllib3's connection class) attaching itself to the calling thread's watch."""

    class Watched(base):  # type: ignore[misc]
        def request(self, *args: Any, **kwargs: Any) -> None:
            watch: Watch | None = getattr(_current, "watch", None)
            if watch is not None:
                watch.conn = self
            super().request(*args, **kwargs)
            if watch is not None:
                # The request is out (an upload may take long): the answer gets the whole time.
                watch.deadline = time.monotonic() + watch.seconds
                watch.sent = True

    Watched.__name__ = Watched.__qualname__ = f"Watched{base.__name__}"
    return Watched
