"""The journal: a SQLite file of tasks and of every call they made, so a task can be run again
without repeating what it already did.

Durability: the file is in WAL mode with ``synchronous=NORMAL``.  A commit survives pooler being
killed (the case keys are for), but a power loss may lose the last few commits.  Every call event
is one short transaction: a keyed call's "sent" row is committed before its request leaves, and
every completion is committed before anything that depends on it starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pooler.errors import JournalError
from pooler.journal.records import (
    TaskRow,
    dumps,
    join_entry,
    now_text,
    pool_identity,
)
from pooler.journal.sqlite.file import SQL, own_file, upgrade
from pooler.journal.timeline import run_row
from pooler.statuses import TaskStatus


class Journal:
    """Tasks and their calls in one SQLite file; safe to use from several threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self._prepare_file(self.path)
        target = str(self.path) if self.path is not None else ":memory:"
        try:
            # One connection behind a lock: the transactions are a few microseconds each, so a
            # connection per thread would buy nothing and cost a WAL reader per thread.
            self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None,
                                       timeout=30.0)
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot open the journal {target}: {exc} - give another file with --journal."
            ) from exc
        try:
            own_file(self._db, target)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # In one write transaction: processes opening a new or older journal at the same moment
            # take turns, so a column is never added twice ("duplicate column name").
            self._db.execute("BEGIN IMMEDIATE")
            upgrade(self._db, target)
            self._db.execute("COMMIT")
        except (sqlite3.Error, JournalError) as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._db.close()
            if isinstance(exc, JournalError):
                raise
            raise JournalError(
                f"cannot open the journal {target}: {exc} - give another file with --journal."
            ) from exc
        self._lock = threading.Lock()
        #: The file the connection has open (device, inode), by its absolute path (the working folder
        #: may change): a journal deleted or replaced under the run is told at its next write, not
        #: written on into a file no one can open again.
        self._where = self.path.absolute() if self.path is not None else None
        self._file = self._identity()

    def _identity(self) -> tuple[int, int] | None:
        if self._where is None:
            return None
        try:
            found = self._where.stat()
        except OSError:
            return None
        return found.st_dev, found.st_ino

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

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._still_there()
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc
            except BaseException:
                # A caller's block that failed (a data file broken while its plan was written).
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction on the journal's connection, for a module that keeps its own
        tables in the journal (a task's plan): committed when the block ends, rolled back on an
        error."""
        return self._tx()

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of a read-only query, read whole: keep it small (page through big tables)."""
        return self._query(sql, args)

    def _write(self, sql: str, args: tuple[Any, ...]) -> int:
        """One statement, committed on its own (autocommit: a transaction of one statement)."""
        with self._lock:
            self._still_there()
            try:
                return int(self._db.execute(sql, args).lastrowid or 0)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc

    def change(self, sql: str, args: tuple[Any, ...] | dict[str, Any]) -> int:
        """One statement, committed on its own: the rows it changed."""
        with self._lock:
            self._still_there()
            try:
                return int(self._db.execute(sql, args).rowcount)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {exc}") from exc

    def where(self) -> str:
        """How messages name this journal: its path, or ``:memory:``."""
        return str(self.path or ":memory:")

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, args))
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc

    # Tasks

    def task(self, task_id: str) -> TaskRow | None:
        rows = self._query(SQL["task"], (task_id,))
        return TaskRow(*rows[0]) if rows else None

    def last_unfinished(self, pool_file: str | Path) -> str | None:
        """The latest task of ``pool_file`` that did not complete (stopped, failed, or killed)."""
        pool = pool_identity(pool_file)
        rows = self._query(SQL["last_unfinished"], (pool,))
        return str(rows[0][0]) if rows else None

    def finish_task(self, task_id: str, answer: dict[str, Any], status: str | None = None) -> None:
        """Record the task's answer (already redacted) and its counts; its status is the answer's
        unless given (``sampled``: a ``--sample`` run that completed, which ``--resume`` continues)."""
        with self._tx() as db:
            db.execute(SQL["finish_task"], (
                now_text(), status or answer.get("status", TaskStatus.FAILED), answer.get("total"),
                answer.get("succeeded"), answer.get("failed"), answer.get("skipped"), answer.get("not_run"),
                dumps(answer), answer.get("unchanged"), task_id))

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first."""
        rows = self._query(SQL["tasks"], (limit,))
        return [TaskRow(*r) for r in rows]

    def answer(self, task_id: str) -> dict[str, Any] | None:
        """The answer recorded when the task last finished, or ``None``."""
        rows = self._query(SQL["answer"], (task_id,))
        if not rows or rows[0][0] is None:
            return None
        found: dict[str, Any] = json.loads(rows[0][0])
        return found

    # Calls

    def record_run(self, task_id: str, run: int, facts: dict[str, Any]) -> None:
        """What the report needs to know of one run of a task: the store, the batch options, the
        steps (already masked)."""
        self._write(SQL["record_run"], run_row(task_id, run, facts))

    def cursor(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of a read-only query one at a time (the report reads 100,000 calls this way).

        The journal's lock is held while the rows are read: finish the iteration promptly.
        """
        with self._lock:
            try:
                yield from self._db.execute(sql, args)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc

    def calls(self, task_id: str) -> list[dict[str, Any]]:
        """Every record of the task, oldest first (for ``pooler show`` and tests)."""
        rows = self._query(SQL["calls_of_task"], (task_id,))
        names = ("run", "num", "row", "key", "round", "step_id", "status", "in_doubt", "sent_at",
                 "done_at", "result", "detail")
        out = []
        for r in rows:
            rec = dict(zip(names, r, strict=True))
            rec["in_doubt"] = bool(rec["in_doubt"])
            rec["result"] = join_entry(rec["result"], rec["detail"])
            rec["detail"] = None if rec["detail"] is None else json.loads(rec["detail"])
            out.append(rec)
        return out

