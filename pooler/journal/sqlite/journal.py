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
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pooler.errors import JournalError
from pooler.journal.records import (
    DONE,
    CallId,
    CallRecord,
    TaskRow,
    dumps,
    enter_run,
    join_entry,
    leave_runs,
    now_text,
    pool_identity,
    split_entry,
    whole_record,
)
from pooler.journal.sqlite.file import SQL, alive, host, own_file, upgrade
from pooler.journal.timeline import epoch_ms, run_row
from pooler.statuses import LANDED, TaskStatus


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

    @classmethod
    def in_memory(cls) -> Journal:
        """A journal that lives as long as the object: keys hold within one run only."""
        return cls(":memory:")

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

    @contextmanager
    def attached(self, path: Path, schema: str) -> Iterator[None]:
        """Another SQLite file readable as ``schema`` on the journal's connection for the block (a
        task's staged plan, copied in by SQLite itself)."""
        with self._lock:
            self._db.execute(f"ATTACH DATABASE ? AS {schema}", (str(path),))
        try:
            yield
        finally:
            with self._lock:
                self._db.execute(f"DETACH DATABASE {schema}")

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of a read-only query, read whole: keep it small (page through big tables)."""
        return self._query(sql, args)

    def _write(self, sql: str, args: tuple[Any, ...]) -> int:
        """One statement, committed on its own (autocommit: a transaction of one statement)."""
        with self._lock:
            try:
                return int(self._db.execute(sql, args).lastrowid or 0)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, args))
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc

    # Tasks

    def new_task(self, pool_file: str | Path, task_id: str | None = None, store: str | None = None,
                 *, also: Callable[[sqlite3.Connection, str], None] | None = None) -> str:
        """Start a task for ``pool_file`` (kept resolved) against ``store`` (the store's URL as
        ``storeid.store_identity`` gives it: never a token); a readable unique id when none is
        given.  ``also`` writes more of the task in the same transaction (its plan): another
        process never finds the task without it."""
        pool = pool_identity(pool_file)
        for _ in range(20):
            tid = task_id or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
            with self._tx() as db:
                if db.execute(SQL["task_exists"], (tid,)).fetchone() is None:
                    db.execute(SQL["insert_task"], (tid, pool, now_text(), store))
                    enter_run(db, tid, 1)
                    if also is not None:
                        also(db, tid)
                    return tid
            if task_id is not None:
                raise JournalError(f"the task {task_id} is already in the journal - "
                                   "give a new id, or run it again with --task to continue it.")
        raise JournalError("no free task id could be made - try again.")

    def open_task(self, task_id: str, store: str | None = None) -> int:
        """Continue an existing task: marks it running again and returns the number of this run.

        ``store`` is recorded for a task that has none yet (made before tasks recorded theirs)."""
        with self._tx() as db:
            row = db.execute(SQL["task_runs"], (task_id,)).fetchone()
            if row is None:
                raise JournalError(f"no task {task_id} in the journal {self.path or ':memory:'} - "
                                   "`pooler runs` lists the tasks it holds.")
            runs = int(row[0]) + 1
            db.execute(SQL["reopen_task"], (runs, store, task_id))
            enter_run(db, task_id, runs)
            return runs

    def live_runs(self, task_id: str) -> frozenset[int]:
        """The runs of the task going on now in another process of this machine.

        Their calls sent without an answer yet are in flight, not in doubt: sending them again would
        run them twice against a store that ignores Idempotency-Key.  A run on another machine, or
        one whose process is gone, is not counted (what it left unanswered is in doubt).
        """
        rows = self._query(SQL["runs_of_task"], (task_id,))
        here = host()
        return frozenset(int(run) for run, where, pid in rows
                         if where == here and pid != os.getpid() and alive(int(pid)))

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
                dumps(answer), task_id))
            # This process's run of the task has ended, though the process may go on (the MCP
            # server, a library caller): what it left unanswered is in doubt, not in flight.
            leave_runs(db, task_id)

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

    def keyed(self, task_id: str) -> dict[str, CallRecord]:
        """The last record of every key of the task (read once at the start of a run).

        Keys of steps over rows come without their entries: a 100,000-row import resumed holds
        100,000 keys, not 100,000 answers.
        """
        out: dict[str, CallRecord] = {}
        with self._lock:
            try:
                # Row by row from the cursor: no list of every record is built first.
                for columns in self._db.execute(SQL["keyed"], (task_id,)):
                    key, num, row, step_id, rnd, status, in_doubt, result, _, rid, run = columns
                    if row is None:
                        out[key] = whole_record(columns)
                    elif status in LANDED and not in_doubt:
                        out[key] = DONE
                    else:
                        landed = result is not None and json.loads(result).get("result") is True
                        out[key] = CallRecord(key, num, row, step_id, rnd, status, bool(in_doubt),
                                              {"result": True} if landed else None, None, rid, run)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc
        return out

    def record_of(self, task_id: str, key: str) -> CallRecord | None:
        """The standing record of one key of the task, whole: what ``keyed`` left out of it."""
        with self._lock:
            try:
                return self._standing(self._db, task_id, key)
            except sqlite3.Error as exc:
                raise JournalError(f"the journal {self.path or ':memory:'} failed: {exc}") from exc

    @staticmethod
    def _standing(db: sqlite3.Connection, task_id: str, key: str) -> CallRecord | None:
        found = db.execute(SQL["standing_of"], (task_id, key)).fetchone()
        if found is None or found[0] is None:
            return None
        return whole_record(db.execute(SQL["record"], (found[0],)).fetchone())

    def claim(self, call: CallId, seen: int) -> int | CallRecord:
        """Claim a keyed call's key for sending, in one transaction: when the key's standing record
        is still the one this run read (its ``CallRecord.id``; 0 when the key had none), the call's
        ``sent`` record is committed and its id returned, as ``record_sent`` does.  Otherwise another
        run of the task (another process on the same journal) has done something with the key since:
        its standing record is returned and nothing is written.

        This is what makes a key leave at most once when two processes run one task.
        """
        assert call.key is not None
        with self._tx() as db:
            found = self._standing(db, call.task, call.key)
            if found is not None and found.id != seen:
                return found
            return int(db.execute(SQL["insert_sent"], (
                call.task, call.run, call.num, call.row, call.key, call.round, call.step_id, now_text(),
                call.lane, call.serial, epoch_ms())).lastrowid or 0)

    def record_sent(self, call: CallId) -> int:
        """A call is about to leave; committed before it does.  Returns the record's id."""
        return self._write(SQL["insert_sent"], (
            call.task, call.run, call.num, call.row, call.key, call.round, call.step_id, now_text(),
            call.lane, call.serial, epoch_ms()))

    def record_done(self, record_id: int, status: str, result: dict[str, Any] | None) -> None:
        """The entry of a call recorded with ``record_sent`` (already redacted)."""
        body, detail = split_entry(result)
        self._write(SQL["record_done"], (status, now_text(), body, detail, epoch_ms(), record_id))

    def record(self, call: CallId, status: str, result: dict[str, Any] | None = None, *,
               sent: bool = False, in_doubt: bool = False, sent_ms: int | None = None) -> None:
        """A call's whole record in one statement: unkeyed calls, and calls never sent.

        ``call.step_id`` is the id of the call that reached the store: for a call skipped or
        stopped because of an earlier record, the earlier call's id.  ``sent_ms`` is when a call
        that was sent left (epoch milliseconds): the report's timeline draws it from there.
        """
        now = now_text()
        body, detail = split_entry(result)
        self._write(SQL["insert_call"], (
            call.task, call.run, call.num, call.row, call.key, call.round, call.step_id, status,
            int(in_doubt), now if sent else None, now, body, detail, call.lane, call.serial,
            sent_ms if sent else None, epoch_ms() if sent else None))

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

