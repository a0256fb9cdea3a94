"""The journal: a SQLite file of tasks and of every call they made, so a task can be run again
without repeating what it already did.

Durability: the file is in WAL mode with ``synchronous=NORMAL``.  A commit survives pooler being
killed (the case keys are for), but a power loss may lose the last few commits.  Every call event
is one short transaction: a keyed call's "sent" row is committed before its request leaves, and
every completion is committed before anything that depends on it starts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pooler.errors import JournalError
from pooler.journal.connector import Guarded, Params, Row, Transaction
from pooler.journal.records import dumps
from pooler.journal.schema import upgrade
from pooler.journal.sqlite.file import MIGRATIONS, SQL, Catalog, mark, own_file, wal

#: Rows a bulk write hands SQLite in one statement.
BULK_BATCH = 5000

#: The queries of more than one statement (SQLite has no statement that writes two tables, as a
#: PostgreSQL CTE does), by name: their statements, run in turn in one transaction.  A query is its
#: SQL on one line, so ``; `` is where one statement ends (no query quotes it).
STEPS = {name: sql.split("; ") for name, sql in SQL.items() if "; " in sql}


class Journal(Guarded):
    """Tasks and their calls in one SQLite file; safe to use from several threads."""

    error = sqlite3.Error

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self._prepare_file(self.path)
        target = str(self.path) if self.path is not None else ":memory:"
        unopened = f"cannot open the journal {target}: {{}} - give another file with --journal."
        try:
            # One connection behind a lock: the transactions are a few microseconds each, so a
            # connection per thread would buy nothing and cost a WAL reader per thread.
            self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None,
                                       timeout=30.0)
        except sqlite3.Error as exc:
            raise JournalError(unopened.format(exc)) from exc
        try:
            unmarked = own_file(self._db, target)
            wal(self._db, 30.0)
            self._db.execute("PRAGMA synchronous=NORMAL")
            # In one write transaction: processes opening a new or older journal at the same moment
            # take turns, so a column is never added twice ("duplicate column name").
            self._db.execute("BEGIN IMMEDIATE")
            if unmarked:
                mark(self._db)
            upgrade(Catalog(self._db), MIGRATIONS, target, "wrote it, or give another file with --journal.")
            self._db.execute("COMMIT")
        except (sqlite3.Error, JournalError) as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._db.close()
            if isinstance(exc, JournalError):
                raise
            raise JournalError(unopened.format(exc)) from exc
        #: The file the connection has open (device, inode), by its absolute path (the working folder
        #: may change): a journal deleted or replaced under the run is told at its next write, not
        #: written on into a file no one can open again.
        self._where = str(self.path.absolute()) if self.path is not None else None
        self._file = self._identity()

    def _identity(self) -> tuple[int, int] | None:
        try:  # as every transaction begins: the text's stat, no Path's
            found = None if self._where is None else os.stat(self._where)  # noqa: PTH116
        except OSError:
            return None
        return None if found is None else (found.st_dev, found.st_ino)

    def _still_there(self) -> None:
        """Raise ``JournalError`` when the journal's path no longer names the file it opened."""
        if self._file is not None and self._identity() != self._file:
            raise JournalError(f"the journal {self.path} was deleted or replaced while this run used it - "
                               "what the run records would be lost with the file")

    @staticmethod
    def _prepare_file(path: Path) -> None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Created owner-only before SQLite opens it; SQLite gives its -wal and -shm files the
            # same mode as the database file.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
        except OSError as exc:
            raise JournalError(
                f"cannot create the journal {path}: {exc.strerror} - give another file with --journal."
            ) from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def transaction(self) -> Transaction[Journal]:
        """One write transaction (``BEGIN IMMEDIATE``: the file's one writer until it ends)."""
        return Transaction(self)

    # What ``Transaction`` asks: SQLite begins and ends a transaction by statement.

    def active(self) -> bool:
        return self._db.in_transaction

    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        self._still_there()

    def end(self, commit: bool) -> None:
        self._db.execute("COMMIT" if commit else "ROLLBACK")

    def lock(self, task: str) -> None:
        """A write transaction holds the whole file: the task's lock is held already."""

    # The connector (pooler.journal.connector.Connector): the named queries of sql/queries.sql

    def _cursor(self, name: str, params: Params | None) -> sqlite3.Cursor:
        cur = self._db.cursor()
        cur.row_factory = sqlite3.Row
        steps = STEPS.get(name)
        if steps is None:
            return cur.execute(SQL[name], params or {})
        for sql in steps[:-1]:
            cur.execute(sql, params or {})
        return cur.execute(steps[-1], params or {})

    def one(self, name: str, params: Params | None = None) -> Row | None:
        with self.guard():
            found: Row | None = self._cursor(name, params).fetchone()
            return found

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        if name in STEPS:
            # The rows of the last of its statements, all of them in one transaction.
            with self.transaction():
                return self._cursor(name, params).fetchall()
        with self.guard():
            return self._cursor(name, params).fetchall()

    def stream(self, name: str, params: Params | None = None) -> Iterator[Row]:
        """The rows of ``name`` one at a time; the journal's lock is held while they are read."""
        with self.guard():
            yield from self._cursor(name, params)

    def execute(self, name: str, params: Params | None = None) -> int:
        with self.guard():
            if not self._db.in_transaction:
                self._still_there()
            if name not in STEPS:
                return int(self._db.execute(SQL[name], params or {}).rowcount)
        with self.transaction():
            changed = 0
            for sql in STEPS[name]:
                changed = int(self._db.execute(sql, params or {}).rowcount)
            # The count of the last: the statements before it are what it is conditioned on.
            return changed

    @contextmanager
    def bulk(self, name: str) -> Iterator[Callable[[tuple[Any, ...]], None]]:
        """Rows written a batch at a time, each one statement over a JSON array of its rows
        (``json_rows``), on a thread while the next is made (a statement makes the values
        SQLite's where they differ: ``insert_work``)."""
        with self.batches(BULK_BATCH, SQL[name], self._db.execute) as add:
            yield add

    @staticmethod
    def json_in(value: Any) -> Any:
        """JSON is kept as text."""
        return None if value is None else dumps(value)

    @staticmethod
    def json_out(value: Any) -> Any:
        return None if value is None else json.loads(value)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a statement of SQL text, read whole (for a look at the file in a test)."""
        with self.guard():
            return list(self._db.execute(sql, tuple(args)))

    def where(self) -> str:
        """How messages name this journal: its path, or ``:memory:``."""
        return str(self.path or ":memory:")

