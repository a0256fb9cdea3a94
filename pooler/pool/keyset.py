"""The keys a plan will send, kept to find two calls that carry one key before anything is sent.

A data file may have millions of rows, so the set is bounded: the first ``MEMORY_KEYS`` keys are kept
in a dict, the rest in a private temporary SQLite database (on disk only while the plan is built,
removed by SQLite when closed).  Keys are kept as digests, so a secret in a key is never stored.
Past the dict, a Bloom filter of the digests tells a new key without asking SQLite (a new key is
all but every key of a million-row file), and new keys are written to SQLite a batch at a time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

#: Keys held in memory before the set moves to SQLite: about 150 bytes each (a digest, a packed
#: holder and the dict's slot), so 3 MB at most; past them each key costs a few microseconds more.
MEMORY_KEYS = 20_000
#: A holder packed into one int: the step above these bits, the row + 1 (0: no row) below them.
_ROW_BITS = 40
#: The filter's bits (8 MB): at a million keys, one new key in about 1,000 is looked up in vain.
_BLOOM_BITS = 26
_BLOOM_MASK = (1 << _BLOOM_BITS) - 1
#: Keys past the dict are held back and written to SQLite this many at a time.
BATCH = 5000


@dataclass(frozen=True, slots=True)
class Holder:
    """Where a key was first met: the step's number and the row (0-based; None for no row)."""

    step: int
    row: int | None


class KeySet:
    """Every key added once; ``add`` tells who held a key first when it comes again."""

    def __init__(self, memory_keys: int = MEMORY_KEYS) -> None:
        self._memory: dict[bytes, int] = {}
        self._limit = memory_keys
        self._db: sqlite3.Connection | None = None
        self._bloom = bytearray()

    def add(self, key: str, holder: Holder) -> Holder | None:
        """Record ``key`` for ``holder``; the first holder when the key was added before."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        found = self._memory.get(digest)
        if found is not None:
            return _unpack(found)
        packed = (holder.step << _ROW_BITS) | (0 if holder.row is None else holder.row + 1)
        if self._db is not None:
            # Past the spill the dict holds the keys not written yet; SQLite is asked only about a
            # key the filter may have seen.
            if self._seen(digest):
                row = self._db.execute("SELECT step, row FROM keys WHERE digest = ?", (digest,)).fetchone()
                if row is not None:
                    return Holder(row[0], row[1])
            self._memory[digest] = packed
            if len(self._memory) >= BATCH:
                self._write()
            return None
        self._memory[digest] = packed
        if len(self._memory) >= self._limit:
            self._spill()
        return None

    def _seen(self, digest: bytes) -> bool:
        """Whether the filter may hold ``digest`` (never False for one it holds); it holds it after.
        Two bits a key, from the digest's own bytes: it is a hash already."""
        bits, number = self._bloom, int.from_bytes(digest[:8], "little")
        one, two = number & _BLOOM_MASK, (number >> 32) & _BLOOM_MASK
        mask_one, mask_two = 1 << (one & 7), 1 << (two & 7)
        seen = bool(bits[one >> 3] & mask_one and bits[two >> 3] & mask_two)
        bits[one >> 3] |= mask_one
        bits[two >> 3] |= mask_two
        return seen

    def _write(self) -> None:
        assert self._db is not None
        low = (1 << _ROW_BITS) - 1
        # In digest order: each batch lands in neighbouring pages of the table.
        self._db.executemany("INSERT OR IGNORE INTO keys VALUES (?, ?, ?)",
                             [(d, p >> _ROW_BITS, (p & low) - 1 if p & low else None)
                              for d, p in sorted(self._memory.items())])
        self._memory.clear()

    def _spill(self) -> None:
        import sqlite3  # noqa: PLC0415 - most plans never need it, and check starts faster without

        # An empty name is SQLite's private temporary database: its own file, deleted on close.
        self._db = sqlite3.connect("")
        # Nothing here outlives the plan: no rollback journal, and pages stay in memory up to 16 MB.
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA cache_size = -16000")
        self._db.execute("CREATE TABLE keys (digest BLOB PRIMARY KEY, step INTEGER, row INTEGER)"
                         " WITHOUT ROWID")
        self._bloom = bytearray(1 << (_BLOOM_BITS - 3))
        for digest in self._memory:
            self._seen(digest)
        self._write()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._memory.clear()
        self._bloom = bytearray()

    def __enter__(self) -> KeySet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unpack(packed: int) -> Holder:
    row = packed & ((1 << _ROW_BITS) - 1)
    return Holder(packed >> _ROW_BITS, row - 1 if row else None)


def _unpacked(item: tuple[bytes, int]) -> tuple[bytes, Holder]:
    return item[0], _unpack(item[1])
