"""What a tool module is given and may return: ``Ctx``, ``Sql``, ``RawTable``.

A tool module holds one function per command, named like the command:
``def CmdAdd(ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]``. ``params`` are the fields
already checked, cast and with their defaults; the answer is a dict with ``result`` and maybe
``message``, ``detail``, ``tables``, ``files`` and keys of its own.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pooler.store.db import transaction

Fields = dict[str, Any]
Command = Callable[["Ctx", Fields], Any]
F = TypeVar("F", bound=Callable[..., Any])

_NOT_RECORDED = "_pooler_store_not_recorded"


def not_recorded(func: F) -> F:
    """Mark a command that adds no row to ``ops`` (one that only reads the ops themselves)."""
    setattr(func, _NOT_RECORDED, True)
    return func


def is_recorded(func: Callable[..., Any]) -> bool:
    return not getattr(func, _NOT_RECORDED, False)


class Sql:
    """A module's road to the database; it counts the queries and their time for ``debug``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.count = 0
        self.seconds = 0.0

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        t0 = time.perf_counter()
        try:
            return self.conn.execute(sql, params)
        finally:
            self.count += 1
            self.seconds += time.perf_counter() - t0

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        t0 = time.perf_counter()
        try:
            return self.conn.executemany(sql, rows)
        finally:
            self.count += 1
            self.seconds += time.perf_counter() - t0

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.execute(sql, params).fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        row = self.execute(sql, params).fetchone()
        return dict(row) if row is not None else None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with transaction(self.conn):
            yield


@dataclass
class Ctx:
    """The person of the session and the store, as a command sees them."""

    sql: Sql
    unit: str
    command: str
    token: str
    root: Path
    #: The rows of the attachments laid out for this call (also in the ``files`` field).
    files: list[dict[str, Any]] = field(default_factory=list)
    #: How long an order books (``--order-ms``).
    order_ms: int = 100


@dataclass(frozen=True)
class RawTable:
    """A table whose rows are already JSON (an array): a big table needs no dict per row."""

    rows: int
    json: bytes
