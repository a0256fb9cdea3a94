"""What the one journal implementation asks of a database (procrastinate's split: the logic is
written once over this, each backend's connector is thin): its named queries run with named
parameters, rows read by their column names, one transaction at a time, the task's lock, and JSON
written and read as the backend keeps it.

A query is looked up by name in the backend's ``sql/queries.sql``; both backends give the same
names the same columns and parameters, and the dialects (placeholders, upserts, ``SKIP LOCKED``,
the clock, JSON types) differ only there and in the connector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

#: A query's named parameters.
Params = Mapping[str, Any]


class Row(Protocol):
    """A row read by its column names (``sqlite3.Row``, psycopg's ``dict_row``)."""

    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Iterable[str]: ...


class Connector(Protocol):
    """One connection to a journal's database, safe to share by threads: every method runs alone,
    and inside ``transaction()`` the thread that began it runs its statements in it."""

    def where(self) -> str:
        """How messages name this journal (a path, or a URL without its password)."""

    def one(self, name: str, params: Params | None = None) -> Row | None:
        """The first row of the query ``name``, or None."""

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        """Every row of the query ``name``, read whole: keep it small."""

    def batch(self, queries: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """Every row of each query, in turn, sent together where the database can (one round
        trip, not one a query): for queries the next does not need the rows of."""

    def finish(self, name: str, params: Params | None = None) -> list[Row]:
        """Every row of the statement that ends the transaction, committed with it (one round
        trip where the database can): nothing runs in the transaction after it."""

    def stream(self, name: str, params: Params | None = None) -> Iterator[Row]:
        """The rows of ``name`` one at a time, as the database sends them (a million calls never
        sit in memory whole); the connection is held until the last row is read."""

    def execute(self, name: str, params: Params | None = None) -> int:
        """The statement ``name``: the rows it changed."""

    def bulk(self, name: str) -> AbstractContextManager[Callable[[tuple[Any, ...]], None]]:
        """A bulk write of the statement ``name`` (a batch of executemany, or COPY), in the
        caller's transaction: the function this gives takes one row at a time, its values in the
        order of the statement's columns."""

    def transaction(self) -> AbstractContextManager[Connector]:
        """One transaction, committed when the block ends and rolled back when it raises; a
        transaction begun inside one is the same transaction."""

    def lock(self, task: str) -> None:
        """The task's lock, held to the end of the transaction (a SQLite write transaction holds
        the whole file already)."""

    def json_in(self, value: Any) -> Any:
        """``value`` as the database keeps JSON."""

    def json_out(self, value: Any) -> Any:
        """A JSON column's value as Python (None stays None)."""

    def close(self) -> None: ...
