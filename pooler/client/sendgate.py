"""A hook a caller gives one call, run on its thread as the last thing before the request's first
byte is written: after the connection (and its TLS handshake) is ready, so whatever the hook
raises stops the request with nothing of it sent.

A runner that holds its calls under a lease checks the lease here: a runner frozen while it
connected finds, on waking, that its lease ran out, and does not send.  What stays is the time
between the hook's return and the kernel taking the bytes, which no client can close (see the
fencing header in docs/operations.md).

A hook may wait (a runner's rate slot is taken there): ``held`` tells how long, so that the time a
request took is counted from when it went, not from when it began to wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_current = threading.local()


@contextmanager
def armed(hook: Callable[[], None] | None) -> Iterator[None]:
    """Run ``hook`` before the first byte of the calling thread's next request (once)."""
    _current.hook = hook
    _current.held = 0.0
    try:
        yield
    finally:
        _current.hook = None


def gated(base: type[Any]) -> type[Any]:
    """``base`` (urllib3's connection class) running the calling thread's hook before it writes."""

    class Gated(base):  # type: ignore[misc]
        def send(self, data: Any) -> None:
            hook: Callable[[], None] | None = getattr(_current, "hook", None)
            if hook is not None:
                _current.hook = None
                if self.sock is None:
                    # A plain connection is made on the first write: made first, so the hook runs
                    # once nothing but the bytes is left to do.
                    self.connect()
                began = time.monotonic()
                try:
                    hook()
                finally:
                    _current.held = time.monotonic() - began
            super().send(data)

    Gated.__name__ = Gated.__qualname__ = f"Gated{base.__name__}"
    return Gated


def held() -> float:
    """The seconds the hook of the calling thread's last request held it before it was written."""
    seconds: float = getattr(_current, "held", 0.0)
    return seconds
