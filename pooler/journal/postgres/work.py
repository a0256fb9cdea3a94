"""The work of a task on PostgreSQL: its calls as rows of ``work``, claimed in small batches
(``SELECT … FOR UPDATE SKIP LOCKED``), moved to ``sent`` only under a live lease, recorded done only
by the runner that still holds them, and taken back from runners whose lease expired.

A claim runs under the task's advisory lock, so the count of calls claimed or in flight across
every runner is exact when it is weighed against ``max_concurrency``; claims are a few
milliseconds, the calls they hand out are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from pooler.errors import JournalError
from pooler.journal.lease import gone_runners
from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.schema import SQL
from pooler.journal.work import (
    BUSY,
    BlockedPolicy,
    Done,
    DoubtPolicy,
    Planned,
    Settled,
    WorkRow,
)
from pooler.pool.budget import Judge, counts_of


class WorkStore:
    """The work of one task as one runner sees it."""

    def __init__(self, journal: PgJournal, task: str, runner: str) -> None:
        self.journal = journal
        self.task = task
        self.runner = runner

    def _tx(self) -> AbstractContextManager[Any]:
        # One connection and one lock, shared with the journal.
        return self.journal.raw_transaction()

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
                db.execute(SQL["lock_task"], (self.task,))
                self._reclaim(db, on_doubt)
                # A halted task lists no call after its halt: what did not run is only counted.
                if db.execute(SQL["task_halted"], (self.task,)).fetchone() == (None,):
                    self._settle_blocked(db, on_blocked)
        args = (self.task, self.runner, limit, cap)
        if gate_run is None:
            _, rows = self._one(SQL["claim"], args, fetch=True)
        else:
            _, rows = self._one(SQL["claim_gate"], (*args, gate_run), fetch=True)
        return sorted((WorkRow(*r) for r in rows), key=lambda r: (r.num, r.idx))

    def _reclaim(self, db: Any, on_doubt: DoubtPolicy) -> None:
        """The calls of runners whose lease expired (or that left with calls they could not
        record): unsent ones back to ready, sent ones ruled in doubt; and the calls an earlier run
        recorded in doubt, which a run again leaves to this rule too."""
        gone = gone_runners(self.journal.db, self.task)
        if gone:
            db.execute(SQL["unclaim_gone"], (self.task, gone))
        for *columns, expired in db.execute(SQL["in_doubt_to_rule"], (self.task, gone)).fetchall():
            row = WorkRow(*columns)
            decided = on_doubt(row, bool(expired))
            if decided is None:
                # A call without a key goes out as a new one: it repeats nothing the store can tell.
                doubted = row.step_id if row.key_text is not None else None
                db.execute(SQL["send_again"], (doubted, self.task, row.num, row.idx))
            else:
                self._end(db, row.num, row.idx, decided)
        if gone:
            db.execute(SQL["forget_runners"], (gone,))

    def _settle_blocked(self, db: Any, on_blocked: BlockedPolicy) -> None:
        """Ready calls of a step that refers to one that did not complete: not run."""
        rows = db.execute(SQL["blocked"], (self.task,)).fetchall()
        for columns in rows:
            how = on_blocked(WorkRow(*columns[:-2]), columns[-2], columns[-1])
            self._end(db, columns[0], columns[1], how)

    def _end(self, db: Any, num: int, idx: int, how: Settled) -> None:
        from psycopg.types.json import Json  # noqa: PLC0415

        db.execute(SQL["end_call"], (how.status, None if how.entry is None else Json(how.entry), how.doubt,
                                     self.task, num, idx))
        self._halt(db, how.halt, how.judge)

    def _halt(self, db: Any, halt: str | None, judge: Judge | None) -> bool:
        """The task halted for ``halt``, or for what ``judge`` says of its counts: whether it was."""
        if halt is None and judge is not None:
            halt = judge(counts_of(db.execute(SQL["budget_counts"], (self.task,)).fetchall()))
        if halt:
            db.execute(SQL["halt_task"], (halt, self.task))
        return bool(halt)

    def gate(self, row: WorkRow, key: str | None, step_id: str, rnd: int, serial: str | None = None
             ) -> int | None:
        """``claimed → sent``, only while this runner's lease is alive and the task not halted: the
        call's fencing epoch (higher than any earlier runner's of the call), or None.

        The task's row is read ``FOR SHARE``: a halt (which updates that row) either waits for this
        call to be marked sent, or is seen by it; so no call is sent after the halt was recorded.
        A call the claim moved to sent with other key material is gated again, under a new epoch.
        """
        args = (self.task, key, step_id, rnd, serial, self.task, row.num, row.idx, self.runner, row.epoch,
                self.runner)
        if serial is None:
            changed, rows = self._one(SQL["gate"], args, fetch=True)
            return int(rows[0][0]) if changed == 1 else None
        # A value a reference gave: under the task's lock, which every claim takes, so no call of
        # that value is claimed or gated between the look and the move to sent.
        with self._tx() as db:
            db.execute(SQL["lock_task"], (self.task,))
            if db.execute(SQL["serial_busy"], (self.task, serial, row.num, row.idx)).fetchone()[0]:
                return BUSY
            found = db.execute(SQL["gate"], args).fetchall()
            return int(found[0][0]) if len(found) == 1 else None

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
            db.execute(SQL["release"], (self.task, row.num, row.idx, self.runner))

    def pace(self, bucket: str, interval: float, tolerance: float) -> float:
        with self._tx() as db:
            tat, now = db.execute(SQL["pace"], {"task": self.task, "name": bucket,
                                                "interval": interval}).fetchone()
        return max(0.0, float(tat) - interval - tolerance - float(now))

    def held(self, bucket: str) -> float:
        with self._tx() as db:
            found = db.execute(SQL["held"], (self.task, bucket)).fetchone()
        return max(0.0, float(found[0])) if found else 0.0

    def hold(self, bucket: str, seconds: float) -> None:
        with self._tx() as db:
            db.execute(SQL["hold"], {"task": self.task, "name": bucket, "seconds": seconds})

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
        args = (*self._done_args(row, status, entry, detail, doubt), self.task, self.task, self.runner,
                limit, cap)
        if gate_run is None:
            _, rows = self._one(SQL["done_and_claim"], args, fetch=True)
        else:
            _, rows = self._one(SQL["done_and_claim_gate"], (*args, gate_run), fetch=True)
        claimed = [WorkRow(*r[1:]) for r in rows if r[1] is not None]
        return bool(rows and rows[0][0]), sorted(claimed, key=lambda r: (r.num, r.idx))

    def done_all(self, outcomes: Sequence[Done]) -> list[bool]:
        """Outcomes recorded in one transaction: whether each was (False: taken back)."""
        with self._tx() as db:
            return [bool(db.execute(SQL["done"], self._done_args(d.row, d.status, d.entry, d.detail, d.doubt)
                                    ).fetchone()[0]) for d in outcomes]

    def done(self, row: WorkRow, status: str, entry: dict[str, Any], detail: Any, *, doubt: str | None,
             tables: dict[str, list[Any]] | None = None, prefix: str = "", into: str | None = None,
             halt: str | None = None, sent: bool = True, judge: Judge | None = None) -> bool:
        """Record a call's outcome; False when the call is no longer this runner's (taken back)."""
        from psycopg.types.json import Json  # noqa: PLC0415

        args = self._done_args(row, status, entry, detail, doubt)
        if not tables and not halt and judge is None and sent:
            return bool(self._one(SQL["done"], args, fetch=True)[1][0][0])
        with self._tx() as db:
            if halt or judge is not None:
                # The halt changes the task's row after the call's: the task's lock first (see
                # lock_task in queries.sql); under it, a budget's count sees every other runner's
                # outcome that counted before this one.
                db.execute(SQL["lock_task"], (self.task,))
            if not sent:
                db.execute(SQL["not_sent"], (self.task, row.num, row.idx, self.runner))
            if not db.execute(SQL["done"], args).fetchone()[0]:
                return False
            if self._halt(db, halt, judge):
                # A gate that read the task's row waits for this to commit (see ``gate``); the call
                # is done once the halt holds.
                db.execute(SQL["done_now"], (self.task, row.num, row.idx))
            for name, rows in (tables or {}).items():
                db.execute(SQL["keep_table_rows"],
                           (self.task, row.num, row.idx, name, prefix, into, Json(rows)))
            return True

    def expand(self, row: WorkRow, work: list[tuple[Any, ...]]) -> bool:
        """Put the calls of a step over an earlier step's table in place of its placeholder."""
        with self._tx() as db:
            cur = db.execute(SQL["take_placeholder"], (self.task, row.num, row.idx, self.runner))
            if cur.rowcount != 1:
                return False
            with db.cursor().copy(SQL["copy_work"]) as copy:
                for values in work:
                    copy.write_row(values)
            return True

    def landed(self, key: str) -> tuple[dict[str, Any], Any] | None:
        """The entry and detail of a call of ``key`` that completed in the run the task is in."""
        found = self.journal.query(SQL["landed"], (self.task, key, self.task))
        return (found[0][0], found[0][1]) if found else None

    def kept_keys(self, num: int) -> set[str]:
        return {str(k) for (k,) in self.journal.query(SQL["kept_keys"], (self.task, num))}

    def planned(self, num: int) -> Planned:
        """What the plan holds of step ``num``: its rows, and the ``idx`` its next call takes."""
        return self.journal.planned(self.task).get(num, Planned(0, 0, False))

    def halt(self, reason: str) -> None:
        self.journal.query(SQL["halt_task"], (reason, self.task))

    def open_counts(self) -> tuple[int, int, str | None]:
        """Calls ready, calls claimed or sent (by anyone), and why the task halted (or None)."""
        rows = self.journal.query(SQL["open_counts"], (self.task, self.task))
        ready, held, halted = rows[0]
        return int(ready), int(held), halted

    def details(self, nums: list[int]) -> dict[int, Any]:
        """The detail each step gives references: that of its last call that completed."""
        rows = self.journal.query(SQL["details"], (self.task, nums))
        return {int(n): d for n, d in rows}

    def table(self, num: int, name: str | None) -> tuple[list[str], list[Any]]:
        """The names of the tables step ``num`` gave, and the rows of ``name`` in call order."""
        names = [r[0] for r in self.journal.query(SQL["table_names"], (self.task, num))]
        if name is None:
            return names, []
        rows: list[Any] = []
        for (part,) in self.journal.query(SQL["table_parts"], (self.task, num, name)):
            rows.extend(part)
        return names, rows
