"""The one place a ``--journal`` value picks its backend: a PostgreSQL URL opens the PostgreSQL
journal (loading psycopg, only then), anything else a SQLite file (``:memory:``: a journal that
lives as long as the object); and the stores' rate buckets either keeps (journal/storerate.py)."""

from __future__ import annotations

from pathlib import Path

from pooler.errors import JournalError
from pooler.journal.api import CallHistory
from pooler.journal.dburl import is_postgres
from pooler.journal.storerate import StoreBuckets
from pooler.journal.work import TaskJournal


def open_journal(spec: str) -> TaskJournal:
    """The journal ``spec`` names, for running tasks (a SQLite file is made when missing)."""
    if is_postgres(spec):
        from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415 - psycopg only when asked for

        return PgJournal(spec)
    from pooler.journal.sqlite.tasks import SqliteTaskJournal  # noqa: PLC0415

    return SqliteTaskJournal(spec)


def open_existing(spec: str) -> TaskJournal:
    """The journal ``spec`` names, for reading: a missing SQLite file is refused, not made."""
    if not is_postgres(spec) and not Path(spec).is_file():
        raise JournalError(f"no journal at {spec} - nothing has run with it yet; "
                           "give the one 'pooler run --journal' wrote with --journal.")
    return open_journal(spec)


def history_of(journal: TaskJournal) -> CallHistory:
    """The call history of ``journal``, which a task's HTML report draws."""
    return journal.history()


def open_store_buckets(spec: str) -> StoreBuckets:
    """The stores' rate buckets of the journal ``spec`` names (journal/storerate.py), on a
    connection of their own: a PostgreSQL journal's, else a SQLite file's, made when missing."""
    if is_postgres(spec):
        from pooler.journal.postgres.connector import PgConnector  # noqa: PLC0415 - psycopg only when asked for

        return StoreBuckets(PgConnector(spec))
    from pooler.journal.sqlite.journal import Journal  # noqa: PLC0415

    return StoreBuckets(Journal(spec))
