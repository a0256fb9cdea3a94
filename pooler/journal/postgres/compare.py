"""A step's compare in a PostgreSQL journal: the rows of both sides written by ``COPY``, and those
of the file that are sent streamed back (``pooler/journal/comparerows.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from pooler.journal.postgres.schema import SQL

if TYPE_CHECKING:
    from pooler.journal.postgres.journal import PgJournal

#: The types of a compare row's values, in COPY's order.
TYPES = ("text", "int4", "int2", "int8", "text", "text")


class PgCompareRows:
    """``CompareRows`` on the journal's connection."""

    def __init__(self, journal: PgJournal) -> None:
        self.journal = journal

    def put(self, scope: str, num: int, side: int, rows: Iterable[tuple[int, str, str]]) -> int:
        counted = 0
        with self.journal.transaction() as conn, conn.cursor().copy(SQL["compare_copy"]) as copy:
            copy.set_types(TYPES)
            for idx, match, digest in rows:
                copy.write_row((scope, num, side, idx, match, digest))
                counted += 1
        return counted

    def sent(self, scope: str, num: int) -> Iterator[tuple[int, str]]:
        for idx, kind in self.journal.stream(SQL["compare_sent"], (scope, num)):
            yield int(idx), str(kind)

    def clear(self, scope: str) -> None:
        self.journal.query(SQL["compare_clear"], (scope,))
