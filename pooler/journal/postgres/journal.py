"""The journal on PostgreSQL: its tasks as ``pooler runs`` and ``pooler show`` read them, and the
creation of a task with its plan in one transaction (the first runner plans, the others
find the plan there)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pooler.errors import JournalError
from pooler.journal import work as api
from pooler.journal.api import CallHistory
from pooler.journal.history import History, task_row
from pooler.journal.lease import Lease, end_dead_leases, live_runners, take
from pooler.journal.planagain import StatementsPlanAgain, cut_at_sample, plan_again
from pooler.journal.postgres.connector import PgConnector
from pooler.journal.postgres.schema import SQL
from pooler.journal.records import FlowDoc, PlanCounts, TaskRow
from pooler.journal.work import (
    OverTable,
    Planned,
    Split,
    narrower,
)
from pooler.pool.budget import Counts, counts_of
from pooler.statuses import TaskStatus

#: The types of the columns of a work row a plan gives, in the order of ``SQL["copy_work"]``, told
#: to COPY once: without them every value of every row is looked at for its type.  A row's data
#: and deps come as their COPY text (JSON, ``{1,2}``), made once by the planner.
WORK_TYPES = ("text", "int4", "int4", "text", "int4", "int4", "int4", "text", "text", "text", "text",
              "bool", "text")


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: A redrive's statements, in the order ``redrive_again`` runs them.
REDRIVE = (SQL["redrive_aside"], SQL["redrive_doubt_aside"], SQL["redrive_failed"], SQL["redrive_not_run"],
           SQL["redrive_in_doubt"])

class PgJournal:
    """Tasks in a PostgreSQL database; one connection behind a lock, safe to share by threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        #: The connector the one implementation runs its queries on.
        self.db = PgConnector(url)
        #: Every text told about this database passes through it: no password in any message.
        self.text = self.db.text
        self.conn = self.db.conn
        self._lock = self.db._lock

    def where(self) -> str:
        return self.text.shown

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __enter__(self) -> PgJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement; a database that cannot be reached is a ``JournalError``."""
        import psycopg  # noqa: PLC0415

        with self._lock:
            try:
                cur = self.conn.execute(sql, tuple(args))
                return list(cur.fetchall()) if cur.description is not None else []
            except psycopg.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {self.text.error(exc)}") from None

    def stream(self, sql: str, args: Iterable[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of a read-only query one at a time, as the server sends them (a task of a
        million calls never sits in memory whole); the connection is held until the last row."""
        import psycopg  # noqa: PLC0415

        with self._lock:
            try:
                yield from self.conn.cursor().stream(sql, tuple(args))
            except psycopg.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {self.text.error(exc)}") from None

    # What runs and show read

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first."""
        return [task_row(r) for r in self.db.all("tasks", {"limit": limit})]

    def task(self, task_id: str) -> TaskRow | None:
        return History(self.db).task(task_id)

    def last_unfinished(self, pool_file: str) -> str | None:
        """The latest task of ``pool_file`` (as ``pool_identity`` gives it) that did not complete."""
        rows = self.query(SQL["last_unfinished"], (pool_file,))
        return str(rows[0][0]) if rows else None

    def answer(self, task_id: str) -> dict[str, Any] | None:
        return History(self.db).answer(task_id)

    def finish_task(self, task_id: str, answer: dict[str, Any], status: str | None = None) -> None:
        """Record the task's answer; its status is the answer's unless given (``sampled``)."""
        status = status or answer.get("status", TaskStatus.FAILED)
        self.query(SQL["finish_task"], (
            stamp(), status, answer.get("total"), answer.get("succeeded"), answer.get("failed"),
             answer.get("skipped"), answer.get("not_run"), dumps(answer), task_id))

    def live_runners(self, task_id: str) -> int:
        return len(live_runners(self.db, task_id))

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        """The task's calls counted against its plan, by status; a call sent whose answer is not
        recorded is in doubt, one never sent not run."""
        rows = self.query(SQL["plan_counts"], (task_id,))
        if not rows or rows[0][0] is None:
            return None
        planned, completed, failed, in_doubt, skipped = (int(v or 0) for v in rows[0])
        return PlanCounts(planned, completed, failed, in_doubt, skipped,
                          planned - completed - failed - in_doubt - skipped)

    # Tasks

    def shared(self, task_id: str) -> dict[str, Any] | None:
        """The stored pool document and options of a task; None when there is no such task."""
        rows = self.query(SQL["shared"], (task_id,))
        if not rows:
            return None
        if rows[0][0] is None:
            raise JournalError(f"the task {task_id} in {self.where()} is not a shared task - "
                               "give a new task id.")
        found: dict[str, Any] = rows[0][0]
        return found

    def create_shared(self, task_id: str, pool_file: str, shared: dict[str, Any],
                      work: Iterable[tuple[Any, ...]]) -> bool:
        """Create the task with its plan in one transaction; False when another runner did first."""
        with self.creating(task_id, pool_file, shared) as write:
            if write is None:
                return False
            for row in work:
                write(row)
        return True

    @contextmanager
    def creating(self, task_id: str, pool_file: str, shared: dict[str, Any], seat: api.Seat | None = None
                 ) -> Iterator[Callable[[tuple[Any, ...]], None] | None]:
        """The task created, its plan written by the caller with the function this gives (a work
        row at a time, by COPY), in one transaction that commits when the block ends and is rolled
        back, leaving no task and no rows, when it raises; None when another runner created the
        task first (a runner creating it meanwhile is waited for, so its plan is found whole).
        ``shared`` is kept as the block leaves it (what the plan found is added to it there).
        ``seat``: the planner's lease, taken as the transaction ends."""
        import psycopg  # noqa: PLC0415
        from psycopg.types.json import Jsonb  # noqa: PLC0415

        with self._lock:
            try:
                with self.conn.transaction():
                    made = self.conn.execute(SQL["create_shared"],
                                             (task_id, pool_file, stamp(), Jsonb(shared))).fetchone()
                    if made is None:
                        yield None
                        return
                    with self._copy() as write:
                        yield write
                    self.conn.execute(SQL["update_shared"], (Jsonb(shared), task_id))
                    if shared.get("key_scope") is not None:
                        # A key landed by another task of the scope is not sent again by this one.
                        self.conn.execute(SQL["skip_keys_of_scope"], (shared["key_scope"], task_id, task_id))
                    if seat is not None:
                        take(self.db, task_id, seat)
                # The planner needs to know how many calls there are to pick the indexes.
                self.conn.execute(SQL["analyze_work"])
            except psycopg.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {self.text.error(exc)}") from None

    @contextmanager
    def widening(self, task_id: str, sample: int | None
                 ) -> Iterator[tuple[dict[int, Planned], Callable[[tuple[Any, ...]], None]] | None]:
        """A sampled task's plan widened to ``sample`` (None: every row): what the plan holds of
        each step, and the function that writes the work rows it lacks, in one transaction that
        commits when the block ends (rolled back when it raises); None when the plan held that much
        already (another runner widened it first: the task's row is locked meanwhile)."""
        import psycopg  # noqa: PLC0415
        from psycopg.types.json import Jsonb  # noqa: PLC0415

        with self._lock:
            try:
                with self.conn.transaction():
                    found = self.conn.execute(SQL["lock_shared"], (task_id,)).fetchone()
                    if found is None or not narrower(found[0].get("sample"), sample):
                        yield None
                        return
                    planned = _planned(self.conn.execute(SQL["planned"], (task_id,)).fetchall())
                    with self._copy() as write:
                        yield planned, write
                    self.conn.execute(SQL["update_shared"], (Jsonb({"sample": sample}), task_id))
            except psycopg.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {_line(exc)}") from None

    @contextmanager
    def _copy(self) -> Iterator[Callable[[tuple[Any, ...]], None]]:
        """A COPY of work rows on the journal's connection (in the caller's transaction).  A block
        that raises ends the COPY with a word of its own: the server's log never gets the
        exception's text (a refused check's problems may quote a row)."""
        failed: BaseException | None = None
        try:
            with self.conn.cursor().copy(SQL["copy_work"]) as copy:
                copy.set_types(WORK_TYPES)
                try:
                    yield copy.write_row
                except BaseException as exc:  # noqa: BLE001 - raised again below, as it was
                    failed = exc
                    raise _Abandoned("the plan was not written") from None
        except _Abandoned:
            assert failed is not None
            raise failed from None

    @contextmanager
    def raw_transaction(self) -> Iterator[Any]:
        """The journal's connection in one transaction; a failure is a ``JournalError``."""
        import psycopg  # noqa: PLC0415

        with self._lock:
            try:
                with self.conn.transaction():
                    yield self.conn
            except psycopg.Error as exc:
                raise JournalError(f"the journal {self.where()} failed: {self.text.error(exc)}") from None

    def release(self, task_id: str, sample: int | None, split: Split) -> bool:
        """A sampled task's plan widened to ``sample`` (None: every row) from the calls it planned
        beyond its sample: those the wider sample holds are released, a chunk it cuts split in two
        (``split``); False when the plan held that much already (another runner widened it first:
        the task's row is locked meanwhile)."""
        from psycopg.types.json import Jsonb  # noqa: PLC0415

        with self.raw_transaction() as db:
            found = db.execute(SQL["lock_shared"], (task_id,)).fetchone()
            if found is None or not narrower(found[0].get("sample"), sample):
                return False
            if sample:
                cut = (SQL["cut_by_sample"], SQL["make_room_out"], SQL["make_room_back"], SQL["drop_call"])
                cut_at_sample(db, task_id, sample, statements=cut, split=split, write=self._write_rows,
                              rows=list)
            db.execute(SQL["release_beyond"], (task_id, sample, sample))
            db.execute(SQL["update_shared"], (Jsonb({"sample": sample}), task_id))
        return True

    def planned(self, task_id: str) -> dict[int, Planned]:
        """What the task's plan holds of each step, by step number."""
        return _planned(self.query(SQL["planned"], (task_id,)))

    def join(self, task_id: str, in_doubt: str, over: Sequence[OverTable] = (), *,
             seat: api.Seat | None = None, again: dict[str, Any] | None = None,
             redrive: api.Redrive | None = None) -> bool:
        """One more runner of the task (a task that had finished is reopened); whether it starts a
        new run, in which the calls that failed are sent again (``pooler_run_again``, 0006), the
        steps ``over`` a table of a step sent again are planned again (``plan_again``) and
        ``again`` is merged into the task's document, in one transaction under the task's lock;
        ``seat`` is taken in it, so a runner joining next finds this one alive."""
        from psycopg.types.json import Jsonb  # noqa: PLC0415

        # Killed here: their leases end now, so this runner takes their calls back at once
        # (in doubt, by the task's policy) rather than when the leases would have run out.
        end_dead_leases(self.db, task_id)
        with self.raw_transaction() as db:
            began = (self._redrive(db, task_id, in_doubt, redrive) if redrive is not None
                     else bool(db.execute(SQL["run_again"], (task_id, in_doubt)).fetchone()[0]))
            if began:
                statements = (SQL["step_open"], SQL["drop_open_calls"], SQL["drop_open_tables"])
                plan_again(StatementsPlanAgain(db, task_id, statements, lambda row: self._restore(db, row)),
                           over)
                if again:
                    db.execute(SQL["update_shared"], (Jsonb(again), task_id))
            if seat is not None:
                take(self.db, task_id, seat)
        return began

    @staticmethod
    def _redrive(db: Any, task_id: str, in_doubt: str, redrive: api.Redrive) -> bool:
        """``redrive`` begun under the task's lock, as ``pooler_run_again`` begins a run again
        (False: a live runner holds the task, and this one joins its run)."""
        params = redrive.params(task_id, in_doubt)
        db.execute(SQL["redrive_lock"], params)
        if db.execute(SQL["redrive_live"], params).fetchone()[0]:
            db.execute(SQL["join_live_run"], params)
            return False
        api.redrive_again(db, REDRIVE, redrive, task_id, in_doubt)
        db.execute(SQL["redrive_task"], params)
        return True

    def _write_rows(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Work rows by the journal's COPY, in the caller's transaction."""
        with self._copy() as write:
            for row in rows:
                write(row)

    def _restore(self, db: Any, placeholder: tuple[Any, ...]) -> None:
        """A step's placeholder written by the journal's COPY, in the caller's transaction, unless
        the step still has it."""
        task, num, idx = placeholder[:3]
        if not db.execute(SQL["has_placeholder"], (task, num, idx)).fetchone()[0]:
            with self._copy() as write:
                write(placeholder)

    # What the engine asks of a task's journal beside (pooler.journal.work.TaskJournal)

    def run_of(self, task_id: str) -> int:
        return int(self.query(SQL["runs_of_task"], (task_id,))[0][0])

    def planned_calls(self, task_id: str) -> int:
        return int(self.query(SQL["planned_calls"], (task_id,))[0][0])

    def budget_counts(self, task_id: str) -> dict[int, Counts]:
        return counts_of(self.query(SQL["budget_counts"], (task_id,)))

    def answer_rows(self, task_id: str) -> Iterator[tuple[Any, ...]]:
        return self.stream(SQL["answer_rows"], (task_id, task_id))

    def answer_state(self, task_id: str) -> tuple[dict[str, Any] | None, str, bool] | None:
        rows = self.query(SQL["answer_state"], (task_id,))
        return (rows[0][0], str(rows[0][1]), bool(rows[0][2])) if rows else None

    def record_run(self, task_id: str, facts: dict[str, Any]) -> None:
        """The facts of the run the task is in (``run_facts``, masked), kept by its first runner."""
        from psycopg.types.json import Json  # noqa: PLC0415

        self.query(SQL["record_run"], (
            task_id, task_id, facts.get("store"), facts.get("mode"), facts.get("width"),
            facts.get("serialize_on"), Json(facts.get("steps") or []),
            Json(list(facts["again"])) if facts.get("again") else None))

    def record_flow(self, task_id: str, flow: FlowDoc) -> None:
        """One runner's flow control, under the run the task is in (not ``flow["run"]``)."""
        from psycopg.types.json import Json  # noqa: PLC0415

        self.query(SQL["record_flow"], (flow["runner"], Json(flow), task_id))

    def flows(self, task_id: str) -> list[FlowDoc]:
        return self.history().flows(task_id)

    def table_rows(self, task_id: str) -> list[tuple[Any, ...]]:
        return self.query(SQL["table_rows_of_task"], (task_id,))

    def lease(self, task_id: str, seconds: float, width: int | None, seat: api.Seat | None = None
              ) -> api.RunnerLease:
        return Lease(self.db.heartbeat(), task_id, seconds, width, seat, owned=True)

    def work(self, task_id: str, runner: str) -> api.WorkStore:
        from pooler.journal.postgres.work import WorkStore  # noqa: PLC0415

        return WorkStore(self, task_id, runner)

    def history(self) -> CallHistory:
        return History(self.db)

    def replanning(self, task_id: str) -> AbstractContextManager[api.Replanning]:
        from pooler.journal.postgres.replanning import replanning  # noqa: PLC0415

        return replanning(self, task_id)


class _Abandoned(Exception):
    """What a COPY is ended with when the block writing its rows raised."""


def _planned(rows: Iterable[tuple[Any, ...]]) -> dict[int, Planned]:
    return {int(num): Planned(int(held), int(nxt), bool(holder)) for num, held, nxt, holder in rows}


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
