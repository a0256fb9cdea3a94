"""A runner's lease on a task, on any journal, and the one rule of which runners are alive.

The lease is ``runners.lease_until``, on the journal's clock (the database's ``now()`` on
PostgreSQL, so hosts whose clocks differ agree on it; the one host's wall clock on SQLite), renewed
every third of the lease by a heartbeat (``heartbeat.py``) on a connection the backend picks (one
of its own on PostgreSQL, so a renewal never waits behind a claim).  A renewal succeeds only while
the lease is still alive, so a runner whose calls were taken back never gets its lease again.

A runner is alive while its lease is, but for one recorded on this machine whose process is gone
(``liveness.py``): its calls are taken back by the next runner at once, not when its lease would
have run out.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

from pooler.errors import JournalError
from pooler.journal.connector import Connector
from pooler.journal.heartbeat import Heartbeat, taken_back
from pooler.journal.liveness import dead_here, host
from pooler.journal.work import Seat


@dataclass(frozen=True)
class Runner:
    """A runner of a task as the journal holds it: whether its lease is alive on the journal's
    clock, the calls it has in flight at most, and when it joined (seconds since the epoch)."""

    id: str
    host: str
    pid: int
    leased: bool
    width: int | None
    started: float

    @classmethod
    def from_row(cls, row: Any) -> Runner:
        return cls(str(row["id"]), str(row["host"]), int(row["pid"]), bool(row["leased"]),
                   None if row["width"] is None else int(row["width"]), float(row["started"]))

    @property
    def killed(self) -> bool:
        """Recorded on this machine, its process gone."""
        return dead_here(self.host, self.pid)

    @property
    def alive(self) -> bool:
        return self.leased and not self.killed


def runners(db: Connector, task: str) -> list[Runner]:
    """Every runner the task has."""
    return [Runner.from_row(r) for r in db.all("runners_of_task", {"task": task, "now": time.time()})]


def live_runners(db: Connector, task: str) -> list[str]:
    """The runners of the task that are alive."""
    return [r.id for r in runners(db, task) if r.alive]


def end_dead_leases(db: Connector, task: str) -> None:
    """The leases of the task's runners killed on this machine end now."""
    dead = [r.id for r in runners(db, task) if r.leased and r.killed]
    if dead:
        db.execute("end_leases", {"ids": db.json_in(dead), "now": time.time()})


def gone_runners(db: Connector, task: str) -> list[str]:
    """The runners of ``task`` that are gone (their lease expired, or their process on this machine
    is not there), and those that left with calls they could not record."""
    gone = [r.id for r in runners(db, task) if not r.alive]
    gone += [str(r["runner"]) for r in db.all("runners_left", {"task": task}) if str(r["runner"]) not in gone]
    return gone


def take(db: Connector, task: str, seat: Seat) -> None:
    """``seat`` taken as a runner of ``task``, in the caller's transaction."""
    seat.taken = time.monotonic()
    db.execute("take_lease", {"id": seat.id, "task": task, "host": host(), "pid": os.getpid(),
                              "now": time.time(), "seconds": seat.seconds, "width": seat.width})


class Lease(Heartbeat):
    """Registers a runner of ``task`` (with the calls it has in flight at most, its ``width``),
    unless its ``seat`` was taken already, and renews its lease every third of ``seconds`` on
    ``beat``, the connection its backend gives a heartbeat (``pooler.journal.work.RunnerLease``)."""

    def __init__(self, beat: Connector, task: str, seconds: float, width: int | None = None,
                 seat: Seat | None = None, *, owned: bool = False) -> None:
        self.db = beat
        #: Whether the heartbeat's connection is the lease's own, closed with it.
        self.owned = owned
        if seat is None:
            seat = Seat.new(seconds, width)
            try:
                with beat.transaction() as db:
                    take(db, task, seat)
            except BaseException:
                if owned:
                    beat.close()
                raise
        super().__init__(task, seat)
        assert seat.taken is not None
        self._started(seat.taken)

    def renew(self) -> str | None:
        try:
            renewed = self.db.execute("renew_lease", {"id": self.id, "now": time.time(),
                                                      "seconds": self.seconds}) == 1
        except JournalError as exc:
            return f"{exc.message} - the lease of runner {self.id} could not be renewed"
        return None if renewed else taken_back(self.id)

    def give_up(self) -> None:
        # A journal closed or out of reach leaves a lease that simply expires.
        with contextlib.suppress(JournalError):
            self.db.execute("give_up_lease", {"id": self.id})
        if self.owned:
            with contextlib.suppress(JournalError):
                self.db.close()
