"""``--replan`` of a task: its calls planned again from the files as they are now, every row
reaching the store once (docs/semantics.md, "A task is planned once").

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
from pooler.journal.work import KEY_COLUMN, TaskJournal
from pooler.pool.compiler import Plan
from pooler.pool.model import Pool, Step
from pooler.run.workplan import Planner
from pooler.statuses import LANDED, CallStatus, WorkState

#: Where a call stands that neither landed nor can be planned again: sent, its answer not known.
_IN_DOUBT = (WorkState.SENT, WorkState.DOUBT)


def replan_task(journal: TaskJournal, task: str, plan: Plan, planner: Planner, *, changed: set[int],
                files: list[dict[str, Any]]) -> None:
    """Plan the steps ``changed`` of ``task`` again from ``plan``'s data files (read through with
    every check), and keep ``files`` (their digests now) with the task."""
    with journal.replanning(task) as work:
        for step in plan.pool.steps:
            if step.num not in changed or step.for_each is None:
                continue
            named = f" ({step.name})" if step.name else ""
            data = plan.data.get(step.num)
            if data is None or not data.path.is_file():
                raise JournalError(f"--replan plans task {task} from its files as they are now, and the "
                                   f"data file of step {step.num}{named} is not there - restore it, or run "
                                   "the task without --replan (its plan holds the rows).")
            again = _Step(task, step, named, planner, work.step_calls(step.num))
            rows = list(again.new_rows(data.iter_rows()))
            work.drop_calls(step.num, again.dropped)
            work.write(rows)
            for idx, rnd in again.rounds.items():
                work.set_round(rnd, step.num, idx)
        work.update_doc({"files": files, "sample": planner.sample})


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
                # A call the store refused goes out under the next round, as a task run again
                # sends it: under its own round the store would answer with the refusal it kept.
                refused = state == WorkState.DONE and status == CallStatus.FAILED
                rounds[key] = max(rounds.get(key, 1), int(rnd) + int(refused))
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


def rekey_steps(journal: TaskJournal, task: str, pool: Pool, planner: Planner) -> None:
    """A step of one call whose key, under this run's variables, is not the key its call was
    done under: that call is another one (a variable in the key makes a call of its own), planned
    in place of the one done; the done one stays in the task's history.  Not while other runners
    hold the task: they run it as it was planned."""
    done: dict[int, Any] = {}
    for row in journal.answer_rows(task):
        if row.kind == "call" and row.state == WorkState.DONE and isinstance(row.entry, dict):
            done[row.num] = row.entry.get("key")
    steps = [s for s in pool.steps if s.for_each is None and s.key is not None and s.num in done]
    fresh = {s.num: planner.single(s) for s in steps}
    changed = [n for n, r in fresh.items() if r[KEY_COLUMN] is not None and r[KEY_COLUMN] != done[n]]
    if not changed or journal.live_runners(task):
        return
    with journal.replanning(task) as work:
        for num in changed:
            work.drop_calls(num, [int(c[0]) for c in work.step_calls(num)])
            work.write([fresh[num]])
