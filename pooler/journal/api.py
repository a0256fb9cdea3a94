"""What every journal offers, whatever holds it (a SQLite file, a PostgreSQL database), and the one
place a ``--journal`` value (or ``POOLER_JOURNAL``) is read: which journal it names.

Opening one is ``pooler.journal.opening.open_journal``: a PostgreSQL journal loads psycopg,
which the layers below the runner never do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from pooler.journal.dburl import JOURNAL_ENV
from pooler.journal.documents import Answer, Entry
from pooler.journal.records import FlowDoc, PlanCounts, TaskRow, default_journal_path


class TaskView(Protocol):
    """Any journal's tasks as ``pooler runs``, ``pooler show`` and ``tool_pool {"task": T}`` read
    them, whichever backend holds them: one behaviour, told the same way."""

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first; a task whose every run died is ``dead``, not ``running``."""

    def task(self, task_id: str) -> TaskRow | None:
        """One task (``dead`` as in ``tasks``), or None."""

    def answer(self, task_id: str, *, live: bool = False, running_here: bool = False
               ) -> Answer | None:
        """What the task has done: the answer its last run recorded, or, for a task whose run died
        (or, with ``live``, one still running), the answer so far as the journal holds it.  None
        for a task still running when ``live`` is not asked for and the backend cannot tell its
        calls apart yet.  ``running_here``: this very process runs the task now."""

    def plan_counts(self, task_id: str) -> PlanCounts | None:
        """The task counted against its plan (planned, completed, failed, in doubt, skipped, not
        run), a task killed before it wrote its answer too; None without a plan."""

    def where(self) -> str:
        """How messages name this journal (a path, or a URL without its password)."""

    def close(self) -> None: ...


class RunFacts(NamedTuple):
    """What a journal keeps of one run of a task for its report: the store, the batch options, the
    steps (masked), and the options a command needs to run the task again as this run went."""

    store: str | None
    mode: str | None
    width: int | None
    serialize_on: str | None
    steps: list[dict[str, Any]]
    again: list[str] | None


class CallRecordRow(NamedTuple):
    """One record of a call, without its answer, as a task's report draws it on its timeline:
    ``sent_ms``/``done_ms`` in epoch milliseconds, else the older ``sent_at``/``done_at`` stamps;
    a call sent whose answer is not recorded has the status ``sent``."""

    id: int
    run: int
    num: int
    row: int | None
    key: str | None
    step_id: str | None
    status: str
    in_doubt: bool
    lane: int | None
    serial: str | None
    sent_ms: int | None
    done_ms: int | None
    sent_at: str | None
    done_at: str | None


class CallHistory(Protocol):
    """What a task's HTML report reads of any journal: its runs, every record of its calls (one a
    row, read as they come: a 100,000-call task never sits in memory whole), and the entries of
    the few calls it names."""

    def task(self, task_id: str) -> TaskRow | None: ...

    def answer(self, task_id: str) -> Answer | None: ...

    def where(self) -> str: ...

    def run_facts(self, task_id: str) -> dict[int, RunFacts]:
        """Each run's facts, by run number."""

    def flows(self, task_id: str) -> list[FlowDoc]:
        """What each runner's flow control did, in every run of the task (by run, then as they
        were recorded)."""

    def call_records(self, task_id: str) -> Iterator[CallRecordRow]:
        """Every record of the task's calls, in the order they were made."""

    def first_entries(self, task_id: str) -> Iterator[tuple[int, Entry]]:
        """The first entry of each step, by step number (its name, unit and command)."""

    def entries(self, task_id: str, ids: Sequence[int]) -> Iterator[tuple[int, Entry]]:
        """The entries of the task's records ``ids``."""

    def table_entries(self, task_id: str, run: int) -> Iterator[Entry]:
        """The entries of the completed calls of run ``run`` that wrote a table."""


def journal_spec(given: str | None, environ: Mapping[str, str]) -> str:
    """The journal a command uses: ``--journal``, else ``POOLER_JOURNAL``, else the default file."""
    return given or environ.get(JOURNAL_ENV) or str(default_journal_path(environ))
