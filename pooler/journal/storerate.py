"""A store's rate limit held by every task that calls it (``rate:`` of a named store in
stores.yaml, ``--store-rate``), and each task's fair share of it.

The store's bucket is the task's rate bucket (``WorkStore.pace``: the generic cell rate
algorithm, a bucket as one timestamp) keyed by the store instead of the task, so it holds for
every task and every pooler process that calls the store: on one host in the default journal of
the state folder, whichever journal a task is in; across hosts in the PostgreSQL journal they
share.

A bucket alone serves its slots first come, first served: a task with three runners would take
three slots for another task's one.  So a call first waits for its task's share, a bucket of the
task's own spaced by the number of tasks that want more of the store than they get (``sharing``),
and only then takes its slot in the store's bucket.  In that order, because a slot is a moment:
one reserved ahead in the store's bucket for a call its share holds back would leave the slots
before it unused.

A task wants more while it asks for slots sooner than its share gives them, or its calls wait a
slot of the store's or more in the store's bucket (behind the other tasks' calls), and calls the
store while its last slot is less than ``WINDOW`` seconds old.  One that calls less than its share
(its own ``rate:`` holds it back, its width is full of slow calls) mostly waits for nothing and is
not counted, so the others share what it leaves; one that stops calling frees its share within
``WINDOW`` seconds, with no lease or heartbeat of its own to keep.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pooler.journal.connector import Connector, Row

#: Seconds after its last slot a task still counts as calling the store, and after its last call
#: that waited as wanting more of it: longer than a busy runner's pause between two calls, short
#: enough that a task that stopped frees its share soon.
WINDOW = 2.0
#: A call that waited this many of the store's slots, or more, for its slot in the store's bucket
#: wants more of the store than its task gets (less is the jitter of calls that meet).
HUNGRY = 1.0
#: How long a task that wanted more of the store counts as wanting it: a few of its share's
#: slots, and at least this many seconds.  Short, so that a task whose calls met the others'
#: now and then does not hold a share it does not use.
HUNGRY_FOR = 0.5
#: Seconds after which a task's share is forgotten (it is made again if the task calls again).
FORGET = 3600.0


@dataclass(frozen=True)
class ShareSlot:
    """When a call's task's share lets it ask for its slot in the store's bucket."""

    #: Seconds until then.
    wait: float
    #: The tasks that want more of the store than they get, this one included.
    sharing: int
    #: The call asked sooner than its share gives slots: its task wants more of the store.
    early: bool


@dataclass(frozen=True)
class StoreSlot:
    """A call's slot in its store's bucket."""

    #: Seconds until the call may start.
    wait: float
    #: The slot's number: how many slots the store's bucket had given, this one included.
    number: int


def slot(now: float, tat: float | None, interval: float, tolerance: float) -> tuple[float, float]:
    """The one rule of a bucket (GCRA), a task's share's or a store's: when the call may go, and
    the bucket's new ``tat``."""
    at = now if tat is None else max(now, tat - tolerance)
    return at, max(tat if tat is not None else at, at) + interval


class StoreBuckets:
    """The stores' buckets of one journal (the default SQLite file, or a PostgreSQL database) on
    a connection of their own, since a slot is taken while the task's journal is busy elsewhere."""

    def __init__(self, db: Connector) -> None:
        self.db = db
        self._forgot = False

    def _held(self, db: Connector, args: dict[str, Any]) -> float:
        """The store's bucket held for the transaction (made the first time); the clock."""
        if not self._forgot:
            self._forgot = True
            db.execute("store_shares_forget", {**args, "now": time.time()})
        db.execute("store_bucket_make", args)
        args["tat"] = float(_found(db.one("store_bucket_read", args))["tat"])
        # The clock is read once the bucket is held: a wait for the lock is not the bucket's.
        return float(_found(db.one("store_clock", {"now": time.time()}))["now"])

    def share(self, store: str, task: str, interval: float, tolerance: float) -> ShareSlot:
        """When ``task``'s share of ``store`` lets its next call ask for a slot; ``JournalError``
        if the journal fails."""
        with self.db.transaction() as db:
            args: dict[str, Any] = {"store": store, "task": task, "window": WINDOW, "forget": FORGET}
            args["now"] = now = self._held(db, args)
            found = _found(db.one("store_share_read", args))
            tat, sharing = found["tat"], int(found["others"]) + 1
            at, share = slot(now, None if tat is None else float(tat), sharing * interval, tolerance)
            db.execute("store_share_take", {**args, "share": share, "at": at})
        return ShareSlot(max(0.0, at - now), sharing, tat is not None and now < float(tat))

    def take(self, store: str, task: str, interval: float, tolerance: float, *,
             asked: ShareSlot) -> StoreSlot:
        """The next slot of ``store``, reserved for a call of ``task`` whose share let it ask
        (``asked``)."""
        with self.db.transaction() as db:
            args: dict[str, Any] = {"store": store, "task": task, "forget": FORGET}
            now = self._held(db, args)
            at, tat = slot(now, args["tat"], interval, tolerance)
            number = _found(db.one("store_bucket_take", {**args, "tat": tat}))["slots"]
            hungry = at + max(HUNGRY_FOR, 4 * asked.sharing * interval)
            db.execute("store_share_slot", {**args, "at": at, "hungry": hungry,
                                                      "waited": asked.early or at - now >= HUNGRY * interval})
        return StoreSlot(max(0.0, at - now), int(number))

    def close(self) -> None:
        self.db.close()


def _found(row: Row | None) -> Row:
    assert row is not None  # each of these queries gives one row
    return row
