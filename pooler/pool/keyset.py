"""The keys a plan will send, kept to find two calls that carry one key before anything is sent.

A data file may have millions of rows, so the set is bounded: the first ``MEMORY_KEYS`` keys are kept
in a dict, the rest in a private temporary SQLite database (on disk only while the plan is built,
removed by SQLite when closed).  Keys are kept as digests, so a secret in a key is never stored.

Past the memory keys a key is not looked up as it comes: a lookup a key in a table of a million
random digests costs a statement and a page or two each.  The keys are appended in batches, and a
key given before is found once a file's rows are read (``repeats``), by one sort of the digests
inside SQLite: the same repeats, with the same first holders, at a fraction of the cost.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import sqlite3

#: Keys held in memory before the set moves to SQLite: about 150 bytes each (a digest, a packed
#: holder and the dict's slot), so 3 MB at most; past them each key costs a few microseconds more.
MEMORY_KEYS = 20_000
#: Keys past the memory keys appended to the table by one statement.
BATCH = 10_000
#: A holder packed into one int: the step above these bits, the row + 1 (0: no row) below them.
_ROW_BITS = 40


class Holder(NamedTuple):
    """Where a key was first met: the step's number and the row (0-based; None for no row).  A
    tuple, not a dataclass: one is made for every row of a data file, and a frozen dataclass costs
    several times as much to make."""

    step: int
    row: int | None


class KeySet:
    """Every key added once; a key that comes again is told with who held it first: by ``add`` while
    the set is in memory, by ``repeats`` once it has moved to SQLite."""

    def __init__(self, memory_keys: int = MEMORY_KEYS) -> None:
        self._memory: dict[bytes, int] = {}
        self._limit = memory_keys
        self._db: sqlite3.Connection | None = None
        self._batch: list[tuple[bytes, int, int | None]] = []
        #: The first key (by its place in the table) that ``repeats`` has not looked at yet.
        self._since = 1

    def add(self, key: str, holder: Holder) -> Holder | None:
        """Record ``key`` for ``holder``; the first holder when the key was added before and the set
        is in memory (past it, None: ``repeats`` tells it)."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        if self._db is not None:
            self._batch.append((digest, holder.step, holder.row))
            if len(self._batch) >= BATCH:
                self._flush()
            return None
        found = self._memory.get(digest)
        if found is not None:
            return _unpack(found)
        self._memory[digest] = (holder.step << _ROW_BITS) | (0 if holder.row is None else holder.row + 1)
        if len(self._memory) >= self._limit:
            self._spill()
        return None

    def repeats(self, step: int, limit: int) -> list[tuple[Holder, Holder]]:
        """The rows of ``step`` added since the last call whose key was added before (in any step):
        each with the first holder of its key, in the order they were added, ``limit`` at most."""
        if self._db is None:
            return []
        self._flush()
        db, since = self._db, self._since
        self._since = int(db.execute("SELECT coalesce(max(seq), 0) + 1 FROM keys").fetchone()[0])
        if self._since == since:
            return []
        # One sort of every digest; the keys met twice (one of them since the last call), with the
        # first place each was met: usually none, and then nothing more is read.
        db.execute("DELETE FROM repeated")
        if not db.execute("INSERT INTO repeated SELECT digest, min(seq) FROM keys GROUP BY digest "
                          "HAVING count(*) > 1 AND max(seq) >= ?", (since,)).rowcount:
            return []
        found = db.execute(
            "SELECT again.row, first.step, first.row FROM keys AS again "
            "JOIN repeated ON repeated.digest = again.digest JOIN keys AS first ON first.seq = repeated.seq "
            "WHERE again.seq >= ? AND again.seq > repeated.seq AND again.step = ? AND again.row IS NOT NULL "
            "ORDER BY again.seq LIMIT ?", (since, step, limit))
        return [(Holder(step, row), Holder(first_step, first_row)) for row, first_step, first_row in found]

    def _spill(self) -> None:
        import sqlite3  # noqa: PLC0415 - most plans never need it, and check starts faster without

        # An empty name is SQLite's private temporary database: its own file, deleted on close.
        self._db = sqlite3.connect("")
        # Nothing here outlives the plan: no rollback journal; the keys are written in order, and the
        # sort that finds a repeat takes as much memory again: 8 MB of pages each.
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA cache_size = -8000")
        # Every key in the order it was met (seq): the first of a digest is its first holder.
        self._db.execute("CREATE TABLE keys (seq INTEGER PRIMARY KEY, digest BLOB NOT NULL, step INTEGER, "
                         "row INTEGER)")
        self._db.execute("CREATE TABLE repeated (digest BLOB PRIMARY KEY, seq INTEGER NOT NULL) "
                         "WITHOUT ROWID")
        self._db.executemany("INSERT INTO keys (digest, step, row) VALUES (?, ?, ?)",
                             ((d, h.step, h.row) for d, h in map(_unpacked, self._memory.items())))
        # A repeat of these was told by ``add`` already.
        self._since = len(self._memory) + 1
        self._memory.clear()

    def _flush(self) -> None:
        if self._db is not None and self._batch:
            self._db.executemany("INSERT INTO keys (digest, step, row) VALUES (?, ?, ?)", self._batch)
        self._batch.clear()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._memory.clear()
        self._batch.clear()

    def __enter__(self) -> KeySet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unpack(packed: int) -> Holder:
    row = packed & ((1 << _ROW_BITS) - 1)
    return Holder(packed >> _ROW_BITS, row - 1 if row else None)


def _unpacked(item: tuple[bytes, int]) -> tuple[bytes, Holder]:
    return item[0], _unpack(item[1])
