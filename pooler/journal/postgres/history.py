"""A task's history as its report reads it from a PostgreSQL journal: the runs' facts and every
record of its calls, whichever runner made them (``pooler.journal.api.CallHistory``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pooler.journal.api import CallRecordRow, RunFacts
from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.schema import SQL
from pooler.journal.records import FlowDoc, TaskRow, flow_of


class PgHistory:
    """The calls a PostgreSQL journal recorded of its tasks, one record an attempt."""

    def __init__(self, journal: PgJournal) -> None:
        self.journal = journal

    def task(self, task_id: str) -> TaskRow | None:
        return self.journal.task(task_id)

    def answer(self, task_id: str) -> dict[str, Any] | None:
        return self.journal.answer(task_id)

    def where(self) -> str:
        return self.journal.where()

    def run_facts(self, task_id: str) -> dict[int, RunFacts]:
        return {int(run): RunFacts(store, mode, width, serial, steps or [], again)
                for run, store, mode, width, serial, steps, again
                in self.journal.query(SQL["report_runs"], (task_id,))}

    def flows(self, task_id: str) -> list[FlowDoc]:
        return [flow_of(run, doc) for run, doc in self.journal.query(SQL["flows"], (task_id,))]

    def call_records(self, task_id: str) -> Iterator[CallRecordRow]:
        for r in self.journal.stream(SQL["report_calls"], (task_id, task_id)):
            yield CallRecordRow._make((*r, None, None))

    def first_entries(self, task_id: str) -> Iterator[tuple[int, dict[str, Any]]]:
        for num, entry in self.journal.stream(SQL["report_first_entries"], (task_id,)):
            yield int(num), entry or {}

    def entries(self, task_id: str, ids: Sequence[int]) -> Iterator[tuple[int, dict[str, Any]]]:
        for rid, entry in self.journal.stream(SQL["report_entries"], (task_id, list(ids))):
            yield int(rid), entry or {}

    def table_entries(self, task_id: str, run: int) -> Iterator[dict[str, Any]]:
        for (entry,) in self.journal.stream(SQL["report_table_entries"], (task_id, run)):
            yield entry
