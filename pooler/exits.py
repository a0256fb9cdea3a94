"""Every exit status pooler's commands end with, in one place (a leaf: it imports nothing)."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """What a command's exit status tells: done, failed, refused before anything was sent, locked..."""

    OK = 0
    FAILED = 1
    #: Refused before anything was sent; for ``check``: not vouched for (invalid, or its
    #: ``--against`` store out of reach).
    REFUSED = 2
    LOCKED = 3
    INTERNAL = 70
    INTERRUPTED = 130
    TERMINATED = 143
