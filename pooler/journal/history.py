"""A task's history as its report reads it from any journal (``pooler.journal.api.CallHistory``):
the task, the runs' facts, every record of its calls (streamed: a 100,000-call task never sits in
memory whole), and the entries of the few calls it names; one implementation over the backend's
connector."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pooler.journal.api import CallRecordRow, RunFacts
from pooler.journal.connector import Connector
from pooler.journal.documents import Answer, Entry, as_entry
from pooler.journal.records import FlowDoc, TaskRow, flow_of, join_entry


def task_row(row: Any) -> TaskRow:
    """A task as ``pooler runs`` lists it, from a row of the ``task``/``tasks`` queries."""
    return TaskRow(row["id"], row["pool_file"], row["started"], row["finished"], row["status"],
                   int(row["runs"]), row["total"], row["succeeded"], row["failed"], row["skipped"],
                   row["not_run"], row["store"], row["unchanged"])


class History:
    """The calls a journal recorded of its tasks, one record an attempt."""

    def __init__(self, db: Connector) -> None:
        self.db = db

    def where(self) -> str:
        return self.db.where()

    def task(self, task_id: str) -> TaskRow | None:
        found = self.db.one("task", {"task": task_id})
        return None if found is None else task_row(found)

    def answer(self, task_id: str) -> Answer | None:
        found = self.db.one("answer", {"task": task_id})
        if found is None or found["answer"] is None:
            return None
        answer: Answer = self.db.json_out(found["answer"])
        return answer

    def calls(self, task_id: str) -> list[dict[str, Any]]:
        """Every record of the task, oldest first, read whole (for a look at the journal in a test)."""
        out = []
        for r in self.db.all("calls_of_task", {"task": task_id}):
            rec = {k: r[k] for k in r.keys()}  # noqa: SIM118 - a row, not a dict
            rec["in_doubt"] = bool(rec["in_doubt"])
            rec["result"] = join_entry(rec["result"], rec["detail"])
            rec["detail"] = self.db.json_out(rec["detail"])
            out.append(rec)
        return out

    def run_facts(self, task_id: str) -> dict[int, RunFacts]:
        out = self.db.json_out
        return {int(r["run"]): RunFacts(r["store"], r["mode"], r["width"], r["serialize_on"],
                                        out(r["steps"]) or [], out(r["again"]) if r["again"] else None)
                for r in self.db.stream("report_runs", {"task": task_id})}

    def flows(self, task_id: str) -> list[FlowDoc]:
        return [flow_of(r["run"], self.db.json_out(r["doc"]))
                for r in self.db.stream("flows", {"task": task_id})]

    def call_records(self, task_id: str) -> Iterator[CallRecordRow]:
        for r in self.db.stream("report_calls", {"task": task_id}):
            yield CallRecordRow(r["id"], r["run"], r["num"], r["row"], r["key"], r["step_id"], r["status"],
                                bool(r["in_doubt"]), r["lane"], r["serial"], r["sent_ms"], r["done_ms"],
                                r["sent_at"], r["done_at"])

    def first_entries(self, task_id: str) -> Iterator[tuple[int, Entry]]:
        for r in self.db.stream("report_first_entries", {"task": task_id}):
            yield int(r["num"]), as_entry(self.db.json_out(r["entry"]))

    def entries(self, task_id: str, ids: Sequence[int]) -> Iterator[tuple[int, Entry]]:
        for r in self.db.stream("report_entries", {"task": task_id, "ids": self.db.json_in(list(ids))}):
            yield int(r["id"]), as_entry(self.db.json_out(r["entry"]))

    def table_entries(self, task_id: str, run: int) -> Iterator[Entry]:
        for r in self.db.stream("report_table_entries", {"task": task_id, "run": run}):
            yield self.db.json_out(r["entry"])
