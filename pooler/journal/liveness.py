"""Which runners are alive, one rule for every journal: a runner is named by the machine it runs on
since that machine's last boot and its process id; one recorded on this machine whose process is gone
is dead before its lease ends, whatever journal holds it."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path


@functools.cache
def host() -> str:
    """This machine since its last boot: a pid names one process only within it (read once: a
    process outlives no boot)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()} {boot}".strip()


def alive(pid: int) -> bool:
    """Whether a process of this machine is still there."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead_here(where: str, pid: int) -> bool:
    """A runner recorded on this machine (since its last boot) whose process is gone."""
    return where == host() and not alive(int(pid))
