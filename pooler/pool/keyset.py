"""The keys a plan will send, kept to find two calls that carry one key before anything is sent.

A data file may have millions of rows, so the set is bounded: the first ``MEMORY_KEYS`` keys are kept
in a dict, the rest in a private temporary SQLite database (on disk only while the plan is built,
removed by SQLite when closed).  Keys are kept as digests, so a secret in a key is never stored.

Past the memory keys a key is not looked up as it comes: a lookup a key in a table of a million
random digests costs a statement and a page or two each.  The keys are appended in batches, written
by a thread of their own while the rows after them are read (``pool/batches.py``), and a key given
before is found once a file's rows are read (``repeats``), by one sort of the digests' first halves
inside SQLite: the same repeats, with the same first holders, at a fraction of the cost.
"""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING, NamedTuple

from pooler.pool.batches import BatchWriter

if TYPE_CHECKING:
    import sqlite3

#: Keys held in memory before the set moves to SQLite: about 150 bytes each (a digest, a packed
#: holder and the dict's slot), so 3 MB at most; past them each key costs a few microseconds more.
MEMORY_KEYS = 20_000
#: Keys past the memory keys appended to the table by one statement.
BATCH = 10_000
#: A holder packed into one int: the step above these bits, the row + 1 (0: no row) below them.
_ROW_BITS = 40
#: A digest as the two integers the table keeps (JSON, which carries a batch, has no bytes).
_HALVES = struct.Struct(">qq").unpack
_APPEND = "INSERT INTO keys (hi, lo, step, row) VALUES (?, ?, ?, ?)"


class Holder(NamedTuple):
    """Where a key was first met: the step's number and the row (0-based; None for no row)."""

    step: int
    row: int | None


class KeySet:
    """Every key added once; a key that comes again is told with who held it first: by ``add`` while
    the set is in memory, by ``repeats`` once it has moved to SQLite."""

    def __init__(self, memory_keys: int = MEMORY_KEYS) -> None:
        self._memory: dict[bytes, int] = {}
        self._limit = memory_keys
        self._db: sqlite3.Connection | None = None
        #: Appends the keys past the memory keys to the table, on a thread of its own.
        self._writer: BatchWriter | None = None
        #: The first key (by its place in the table) that ``repeats`` has not looked at yet.
        self._since = 1

    def add(self, key: str, step: int, row: int | None) -> Holder | None:
        """Record ``key`` for its holder, row ``row`` of step ``step`` (None: the step's own key);
        the first holder when the key was added before and the set is in memory (past it, None:
        ``repeats`` tells it).  The holder is given as two values, not a ``Holder``: one is made for
        every row of a data file."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        if self._db is not None:
            if self._writer is None:
                self._writer = BatchWriter(BATCH, _APPEND, self._db.execute)
            self._writer.add((*_HALVES(digest), step, row))
            return None
        found = self._memory.get(digest)
        if found is not None:
            return _unpack(found)
        self._memory[digest] = (step << _ROW_BITS) | (0 if row is None else row + 1)
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
        # One sort of every digest's first half (a sort of integers) finds whether a key came
        # twice, one of the two since the last call: usually none, and then nothing more is read.
        # Else the digests whole, of those halves alone, with the first place each was met.
        if db.execute("SELECT 1 FROM keys GROUP BY hi HAVING count(*) > 1 AND max(seq) >= ? LIMIT 1",
                      (since,)).fetchone() is None:
            return []
        db.execute("DELETE FROM repeated")
        db.execute("INSERT INTO repeated SELECT hi, lo, min(seq) FROM keys WHERE hi IN "
                   "(SELECT hi FROM keys GROUP BY hi HAVING count(*) > 1) GROUP BY hi, lo "
                   "HAVING count(*) > 1 AND max(seq) >= ?", (since,))
        found = db.execute(
            "SELECT again.row, first.step, first.row FROM keys AS again "
            "JOIN repeated ON repeated.hi = again.hi AND repeated.lo = again.lo "
            "JOIN keys AS first ON first.seq = repeated.seq "
            "WHERE again.seq >= ? AND again.seq > repeated.seq AND again.step = ? AND again.row IS NOT NULL "
            "ORDER BY again.seq LIMIT ?", (since, step, limit))
        return [(Holder(step, row), Holder(first_step, first_row)) for row, first_step, first_row in found]

    def _spill(self) -> None:
        import sqlite3  # noqa: PLC0415 - most plans never need it, and check starts faster without

        # An empty name is SQLite's private temporary database: its own file, deleted on close.  Its
        # appends are written by a thread (``_writer``), never while another statement runs.
        self._db = sqlite3.connect("", check_same_thread=False)
        # Nothing here outlives the plan: no rollback journal; the keys are written in order, and the
        # sort that finds a repeat takes as much memory again: 8 MB of pages each.
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA cache_size = -8000")
        # Every key in the order it was met (seq): the first of a digest is its first holder.
        self._db.execute("CREATE TABLE keys (seq INTEGER PRIMARY KEY, hi INTEGER NOT NULL, "
                         "lo INTEGER NOT NULL, step INTEGER, row INTEGER)")
        self._db.execute("CREATE TABLE repeated (hi INTEGER NOT NULL, lo INTEGER NOT NULL, "
                         "seq INTEGER NOT NULL, PRIMARY KEY (hi, lo)) WITHOUT ROWID")
        self._db.executemany(_APPEND, ((*_HALVES(d), h.step, h.row)
                                       for d, h in map(_unpacked, self._memory.items())))
        # A repeat of these was told by ``add`` already.
        self._since = len(self._memory) + 1
        self._memory.clear()

    def _flush(self) -> None:
        """Every key added so far in the table (the thread that appends them ended)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.__exit__(None, None, None)

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.__exit__(RuntimeError, RuntimeError("closed"), None)
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
