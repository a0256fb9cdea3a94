"""A step's compare in a SQLite journal: the rows of both sides written in one transaction each,
and those of the file that are sent read back by a cursor (``pooler/journal/comparerows.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal


class SqliteCompareRows:
    """``CompareRows`` on the journal's one connection."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def put(self, scope: str, num: int, side: int, rows: Iterable[tuple[int, str, str]]) -> int:
        counted = 0

        def values() -> Iterator[tuple[str, int, int, int, str, str]]:
            nonlocal counted
            for idx, match, digest in rows:
                counted += 1
                yield scope, num, side, idx, match, digest

        with self.journal.transaction() as db:
            db.executemany(SQL["compare_put"], values())
        return counted

    def sent(self, scope: str, num: int) -> Iterator[tuple[int, str]]:
        for idx, kind in self.journal.cursor(SQL["compare_sent"], (scope, num)):
            yield int(idx), str(kind)

    def clear(self, scope: str) -> None:
        self.journal.change(SQL["compare_clear"], (scope,))
