"""A SQLite journal as the engine plans, joins, runs and answers a task in it
(``pooler.journal.work.TaskJournal``): the task's plan as work rows, made whole by its first runner
in the transaction that creates the task, joined by any number of runners of this host, and run
again as the PostgreSQL journal runs a task again (``pooler_run_again``).

It is the journal of ``pooler.journal.sqlite.journal.Journal`` (one connection behind a lock, the
file made pooler's own and brought up to date): ``pooler runs`` and ``pooler show`` read its tasks
as they read every other task of the file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from pooler.errors import JournalError
from pooler.journal.api import CallHistory
from pooler.journal.history import History
from pooler.journal.lease import Lease, end_dead_leases, live_runners, take
from pooler.journal.planagain import StatementsPlanAgain, cut_at_sample, plan_again
from pooler.journal.records import FlowDoc, PlanCounts, TaskRow, dumps, now_text
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal, work_values
from pooler.journal.sqlite.work import (
    SqliteWorkStore,
    Writer,
    planned_steps,
    update_doc,
    write_work,
)
from pooler.journal.timeline import run_row
from pooler.journal.work import (
    OverTable,
    Planned,
    Redrive,
    Replanning,
    RunnerLease,
    Seat,
    Split,
    WorkStore,
    Write,
    narrower,
    redrive_again,
)
from pooler.pool.budget import Counts, counts_of
from pooler.statuses import CallStatus

#: The statements that cut a chunk planned beyond a sample (``cut_at_sample``).
CUT = (SQL["cut_by_sample"], SQL["make_room_out"], SQL["make_room_back"], SQL["drop_call"])


#: A redrive's statements, in the order ``redrive_again`` runs them.
REDRIVE = (SQL["redrive_aside"], SQL["redrive_doubt_aside"], SQL["redrive_failed"], SQL["redrive_not_run"],
           SQL["redrive_in_doubt"])

class SqliteTaskJournal:
    """Tasks planned as work rows in a SQLite file (or ``:memory:``); safe to share by threads.
    ``journal``: a path, or a ``Journal`` open already (this one closes it)."""

    def __init__(self, journal: Journal | Path | str) -> None:
        self.journal = journal if isinstance(journal, Journal) else Journal(journal)

    def where(self) -> str:
        return self.journal.where()

    def close(self) -> None:
        self.journal.close()

    def __enter__(self) -> SqliteTaskJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # What runs and show read, as the journal gives it

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        return self.journal.tasks(limit)

    def task(self, task_id: str) -> TaskRow | None:
        return History(self.journal).task(task_id)

    def last_unfinished(self, pool_file: str) -> str | None:
        return self.journal.last_unfinished(pool_file)

    def answer(self, task_id: str) -> dict[str, Any] | None:
        return History(self.journal).answer(task_id)

    def finish_task(self, task_id: str, answer: dict[str, Any], status: str | None = None) -> None:
        self.journal.finish_task(task_id, answer, status)

    # The plan

    def shared(self, task_id: str) -> dict[str, Any] | None:
        """What the task keeps of its pool (its document); None when there is no such task."""
        rows = self.journal.query(SQL["task_doc"], (task_id,))
        if not rows:
            return None
        if rows[0][0] is None:
            raise JournalError(f"the task {task_id} in {self.where()} was planned by an earlier version of "
                               "pooler, before tasks kept their plan as work rows - it can be shown, not run "
                               "again: start a new task.")
        found: dict[str, Any] = json.loads(rows[0][0])
        return found

    @contextmanager
    def creating(self, task_id: str, pool_file: str, doc: dict[str, Any], seat: Seat | None = None
                 ) -> Iterator[Write | None]:
        """The task created, its plan written by the caller with the function this gives, in one
        write transaction that commits when the block ends and leaves nothing when it raises; None
        when another runner created the task first (one creating it meanwhile is waited for, up to
        the journal's busy timeout).  ``doc`` is kept as the block leaves it; a task of a
        ``key_scope`` skips the calls whose key another task of the scope has landed.  ``seat``:
        the planner's lease, taken as the transaction ends (a long plan does not eat into it)."""
        with self.journal.raw_transaction() as db:
            made = db.execute(SQL["create_shared"], (task_id, pool_file, now_text(), dumps(doc))).rowcount
            if made != 1:
                yield None
                return
            write = Writer(db)
            yield write
            write.flush()
            db.execute(SQL["set_task_doc"], (dumps(doc), task_id))
            if doc.get("key_scope") is not None:
                # A key landed by another task of the scope is not sent again by this one.
                done_ms = int(time.time() * 1000)
                for num, idx, entry, detail, step_id in db.execute(
                        SQL["landed_in_scope"], (doc["key_scope"], task_id, task_id)).fetchall():
                    skipped: dict[str, Any] = json.loads(entry) if entry else {}
                    skipped["status"] = CallStatus.SKIPPED
                    db.execute(SQL["skip_landed"], (step_id, detail, dumps(skipped), done_ms, task_id, num,
                                                    idx))
            if seat is not None:
                take(self.journal, task_id, seat)

    @contextmanager
    def widening(self, task_id: str, sample: int | None
                 ) -> Iterator[tuple[dict[int, Planned], Write] | None]:
        """A task of a SQLite journal is planned whole (its rows after a sample wait ``beyond``
        it, ``release`` widens it): there is never a plan of a sample alone to widen."""
        yield None

    def release(self, task_id: str, sample: int | None, split: Split) -> bool:
        """A sampled task's plan widened to ``sample`` (None: every row) from the calls it planned
        beyond its sample: those the wider sample holds are released, a chunk it cuts split in two
        (``split``); False when the plan held that much already (another runner widened it first)."""
        with self.journal.raw_transaction() as db:
            found = db.execute(SQL["task_doc"], (task_id,)).fetchone()
            kept = json.loads(found[0]) if found is not None and found[0] else {}
            if found is None or not narrower(kept.get("sample"), sample):
                return False
            if sample:
                cut_at_sample(db, task_id, sample, statements=CUT, split=split,
                              write=lambda parts: write_work(db, parts),
                              rows=lambda data: list(json.loads(data)))
            db.execute(SQL["release_beyond"], (task_id, sample))
            update_doc(db, task_id, {"sample": sample})
        return True

    def planned(self, task_id: str) -> dict[int, Planned]:
        """What the task's plan holds of each step, by step number."""
        return planned_steps(self.journal.query(SQL["planned_steps"], (task_id,)))

    def planned_calls(self, task_id: str) -> int:
        """The calls of the task's plan (but those beyond its sample)."""
        return int(self.journal.query(SQL["planned_calls"], (task_id,))[0][0])

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        """The task's calls counted against its plan, by status; a call sent whose answer is not
        recorded is in doubt, one never sent not run."""
        rows = self.journal.query(SQL["work_plan_counts"], (task_id,))
        if not rows or rows[0][0] is None:
            return None
        planned, completed, failed, in_doubt, skipped = (int(v or 0) for v in rows[0])
        return PlanCounts(planned, completed, failed, in_doubt, skipped,
                          planned - completed - failed - in_doubt - skipped)

    # Runners

    def join(self, task_id: str, in_doubt: str, over: Sequence[OverTable] = (), *, seat: Seat | None = None,
             again: dict[str, Any] | None = None, redrive: Redrive | None = None) -> bool:
        """One more runner of the task (a task that had finished is reopened); whether it starts a
        new run of it: when no live runner holds the task, the calls that failed are sent again
        under their next key round, those not run and those completed without a key are ready
        again, those in doubt wait for the rule of the runner that tidies first (by ``in_doubt``),
        ``again`` is merged into the task's document and its halt is cleared.  ``seat`` is taken
        in the same write transaction: a runner joining next finds this one alive."""
        with self.journal.raw_transaction() as db:
            began = self._join(db, task_id, in_doubt, over, again=again, redrive=redrive)
            if seat is not None:
                take(self.journal, task_id, seat)
            return began

    def _join(self, db: sqlite3.Connection, task_id: str, in_doubt: str, over: Sequence[OverTable], *,
              again: dict[str, Any] | None, redrive: Redrive | None) -> bool:
        # Killed here: their leases end now, so this runner takes their calls back at once
        # (in doubt, by the task's policy) rather than when the leases would have run out.
        end_dead_leases(self.journal, task_id)
        if live_runners(self.journal, task_id):
            db.execute(SQL["join_live_run"], (task_id,))
            return False
        if redrive is not None:
            redrive_again(db, REDRIVE, redrive, task_id, in_doubt)
        else:
            db.execute(SQL["again_failed"], (task_id,))
            db.execute(SQL["again_not_run"], (task_id,))
            db.execute(SQL["again_unkeyed"], (task_id,))
            db.execute(SQL["again_in_doubt"], (task_id,))
        db.execute(SQL["again_task"], (in_doubt, task_id))
        if again:
            update_doc(db, task_id, again)
        statements = (SQL["step_open"], SQL["drop_open_calls"], SQL["drop_open_tables"])
        restore = SQL["restore_placeholder"]
        plan_again(StatementsPlanAgain(db, task_id, statements,
                                       lambda row: db.execute(restore, work_values(row))), over)
        return True

    def run_of(self, task_id: str) -> int:
        """The run of the task its runners are in now (part of each call's step id)."""
        return int(self.journal.query(SQL["task_runs"], (task_id,))[0][0])

    def live_runners(self, task_id: str) -> int:
        """Runners of the task whose lease is alive, but for those whose process is gone."""
        return len(live_runners(self.journal, task_id))

    def lease(self, task_id: str, seconds: float, width: int | None, seat: Seat | None = None
              ) -> RunnerLease:
        """This process registered as a runner of the task (by ``seat``: taken already)."""
        return Lease(self.journal, task_id, seconds, width, seat)

    def work(self, task_id: str, runner: str) -> WorkStore:
        return SqliteWorkStore(self.journal, task_id, runner)

    # The answer and the report

    def answer_rows(self, task_id: str) -> Iterator[tuple[Any, ...]]:
        """Every call of the task in file order (but those beyond its sample), one at a time: num,
        idx, kind, size, state, status, entry, doubt, doubted, step_id, detail, when it was sent and
        done (ms), whether it was done in an earlier run than the task's current one, its key, first
        and last row.  Streamed: a task of a million calls never sits in memory whole."""
        for (num, idx, kind, size, state, status, entry, doubt, doubted, step_id, detail, sent, done, earlier,
             *rest) in self.journal.cursor(SQL["answer_rows"], (task_id,)):
            yield (num, idx, kind, size, state, status, None if entry is None else json.loads(entry), doubt,
                   doubted, step_id, None if detail is None else json.loads(detail), sent, done,
                   bool(earlier), *rest)

    def budget_counts(self, task_id: str) -> dict[int, Counts]:
        return counts_of(self.journal.query(SQL["budget_counts"], (task_id,)))

    def answer_state(self, task_id: str) -> tuple[dict[str, Any] | None, str, bool] | None:
        """The task's document, its status, and whether it has no recorded answer yet."""
        rows = self.journal.query(SQL["answer_state"], (task_id,))
        if not rows:
            return None
        doc, status, unanswered = rows[0]
        return (None if doc is None else json.loads(doc)), str(status), bool(unanswered)

    def record_run(self, task_id: str, facts: dict[str, Any]) -> None:
        """The facts of the run the task is in (``run_facts``, masked), kept by its first runner."""
        with self.journal.raw_transaction() as db:
            found = db.execute(SQL["task_again"], (task_id,)).fetchone()
            if found is not None:
                db.execute(SQL["record_work_run"], run_row(task_id, int(found[0]), facts))

    def record_flow(self, task_id: str, flow: FlowDoc) -> None:
        """One runner's flow control, under the run the task is in (not ``flow["run"]``)."""
        self.journal.change(SQL["record_flow"], (task_id, flow["runner"], dumps(flow)))

    def flows(self, task_id: str) -> list[FlowDoc]:
        return History(self.journal).flows(task_id)

    def table_rows(self, task_id: str) -> list[tuple[Any, ...]]:
        """The table rows the task's calls gave, in call order: (num, idx, name, prefix, into, rows),
        a part a call (``pooler gather``)."""
        return [(num, idx, name, prefix, into, json.loads(rows)) for num, idx, name, prefix, into, rows
                in self.journal.query(SQL["table_rows_of_task"], (task_id,))]

    def history(self) -> CallHistory:
        """The journal's call history, as a task's report reads it."""
        return History(self.journal)

    # --replan

    def replanning(self, task_id: str) -> AbstractContextManager[Replanning]:
        """The task's plan in one write transaction for ``--replan``; refused while runners hold it."""
        return self._replanning(task_id)

    @contextmanager
    def _replanning(self, task_id: str) -> Iterator[Replanning]:
        with self.journal.raw_transaction() as db:
            if live_runners(self.journal, task_id):
                raise JournalError(f"--replan refused for task {task_id}: runners still hold it - run it "
                                   "with --replan once they have ended.")
            yield _Replanning(db, task_id)


class _Replanning:
    """``--replan`` of one task inside the journal's write transaction (``Replanning``)."""

    def __init__(self, db: sqlite3.Connection, task: str) -> None:
        self.db = db
        self.task = task

    def step_calls(self, num: int) -> list[tuple[Any, ...]]:
        """The calls of step ``num``: (idx, state, status, key_text, data, round), by idx."""
        rows = self.db.execute(SQL["step_calls"], (self.task, num))
        return [(idx, state, status, key, None if data is None else json.loads(data), rnd)
                for idx, state, status, key, data, rnd in rows]

    def drop_calls(self, num: int, idxs: list[int]) -> None:
        self.db.execute(SQL["drop_calls"], (self.task, num, json.dumps(idxs)))

    def write(self, rows: Iterable[tuple[Any, ...]]) -> None:
        write_work(self.db, rows)

    def set_round(self, rnd: int, num: int, idx: int) -> None:
        self.db.execute(SQL["set_round"], (rnd, self.task, num, idx))

    def update_doc(self, doc: dict[str, Any]) -> None:
        update_doc(self.db, self.task, doc)
