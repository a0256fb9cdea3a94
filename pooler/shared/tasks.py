"""Any journal's tasks, opened from a ``--journal`` value (or ``POOLER_JOURNAL``): the one place that
picks the backend for ``pooler runs``, ``pooler show`` and ``tool_pool {"task": T}``, which then read
every journal through ``pooler.journal.api.TaskView``."""

from __future__ import annotations

from pathlib import Path

from pooler.errors import JournalError
from pooler.journal.api import CallHistory, TaskView
from pooler.journal.dburl import is_postgres
from pooler.journal.sqlite.history import SqliteHistory
from pooler.journal.sqlite.journal import Journal
from pooler.run.taskview import SqliteTasks


def open_tasks(spec: str) -> TaskView:
    """The tasks of the journal ``spec`` names, for reading: a missing SQLite file is refused, not
    created."""
    if is_postgres(spec):
        from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415 - psycopg only when asked for
        from pooler.shared.answer import PgTasks  # noqa: PLC0415

        return PgTasks(PgJournal(spec))
    path = Path(spec)
    if not path.is_file():
        raise JournalError(f"no journal at {path} - nothing has run with it yet; "
                           "give the one 'pooler run --journal' wrote with --journal.")
    return SqliteTasks(Journal(path))


def history_of(view: TaskView) -> CallHistory:
    """The call history behind ``view``, which a task's HTML report draws."""
    if isinstance(view, SqliteTasks):
        return SqliteHistory(view.journal)
    from pooler.journal.postgres.history import PgHistory  # noqa: PLC0415
    from pooler.shared.answer import PgTasks  # noqa: PLC0415

    assert isinstance(view, PgTasks)
    return PgHistory(view.journal)
