"""``--replan`` of a shared task: its calls planned again from the files as they are now, by the
rules a task on SQLite follows (``pooler/run/replan.py``), every row reaching the store once.

Only the steps whose data file changed are planned again, in one transaction, while no runner
holds the task.  The calls that landed (completed, skipped) stay as they are: they are the record.

- A step keyed per row: a call whose key the file still holds and that landed, or is in doubt,
  stays (one in doubt is ruled by the run's ``--in-doubt``); every other call of the step goes,
  and the rows whose key no call keeps are planned anew in file order (an edited row is sent with
  its new values, under the key round its call had reached); a row the file no longer holds is
  not sent.
- A chunked keyed step: the rows carried by its landed chunks are told by their keys; the rest
  of the file is cut into chunks again, a chunk never reaching over a done row.  A chunk in doubt
  refuses ``--replan``: a new cut would send its rows under another key.
- A step without a key: once it has sent anything, ``--replan`` is refused, naming the step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pooler.errors import JournalError
from pooler.journal.postgres.journal import WORK_TYPES, PgJournal
from pooler.journal.postgres.schema import SQL
from pooler.pool.compiler import Plan
from pooler.pool.model import Step
from pooler.shared.plan import Planner
from pooler.statuses import LANDED, CallStatus, WorkState

#: Where a call stands that neither landed nor can be planned again: sent, its answer not known.
_IN_DOUBT = (WorkState.SENT, WorkState.DOUBT)


def replan_shared(journal: PgJournal, task: str, plan: Plan, planner: Planner, *, changed: set[int],
                  files: list[dict[str, Any]]) -> None:
    """Plan the steps ``changed`` of ``task`` again from ``plan``'s data files (read through with
    every check), and keep ``files`` (their digests now) with the task."""
    from psycopg.types.json import Jsonb  # noqa: PLC0415

    with journal.transaction() as db:
        db.execute(SQL["lock_task"], (task,))
        db.execute(SQL["lock_shared"], (task,))
        if db.execute(SQL["live_runner_count"], (task,)).fetchone()[0]:
            raise JournalError(f"--replan refused for task {task}: runners still hold it - run it with "
                               "--replan once they have ended.")
        for step in plan.pool.steps:
            if step.num not in changed or step.for_each is None:
                continue
            named = f" ({step.name})" if step.name else ""
            data = plan.data.get(step.num)
            if data is None or not data.path.is_file():
                raise JournalError(f"--replan plans task {task} from its files as they are now, and the "
                                   f"data file of step {step.num}{named} is not there - restore it, or run "
                                   "the task without --replan (its plan holds the rows).")
            calls = db.execute(SQL["step_calls"], (task, step.num)).fetchall()
            work = _Step(task, step, named, planner, calls)
            rows = list(work.new_rows(data.iter_rows()))
            db.execute(SQL["drop_calls"], (task, step.num, work.dropped))
            with db.cursor().copy(SQL["copy_work"]) as copy:
                copy.set_types(WORK_TYPES)
                for values in rows:
                    copy.write_row(values)
            for idx, rnd in work.rounds.items():
                db.execute(SQL["set_round"], (rnd, task, step.num, idx))
        db.execute(SQL["update_shared"], (Jsonb({"files": files, "sample": planner.sample}), task))


class _Step:
    """One step's calls as the journal holds them, and the calls its new plan adds."""

    def __init__(self, task: str, step: Step, named: str, planner: Planner, calls: list[tuple[Any, ...]]
                 ) -> None:
        self.task = task
        self.step = step
        self.named = named
        self.planner = planner
        self.plan = planner.plans[step.num]
        self.calls = calls
        #: The idx of the calls the new plan drops.
        self.dropped: list[int] = []
        #: The key round each new call takes on from the call it replaces, by its idx.
        self.rounds: dict[int, int] = {}
        self.next_idx = max((int(c[0]) for c in calls), default=-1) + 1

    def new_rows(self, rows: Iterator[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
        if self.step.key is None:
            return self._unkeyed(rows)
        if self.step.for_each is not None and self.step.for_each.chunk:
            return self._chunked(rows)
        return self._per_row(rows)

    def _key(self, row: dict[str, Any]) -> str | None:
        return self.planner.key_of(self.plan, row)

    def _unkeyed(self, rows: Iterator[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
        sent = sum(1 for _, state, status, *_ in self.calls
                   if state in _IN_DOUBT or (state == WorkState.DONE and status != CallStatus.NOT_RUN))
        if sent:
            raise JournalError(
                f"--replan refused for task {self.task}: step {self.step.num}{self.named} has no key, so "
                f"the rows it sent ({sent:,} calls) cannot be told apart from new ones and a new plan could "
                "send them again - give the step a key, or start a new task.")
        self.dropped = [int(c[0]) for c in self.calls]
        return self.planner.rows_of(self.step, rows, idx=self.next_idx)

    def _per_row(self, rows: Iterator[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
        keys_now: list[tuple[int, dict[str, Any], str | None]] = [(i, row, self._key(row))
                                                                  for i, row in enumerate(rows)]
        present = {key for _, _, key in keys_now if key is not None}
        kept: set[str] = set()
        rounds: dict[str, int] = {}
        for idx, state, status, key, _, rnd in self.calls:
            stays = state in _IN_DOUBT or (state == WorkState.DONE
                                           and status in (*LANDED, CallStatus.IN_DOUBT))
            if key is not None and key in present and stays:
                kept.add(key)
                continue
            self.dropped.append(int(idx))
            if key is not None:
                rounds[key] = max(rounds.get(key, 1), int(rnd))
        idx = self.next_idx
        for i, row, key in keys_now:
            if key is not None and key in kept:
                continue
            yield from self.planner.rows_of(self.step, [row], first=i, idx=idx)
            if key is not None and rounds.get(key, 1) > 1:
                self.rounds[idx] = rounds[key]
            idx += 1

    def _chunked(self, rows: Iterator[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
        done: set[str] = set()
        for idx, state, status, key, data, _ in self.calls:
            if state in _IN_DOUBT or (state == WorkState.DONE and status == CallStatus.IN_DOUBT):
                raise JournalError(
                    f"--replan refused for task {self.task}: the chunk {key} of step {self.step.num}"
                    f"{self.named} is in doubt (sent, and no answer recorded), and a new plan would send its "
                    "rows under another key - restore the file and run the task again to settle it "
                    "(--in-doubt retry or skip).")
            if state == WorkState.DONE and status in LANDED:
                done.update(k for k in map(self._key, data or []) if k is not None)
            else:
                self.dropped.append(int(idx))
        size = self.step.for_each.chunk if self.step.for_each is not None else None
        assert size is not None
        idx = self.next_idx
        part: list[dict[str, Any]] = []
        start = 0
        for i, row in enumerate(rows):
            if self._key(row) in done:
                if part:
                    yield self.planner.call_row(self.step, idx, start, part)
                    idx, part = idx + 1, []
                continue
            if not part:
                start = i
            part.append(row)
            sample = self.planner.sample
            if len(part) == size or (sample is not None and i + 1 == sample):
                yield self.planner.call_row(self.step, idx, start, part)
                idx, part = idx + 1, []
        if part:
            yield self.planner.call_row(self.step, idx, start, part)
