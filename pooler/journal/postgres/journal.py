"""The journal on PostgreSQL: the one implementation (``pooler.journal.tasks.Tasks``) over the
database's connector (``connector.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pooler.journal.connector import Connector
from pooler.journal.postgres.connector import PgConnector
from pooler.journal.tasks import Tasks


class PgJournal(Tasks):
    """Tasks in a PostgreSQL database: the one implementation (``pooler.journal.tasks.Tasks``) over
    one connection behind a lock, safe to share by threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        connector = PgConnector(url)
        super().__init__(connector)
        #: Every text told about this database passes through it: no password in any message.
        self.text = connector.text
        self.conn = connector.conn
        self._lock = connector._lock
        self.pg = connector

    def __enter__(self) -> PgJournal:
        return self

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement of SQL text; a database that cannot be reached is a ``JournalError``."""
        import psycopg  # noqa: PLC0415

        with self._lock:
            try:
                cur = self.conn.execute(sql, tuple(args))
                return list(cur.fetchall()) if cur.description is not None else []
            except psycopg.Error as exc:
                raise self.pg.failed(exc) from None

    def heartbeat(self) -> Connector:
        """A connection of its own: a renewal never waits behind a claim."""
        return self.pg.heartbeat()
