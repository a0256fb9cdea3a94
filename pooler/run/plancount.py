"""A task counted against its plan: planned, completed, failed, in doubt, skipped and not run, for
every task whose plan the journal holds, one killed with SIGKILL too.

Rows of a step over a data file are counted as the plan holds them; every other step is one
call.  A row's status is that of the latest record of this plan's runs that carried it, except
that a record which skipped a call already done leaves the row as it was (a task run three times
counts a row completed once, not skipped twice).  A record sent without an answer is in doubt;
a ``skipped`` call counted done without its answer (``--in-doubt skip``) is skipped; a row no
record carried is not run.  A step over the table of an earlier step has no planned rows: what
its records carried is counted.
"""

from __future__ import annotations

import json
from typing import Any

from pooler.journal.records import PLAN_ORDER as _ORDER
from pooler.journal.records import PlanCounts
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal
from pooler.run.identity import chunk_span
from pooler.run.taskplan import POOL_FILE, PlannedFile, planned_files
from pooler.statuses import CallStatus, final_status


def plan_counts(journal: Journal, task: str) -> PlanCounts | None:
    """The task counted against its plan; None for a task planned before tasks recorded theirs."""
    files = planned_files(journal, task)
    if not files:
        return None
    first_run = files[POOL_FILE].first_run if POOL_FILE in files else 1
    found = journal.query(SQL["latest_run_steps"], (task,))
    steps: list[dict[str, Any]] = json.loads(found[0][0]) if found and found[0][0] else []
    tally = dict.fromkeys(_ORDER, 0)
    planned = 0
    for step in steps:
        num = int(step["num"])
        if num in files:
            was = files[num]
            planned += was.rows or 0
            marks = _row_marks(journal, task, was)
            for code, name in enumerate(_ORDER_CODES):
                tally[name] += marks.count(code)
        elif step.get("over_rows"):
            for size, status in _row_spans(journal, task, num, first_run).values():
                tally[status] += size
                planned += size
        else:
            planned += 1
            tally[_single(journal, task, num, first_run) or CallStatus.NOT_RUN] += 1
    return PlanCounts(planned, **tally)


def _status(status: str, in_doubt: int) -> str | None:
    told = final_status(status)
    if told == CallStatus.NOT_RUN:
        return None
    if told == CallStatus.SKIPPED and not in_doubt:
        return CallStatus.COMPLETED
    return told


def _single(journal: Journal, task: str, num: int, first_run: int) -> str | None:
    found: str | None = None
    for status, in_doubt in journal.query(SQL["single_call_records"], (task, num, first_run)):
        told = _status(status, in_doubt)
        if told is None or (status == CallStatus.SKIPPED and not in_doubt and found == CallStatus.COMPLETED):
            continue
        found = told
    return found


#: A row's status as one byte: a million rows are counted in a megabyte.
_ORDER_CODES = tuple(s.value for s in (CallStatus.NOT_RUN, CallStatus.COMPLETED, CallStatus.FAILED,
                                       CallStatus.IN_DOUBT, CallStatus.SKIPPED))
_CODE = {name: code for code, name in enumerate(_ORDER_CODES)}


def _row_marks(journal: Journal, task: str, was: PlannedFile) -> bytearray:
    """The status of every planned row of a step over a data file, a byte a row."""
    rows = was.rows or 0
    marks = bytearray(rows)
    completed = _CODE[CallStatus.COMPLETED]
    for (row,) in journal.cursor(SQL["plan_done_rows"], (task, was.num)):
        if 0 <= row < rows:
            marks[row] = completed
    records = journal.cursor(SQL["row_call_records"], (task, was.num, was.first_run))
    for row, key, status, in_doubt, last in records:
        told = _status(status, in_doubt)
        if told is None or not 0 <= row < rows:
            continue
        size = min(_size(row, key, last, was.chunk, rows), rows - row)
        if status == CallStatus.SKIPPED and not in_doubt and marks[row] == completed:
            continue
        marks[row:row + size] = bytes([_CODE[told]]) * size
    return marks


def _size(row: int, key: Any, last: Any, chunk: int | None, rows: int | None) -> int:
    """The rows one record carried: its chunk's span (by its key or its entry), else one."""
    span = chunk_span(key) if isinstance(key, str) else None
    if span is not None:
        return span[2] - span[1] + 1
    if isinstance(last, int):
        return last - row + 1
    if chunk:
        return min(chunk, (rows or row + chunk) - row)
    return 1


def _row_spans(journal: Journal, task: str, num: int, first_run: int) -> dict[int, tuple[int, str]]:
    """The rows a step over an earlier step's table carried, as its records tell: first row ->
    (rows, status)."""
    spans: dict[int, tuple[int, str]] = {}
    for row, key, status, in_doubt, last in journal.query(SQL["row_call_records"], (task, num, first_run)):
        told = _status(status, in_doubt)
        if told is None:
            continue
        earlier = spans.get(row)
        if earlier is not None and earlier[1] == CallStatus.COMPLETED and status == CallStatus.SKIPPED \
                and not in_doubt:
            continue
        spans[row] = (_size(row, key, last, None, None), told)
    return spans
