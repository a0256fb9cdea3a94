"""What a journal offers a step's compare: the store's rows and the file's rows put side by side in
``compare_rows``, and the file's rows that differ read back, so a million rows are matched by the
database and never held in memory (``pooler/run/compare.py`` classifies with it).  Written once over
the journal's connector: the rows go in by its bulk write (batches of one statement on SQLite, COPY on
PostgreSQL) and come back streamed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pooler.journal.connector import Connector

#: The side of a compare's row: a row of the store's table, or a row of the step's data file.
STORE, FILE = 0, 1


class CompareRows:
    """The rows of compares in a journal, under a scope of their own (the task being planned)."""

    def __init__(self, db: Connector) -> None:
        self.db = db

    def put(self, scope: str, num: int, side: int, rows: Iterable[tuple[int, str, str]]) -> int:
        """Rows of one side of step ``num``'s compare, each ``(idx, match, digest)``, written in one
        transaction; how many."""
        counted = 0
        with self.db.transaction() as db, db.bulk("compare_put") as write:
            for idx, match, digest in rows:
                write((scope, num, side, idx, match, digest))
                counted += 1
        return counted

    def sent(self, scope: str, num: int) -> Iterator[tuple[int, str]]:
        """The file's rows that are sent, in no order: ``(idx, "new" or "changed")``."""
        for row in self.db.stream("compare_sent", {"scope": scope, "num": num}):
            yield int(row["idx"]), str(row["kind"])

    def clear(self, scope: str) -> None:
        """Every row of the scope, dropped."""
        self.db.execute("compare_clear", {"scope": scope})
