"""A SQLite journal as the engine plans, joins, runs and answers a task in it: the one
implementation (``pooler.journal.tasks.Tasks``) over the file's connector (``journal.py``: one
connection behind a lock, the file made pooler's own and brought up to date)."""

from __future__ import annotations

from pathlib import Path

from pooler.journal.sqlite.journal import Journal
from pooler.journal.tasks import Tasks


class SqliteTaskJournal(Tasks):
    """Tasks planned as work rows in a SQLite file (or ``:memory:``); safe to share by threads.
    ``journal``: a path, or a ``Journal`` open already (this one closes it)."""

    def __init__(self, journal: Journal | Path | str) -> None:
        self.journal = journal if isinstance(journal, Journal) else Journal(journal)
        super().__init__(self.journal)

    def __enter__(self) -> SqliteTaskJournal:
        return self
