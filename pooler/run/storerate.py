"""A store's rate limit held by every task that calls it (``rate:`` of a named store in
stores.yaml, ``--store-rate``): a runner's calls take their slots from the store's bucket, after
every wait of their own task (its pause, its learnt rate, its own ``rate:``), so a task's limit
applies inside its share of the store's.  The bucket and the fair share are
journal/storerate.py's; here, what a runner took of it and the share a task had, as
``pooler runs`` and the report tell it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pooler.journal.opening import open_store_buckets
from pooler.journal.records import FlowDoc, StoreFlow
from pooler.journal.storerate import ShareSlot
from pooler.pool.rate import Rate


@dataclass(frozen=True)
class StoreRate:
    """A store's limit for every task that calls it, and the journal that keeps its bucket."""

    rate: Rate
    #: The default SQLite journal of the state folder (every process of this host meets there),
    #: or the PostgreSQL journal of the run (every host that shares it).
    buckets: str


class StorePace:
    """One runner's slots in its store's bucket, and what it took (its flow record's ``store``)."""

    def __init__(self, limit: StoreRate, store: str, task: str) -> None:
        self.rate = limit.rate
        self.store = store
        self.task = task
        self._buckets = open_store_buckets(limit.buckets)
        self._lock = threading.Lock()
        self._slots = 0
        self._first = 0
        self._last = 0
        self._sharing = 0
        self._asked = ShareSlot(0.0, 1, early=False)

    @classmethod
    def of(cls, limit: StoreRate | None, store: str, task: str) -> StorePace | None:
        """The runner's pace in the store's bucket, when the store has a rate."""
        return None if limit is None else cls(limit, store, task)

    def share(self) -> float:
        """The seconds until the task's share lets the next call ask for its slot (``JournalError``
        if the journal that keeps the bucket fails)."""
        found = self._buckets.share(self.store, self.task, self.rate.interval, self.rate.tolerance)
        with self._lock:
            self._asked = found
            self._sharing = max(self._sharing, found.sharing)
        return found.wait

    def slot(self) -> float:
        """The seconds until the next call's slot in the store's bucket, which is taken."""
        with self._lock:
            asked = self._asked
        taken = self._buckets.take(self.store, self.task, self.rate.interval, self.rate.tolerance,
                                   asked=asked)
        with self._lock:
            self._slots += 1
            self._first = self._first or taken.number
            self._last = taken.number
        return taken.wait

    def doc(self) -> StoreFlow:
        with self._lock:
            return {"per_second": self.rate.per_second, "burst": self.rate.burst, "slots": self._slots,
                    "first": self._first, "last": self._last, "sharing": self._sharing}

    def close(self) -> None:
        self._buckets.close()


@dataclass(frozen=True)
class StoreShare:
    """The share of its store's rate a run of a task had, over its runners."""

    per_second: float
    #: Its slots, of every slot the store's bucket gave from its first to its last (0 to 1).
    share: float
    #: The most tasks that wanted more of the store than they got at once, this one included.
    sharing: int

    def text(self) -> str:
        """``store rate 20/s, share 51 %``."""
        return f"store rate {self.per_second:g}/s, share {round(self.share * 100)} %"


def store_share(flows: list[FlowDoc]) -> StoreShare | None:
    """The share the run whose runners' records are ``flows`` had of its store's rate; None when
    it took no slot of one."""
    took = [f["store"] for f in flows if "store" in f and f["store"]["slots"]]
    if not took:
        return None
    given = max(s["last"] for s in took) - min(s["first"] for s in took) + 1
    slots = sum(s["slots"] for s in took)
    return StoreShare(took[0]["per_second"], min(1.0, slots / given), max(s["sharing"] for s in took))


def last_share(flows: list[FlowDoc]) -> StoreShare | None:
    """The share of its store's rate the last run of a task that took slots of one had."""
    runs = sorted({f["run"] for f in flows if "store" in f}, reverse=True)
    for run in runs:
        found = store_share([f for f in flows if f["run"] == run])
        if found is not None:
            return found
    return None
