"""The work of a task in a SQLite journal as one runner sees it (``pooler.journal.work.WorkStore``):
its calls as rows of ``work``, claimed in small batches in file order, moved to ``sent`` only under
a live lease, recorded done only by the runner that still holds them (each outcome joining the
history in ``calls``), and taken back from runners that are gone.

SQLite has no ``SKIP LOCKED`` and no advisory locks: every claim, gate and outcome is one write
transaction (``BEGIN IMMEDIATE``), which serializes the runners of every process on the file, so
the count of calls claimed or in flight is exact when it is weighed against ``max_concurrency``.
The PostgreSQL journal's functions (``pooler_claim_gate``, ``pooler_share``, ``pooler_done``) are
Python here, over the same rows.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from pooler.journal.lease import gone_runners, runners
from pooler.journal.records import dumps, join_entry, split_entry
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal, work_values
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


def work_row(columns: Iterable[Any], epoch: int | None = None) -> WorkRow:
    """A work row from its 13 columns (``WorkRow``'s fields), its JSON read."""
    num, idx, kind, first, last, size, data, deps, serial, rnd, doubted, key, step_id = columns
    return WorkRow(int(num), int(idx), kind, first, last, int(size),
                   None if data is None else json.loads(data), json.loads(deps), serial, int(rnd), doubted,
                   key, step_id, epoch)


def write_work(db: sqlite3.Connection, rows: Iterable[tuple[Any, ...]]) -> None:
    """Work rows as the planner makes them (``WORK_COLUMNS``), in the caller's transaction."""
    db.executemany(SQL["insert_work"], (work_values(r) for r in rows))


class Writer:
    """Takes work rows one at a time and writes them a batch at a time (``flush`` at the end)."""

    def __init__(self, db: sqlite3.Connection, batch: int = 2000) -> None:
        self.db = db
        self.batch = batch
        self.rows: list[tuple[Any, ...]] = []

    def __call__(self, row: tuple[Any, ...]) -> None:
        self.rows.append(work_values(row))
        if len(self.rows) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.db.executemany(SQL["insert_work"], self.rows)
            self.rows = []


def planned_steps(rows: Iterable[tuple[Any, ...]]) -> dict[int, Planned]:
    return {int(num): Planned(int(held), int(nxt), bool(holder)) for num, held, nxt, holder in rows}


def update_doc(db: sqlite3.Connection, task: str, doc: dict[str, Any]) -> None:
    """``doc``'s keys merged into what the task keeps of its pool (its top-level keys replaced)."""
    found = db.execute(SQL["task_doc"], (task,)).fetchone()
    if found is None:
        return
    kept: dict[str, Any] = json.loads(found[0]) if found[0] else {}
    kept.update(doc)
    db.execute(SQL["set_task_doc"], (dumps(kept), task))


def _ms(now: float) -> int:
    return int(now * 1000)


#: How many steps past the first with ready calls a claim looks for a step that may go: a claim
#: costs a seek a step it looks at, so a window keeps it the same for a pool of 2,000 steps.
HEADS_WINDOW = 32


def claim_order(db: sqlite3.Connection, args: tuple[str, int], cap: int) -> list[tuple[Any, ...]]:
    """The calls a claim takes, up to ``args[1]``: the first of each step that may go (fewest in
    flight first), then the rest in file order; given in file order, as every claim is.  One call
    at a time (``cap`` 1) goes in file order: no step has a call in flight to be weighed by."""
    heads = db.execute(SQL["claimable_heads"], (*args, args[1] + HEADS_WINDOW)).fetchall() if cap > 1 else []
    if len(heads) < args[1]:
        taken = {(r[0], r[1]) for r in heads}
        rest = [r for r in db.execute(SQL["claimable"], (args[0], args[1] + len(heads))).fetchall()
                if (r[0], r[1]) not in taken]
        heads += rest[:args[1] - len(heads)]
    return sorted(heads, key=lambda r: (r[0], r[1]))


def fair_share(db: Journal, task: str, runner: str, cap: int) -> int:
    """A runner's fair share of the task's cap: the cap divided among the live runners as water
    fills vessels, each up to its width (``pooler_share`` of the PostgreSQL journal): a runner
    narrower than an equal part keeps its width, the others split what is left in equal parts,
    one more for each of the first to join while a remainder lasts."""
    live = [(r.id, min(cap if r.width is None else r.width, cap), r.started)
            for r in runners(db, task) if r.id == runner or r.alive]
    left, n = cap, len(live)
    wide: int | None = None
    for rid, width, _ in sorted(live, key=lambda r: r[1]):
        if width * n > left:
            wide = width
            break
        if rid == runner:
            return width
        left -= width
        n -= 1
    if wide is None:
        return cap
    me = next((r for r in live if r[0] == runner), None)
    rank = 0 if me is None else sum(1 for rid, width, started in live
                                    if width >= wide and (started, rid) < (me[2], me[0]))
    return left // n + (1 if rank < left % n else 0)


class SqliteWorkStore:
    """The work of ``task`` in ``journal`` as the runner ``runner`` (its lease's id) sees it."""

    def __init__(self, journal: Journal, task: str, runner: str) -> None:
        self.journal = journal
        self.task = task
        self.runner = runner

    def claim(self, limit: int, cap: int, on_doubt: DoubtPolicy, on_blocked: BlockedPolicy, *,
              tidy: bool = True, gate_run: int | None = None) -> list[WorkRow]:
        """Up to ``limit`` calls this runner may send, within the task-wide ``cap``, in file order;
        with ``gate_run`` (the run of the task this runner sends in, part of each call's step id),
        those whose key the plan holds already moved to sent, as ``gate`` does.  With ``tidy``,
        first take back the calls of runners that are gone and end the calls whose step cannot
        run, in the same transaction."""
        with self.journal.raw_transaction() as db:
            now = time.time()
            if tidy:
                self._reclaim(db, on_doubt, now)
                # A halted task lists no call after its halt: what did not run is only counted.
                if db.execute(SQL["task_halted"], (self.task,)).fetchone() == (None,):
                    self._settle_blocked(db, on_blocked, now)
            return self._claim(db, limit, cap, gate_run, now)

    def _claim(self, db: sqlite3.Connection, limit: int, cap: int, run: int | None, now: float
               ) -> list[WorkRow]:
        there, halted, busy, mine, alive, runners, epoch = db.execute(
            SQL["claim_state"], (self.task, self.runner, now)).fetchone()
        if not there or halted is not None or cap - busy <= 0:
            return []
        if runners > 1:
            # Held to its share only while the cap is shared: a runner alone takes the whole cap.
            limit = min(limit, fair_share(self.journal, self.task, self.runner, cap) - int(mine))
            if limit <= 0:
                return []
        gate = run is not None and bool(alive)
        found = claim_order(db, (self.task, min(limit, cap - busy)), cap)
        epoch = first = int(epoch)
        out: list[WorkRow] = []
        for *columns, planned in found:
            row = work_row(columns)
            if gate and row.kind == "call" and planned:
                epoch += 1
                rows = "" if row.row_first is None else f"-{row.row_first}"
                row.step_id, row.epoch = f"{self.task}-{row.num}{rows}-{run}", epoch
                db.execute(SQL["take_sent"], (self.runner, _ms(now), row.step_id, epoch, self.task, row.num,
                                              row.idx))
            else:
                db.execute(SQL["take_claimed"], (self.runner, self.task, row.num, row.idx))
            out.append(row)
        if epoch != first:
            db.execute(SQL["set_epoch"], (epoch,))
        return out

    def _reclaim(self, db: sqlite3.Connection, on_doubt: DoubtPolicy, now: float) -> None:
        """The calls of runners that are gone: unsent ones back to ready, sent ones ruled in doubt;
        and the calls an earlier run recorded in doubt, which a run again leaves to this rule too."""
        gone = json.dumps(gone_runners(self.journal, self.task))
        if gone != "[]":
            db.execute(SQL["unclaim_gone"], (self.task, gone))
        found = db.execute(SQL["in_doubt_to_rule"], (self.task, gone, _ms(now))).fetchall()
        for *columns, age, expired in sorted(found, key=lambda r: (r[0], r[1])):
            row = replace(work_row(columns), sent_age=age)
            decided = on_doubt(row, bool(expired))
            if decided is None:
                # A call without a key goes out as a new one: it repeats nothing the store can tell.
                doubted = row.step_id if row.key_text is not None else None
                db.execute(SQL["send_again"], (doubted, self.task, row.num, row.idx))
            else:
                self._end(db, row.num, row.idx, decided, now)
        if gone != "[]":
            db.execute(SQL["forget_runners"], (gone,))

    def _settle_blocked(self, db: sqlite3.Connection, on_blocked: BlockedPolicy, now: float) -> None:
        """Ready calls of a step that refers to one that did not complete: not run."""
        for columns in db.execute(SQL["blocked"], (self.task,)).fetchall():
            row = work_row(columns[:-2])
            self._end(db, row.num, row.idx, on_blocked(row, int(columns[-2]), str(columns[-1])), now)

    def _end(self, db: sqlite3.Connection, num: int, idx: int, how: Settled, now: float) -> None:
        db.execute(SQL["end_call"], (how.status, None if how.entry is None else dumps(how.entry), how.doubt,
                                     _ms(now), self.task, num, idx))
        self._history(db, num, idx, how.entry, sent=False)
        self._halt(db, how.halt, how.judge)

    def _halt(self, db: sqlite3.Connection, halt: str | None, judge: Judge | None) -> None:
        """The task halted for ``halt``, or for what ``judge`` says of its counts."""
        if halt is None and judge is not None:
            halt = judge(counts_of(db.execute(SQL["budget_counts"], (self.task,)).fetchall()))
        if halt:
            db.execute(SQL["halt_task"], (halt, self.task))

    def _history(self, db: sqlite3.Connection, num: int, idx: int, entry: dict[str, Any] | None, *,
                 sent: bool, detail_text: str | None = None) -> None:
        """The call's record joins the task's history (``calls``), its detail in a column of its own
        (``detail_text``: the entry's detail, encoded already)."""
        body: str | None
        detail: str | None
        if detail_text is not None and entry is not None:
            body, detail = dumps({k: v for k, v in entry.items() if k != "detail"}), detail_text
        else:
            body, detail = split_entry(entry)
        db.execute(SQL["record_call"], (int(sent), body, detail, self.task, num, idx))

    def gate(self, row: WorkRow, key: str | None, step_id: str, rnd: int, serial: str | None = None
             ) -> int | None:
        """``claimed → sent``, only while this runner's lease is alive and the task not halted: the
        call's fencing epoch (higher than any earlier runner's of the call), or None.  A call the
        claim moved to sent with other key material is gated again, under a new epoch; a halt
        (a write transaction too) is either seen here or made after this call was marked sent."""
        with self.journal.raw_transaction() as db:
            now = time.time()
            if serial is not None and db.execute(SQL["serial_busy"], (self.task, serial, row.num,
                                                                       row.idx)).fetchone()[0]:
                return BUSY
            epoch = int(db.execute(SQL["last_epoch"]).fetchone()[0]) + 1
            changed = db.execute(SQL["gate"], (
                _ms(now), key, step_id, rnd, epoch, serial, self.task, row.num, row.idx, self.runner,
                row.epoch, self.task, self.runner, now)).rowcount
            if changed != 1:
                return None
            db.execute(SQL["set_epoch"], (epoch,))
            return epoch

    def release(self, row: WorkRow) -> None:
        """A call this runner claimed and will not send: back to ready for any runner."""
        self.journal.change(SQL["release_call"], (self.task, row.num, row.idx, self.runner))

    def pace(self, bucket: str, interval: float, tolerance: float) -> float:
        with self.journal.raw_transaction() as db:
            # The clock is read once the write lock is held: a wait for the lock is not the bucket's.
            now = time.time()
            tat = float(db.execute(SQL["pace"], {"task": self.task, "name": bucket, "now": now,
                                                 "interval": interval}).fetchone()[0])
        return max(0.0, tat - interval - tolerance - now)

    def held(self, bucket: str) -> float:
        found = self.journal.query(SQL["held"], (self.task, bucket))
        return max(0.0, float(found[0][0]) - time.time()) if found else 0.0

    def hold(self, bucket: str, seconds: float) -> None:
        with self.journal.raw_transaction() as db:
            db.execute(SQL["hold"], {"task": self.task, "name": bucket, "until": time.time() + seconds})

    def _done(self, db: sqlite3.Connection, row: WorkRow, status: str, entry: dict[str, Any], detail: Any,
              *, doubt: str | None, now: float) -> bool:
        detail_text = None if detail is None else dumps(detail)
        changed = db.execute(SQL["done_call"], (
            status, dumps(entry), detail_text, doubt, entry.get("key"),
            entry.get("step_id"), _ms(now), self.task, row.num, row.idx, self.runner)).rowcount
        if changed != 1:
            return False
        # The detail the runner gives is the entry's own (masked with it): encoded once for both.
        same = detail_text is not None and "detail" in entry and entry["detail"] is detail
        self._history(db, row.num, row.idx, entry, sent=True, detail_text=detail_text if same else None)
        return True

    def done_and_claim(self, row: WorkRow, status: str, entry: dict[str, Any], detail: Any, *,
                       doubt: str | None, limit: int, cap: int,
                       gate_run: int | None = None) -> tuple[bool, list[WorkRow]]:
        """A call's outcome (no tables, no halt) recorded and the next calls claimed (with
        ``gate_run``, and moved to sent as ``claim`` does), in one transaction: whether the outcome
        was recorded, and the calls claimed (none when it was not: the call is no longer this
        runner's)."""
        with self.journal.raw_transaction() as db:
            now = time.time()
            if not self._done(db, row, status, entry, detail, doubt=doubt, now=now):
                return False, []
            return True, self._claim(db, limit, cap, gate_run, now)

    def done_all(self, outcomes: Sequence[Done]) -> list[bool]:
        """Outcomes recorded in one transaction: whether each was (False: taken back)."""
        with self.journal.raw_transaction() as db:
            now = time.time()
            return [self._done(db, d.row, d.status, d.entry, d.detail, doubt=d.doubt, now=now)
                    for d in outcomes]

    def done(self, row: WorkRow, status: str, entry: dict[str, Any], detail: Any, *, doubt: str | None,
             tables: dict[str, list[Any]] | None = None, prefix: str = "", into: str | None = None,
             halt: str | None = None, sent: bool = True, judge: Judge | None = None) -> bool:
        """Record a call's outcome, with the table rows it gave and why it halts the task, in one
        transaction; False when the call is no longer this runner's (taken back)."""
        with self.journal.raw_transaction() as db:
            if not sent:
                db.execute(SQL["not_sent"], (self.task, row.num, row.idx, self.runner))
            if not self._done(db, row, status, entry, detail, doubt=doubt, now=time.time()):
                return False
            self._halt(db, halt, judge)
            for name, rows in (tables or {}).items():
                db.execute(SQL["keep_table_rows"], (self.task, row.num, row.idx, name, prefix, into,
                                                    dumps(rows)))
            return True

    def expand(self, row: WorkRow, work: list[tuple[Any, ...]]) -> bool:
        """Put the calls of a step over an earlier step's table in place of its placeholder."""
        with self.journal.raw_transaction() as db:
            taken = db.execute(SQL["take_placeholder"], (self.task, row.num, row.idx, self.runner)).rowcount
            if taken != 1:
                return False
            write_work(db, work)
            return True

    def landed(self, key: str) -> tuple[dict[str, Any], Any] | None:
        """The entry and detail of a call of ``key`` that completed in the run the task is in."""
        found = self.journal.query(SQL["landed"], (self.task, key))
        if not found:
            return None
        entry = join_entry(*found[0]) or {}
        return entry, entry.get("detail")

    def kept_keys(self, num: int) -> set[str]:
        return {str(k) for (k,) in self.journal.query(SQL["kept_keys"], (self.task, num))}

    def planned(self, num: int) -> Planned:
        """What the plan holds of step ``num``: its rows, and the ``idx`` its next call takes."""
        found = planned_steps(self.journal.query(SQL["planned_steps"], (self.task,)))
        return found.get(num, Planned(0, 0, False))

    def halt(self, reason: str) -> None:
        self.journal.change(SQL["halt_task"], (reason, self.task))

    def open_counts(self) -> tuple[int, int, str | None]:
        """Calls ready, calls claimed or sent (by anyone), and why the task halted (or None)."""
        ready, held, halted = self.journal.query(SQL["open_counts"], (self.task,))[0]
        return int(ready), int(held), halted

    def details(self, nums: list[int]) -> dict[int, Any]:
        """The detail each step gives references: that of its last call that completed."""
        rows = self.journal.query(SQL["details"], (self.task, json.dumps(nums)))
        return {int(n): None if d is None else json.loads(d) for n, d, _ in rows}

    def table(self, num: int, name: str | None) -> tuple[list[str], list[Any]]:
        """The names of the tables step ``num`` gave, and the rows of ``name`` in call order."""
        names = [str(r[0]) for r in self.journal.query(SQL["table_names"], (self.task, num))]
        if name is None:
            return names, []
        rows: list[Any] = []
        for (part,) in self.journal.query(SQL["table_parts"], (self.task, num, name)):
            rows.extend(json.loads(part))
        return names, rows
