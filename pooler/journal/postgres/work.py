"""The store of record of a shared task: its calls as rows of ``work``, claimed in small batches
(``SELECT … FOR UPDATE SKIP LOCKED``), moved to ``sent`` only under a live lease, recorded done only
by the runner that still holds them, and taken back from runners whose lease expired.

A claim runs under the task's advisory lock, so the count of calls claimed or in flight across
every runner is exact when it is weighed against ``max_concurrency``; claims are a few
milliseconds, the calls they hand out are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pooler.errors import JournalError
from pooler.journal.postgres.journal import WORK_COLUMNS, PgJournal, Planned

_ROW = ("num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text, "
        "step_id")
_DONE = "pooler_done(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
#: A claimed row, and its epoch when the claim moved it to sent.
_CLAIMED = f"{_ROW}, CASE WHEN state = 'sent' THEN epoch END"


@dataclass
class WorkRow:
    """One call of the task as the journal holds it."""

    num: int
    idx: int
    kind: str
    row_first: int | None
    row_last: int | None
    size: int
    data: Any
    deps: list[int]
    serial: str | None
    round: int
    #: The step id of the call an expired runner left in doubt, when this one sends it again.
    doubted: str | None
    key_text: str | None
    step_id: str | None
    #: The fencing epoch when the claim moved the call to sent (``gate_run``); None: claimed.
    epoch: int | None = None


@dataclass
class Settled:
    """How a call is ended without being sent (found in doubt, or its step cannot run)."""

    status: str
    entry: dict[str, Any] | None
    doubt: str | None = None
    halt: str | None = None


#: What a runner does with a call an expired runner sent without recording its answer:
#: None puts it back to be sent again (same key, same round); a ``Settled`` ends it.
DoubtPolicy = Callable[[WorkRow], Settled | None]
#: A ready call whose step cannot run (a step it refers to did not complete): how it ends.
BlockedPolicy = Callable[[WorkRow, int, str], Settled]


class WorkStore:
    """The work of one task as one runner sees it."""

    def __init__(self, journal: PgJournal, task: str, runner: str) -> None:
        self.journal = journal
        self.task = task
        self.runner = runner

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        import psycopg  # noqa: PLC0415

        conn = self.journal.conn
        # One connection and one lock, shared with the journal.
        with self.journal._lock:
            try:
                with conn.transaction():
                    yield conn
            except psycopg.Error as exc:
                raise self._failed(exc) from None

    def _failed(self, exc: Exception) -> JournalError:
        return JournalError(f"the journal {self.journal.where()} failed: {self.journal.text.error(exc)}")

    def claim(self, limit: int, cap: int, on_doubt: DoubtPolicy, on_blocked: BlockedPolicy, *,
              tidy: bool = True, gate_run: int | None = None) -> list[WorkRow]:
        """Up to ``limit`` calls this runner may send, within the task-wide ``cap``, in file order;
        with ``gate_run`` (the run of the task this runner sends in, part of each call's step id),
        those whose key the plan holds already moved to sent, as ``gate`` does.

        With ``tidy``, first take back the calls of expired runners and end the calls whose step
        cannot run: a runner asks for that when it found nothing to claim, and now and then.
        """
        if tidy:
            with self._tx() as db:
                db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.task,))
                self._reclaim(db, on_doubt)
                self._settle_blocked(db, on_blocked)
        claim, more = self._claim("%s", gate_run)
        _, rows = self._one(f"SELECT {_CLAIMED} FROM {claim}", (self.task, self.runner, limit, cap, *more),
                            fetch=True)
        return sorted((WorkRow(*r) for r in rows), key=lambda r: (r.num, r.idx))

    @staticmethod
    def _claim(limit: str, gate_run: int | None) -> tuple[str, tuple[Any, ...]]:
        """The claim's function call (its limit the SQL ``limit``) and the arguments after the cap."""
        if gate_run is None:
            return f"pooler_claim(%s, %s, {limit}, %s)", ()
        return f"pooler_claim_gate(%s, %s, {limit}, %s, %s)", (gate_run,)

    def _reclaim(self, db: Any, on_doubt: DoubtPolicy) -> None:
        """The calls of runners whose lease expired (or that left with calls they could not
        record): unsent ones back to ready, sent ones in doubt."""
        gone = [r[0] for r in db.execute(
            "SELECT id FROM runners WHERE task = %s AND lease_until < now() UNION "
            "SELECT DISTINCT runner FROM work w WHERE task = %s AND state IN ('claimed', 'sent') "
            "AND NOT EXISTS (SELECT 1 FROM runners r WHERE r.id = w.runner)",
            (self.task, self.task)).fetchall()]
        if not gone:
            return
        db.execute("UPDATE work SET state = 'ready', runner = NULL WHERE task = %s AND state = 'claimed' "
                   "AND runner = ANY(%s)", (self.task, gone))
        sent = db.execute(f"SELECT {_ROW} FROM work WHERE task = %s AND state = 'sent' AND runner = ANY(%s) "
                          "ORDER BY num, idx", (self.task, gone)).fetchall()
        for columns in sent:
            row = WorkRow(*columns)
            decided = on_doubt(row)
            if decided is None:
                db.execute("UPDATE work SET state = 'ready', runner = NULL, doubted = %s "
                           "WHERE task = %s AND num = %s AND idx = %s",
                           (row.step_id, self.task, row.num, row.idx))
            else:
                self._end(db, row.num, row.idx, decided)
        db.execute("DELETE FROM runners WHERE id = ANY(%s)", (gone,))

    def _settle_blocked(self, db: Any, on_blocked: BlockedPolicy) -> None:
        """Ready calls of a step that refers to one that did not complete: not run."""
        rows = db.execute(
            f"SELECT {_ROW}, (SELECT d.num FROM work d WHERE d.task = w.task AND d.num = ANY(w.deps) "
            "  AND d.state = 'done' AND d.status NOT IN ('completed', 'skipped') ORDER BY d.num LIMIT 1), "
            " (SELECT d.status FROM work d WHERE d.task = w.task AND d.num = ANY(w.deps) "
            "  AND d.state = 'done' AND d.status NOT IN ('completed', 'skipped') ORDER BY d.num, "
            "  d.status = 'in_doubt' DESC LIMIT 1) "
            "FROM work w WHERE w.task = %s AND w.state = 'ready' AND w.deps <> '{}' AND EXISTS (SELECT 1 "
            "FROM work d WHERE d.task = w.task AND d.num = ANY(w.deps) AND d.state = 'done' "
            "AND d.status NOT IN ('completed', 'skipped')) FOR UPDATE SKIP LOCKED", (self.task,)).fetchall()
        for columns in rows:
            how = on_blocked(WorkRow(*columns[:-2]), columns[-2], columns[-1])
            self._end(db, columns[0], columns[1], how)

    def _end(self, db: Any, num: int, idx: int, how: Settled) -> None:
        from psycopg.types.json import Json  # noqa: PLC0415

        db.execute("UPDATE work SET state = 'done', runner = NULL, status = %s, entry = %s, doubt = %s, "
                   "done_at = now() WHERE task = %s AND num = %s AND idx = %s",
                   (how.status, None if how.entry is None else Json(how.entry), how.doubt, self.task, num,
                    idx))
        if how.halt:
            db.execute("UPDATE tasks SET halted = coalesce(halted, %s) WHERE id = %s", (how.halt, self.task))

    def gate(self, row: WorkRow, key: str | None, step_id: str, rnd: int) -> int | None:
        """``claimed → sent``, only while this runner's lease is alive and the task not halted: the
        call's fencing epoch (higher than any earlier runner's of the call), or None.

        The task's row is read ``FOR SHARE``: a halt (which updates that row) either waits for this
        call to be marked sent, or is seen by it; so no call is sent after the halt was recorded.
        A call the claim moved to sent with other key material is gated again, under a new epoch.
        """
        changed, rows = self._one(
            "WITH t AS (SELECT halted FROM tasks WHERE id = %s FOR SHARE) "
            "UPDATE work SET state = 'sent', sent_at = clock_timestamp(), key_text = %s, step_id = %s, "
            "round = %s, epoch = nextval('pooler_epoch') WHERE task = %s AND num = %s AND idx = %s "
            "AND runner = %s AND (state = 'claimed' OR state = 'sent' AND epoch = %s) "
            "AND EXISTS (SELECT 1 FROM t WHERE halted IS NULL) "
            "AND EXISTS (SELECT 1 FROM runners WHERE id = %s AND lease_until > now()) RETURNING epoch",
            (self.task, key, step_id, rnd, self.task, row.num, row.idx, self.runner, row.epoch, self.runner),
            fetch=True)
        return int(rows[0][0]) if changed == 1 else None

    def _one(self, sql: str, args: tuple[Any, ...], *, fetch: bool = False) -> tuple[int, list[Any]]:
        """One statement, committed on its own: the rows it changed, and those it gave."""
        import psycopg  # noqa: PLC0415

        with self.journal._lock:
            try:
                cur = self.journal.conn.execute(sql, args)
                return cur.rowcount, cur.fetchall() if fetch else []
            except psycopg.Error as exc:
                raise self._failed(exc) from None

    def release(self, row: WorkRow) -> None:
        """A call this runner claimed and will not send: back to ready for any runner."""
        with self._tx() as db:
            db.execute("UPDATE work SET state = 'ready', runner = NULL WHERE task = %s AND num = %s "
                       "AND idx = %s AND runner = %s AND state IN ('claimed', 'sent')",
                       (self.task, row.num, row.idx, self.runner))

    def _done_args(self, row: WorkRow, status: str, entry: dict[str, Any], detail: Any,
                   doubt: str | None) -> tuple[Any, ...]:
        from psycopg.types.json import Json  # noqa: PLC0415

        return (self.task, self.runner, row.num, row.idx, status, Json(entry), Json(detail), doubt,
                entry.get("key"), entry.get("step_id"))

    def done_and_claim(self, row: WorkRow, status: str, entry: dict[str, Any], detail: Any, *,
                       doubt: str | None, limit: int, cap: int,
                       gate_run: int | None = None) -> tuple[bool, list[WorkRow]]:
        """A call's outcome (no tables, no halt) recorded and the next calls claimed (with
        ``gate_run``, and moved to sent as ``claim`` does), in one round trip: whether the outcome
        was recorded, and the calls claimed."""
        # The claim takes the outcome's result as an argument, so it runs after it.
        claim, more = self._claim("CASE WHEN d.ok IS NULL THEN 0 ELSE %s END", gate_run)
        columns = ", ".join("c." + c.strip() for c in _ROW.split(","))
        _, rows = self._one(
            f"SELECT d.ok, {columns}, CASE WHEN c.state = 'sent' THEN c.epoch END FROM "
            f"(SELECT {_DONE} AS ok) d LEFT JOIN LATERAL {claim} c ON true",
            (*self._done_args(row, status, entry, detail, doubt), self.task, self.runner, limit, cap, *more),
            fetch=True)
        claimed = [WorkRow(*r[1:]) for r in rows if r[1] is not None]
        return bool(rows and rows[0][0]), sorted(claimed, key=lambda r: (r.num, r.idx))

    def done(self, row: WorkRow, status: str, entry: dict[str, Any], detail: Any, *, doubt: str | None,
             tables: dict[str, list[Any]] | None = None, prefix: str = "", into: str | None = None,
             halt: str | None = None) -> bool:
        """Record a call's outcome; False when the call is no longer this runner's (taken back)."""
        from psycopg.types.json import Json  # noqa: PLC0415

        args = self._done_args(row, status, entry, detail, doubt)
        if not tables and not halt:
            return bool(self._one(f"SELECT {_DONE}", args, fetch=True)[1][0][0])
        with self._tx() as db:
            if not db.execute(f"SELECT {_DONE}", args).fetchone()[0]:
                return False
            if halt:
                # A gate that read the task's row waits for this to commit (see ``gate``); the call
                # is done once the halt holds.
                db.execute("UPDATE tasks SET halted = coalesce(halted, %s) WHERE id = %s", (halt, self.task))
                db.execute("UPDATE work SET done_at = clock_timestamp() WHERE task = %s AND num = %s "
                           "AND idx = %s", (self.task, row.num, row.idx))
            for name, rows in (tables or {}).items():
                db.execute("INSERT INTO table_rows (task, num, idx, name, prefix, into_job, rows) "
                           "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (task, num, idx, name) "
                           "DO UPDATE SET rows = excluded.rows",
                           (self.task, row.num, row.idx, name, prefix, into, Json(rows)))
            return True

    def expand(self, row: WorkRow, work: list[tuple[Any, ...]]) -> bool:
        """Put the calls of a step over an earlier step's table in place of its placeholder."""
        with self._tx() as db:
            cur = db.execute("DELETE FROM work WHERE task = %s AND num = %s AND idx = %s AND runner = %s "
                             "AND state = 'claimed'", (self.task, row.num, row.idx, self.runner))
            if cur.rowcount != 1:
                return False
            with db.cursor().copy(f"COPY work ({', '.join(WORK_COLUMNS)}) FROM STDIN") as copy:
                for values in work:
                    copy.write_row(values)
            return True

    def planned(self, num: int) -> Planned:
        """What the plan holds of step ``num``: its rows, and the ``idx`` its next call takes."""
        return self.journal.planned(self.task).get(num, Planned(0, 0, False))

    def halt(self, reason: str) -> None:
        self.journal.query("UPDATE tasks SET halted = coalesce(halted, %s) WHERE id = %s",
                           (reason, self.task))

    def open_counts(self) -> tuple[int, int, str | None]:
        """Calls ready, calls claimed or sent (by anyone), and why the task halted (or None)."""
        rows = self.journal.query(
            "SELECT count(*) FILTER (WHERE state = 'ready'), count(*) FILTER (WHERE state <> 'ready'), "
            "(SELECT halted FROM tasks WHERE id = %s) FROM work WHERE task = %s AND state <> 'done'",
            (self.task, self.task))
        ready, held, halted = rows[0]
        return int(ready), int(held), halted

    def details(self, nums: list[int]) -> dict[int, Any]:
        """The detail each step gives references: that of its last call that completed."""
        rows = self.journal.query(
            "SELECT DISTINCT ON (num) num, detail FROM work WHERE task = %s AND num = ANY(%s) "
            "AND status IN ('completed', 'skipped') ORDER BY num, idx DESC", (self.task, nums))
        return {int(n): d for n, d in rows}

    def table(self, num: int, name: str | None) -> tuple[list[str], list[Any]]:
        """The names of the tables step ``num`` gave, and the rows of ``name`` in call order."""
        names = [r[0] for r in self.journal.query(
            "SELECT DISTINCT name FROM table_rows WHERE task = %s AND num = %s ORDER BY name",
            (self.task, num))]
        if name is None:
            return names, []
        rows: list[Any] = []
        for (part,) in self.journal.query("SELECT rows FROM table_rows WHERE task = %s AND num = %s "
                                          "AND name = %s ORDER BY idx", (self.task, num, name)):
            rows.extend(part)
        return names, rows
