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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pooler.errors import JournalError
from pooler.journal.connector import Params, Row
from pooler.journal.history import task_row
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


def _deps(deps: Any) -> str:
    """The step numbers a call waits for as a JSON array: the planner gives PostgreSQL's array
    text (``{1,2}``)."""
    if isinstance(deps, str):
        inner = deps.strip().removeprefix("{").removesuffix("}").strip()
        return f"[{inner}]" if inner else "[]"
    return json.dumps([int(d) for d in deps or ()])


def work_values(row: tuple[Any, ...]) -> tuple[Any, ...]:
    task, num, idx, kind, first, last, size, data, deps, serial, key, planned, state = row
    if data is not None and not isinstance(data, str):
        data = dumps(data)
    return (task, num, idx, kind, first, last, size, data, _deps(deps), serial, key,
            None if planned is None else int(bool(planned)), str(state))


#: How a bulk write makes its rows' values SQLite's, by statement.
BULK_VALUES: dict[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]] = {"insert_work": work_values}


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
        self._lock = threading.RLock()
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
            if self._db.in_transaction:
                # Begun by this thread (the lock is its own): the same transaction.
                yield self._db
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._still_there()
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise JournalError(f"the journal {self.where()} failed: {exc}") from exc
            except BaseException:
                # A caller's block that failed (a data file broken while its plan was written).
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def raw_transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction on the journal's connection itself: committed when the block
        ends, rolled back on an error."""
        return self._tx()

    @contextmanager
    def transaction(self) -> Iterator[Journal]:
        """One write transaction (``BEGIN IMMEDIATE``: the file's one writer until it ends)."""
        with self._tx():
            yield self

    def lock(self, task: str) -> None:
        """A write transaction holds the whole file: the task's lock is held already."""

    # The connector (pooler.journal.connector.Connector): the named queries of sql/queries.sql

    def _cursor(self, name: str, params: Params | None) -> sqlite3.Cursor:
        cur = self._db.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(SQL[name], params or {})

    def one(self, name: str, params: Params | None = None) -> Row | None:
        with self._lock:
            try:
                found: Row | None = self._cursor(name, params).fetchone()
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {exc}") from exc
            return found

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        with self._lock:
            try:
                return list(self._cursor(name, params))
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {exc}") from exc

    def stream(self, name: str, params: Params | None = None) -> Iterator[Row]:
        """The rows of ``name`` one at a time; the journal's lock is held while they are read."""
        with self._lock:
            try:
                yield from self._cursor(name, params)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {exc}") from exc

    def execute(self, name: str, params: Params | None = None) -> int:
        with self._lock:
            if not self._db.in_transaction:
                self._still_there()
            try:
                return int(self._db.execute(SQL[name], params or {}).rowcount)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {exc}") from exc

    @contextmanager
    def bulk(self, name: str) -> Iterator[Callable[[tuple[Any, ...]], None]]:
        """Rows written a batch of executemany at a time (a work row's values made SQLite's)."""
        adapt = BULK_VALUES.get(name, tuple)
        batch: list[tuple[Any, ...]] = []

        def write(row: tuple[Any, ...]) -> None:
            batch.append(adapt(row))
            if len(batch) >= 2000:
                flush()

        def flush() -> None:
            with self._lock:
                try:
                    self._db.executemany(SQL[name], batch)
                except sqlite3.Error as exc:
                    raise JournalError(f"the journal {self.where()} failed: {exc}") from exc
            batch.clear()

        yield write
        flush()

    @staticmethod
    def json_in(value: Any) -> Any:
        """JSON is kept as text."""
        return None if value is None else dumps(value)

    @staticmethod
    def json_out(value: Any) -> Any:
        return None if value is None else json.loads(value)

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
                dumps(answer), task_id))

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first."""
        return [task_row(r) for r in self.all("tasks", {"limit": limit})]

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

