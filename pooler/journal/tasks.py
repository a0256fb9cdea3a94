"""A journal as the engine plans, joins, runs again and answers a task in it
(``pooler.journal.work.TaskJournal``), written once over the backend's connector: the task's plan
as work rows, made whole by its first runner in the transaction that creates the task, joined by
any number of runners, and run again (its failed calls sent again under their next key round)
when no live runner holds it.  A SQLite file and a PostgreSQL database each give their connector
and their ``queries.sql``; the rules are these."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pooler.errors import JournalError
from pooler.journal.api import CallHistory
from pooler.journal.claims import Work, budget_counts, planned_steps
from pooler.journal.comparerows import CompareRows
from pooler.journal.connector import Connector
from pooler.journal.documents import Answer, AnswerState, TaskDoc
from pooler.journal.history import History, task_row
from pooler.journal.lease import Lease, end_dead_leases, live_runners, take
from pooler.journal.planagain import cut_at_sample, plan_again
from pooler.journal.records import AnswerRow, FlowDoc, PlanCounts, TaskRow, dumps, now_text, pool_identity
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
)
from pooler.pool.budget import Counts
from pooler.statuses import TaskStatus

#: A run again's statements: the calls failed, not run, completed without a key, in doubt.
AGAIN = ("again_failed", "again_not_run", "again_unkeyed", "again_in_doubt")
#: A redrive's statements: the calls it does not send set aside first (not run, in doubt), so the
#: ones it puts back are not.
REDRIVE = ("redrive_aside", "redrive_doubt_aside", "redrive_failed", "redrive_not_run", "redrive_in_doubt")


def merge_doc(db: Connector, task: str, doc: dict[str, Any]) -> None:
    """``doc``'s keys merged into what the task keeps of its pool (its top-level keys replaced),
    the task's row held meanwhile, in the caller's transaction."""
    found = db.one("lock_task_doc", {"task": task})
    if found is None:
        return
    kept: dict[str, Any] = db.json_out(found["shared"]) or {}
    kept.update(doc)
    db.execute("set_task_doc", {"task": task, "doc": db.json_in(kept)})


class Tasks:
    """Tasks planned as work rows in the journal ``db`` opens; safe to share by threads."""

    def __init__(self, db: Connector) -> None:
        self.db = db

    def where(self) -> str:
        return self.db.where()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Tasks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # What runs and show read

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first."""
        return [task_row(r) for r in self.db.all("tasks", {"limit": limit})]

    def task(self, task_id: str) -> TaskRow | None:
        return History(self.db).task(task_id)

    def answer(self, task_id: str) -> Answer | None:
        return History(self.db).answer(task_id)

    def calls(self, task_id: str) -> list[dict[str, Any]]:
        """Every record of the task, oldest first (a look at the journal in a test)."""
        return History(self.db).calls(task_id)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a statement of SQL text in the backend's dialect (a look at it in a test)."""
        return self.db.query(sql, args)

    def last_unfinished(self, pool_file: str) -> str | None:
        """The latest task of ``pool_file`` that did not complete (stopped, failed, or killed)."""
        found = self.db.one("last_unfinished", {"pool": pool_identity(pool_file)})
        return None if found is None else str(found["id"])

    def finish_task(self, task_id: str, answer: Answer, status: str | None = None) -> None:
        """Record the task's answer (already redacted) and its counts; its status is the answer's
        unless given (``sampled``: a ``--sample`` run that completed, which ``--resume`` continues)."""
        counts = {k: answer.get(k)
                  for k in ("total", "succeeded", "failed", "skipped", "not_run", "unchanged")}
        self.db.execute("finish_task", {
            "task": task_id, "finished": now_text(), "answer": dumps(answer),
            "status": status or answer.get("status", TaskStatus.FAILED), **counts})

    # The plan

    def shared(self, task_id: str) -> TaskDoc | None:
        """What the task keeps of its pool (its document); None when there is no such task."""
        found = self.db.one("task_doc", {"task": task_id})
        if found is None:
            return None
        if found["shared"] is None:
            raise JournalError(f"the task {task_id} in {self.where()} was planned by an earlier version of "
                               "pooler, before tasks kept their plan as work rows - it can be shown, not run "
                               "again: start a new task.")
        doc: TaskDoc = self.db.json_out(found["shared"])
        return doc

    @contextmanager
    def creating(self, task_id: str, pool_file: str, doc: TaskDoc, seat: Seat | None = None
                 ) -> Iterator[Write | None]:
        """The task created, its plan written by the caller with the function this gives, in one
        transaction that commits when the block ends and leaves nothing when it raises; None when
        another runner created the task first (one creating it meanwhile is waited for, so its plan
        is found whole).  ``doc`` is kept as the block leaves it; a task of a ``key_scope`` skips
        the calls whose key another task of the scope has landed.  ``seat``: the planner's lease,
        taken as the transaction ends (a long plan does not eat into it)."""
        with self.db.transaction() as db:
            # The document is written once, as the block leaves it: no one reads it before this
            # transaction commits (a pool of 2,000 steps keeps some 400 KB of it).
            made = db.execute("create_task", {"task": task_id, "pool_file": pool_file, "started": now_text()})
            if made != 1:
                yield None
                return
            with db.bulk("insert_work") as write:
                yield write
            db.execute("set_task_doc", {"task": task_id, "doc": db.json_in(doc)})
            if doc.get("key_scope") is not None:
                # A key landed by another task of the scope is not sent again by this one.
                db.execute("skip_landed_in_scope", {"task": task_id, "scope": doc["key_scope"],
                                                    "now_ms": int(time.time() * 1000)})
            if seat is not None:
                take(db, task_id, seat)
        # The query planner needs to know how many calls there are to pick the indexes.
        self.db.execute("analyze_work")

    @contextmanager
    def widening(self, task_id: str, sample: int | None
                 ) -> Iterator[tuple[dict[int, Planned], Write] | None]:
        """A plan of a sample alone widened to ``sample`` (None: every row): what the plan holds
        of each step, and the function that writes the work rows it lacks, in one transaction that
        commits when the block ends; None when the plan held that much already (another runner
        widened it first: the task's row is held meanwhile)."""
        with self.db.transaction() as db:
            found = db.one("lock_task_doc", {"task": task_id})
            if found is None or not narrower((db.json_out(found["shared"]) or {}).get("sample"), sample):
                yield None
                return
            planned = planned_steps(db.all("planned_steps", {"task": task_id}))
            with db.bulk("insert_work") as write:
                yield planned, write
            merge_doc(db, task_id, {"sample": sample})

    def release(self, task_id: str, sample: int | None, split: Split) -> bool:
        """A sampled task's plan widened to ``sample`` (None: every row) from the calls it planned
        beyond its sample: those the wider sample holds are released, a chunk it cuts split in two
        (``split``); False when the plan held that much already (another runner widened it first)."""
        with self.db.transaction() as db:
            found = db.one("lock_task_doc", {"task": task_id})
            if found is None or not narrower((db.json_out(found["shared"]) or {}).get("sample"), sample):
                return False
            if sample:
                cut_at_sample(db, task_id, sample, split)
            db.execute("release_beyond", {"task": task_id, "sample": sample})
            merge_doc(db, task_id, {"sample": sample})
        return True

    def planned(self, task_id: str) -> dict[int, Planned]:
        """What the task's plan holds of each step, by step number."""
        return planned_steps(self.db.all("planned_steps", {"task": task_id}))

    def planned_calls(self, task_id: str) -> int:
        """The calls of the task's plan (but those beyond its sample)."""
        found = self.db.one("planned_calls", {"task": task_id})
        return 0 if found is None else int(found["n"])

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        """The task's calls counted against its plan, by status; a call sent whose answer is not
        recorded is in doubt, one never sent not run."""
        found = self.db.one("plan_counts", {"task": task_id})
        if found is None or found["planned"] is None:
            return None
        planned, completed, failed = int(found["planned"]), int(found["completed"]), int(found["failed"])
        in_doubt, skipped = int(found["in_doubt"]), int(found["skipped"])
        return PlanCounts(planned, completed, failed, in_doubt, skipped,
                          planned - completed - failed - in_doubt - skipped)

    def budget_counts(self, task_id: str) -> dict[int, Counts]:
        """What the task's error budgets count, by step."""
        return budget_counts(self.db, task_id)

    # Runners

    def join(self, task_id: str, in_doubt: str, over: Sequence[OverTable] = (), *, seat: Seat | None = None,
             again: dict[str, Any] | None = None, redrive: Redrive | None = None) -> bool:
        """One more runner of the task (a task that had finished is reopened); whether it starts a
        new run of it: when no live runner holds the task, the calls that failed are sent again
        under their next key round, those not run and those completed without a key are ready
        again, those in doubt wait for the rule of the runner that tidies first (by ``in_doubt``),
        ``again`` is merged into the task's document and its halt is cleared; a ``redrive`` sends
        only what it says instead.  The steps ``over`` a table of a step sent again are planned
        again.  ``seat`` is taken in the same transaction, under the task's lock: a runner joining
        next finds this one alive."""
        with self.db.transaction() as db:
            db.lock(task_id)
            db.one("lock_task_doc", {"task": task_id})
            # Killed here: their leases end now, so this runner takes their calls back at once
            # (in doubt, by the task's policy) rather than when the leases would have run out.
            end_dead_leases(db, task_id)
            began = not live_runners(db, task_id)
            if not began:
                db.execute("join_live_run", {"task": task_id})
            else:
                params: dict[str, Any] = {"task": task_id}
                names: tuple[str, ...]
                if redrive is not None:
                    params = redrive.params(task_id, in_doubt)
                    names = REDRIVE
                else:
                    names = AGAIN
                for name in names:
                    db.execute(name, params)
                db.execute("again_task", {"task": task_id})
                merge_doc(db, task_id, {"in_doubt": in_doubt, **(again or {})})
                plan_again(db, task_id, over)
            if seat is not None:
                take(db, task_id, seat)
        return began

    def run_of(self, task_id: str) -> int:
        """The run of the task its runners are in now (part of each call's step id)."""
        found = self.db.one("task_runs", {"task": task_id})
        return 1 if found is None else int(found["runs"])

    def live_runners(self, task_id: str) -> int:
        """Runners of the task whose lease is alive, but for those whose process is gone."""
        return len(live_runners(self.db, task_id))

    def heartbeat(self) -> Connector:
        """The connection a lease's heartbeat renews it on (the journal's own, unless the backend
        gives one of its own)."""
        return self.db

    def lease(self, task_id: str, seconds: float, width: int | None, seat: Seat | None = None
              ) -> RunnerLease:
        """This process registered as a runner of the task (by ``seat``: taken already)."""
        beat = self.heartbeat()
        return Lease(beat, task_id, seconds, width, seat, owned=beat is not self.db)

    def work(self, task_id: str, runner: str) -> WorkStore:
        """The work of the task as the runner ``runner`` (its lease's id) sees it."""
        return Work(self.db, task_id, runner)

    # The answer and the report

    def answer_rows(self, task_id: str) -> Iterator[AnswerRow]:
        """Every call of the task in file order (but those beyond its sample), one at a time.
        Streamed: a task of a million calls never sits in memory whole."""
        out = self.db.json_out
        for r in self.db.stream("answer_rows", {"task": task_id}):
            yield AnswerRow.from_row(r, out)

    def answer_state(self, task_id: str) -> AnswerState | None:
        """The task's document, its status, and whether it has no recorded answer yet."""
        found = self.db.one("answer_state", {"task": task_id})
        if found is None:
            return None
        return AnswerState(self.db.json_out(found["shared"]), str(found["status"]), bool(found["unanswered"]))

    def record_run(self, task_id: str, facts: dict[str, Any]) -> None:
        """The facts of the run the task is in (``run_facts``, masked), kept by its first runner."""
        again = list(facts.get("again") or ())
        told = {k: facts.get(k) for k in ("store", "mode", "width", "serialize_on")}
        self.db.execute("record_run", {
            "task": task_id, "started_ms": int(time.time() * 1000), **told,
            "steps": self.db.json_in(facts.get("steps") or []),
            "again": self.db.json_in(again) if again else None})

    def record_flow(self, task_id: str, flow: FlowDoc) -> None:
        """One runner's flow control, under the run the task is in (not ``flow["run"]``)."""
        self.db.execute("record_flow", {"task": task_id, "runner": flow["runner"],
                                        "doc": self.db.json_in(flow)})

    def flows(self, task_id: str) -> list[FlowDoc]:
        return History(self.db).flows(task_id)

    def table_rows(self, task_id: str) -> list[tuple[Any, ...]]:
        """The table rows the task's calls gave, in call order: (num, idx, name, prefix, into, rows),
        a part a call (``pooler gather``)."""
        return [(r["num"], r["idx"], r["name"], r["prefix"], r["into_job"], self.db.json_out(r["rows"]))
                for r in self.db.all("table_rows_of_task", {"task": task_id})]

    def history(self) -> CallHistory:
        """The journal's call history, as a task's report reads it."""
        return History(self.db)

    def compare_rows(self) -> CompareRows:
        """Where a step's compare matches its rows (``compare_rows``)."""
        return CompareRows(self.db)

    # --replan

    def replanning(self, task_id: str) -> AbstractContextManager[Replanning]:
        """The task's plan in one transaction for ``--replan``, under the task's lock; refused while
        runners hold it."""
        return self._replanning(task_id)

    @contextmanager
    def _replanning(self, task_id: str) -> Iterator[Replanning]:
        with self.db.transaction() as db:
            db.lock(task_id)
            db.one("lock_task_doc", {"task": task_id})
            if live_runners(db, task_id):
                raise JournalError(f"--replan refused for task {task_id}: runners still hold it - run it "
                                   "with --replan once they have ended.")
            yield Replan(db, task_id)


class Replan:
    """``--replan`` of one task inside the journal's transaction (``Replanning``)."""

    def __init__(self, db: Connector, task: str) -> None:
        self.db = db
        self.task = task

    def step_calls(self, num: int) -> list[tuple[Any, ...]]:
        """The calls of step ``num``: (idx, state, status, key_text, data, round), by idx."""
        return [(r["idx"], r["state"], r["status"], r["key_text"], self.db.json_out(r["data"]), r["round"])
                for r in self.db.all("step_calls", {"task": self.task, "num": num})]

    def drop_calls(self, num: int, idxs: list[int]) -> None:
        self.db.execute("drop_calls", {"task": self.task, "num": num, "idxs": self.db.json_in(idxs)})

    def write(self, rows: Iterable[tuple[Any, ...]]) -> None:
        with self.db.bulk("insert_work") as write:
            for row in rows:
                write(row)

    def set_round(self, rnd: int, num: int, idx: int) -> None:
        self.db.execute("set_round", {"round": rnd, "task": self.task, "num": num, "idx": idx})

    def update_doc(self, doc: dict[str, Any]) -> None:
        merge_doc(self.db, self.task, doc)
