"""``--replan``: a new plan of what a task has not done yet, from the files as they are now.

Every row of the files as they are now reaches the store once: a row already done is told by its
key, a row the file no longer holds is not sent, a new or edited row is.

- A step keyed per row: the new plan holds every row of the file; a row whose key is done is
  skipped by its key, as on any rerun.
- A chunked keyed step: the rows carried by its done chunks are found by the keys the old plan
  gave them, and marked done in the new plan; the rest are cut into chunks again, a chunk never
  reaching over a done row, so no done row is sent twice and no new row is missed.
- A step without a key: its rows cannot be told apart from new ones; once it has sent anything,
  ``--replan`` is refused for the task, naming the step.
- A chunk in doubt (sent, no answer) of a chunked step: its rows may or may not have landed, and
  a new cut would send them under another key; ``--replan`` is refused until it is settled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pooler.errors import JournalError
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal
from pooler.pool.compiler import Plan
from pooler.redact import Redactor
from pooler.run.identity import chunk_span
from pooler.run.taskplan import PlannedFile, planned_files, record_plan
from pooler.statuses import DOUBTFUL, LANDED


def replan(journal: Journal, task: str, plan: Plan, values: Mapping[str, Any], redactor: Redactor, *,
           run: int) -> None:
    """Plan the task again from the files as they are now (``run`` is the run that replans it)."""
    files = planned_files(journal, task)
    done: dict[int, set[str]] = {}
    for step in plan.pool.steps:
        fe = step.for_each
        if fe is None or step.num not in files:
            continue
        named = f" ({step.name})" if step.name else ""
        if plan.data.get(step.num) is None:
            raise JournalError(f"--replan plans task {task} from its files as they are now, and "
                               f"{files[step.num].name} of step {step.num}{named} is not there - "
                               "restore it, or run the task without --replan (its plan holds the rows).")
        if step.key is None:
            sent = journal.query(SQL["calls_sent_of_step"], (task, step.num))[0][0]
            if sent:
                raise JournalError(
                    f"--replan refused for task {task}: step {step.num}{named} has no key, so the rows "
                    f"it sent ({sent:,} calls) cannot be told apart from new ones and a new plan could "
                    "send them again - give the step a key, or start a new task.")
            continue
        if fe.chunk:
            done[step.num] = _done_chunk_rows(journal, task, step.num, named, files[step.num])
    record_plan(journal, task, plan, values, redactor, first_run=run,
                done=lambda num, key: key is not None and key in done.get(num, ()))


def _done_chunk_rows(journal: Journal, task: str, num: int, named: str, was: PlannedFile) -> set[str]:
    """The keys of the rows the step's done chunks carried, as its old plan gave them."""
    keys = {str(r[0]) for r in journal.query(SQL["plan_done_keys"], (task, num))}
    # Every chunk key of this plan's runs: landed once is done; else its last record tells.
    standing: dict[str, str] = {}
    for key, status in journal.query(SQL["chunk_records_since"], (task, num, was.first_run)):
        if standing.get(key) not in LANDED:
            standing[key] = status
    for key, status in standing.items():
        span = chunk_span(key)
        if span is None:
            continue
        if status in DOUBTFUL:
            raise JournalError(
                f"--replan refused for task {task}: the chunk {key} of step {num}{named} is in doubt "
                "(sent, and no answer recorded), and a new plan would send its rows under another key - "
                "restore the file and run the task again to settle it (--in-doubt retry or skip).")
        if status in LANDED:
            spanned = journal.query(SQL["plan_keys_in_span"], (task, num, span[1], span[2]))
            keys.update(str(r[0]) for r in spanned)
    return keys
