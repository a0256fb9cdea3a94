"""A runner's lease on a task of a SQLite journal, and the one rule of which runners are alive.

The lease is ``runners.lease_until``, on the wall clock of the runners' one host, renewed every
third of the lease by a heartbeat on the journal's own connection (behind its lock, so a journal
in memory has leases too).  A renewal succeeds only while the lease is still alive, so a runner
whose calls were taken back never gets its lease again.  Beside it the runner keeps a local
deadline on the monotonic clock (which runs on while a process is stopped), checked just before
each request leaves.

A runner is gone when its lease expired, or when it runs on this machine and its process is not
there any more: the calls of a process killed with SIGKILL are taken back by the next runner at
once, not when its lease would have run out.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from pooler.errors import JournalError
from pooler.journal.heartbeat import Heartbeat, taken_back
from pooler.journal.liveness import dead_here, host
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal
from pooler.journal.work import Seat


def live_runners(runners: Iterable[tuple[Any, ...]], now: float) -> list[str]:
    """Of the task's ``runners`` (``SQL["runners_of_task"]``), those whose lease is alive at ``now``
    (seconds since the epoch), but for those of this machine whose process is gone."""
    return [str(rid) for rid, where, pid, until, _, _ in runners
            if until > now and not dead_here(where, pid)]


def end_dead_leases(db: sqlite3.Connection, task: str, now: float) -> None:
    """The leases of the task's runners killed on this machine end now."""
    dead = [str(rid) for rid, where, pid, until, _, _ in db.execute(SQL["runners_of_task"], (task,))
            if until > now and dead_here(where, pid)]
    if dead:
        db.execute(SQL["end_leases"], (now, json.dumps(dead)))


def gone_runners(db: sqlite3.Connection, task: str, now: float) -> list[str]:
    """The runners of ``task`` that are gone: their lease expired, or their process (on this
    machine) is not there; and the runners that left with calls they could not record."""
    gone = [str(rid) for rid, where, pid, until, _, _ in db.execute(SQL["runners_of_task"], (task,))
            if until < now or dead_here(where, pid)]
    gone += [str(r[0]) for r in db.execute(SQL["runners_left"], (task,)) if str(r[0]) not in gone]
    return gone


def fair_share(db: sqlite3.Connection, task: str, runner: str, cap: int, now: float) -> int:
    """A runner's fair share of the task's cap: the cap divided among the live runners as water
    fills vessels, each up to its width (``pooler_share`` of the PostgreSQL journal): a runner
    narrower than an equal part keeps its width, the others split what is left in equal parts,
    one more for each of the first to join while a remainder lasts."""
    live = [(str(rid), min(cap if width is None else int(width), cap), float(started))
            for rid, where, pid, until, width, started in db.execute(SQL["runners_of_task"], (task,))
            if rid == runner or (until > now and not dead_here(where, pid))]
    left, n = cap, len(live)
    wide: int | None = None
    for rid, width, _ in sorted(live, key=lambda r: r[1]):
        if width * n > left:
            wide = width
            break
        if rid == runner:
            return width
        left -= width
        n -= 1
    if wide is None:
        return cap
    me = next((r for r in live if r[0] == runner), None)
    rank = 0 if me is None else sum(1 for rid, width, started in live
                                    if width >= wide and (started, rid) < (me[2], me[0]))
    return left // n + (1 if rank < left % n else 0)


def take(db: sqlite3.Connection, task: str, seat: Seat) -> None:
    """``seat`` taken as a runner of ``task``, in the caller's transaction."""
    seat.taken = time.monotonic()
    now = time.time()
    db.execute(SQL["take_lease"], (seat.id, task, host(), os.getpid(), now, now + seat.seconds, seat.width))


class SqliteLease(Heartbeat):
    """Registers a runner of ``task`` (with the calls it has in flight at most, its ``width``) in
    ``journal``, unless its ``seat`` was taken already, and renews its lease every third of
    ``seconds`` (``pooler.journal.work.RunnerLease``)."""

    def __init__(self, journal: Journal, task: str, seconds: float, width: int | None = None,
                 seat: Seat | None = None) -> None:
        if seat is None:
            seat = Seat.new(seconds, width)
            with journal.raw_transaction() as db:
                take(db, task, seat)
        super().__init__(task, seat)
        self.journal = journal
        assert seat.taken is not None
        self._started(seat.taken)

    def renew(self) -> str | None:
        now = time.time()
        try:
            renewed = self.journal.change(SQL["renew_lease"], (now + self.seconds, self.id, now)) == 1
        except JournalError as exc:
            return f"{exc.message} - the lease of runner {self.id} could not be renewed"
        return None if renewed else taken_back(self.id)

    def give_up(self) -> None:
        # A journal closed already leaves a lease that simply expires.
        with contextlib.suppress(JournalError):
            self.journal.change(SQL["give_up_lease"], (self.id,))
