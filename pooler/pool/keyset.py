"""The keys a plan will send, kept to find two calls that carry one key before anything is sent.

A data file may have millions of rows, so the set is bounded: the first ``MEMORY_KEYS`` keys are kept
in a dict, the rest in a private temporary SQLite database (on disk only while the plan is built,
removed by SQLite when closed).  Keys are kept as digests, so a secret in a key is never stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

#: Keys held in memory before the set moves to SQLite (about 200 bytes each: 20 MB at most).
MEMORY_KEYS = 100_000


@dataclass(frozen=True, slots=True)
class Holder:
    """Where a key was first met: the step's number and the row (0-based; None for no row)."""

    step: int
    row: int | None


class KeySet:
    """Every key added once; ``add`` tells who held a key first when it comes again."""

    def __init__(self, memory_keys: int = MEMORY_KEYS) -> None:
        self._memory: dict[bytes, Holder] = {}
        self._limit = memory_keys
        self._db: sqlite3.Connection | None = None

    def add(self, key: str, holder: Holder) -> Holder | None:
        """Record ``key`` for ``holder``; the first holder when the key was added before."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        found = self._memory.get(digest)
        if found is not None:
            return found
        if self._db is not None:
            row = self._db.execute("SELECT step, row FROM keys WHERE digest = ?", (digest,)).fetchone()
            if row is not None:
                return Holder(row[0], row[1])
            self._db.execute("INSERT INTO keys VALUES (?, ?, ?)", (digest, holder.step, holder.row))
            return None
        self._memory[digest] = holder
        if len(self._memory) >= self._limit:
            self._spill()
        return None

    def _spill(self) -> None:
        import sqlite3  # noqa: PLC0415 - most plans never need it, and check starts faster without

        # An empty name is SQLite's private temporary database: its own file, deleted on close.
        self._db = sqlite3.connect("")
        self._db.execute("CREATE TABLE keys (digest BLOB PRIMARY KEY, step INTEGER, row INTEGER)"
                         " WITHOUT ROWID")
        self._db.executemany("INSERT INTO keys VALUES (?, ?, ?)",
                             ((d, h.step, h.row) for d, h in self._memory.items()))
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
