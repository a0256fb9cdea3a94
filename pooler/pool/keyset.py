"""The keys a plan will send, kept to find two calls that carry one key before anything is sent.

A data file may have millions of rows, so the set is bounded: the first ``MEMORY_KEYS`` keys are kept
in a dict, the rest in a private temporary SQLite database (on disk only while the plan is built,
removed by SQLite when closed).  Keys are kept as digests, so a secret in a key is never stored.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import sqlite3

#: Keys held in memory before the set moves to SQLite: about 150 bytes each (a digest, a packed
#: holder and the dict's slot), so 3 MB at most; past them each key costs a few microseconds more.
MEMORY_KEYS = 20_000
#: A holder packed into one int: the step above these bits, the row + 1 (0: no row) below them.
_ROW_BITS = 40


class Holder(NamedTuple):
    """Where a key was first met: the step's number and the row (0-based; None for no row).  A
    tuple, not a dataclass: one is made for every row of a data file, and a frozen dataclass costs
    several times as much to make."""

    step: int
    row: int | None


class KeySet:
    """Every key added once; ``add`` tells who held a key first when it comes again."""

    def __init__(self, memory_keys: int = MEMORY_KEYS) -> None:
        self._memory: dict[bytes, int] = {}
        self._limit = memory_keys
        self._db: sqlite3.Connection | None = None

    def add(self, key: str, holder: Holder) -> Holder | None:
        """Record ``key`` for ``holder``; the first holder when the key was added before."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        found = self._memory.get(digest)
        if found is not None:
            return _unpack(found)
        if self._db is not None:
            # One statement for the usual case, a new key; only a key met before is looked up.
            if self._db.execute("INSERT OR IGNORE INTO keys VALUES (?, ?, ?)",
                                (digest, holder.step, holder.row)).rowcount:
                return None
            step, row = self._db.execute("SELECT step, row FROM keys WHERE digest = ?", (digest,)).fetchone()
            return Holder(step, row)
        self._memory[digest] = (holder.step << _ROW_BITS) | (0 if holder.row is None else holder.row + 1)
        if len(self._memory) >= self._limit:
            self._spill()
        return None

    def _spill(self) -> None:
        import sqlite3  # noqa: PLC0415 - most plans never need it, and check starts faster without

        # An empty name is SQLite's private temporary database: its own file, deleted on close.
        self._db = sqlite3.connect("")
        # Nothing here outlives the plan: no rollback journal, and pages stay in memory up to 16 MB.
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA cache_size = -16000")
        self._db.execute("CREATE TABLE keys (digest BLOB PRIMARY KEY, step INTEGER, row INTEGER)"
                         " WITHOUT ROWID")
        self._db.executemany("INSERT INTO keys VALUES (?, ?, ?)",
                             ((d, h.step, h.row) for d, h in map(_unpacked, self._memory.items())))
        self._memory.clear()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._memory.clear()

    def __enter__(self) -> KeySet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unpack(packed: int) -> Holder:
    row = packed & ((1 << _ROW_BITS) - 1)
    return Holder(packed >> _ROW_BITS, row - 1 if row else None)


def _unpacked(item: tuple[bytes, int]) -> tuple[bytes, Holder]:
    return item[0], _unpack(item[1])
