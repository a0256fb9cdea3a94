"""Any journal's tasks, opened from a ``--journal`` value (or ``POOLER_JOURNAL``) for reading, as
``pooler runs``, ``pooler show`` and ``tool_pool {"task": T}`` tell them (``TaskView``), and the
call history a task's report draws, whose task and answer are told by the same rule."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pooler.journal.api import CallHistory, CallRecordRow, RunFacts, TaskView
from pooler.journal.documents import Answer, Entry
from pooler.journal.opening import open_existing
from pooler.journal.records import FlowDoc, TaskRow
from pooler.journal.work import TaskJournal
from pooler.run.taskanswer import WorkTasks


def open_tasks(spec: str) -> TaskView:
    """The tasks of the journal ``spec`` names: a missing SQLite file is refused, not made."""
    return WorkTasks(open_existing(spec))


def history_of(view: TaskView) -> CallHistory:
    """The call history behind ``view``, which a task's HTML report draws."""
    assert isinstance(view, WorkTasks)
    return ToldHistory(view.journal.history(), view)


def told_history(journal: TaskJournal) -> CallHistory:
    """The call history of ``journal``, its tasks told as ``pooler runs`` and ``pooler show`` tell them."""
    return history_of(WorkTasks(journal))


class ToldHistory:
    """A journal's call history whose task (``dead`` when every run of it died) and answer (so far,
    for a task that never finished) are the ones ``pooler runs`` and ``pooler show`` give: a report
    never tells a killed task ``running`` with nothing left to run."""

    def __init__(self, history: CallHistory, view: WorkTasks) -> None:
        self.history = history
        self.view = view

    def task(self, task_id: str) -> TaskRow | None:
        return self.view.task(task_id)

    def answer(self, task_id: str) -> Answer | None:
        return self.view.answer(task_id)

    def where(self) -> str:
        return self.history.where()

    def run_facts(self, task_id: str) -> dict[int, RunFacts]:
        return self.history.run_facts(task_id)

    def flows(self, task_id: str) -> list[FlowDoc]:
        return self.history.flows(task_id)

    def call_records(self, task_id: str) -> Iterator[CallRecordRow]:
        return self.history.call_records(task_id)

    def first_entries(self, task_id: str) -> Iterator[tuple[int, Entry]]:
        return self.history.first_entries(task_id)

    def entries(self, task_id: str, ids: Sequence[int]) -> Iterator[tuple[int, Entry]]:
        return self.history.entries(task_id, ids)

    def table_entries(self, task_id: str, run: int) -> Iterator[Entry]:
        return self.history.table_entries(task_id, run)
