"""Rows written into SQLite a batch at a time, each batch one statement over a JSON array of its
rows, by a thread of their own while the caller makes the next: the SQLite journal's bulk writes (a
plan of a million work rows) and the key set's temporary database (a million keys).

Through ``executemany`` a row costs a bind of each of its values, with the interpreter held; a
batch as one ``INSERT ... SELECT ... FROM json_each(?)`` binds one value, and SQLite runs the whole
statement with the interpreter let go, so the thread's batch is written while the caller reads and
checks the next rows.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Callable
from typing import Any

Batch = list[tuple[Any, ...]]


class BatchWriter:
    """A bulk write's rows gathered into batches that a thread of its own writes while the caller
    makes the next: SQLite lets the interpreter go while it runs a statement, so a batch written as
    one (``json_rows``) costs the caller little more than making it.  One batch waits at most, so
    three are held at most.  The connection is the thread's while the block lasts: its owner waits
    for the batches handed over (``idle``) before a statement of its own.  A batch that fails is
    raised to the caller at its next row, or as the block ends; the block's own error stops the
    thread first (the transaction is rolled back after).  A write of one batch or less takes no
    thread."""

    def __init__(self, size: int, sql: str, execute: Callable[[str, tuple[str]], object]) -> None:
        self._size, self._sql, self._execute = size, sql, execute
        self._batch: Batch = []
        self._queue: queue.Queue[tuple[str, tuple[str]] | None] = queue.Queue(1)
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    def __enter__(self) -> BatchWriter:
        return self

    def add(self, row: tuple[Any, ...]) -> None:
        batch = self._batch
        batch.append(row)
        if len(batch) >= self._size:
            self._batch = []
            self._hand(batch)

    def _hand(self, batch: Batch) -> None:
        if self._failed is not None:
            raise self._failed
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pooler-batches", daemon=True)
            self._thread.start()
        # Made here, not on the thread: the thread would wait for the interpreter at every turn
        # the caller's thread takes it back (every 5 ms), and write a batch in several times the
        # time it takes to make.
        self._queue.put(json_rows(self._sql, batch))

    def _run(self) -> None:
        while (statement := self._queue.get()) is not None:
            try:
                if self._failed is None:
                    self._execute(*statement)
            except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
                self._failed = exc
            finally:
                self._queue.task_done()

    def idle(self) -> None:
        """Wait for the batches handed over to be written."""
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._queue.join()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None and self._failed is None:
            # The batches still waiting are not written: the transaction they are in is rolled back.
            self._failed = exc
        try:
            if exc is None and self._batch:
                if self._thread is None:
                    self._execute(*json_rows(self._sql, self._batch))
                else:
                    self._hand(self._batch)
        finally:
            self._batch = []
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()
                self._thread = None
        if exc is None and self._failed is not None:
            raise self._failed


#: A ``?`` parameter of a statement, or a quoted text or name it may hold (skipped whole).
_PARAM = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?")
#: ``INSERT INTO t (columns) VALUES (values)``, the form of a bulk write's statement.
_INSERT = re.compile(r"^(INSERT INTO [^(]+\([^)]*\)) VALUES \((.*)\)$", re.S)
#: The integers a statement takes as written: SQLite's own (a larger one is bound, and refused there).
_INT_RANGE = range(-(2**63), 2**63)
_ROWS_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False,
                              allow_nan=False).encode


def json_rows(sql: str, rows: list[tuple[Any, ...]]) -> tuple[str, tuple[str]]:
    """A batch of a bulk insert (``INSERT INTO t (...) VALUES (?, ...)``, a value of the row for
    each ``?``, in order) as one statement over a JSON array of its rows (``json_each``), and that
    array: one value bound, not one a column a row (binding is most of what a row costs through
    executemany), and one statement during which SQLite lets the interpreter go.  The values every
    row gives alike (a plan of a million rows of one step gives the same task, step, state and
    deps in each) are written into the statement as SQL literals, not repeated in the array.  The
    values are text, integers, booleans (1 and 0 as SQLite binds them) and NULLs."""
    shape = _INSERT.match(sql)
    if shape is None:
        raise ValueError(f"not an INSERT ... VALUES (...) statement: {sql}")
    columns = list(zip(*rows, strict=True))
    fixed = {i: literal for i, column in enumerate(columns)
             if len(rows) > 1 and column.count(column[0]) == len(rows)
             and (literal := _literal(column)) is not None}
    place, kept = iter(range(len(columns))), iter(range(len(columns)))

    def written(match: re.Match[str]) -> str:
        if match.group(0) != "?":
            return match.group(0)
        i = next(place)
        return fixed[i] if i in fixed else f"json_extract(value, '$[{next(kept)}]')"

    values = _PARAM.sub(written, shape.group(2))
    left = [column for i, column in enumerate(columns) if i not in fixed]
    array = _ROWS_JSON(list(zip(*left, strict=True)) if left else [()] * len(rows))
    return f"{shape.group(1)} SELECT {values} FROM json_each(?)", (array,)


def _literal(column: tuple[Any, ...]) -> str | None:
    """The literal of a column whose values are equal: None where they differ in type (1, True
    and 1.0 are equal, but are different values)."""
    value = column[0]
    if value is None:
        return "NULL"
    if type(value) is str:
        return "'" + value.replace("'", "''") + "'" if "\x00" not in value else None
    if type(value) in (int, bool) and value in _INT_RANGE and set(map(type, column)) == {type(value)}:
        return str(int(value))
    return None
