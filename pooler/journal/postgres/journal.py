"""The journal on PostgreSQL: the one implementation (``pooler.journal.tasks.Tasks``) over the
database's connector (``connector.py``), and a lease's heartbeat on a connection of its own."""

from __future__ import annotations

from pooler.journal.postgres.connector import PgConnector
from pooler.journal.tasks import Tasks


class PgJournal(Tasks):
    """Tasks in a PostgreSQL database, over one connection behind a lock; safe to share by threads."""

    def __init__(self, url: str) -> None:
        self.pg = PgConnector(url)
        super().__init__(self.pg)

    def __enter__(self) -> PgJournal:
        return self

    def heartbeat(self) -> PgConnector:
        """A connection of its own: a renewal never waits behind a claim."""
        return self.pg.heartbeat()
