"""What every journal offers, whatever holds it (a SQLite file, a PostgreSQL database), and the one
place a ``--journal`` value (or ``POOLER_JOURNAL``) is read: which journal it names.

Opening one for reading is ``pooler.shared.tasks.open_tasks``: a PostgreSQL journal loads psycopg,
which the layers below the shared task never do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pooler.journal.records import PlanCounts, TaskRow, default_journal_path

#: The environment variable that names the journal when ``--journal`` is not given.
JOURNAL_ENV = "POOLER_JOURNAL"


class TaskView(Protocol):
    """Any journal's tasks as ``pooler runs``, ``pooler show`` and ``tool_pool {"task": T}`` read
    them, whichever backend holds them: one behaviour, told the same way."""

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first; a task whose every run died is ``dead``, not ``running``."""

    def task(self, task_id: str) -> TaskRow | None:
        """One task (``dead`` as in ``tasks``), or None."""

    def answer(self, task_id: str, *, live: bool = False, running_here: bool = False
               ) -> dict[str, Any] | None:
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


def journal_spec(given: str | None, environ: Mapping[str, str]) -> str:
    """The journal a command uses: ``--journal``, else ``POOLER_JOURNAL``, else the default file."""
    return given or environ.get(JOURNAL_ENV) or str(default_journal_path(environ))
