"""What the one journal implementation asks of a database (procrastinate's split: the logic is
written once over this, each backend's connector is thin): its named queries run with named
parameters, rows read by their column names, one transaction at a time, the task's lock, and JSON
written and read as the backend keeps it.

A query is looked up by name in the backend's ``sql/queries.sql``; both backends give the same
names the same columns and parameters, and the dialects (placeholders, upserts, ``SKIP LOCKED``,
the clock, JSON types) differ only there and in the connector.  What every connector does the same
way is written once here (``Guarded``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Generic, Protocol, TypeVar

from pooler.errors import JournalError
from pooler.pool.batches import BatchWriter

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
        """A bulk write of the statement ``name`` (batches of one statement each, or COPY), in the
        caller's transaction: the function this gives takes one row at a time, its values in the
        order of the statement's columns."""

    def transaction(self) -> AbstractContextManager[Connector]:
        """One transaction, committed when the block ends and rolled back when it raises; a
        transaction begun inside one is the same transaction."""

    def lock(self, task: str) -> None:
        """The task's lock, held to the end of the transaction (a SQLite write transaction holds
        the whole file already)."""

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a statement of SQL text in the backend's dialect, read whole (a look at the
        journal in a test)."""

    def json_in(self, value: Any) -> Any:
        """``value`` as the database keeps JSON."""

    def json_out(self, value: Any) -> Any:
        """A JSON column's value as Python (None stays None)."""

    def close(self) -> None: ...


_Self = TypeVar("_Self", bound="Guarded")


class Guarded:
    """What every connector does the same way: one connection behind a lock (a thread's
    transaction is its own: the lock is re-entrant), the driver's ``error`` told as the journal's."""

    #: The driver's error, which ``guard`` tells as a ``JournalError``.
    error: type[Exception] = Exception

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._guard = _Guard(self)

    def where(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        raise NotImplementedError

    def batch(self, queries: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """Each query's rows, in turn (a database that sends them together says so)."""
        return [self.all(name, params) for name, params in queries]

    def finish(self, name: str, params: Params | None = None) -> list[Row]:
        """Every row of ``name``; the transaction commits as its block ends (a database that
        commits with the statement says so)."""
        return self.all(name, params)

    def told(self, exc: Exception) -> str:
        """How a message quotes the driver's error."""
        return str(exc)

    def failed(self, exc: Exception) -> JournalError:
        return JournalError(f"the journal {self.where()} failed: {self.told(exc)}")

    @contextmanager
    def batches(self, size: int, sql: str, execute: Callable[[str, tuple[str]], object]
                ) -> Iterator[Callable[[tuple[Any, ...]], None]]:
        """A bulk write whose batches a thread writes (``BatchWriter``), under the connector's
        lock, the connection lent to that thread: a statement of the caller's meanwhile waits for
        the batches handed over."""
        with self.guard(), BatchWriter(size, sql, execute) as writer:
            # The guard that waits, for this block alone: a statement's guard costs nothing more.
            plain, self._guard = self._guard, _Waiting(self, writer)
            try:
                yield writer.add
            finally:
                self._guard = plain

    def guard(self) -> _Guard:
        """The connection, alone; its errors told as the journal's (never with their chain: a
        driver's may quote a password)."""
        return self._guard


class _Guard:
    """``Guarded.guard``: a plain context manager, made once a connector, where a generator's
    would be made anew each time (a call goes through a dozen of them)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: Guarded) -> None:
        self._owner = owner

    def __enter__(self) -> None:
        self._owner._lock.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        owner = self._owner
        owner._lock.release()
        if exc is not None and isinstance(exc, owner.error):
            raise owner.failed(exc) from None


class _Waiting(_Guard):
    """The guard while a bulk write's thread has the connection: a statement of the caller's
    waits for the batches handed over first."""

    __slots__ = ("_writer",)

    def __init__(self, owner: Guarded, writer: BatchWriter) -> None:
        super().__init__(owner)
        self._writer = writer

    def __enter__(self) -> None:
        super().__enter__()
        try:
            self._writer.idle()
        except BaseException:
            self._owner._lock.release()
            raise


_Begun = TypeVar("_Begun", bound="Begins")


class Begins(Protocol):
    """A connector whose driver begins and ends a transaction by statement (SQLite)."""

    @property
    def error(self) -> type[Exception]: ...

    @property
    def _lock(self) -> threading.RLock: ...

    def guard(self) -> _Guard: ...

    def failed(self, exc: Exception) -> JournalError: ...

    def active(self) -> bool:
        """Whether a transaction is open on the connection."""

    def begin(self) -> None: ...

    def end(self, commit: bool) -> None:
        """COMMIT, or ROLLBACK."""


class Transaction(Generic[_Begun]):
    """``transaction()`` of such a connector: a plain context manager (a call's transaction goes
    through one), giving the connector; one begun inside another by the same thread is that one."""

    __slots__ = ("_db", "_nested")

    def __init__(self, db: _Begun) -> None:
        self._db = db
        self._nested = False

    def __enter__(self) -> _Begun:
        db = self._db
        db.guard().__enter__()
        try:
            # A connection closed meanwhile (a lease's last renewal as its run ends) fails here as
            # the journal does, not with the driver's own error.
            self._nested = db.active()
            if not self._nested:
                db.begin()
        except BaseException as exc:
            self._end(exc)
            raise
        return db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._end(exc)

    def _end(self, exc: BaseException | None) -> None:
        """Commit (or, on the caller's error or the journal's, roll back) a transaction this one
        began, and let the connection go; the driver's error told as the journal's."""
        db = self._db
        try:
            if not self._nested and db.active():
                if exc is None:
                    try:
                        db.end(commit=True)
                    except BaseException:
                        if db.active():
                            db.end(commit=False)
                        raise
                else:
                    # The journal's error, or the caller's block's (a data file broken while its
                    # plan was written).
                    db.end(commit=False)
        except db.error as failure:
            db._lock.release()
            raise db.failed(failure) from None
        except BaseException:
            db._lock.release()
            raise
        db._lock.release()
        if exc is not None and isinstance(exc, db.error):
            raise db.failed(exc) from None
