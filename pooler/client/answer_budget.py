"""The memory every answer in flight may hold together, not only each one.

Each call's answer is capped (256 MB), but sixteen calls side by side could still hold sixteen
such answers.  A call reading a big answer takes its bytes from one shared budget as they arrive
and gives them back once its answer has been used (its tables written).  A call that would pass
the budget waits, its socket unread (the store is held back by TCP), until others give bytes
back; the oldest open call never waits, so the calls always move on: at most the budget plus one
answer is held at once.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import sys
import threading
import time

#: glibc's mallopt parameter for the number of malloc arenas.
_M_ARENA_MAX = -8


class AnswerBudget:
    """Bytes of answers held by the calls in flight, bounded by ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._cond = threading.Condition(threading.Lock())
        self._held = 0
        #: Bytes each open hold has taken, oldest first (dicts keep insertion order).
        self._open: dict[int, int] = {}
        self._tickets = itertools.count()

    def open(self) -> Hold:
        ticket = next(self._tickets)
        with self._cond:
            self._open[ticket] = 0
        return Hold(self, ticket)

    @property
    def held(self) -> int:
        return self._held

    def _take(self, ticket: int, size: int, deadline: float) -> bool:
        with self._cond:
            while self._held + size > self.limit and next(iter(self._open)) != ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._held += size
            self._open[ticket] += size
            return True

    def _release(self, ticket: int) -> None:
        with self._cond:
            self._held -= self._open.pop(ticket, 0)
            self._cond.notify_all()


class Hold:
    """One call's share of the budget; released once, by the call or when its answer is dropped."""

    __slots__ = ("_budget", "_ticket", "taken")

    def __init__(self, budget: AnswerBudget, ticket: int) -> None:
        self._budget = budget
        self._ticket = ticket
        self.taken = 0

    def take(self, size: int, deadline: float) -> bool:
        """Take ``size`` more bytes, waiting until ``deadline`` (monotonic) at most."""
        if not self._budget._take(self._ticket, size, deadline):
            return False
        self.taken += size
        return True

    def release(self) -> None:
        self._budget._release(self._ticket)


@functools.cache
def share_malloc_arenas() -> None:
    """Let the threads of a run share two malloc arenas (glibc), once per process.

    A setting of the whole process: the commands that run calls side by side (``pooler run``,
    ``pooler mcp``) call it at their start, never a library constructor.

    glibc gives each thread that allocates at the same time as another an arena of its own and
    keeps what was freed in it: sixteen threads that each read a big answer in turn would keep
    sixteen answers' worth of memory, whatever the budget let them hold at once.  Python threads
    take the GIL to allocate anyway, so more arenas buy no speed.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        # The process's own symbols hold libc's: ctypes.util.find_library would run ldconfig in a
        # child process (a tenth of a short run's start-up) to find the file already loaded.
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):
        return
