"""Idempotency-Key: a repeat gets the stored answer and the command does not run again.

Answers are kept in SQLite, so they outlive a restart. A repeat that arrives while the first call
is still running waits for it on the key's lock, then finds its answer. Keys belong to a token:
the same key sent with another token is another call.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

from pooler.store.db import Database


@dataclass(frozen=True)
class Stored:
    status: int
    content_type: str
    body: bytes


class Claim:
    """The right to run the call of one key; ``stored`` is the earlier answer, if there is one."""

    def __init__(self, keeper: Idempotency, owner: str, key: str, stored: Stored | None) -> None:
        self._keeper = keeper
        self._owner = owner
        self._key = key
        self.stored = stored

    def keep(self, answer: Stored, conn: sqlite3.Connection | None = None) -> None:
        """The answer kept for the key: on ``conn``, in its transaction, when given."""
        self._keeper.keep(self._owner, self._key, answer, conn)


class Idempotency:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._guard = threading.Lock()
        self._running: dict[tuple[str, str], tuple[threading.Lock, int]] = {}

    @staticmethod
    def owner_of(token: str) -> str:
        # the token itself is a secret: only its digest goes to disk
        return hashlib.sha256(token.encode("utf-8")).hexdigest()[:32]

    @contextmanager
    def claim(self, token: str, key: str) -> Iterator[Claim]:
        """Holds the key for the block; waits while another call holds it."""
        owner = self.owner_of(token)
        slot = (owner, key)
        with self._guard:
            lock, users = self._running.get(slot, (threading.Lock(), 0))
            self._running[slot] = (lock, users + 1)
        try:
            with lock:
                yield Claim(self, owner, key, self.stored(owner, key))
        finally:
            with self._guard:
                lock, users = self._running[slot]
                if users == 1:
                    del self._running[slot]
                else:
                    self._running[slot] = (lock, users - 1)

    def stored(self, owner: str, key: str) -> Stored | None:
        with self._db.connect() as conn:
            row = conn.execute("SELECT status, content_type, body FROM idempotency "
                               "WHERE owner = ? AND key = ?", (owner, key)).fetchone()
        return Stored(row["status"], row["content_type"], bytes(row["body"])) if row is not None else None

    def keep(self, owner: str, key: str, answer: Stored, conn: sqlite3.Connection | None = None) -> None:
        if conn is None:
            with self._db.connect() as own:
                self.keep(owner, key, answer, own)
            return
        conn.execute("INSERT OR REPLACE INTO idempotency "
                     "(owner, key, status, content_type, body, created) VALUES (?, ?, ?, ?, ?, ?)",
                     (owner, key, answer.status, answer.content_type, answer.body,
                      datetime.now(timezone.utc).isoformat(timespec="seconds")))
