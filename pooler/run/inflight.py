"""A runner's calls in flight: each call's future with its work row and call, and the calls that
ended in the order they ended, so that a runner waiting for its calls wakes at the first to end
without a waiter installed on, and taken off, every call still going (``concurrent.futures.wait``
does that each time it is asked)."""

from __future__ import annotations

import queue
from concurrent.futures import Future
from typing import Any

from pooler.journal.work import WorkRow
from pooler.run.callplan import Prepared


class InFlight:
    """The calls a runner started and has not collected."""

    def __init__(self) -> None:
        self._calls: dict[Future[Any], tuple[WorkRow, Prepared]] = {}
        self._ended: queue.SimpleQueue[Future[Any]] = queue.SimpleQueue()

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, future: Future[Any], row: WorkRow, got: Prepared) -> None:
        self._calls[future] = (row, got)
        # Told as it ends: at once for a call made on the runner's own thread, which has ended.
        future.add_done_callback(self._ended.put)

    def ended(self, *, block: bool) -> list[tuple[Future[Any], WorkRow, Prepared]]:
        """The calls that ended, each taken out, in the order they ended; with ``block``, at least
        one (none when none is in flight)."""
        found: list[tuple[Future[Any], WorkRow, Prepared]] = []
        try:
            future = self._ended.get(block=block and bool(self._calls))
            while True:
                row, got = self._calls.pop(future)
                found.append((future, row, got))
                future = self._ended.get_nowait()
        except queue.Empty:
            return found
