"""One run at a time per pool file, and per ``--out`` folder: an advisory ``flock`` on a file in
the state folder, named by the path it guards.  The locks do not follow ``--journal``: two runs
of one pool file, or two runs writing one ``--out``, meet whatever journals they keep.

The lock file holds the pid and start time of the run that holds it, so a second run can say
who is in its way. The kernel drops a ``flock`` when its process dies, so a killed run never
leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType

from pooler.errors import LockedError
from pooler.folders import state_dir

#: How long a run refused the lock waits for the holder's line (written as the lock is taken).
HOLDER_WAIT = 1.0


def lock_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where lock files live: ``locks`` in the state folder."""
    return state_dir(environ) / "locks"


def lock_path(pool_file: Path, directory: Path) -> Path:
    """The lock file of one pool file (or ``--out`` folder): named by the SHA-1 of its absolute path."""
    digest = hashlib.sha1(str(pool_file.resolve()).encode("utf-8"), usedforsecurity=False).hexdigest()
    return directory / f"{digest}.lock"


class PoolLock:
    """An exclusive lock on one pool file, held from ``acquire`` until ``release``."""

    def __init__(self, pool_file: Path, directory: Path) -> None:
        self.pool_file = pool_file
        self.path = lock_path(pool_file, directory)
        self._fd: int | None = None

    def _busy(self, holder: str) -> str:
        return f"another run of {self.pool_file} is running ({holder}); this run sent nothing."

    def acquire(self) -> None:
        """Take the lock at once, or raise ``LockedError`` naming the run that holds it."""
        # Owner-only: the folder and file reveal which pools run on this machine and when.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Made before the lock is taken: a run refused meanwhile reads the holder's line at once.
        started = datetime.now().astimezone().isoformat(timespec="seconds")
        line = f"pid {os.getpid()}\nstarted {started}\n".encode()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LockedError(self._busy(holder)) from None
        except BaseException:
            os.close(fd)
            raise
        # Not synced to disk: a second run reads the holder from the page cache, and after a crash of
        # the machine no run holds the lock, whatever the file still says.
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))
        self._fd = fd

    def release(self) -> None:
        """Let the next run in; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> PoolLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class OutLock(PoolLock):
    """An exclusive lock on one ``--out`` folder: runs that share it would read and clear each
    other's tables, and a ``pooler call`` would write into a run's tables."""

    def __init__(self, out: Path, directory: Path, *, doing: str = "run") -> None:
        super().__init__(out, directory)
        #: What waits for the lock, as the refusal names it: ``run`` or ``call``.
        self.doing = doing

    def _busy(self, holder: str) -> str:
        return (f"another run writes its tables to --out {self.pool_file} ({holder}); this {self.doing} "
                "sent nothing - give it an --out of its own, or wait for that run to end.")


def _read_holder(fd: int) -> str:
    """``pid N, started T`` from the lock file, as far as the holder has written it: a holder that
    has just taken the lock writes its line within microseconds, so it is waited for a moment."""
    deadline = time.monotonic() + HOLDER_WAIT
    while True:
        try:
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        except OSError:
            text = ""
        if "started " in text or time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    fields = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    pid = fields.get("pid", "unknown")
    started = fields.get("started", "unknown")
    return f"pid {pid}, started {started}"

