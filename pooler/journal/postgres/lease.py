"""A runner's lease on a shared task, kept alive by a heartbeat on the database's clock.

The lease is ``runners.lease_until``, set from the database's ``now()``: hosts whose clocks differ
agree on it.  A renewal succeeds only while the lease is still alive, so a runner whose calls were
taken back never gets its lease again.  Beside it the runner keeps a local deadline on the
monotonic clock (which runs on while a process is stopped): the last renewal's start plus the
lease, less a margin.  The client checks it just before each request leaves, so a runner frozen
past its lease does not send when it wakes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time

from pooler.errors import JournalError
from pooler.journal.dburl import DbText
from pooler.journal.postgres.schema import SQL, connect


class LeaseLost(JournalError):
    """The runner's lease expired or could not be renewed: it may send nothing more."""


class Lease:
    """Registers a runner of ``task`` (with the calls it has in flight at most, its ``width``) and
    renews its lease every third of ``seconds``."""

    def __init__(self, url: str, task: str, seconds: float, width: int | None = None) -> None:
        self.url = url
        self.task = task
        self.seconds = seconds
        self.id = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        # A margin for the time between the check and the request leaving, and for clock rates.
        self.margin = min(1.0, seconds / 5)
        self.lost: str | None = None
        self._deadline = 0.0
        self._stop = threading.Event()
        self._conn = connect(url)
        began = time.monotonic()
        import psycopg  # noqa: PLC0415

        try:
            self._conn.execute(SQL["take_lease"], (self.id, task, socket.gethostname(), os.getpid(), seconds,
                                                   width))
        except psycopg.Error as exc:
            self._conn.close()
            text = DbText(url)
            raise JournalError(f"the journal {text.shown} failed: {text.error(exc)}") from None
        self._deadline = began + seconds - self.margin
        self._thread = threading.Thread(target=self._beat, name="pooler-lease", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """Whether a request may leave now."""
        return self.lost is None and time.monotonic() < self._deadline

    def check(self) -> None:
        """Raise ``LeaseLost`` unless a request may leave now."""
        if not self.alive():
            raise LeaseLost(self.lost or f"the lease of runner {self.id} on task {self.task} ran out "
                            "before the call could leave")

    def _beat(self) -> None:
        import psycopg  # noqa: PLC0415

        while not self._stop.wait(self.seconds / 3):
            began = time.monotonic()
            if began >= self._deadline:
                # Frozen or starved past the lease: it may already have been taken back.
                self.lost = (f"runner {self.id} was not heard from for longer than its lease "
                             f"({self.seconds:g} s): its calls may have been taken back")
            try:
                cur = self._conn.execute(SQL["renew_lease"], (self.seconds, self.id))
                renewed = cur.rowcount == 1
            except psycopg.Error as exc:
                text = DbText(self.url)
                self.lost = (f"the journal {text.shown} could not be reached to renew the lease: "
                             f"{text.error(exc)}")
                return
            if not renewed:
                self.lost = (f"the lease of runner {self.id} expired and its calls were taken back "
                             "by another runner")
                return
            if self.lost is None:
                self._deadline = began + self.seconds - self.margin

    def close(self) -> None:
        """Stop renewing and give the lease up (its calls are all recorded by now)."""
        self._stop.set()
        self._thread.join(timeout=5)
        # A database gone leaves a lease that simply expires.
        with contextlib.suppress(Exception):
            self._conn.execute(SQL["give_up_lease"], (self.id,))
        self._conn.close()
