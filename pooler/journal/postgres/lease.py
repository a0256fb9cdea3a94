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
import time
from typing import Any

from pooler.errors import JournalError
from pooler.journal.dburl import DbText
from pooler.journal.heartbeat import Heartbeat, taken_back
from pooler.journal.liveness import host
from pooler.journal.postgres.schema import SQL, connect
from pooler.journal.work import Seat


def take(db: Any, task: str, seat: Seat) -> None:
    """``seat`` taken as a runner of ``task``, on the connection ``db`` (in its transaction)."""
    seat.taken = time.monotonic()
    db.execute(SQL["take_lease"],
               (seat.id, task, host(), os.getpid(), seat.seconds, seat.width))


class Lease(Heartbeat):
    """Registers a runner of ``task`` (with the calls it has in flight at most, its ``width``),
    unless its ``seat`` was taken already, and renews its lease every third of ``seconds``, on a
    connection of its own."""

    def __init__(self, url: str, task: str, seconds: float, width: int | None = None,
                 seat: Seat | None = None) -> None:
        import psycopg  # noqa: PLC0415

        self.url = url
        self._conn = connect(url)
        if seat is None:
            seat = Seat.new(seconds, width)
            try:
                take(self._conn, task, seat)
            except psycopg.Error as exc:
                self._conn.close()
                text = DbText(url)
                raise JournalError(f"the journal {text.shown} failed: {text.error(exc)}") from None
        super().__init__(task, seat)
        assert seat.taken is not None
        self._started(seat.taken)

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
