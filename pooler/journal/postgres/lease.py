"""A runner's lease on a task, kept alive by a heartbeat on the database's clock.

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
import socket
import time

from pooler.errors import JournalError
from pooler.journal.dburl import DbText
from pooler.journal.heartbeat import Heartbeat, taken_back
from pooler.journal.postgres.schema import SQL, connect


class Lease(Heartbeat):
    """Registers a runner of ``task`` (with the calls it has in flight at most, its ``width``) and
    renews its lease every third of ``seconds``, on a connection of its own."""

    def __init__(self, url: str, task: str, seconds: float, width: int | None = None) -> None:
        super().__init__(task, seconds)
        self.url = url
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
        self._started(began)

    def renew(self) -> str | None:
        import psycopg  # noqa: PLC0415

        try:
            cur = self._conn.execute(SQL["renew_lease"], (self.seconds, self.id))
        except psycopg.Error as exc:
            text = DbText(self.url)
            return f"the journal {text.shown} could not be reached to renew the lease: {text.error(exc)}"
        return None if cur.rowcount == 1 else taken_back(self.id)

    def give_up(self) -> None:
        # A database gone leaves a lease that simply expires.
        with contextlib.suppress(Exception):
            self._conn.execute(SQL["give_up_lease"], (self.id,))
        self._conn.close()
