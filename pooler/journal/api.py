"""What every journal offers, whatever holds it (a SQLite file, a PostgreSQL database), and the one
place a ``--journal`` value (or ``POOLER_JOURNAL``) is read: which journal it names, and which kind.

Opening a PostgreSQL journal is left to the layers above (pooler/shared/ is built on run/).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from pooler.journal.records import TaskRow, default_journal_path

#: The environment variable that names the journal when ``--journal`` is not given.
JOURNAL_ENV = "POOLER_JOURNAL"


class JournalStore(Protocol):
    """The journal as ``pooler runs``, ``pooler show`` and a finished run see it.

    ``pooler.journal.Journal`` (SQLite) and ``pooler.pg_journal.PgJournal`` both are one.
    """

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first."""

    def task(self, task_id: str) -> TaskRow | None:
        """One task, or None."""

    def answer(self, task_id: str) -> dict[str, Any] | None:
        """The answer recorded when the task last finished (already masked), or None."""

    def finish_task(self, task_id: str, answer: dict[str, Any]) -> None:
        """Record the task's answer (already masked) and its counts."""

    def where(self) -> str:
        """How messages name this journal (a path, or a URL without its password)."""

    def close(self) -> None: ...


def journal_spec(given: str | None, environ: Mapping[str, str]) -> str:
    """The journal a command uses: ``--journal``, else ``POOLER_JOURNAL``, else the default file."""
    return given or environ.get(JOURNAL_ENV) or str(default_journal_path(environ))


def open_sqlite(path: Path) -> JournalStore:
    """The SQLite journal at ``path``, for reading: a missing file is refused, not created."""
    from pooler.errors import JournalError  # noqa: PLC0415
    from pooler.journal.sqlite.journal import Journal  # noqa: PLC0415

    if not path.is_file():
        raise JournalError(f"no journal at {path} - nothing has run with it yet; "
                           "give the one 'pooler run --journal' wrote with --journal.")
    return _SqliteView(Journal(path))


class _SqliteView:
    """The SQLite journal as a ``JournalStore`` (it only lacks ``where``)."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        found: list[TaskRow] = self.journal.tasks(limit)
        return found

    def task(self, task_id: str) -> TaskRow | None:
        found: TaskRow | None = self.journal.task(task_id)
        return found

    def answer(self, task_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.journal.answer(task_id)
        return found

    def finish_task(self, task_id: str, answer: dict[str, Any]) -> None:
        self.journal.finish_task(task_id, answer)

    def where(self) -> str:
        return str(self.journal.path)

    def close(self) -> None:
        self.journal.close()
