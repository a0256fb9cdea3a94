"""A task's history as its report reads it from a SQLite journal: the runs' facts and every record
of its calls (``pooler.journal.api.CallHistory``)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pooler.journal.api import CallRecordRow, RunFacts
from pooler.journal.records import FlowDoc, TaskRow, flow_of
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal


class SqliteHistory:
    """The calls a SQLite journal recorded of its tasks, one record an attempt."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def task(self, task_id: str) -> TaskRow | None:
        return self.journal.task(task_id)

    def answer(self, task_id: str) -> dict[str, Any] | None:
        return self.journal.answer(task_id)

    def where(self) -> str:
        return str(self.journal.path or ":memory:")

    def run_facts(self, task_id: str) -> dict[int, RunFacts]:
        return {int(run): RunFacts(store, mode, width, serial, json.loads(steps or "[]"),
                                   json.loads(again) if again else None)
                for run, store, mode, width, serial, steps, again in self.journal.cursor(SQL["report_runs"],
                                                                                         (task_id,))}

    def flows(self, task_id: str) -> list[FlowDoc]:
        return [flow_of(run, json.loads(doc)) for run, doc in self.journal.cursor(SQL["flows"], (task_id,))]

    def call_records(self, task_id: str) -> Iterator[CallRecordRow]:
        for r in self.journal.cursor(SQL["report_calls"], (task_id,)):
            yield CallRecordRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), *r[8:])

    def first_entries(self, task_id: str) -> Iterator[tuple[int, dict[str, Any]]]:
        for num, result in self.journal.cursor(SQL["report_first_entries"], (task_id,)):
            yield int(num), json.loads(result) if result else {}

    def entries(self, task_id: str, ids: Sequence[int]) -> Iterator[tuple[int, dict[str, Any]]]:
        for rid, result in self.journal.cursor(SQL["report_entries"], (task_id, json.dumps(list(ids)))):
            yield int(rid), json.loads(result) if result else {}

    def table_entries(self, task_id: str, run: int) -> Iterator[dict[str, Any]]:
        for (result,) in self.journal.cursor(SQL["report_table_entries"], (task_id, run)):
            yield json.loads(result)
