"""The PostgreSQL journal's connector (``pooler.journal.connector.Connector``): one autocommit
connection behind a lock, the named queries of ``sql/queries.sql`` run with named parameters and
read by column name, COPY for bulk writes, the task's advisory lock, JSON as ``jsonb``.  Every text
told about the database passes through ``DbText``: no password in any message."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from pooler.journal.connector import Guarded, Params, Row
from pooler.journal.dburl import DbText
from pooler.journal.postgres.schema import SQL, check_version, connect

#: The types of the columns a COPY writes, told to it once (without them every value of every row
#: is looked at for its type), by statement.  A work row's data and deps come as their COPY text
#: (JSON, ``{1,2}``), made once by the planner.
COPY_TYPES = {"insert_work": ("text", "int4", "int4", "text", "int4", "int4", "int4", "text", "text", "text",
                            "text", "bool", "text")}

#: How the journal's session plans its statements, set once a connection.  psycopg prepares a
#: statement run a few times; the server then plans it once (a generic plan) only when it judges
#: that plan as cheap as one made for each run's values.  A claim's ``LIMIT %(take)s`` fails that
#: judgement every time (a generic plan counts on a tenth of the task's rows, a claim takes one), so
#: a sequential call's claim was planned again on every call, half a millisecond of the server's
#: time: the plans are the same, each statement reaching the work rows by the task's index.  With
#: JIT, a generic plan of a task of a million rows would cost enough to be compiled on every run.
SESSION = ("SELECT set_config('plan_cache_mode', 'force_generic_plan', false), "
           "set_config('jit', 'off', false)")


class PgConnector(Guarded):
    """One connection to the journal at ``url``, its schema version checked; safe to share by
    threads."""

    def __init__(self, url: str, *, check: bool = True) -> None:
        super().__init__()
        self.url = url
        self.text = DbText(url)
        # Connected first: without psycopg, connect() says how to install it.
        self.conn = connect(url)
        import psycopg  # noqa: PLC0415
        from psycopg.rows import dict_row  # noqa: PLC0415
        from psycopg.types.json import Json  # noqa: PLC0415

        self.error, self._rows, self._json = psycopg.Error, dict_row, Json
        self._tuples = psycopg.pq.ExecStatus.TUPLES_OK
        #: The cursors statements run on, made once and used again (a batch uses one a statement);
        #: the plain one runs what gives no rows (BEGIN, the task's lock, COMMIT).
        self._cursors: list[Any] = []
        self._plain = self.conn.cursor()
        self._depth = 0
        #: What a transaction has still to send before its first statement (its BEGIN, the task's
        #: lock), sent with that statement in one round trip (psycopg's pipeline mode): a call's
        #: outcome costs one round trip, not three.
        self._pending: list[tuple[str, Params]] = []
        #: Whether the transaction committed with its last statement (``finish``).
        self._finished = False
        try:
            with self.guard():
                self.conn.execute(SESSION)
                if check:
                    check_version(self.conn, url)
        except BaseException:
            self.conn.close()
            raise

    def where(self) -> str:
        return self.text.shown

    def told(self, exc: Exception) -> str:
        return self.text.error(exc)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def heartbeat(self) -> PgConnector:
        """A connection of its own for a lease's heartbeat: a renewal never waits behind a claim."""
        return PgConnector(self.url, check=False)

    def _send(self, statements: Sequence[tuple[Any, str, Params | None]] = (), *,
              commit: bool = False) -> None:
        """What the transaction has still to send, then each statement on its cursor (and the
        COMMIT), in one round trip; their results are read once it returns."""
        if self._finished:
            raise RuntimeError("a statement after the one that ended its transaction")
        pending, self._pending = self._pending, []
        with self.conn.pipeline():
            for text, args in pending:
                self._plain.execute(text, args)
            for cur, sql, params in statements:
                cur.execute(sql, params or {})
            if commit:
                self._plain.execute("COMMIT")
        self._finished = commit

    def _reused(self, n: int) -> list[Any]:
        """``n`` cursors for statements whose rows are read before the next statement runs."""
        while len(self._cursors) < n:
            self._cursors.append(self.conn.cursor(row_factory=self._rows))
        return self._cursors[:n]

    @contextmanager
    def _cursor(self, name: str, params: Params | None, *, commit: bool = False) -> Iterator[Any]:
        with self.guard():
            (cur,) = self._reused(1)
            if self._pending or self._finished or commit:
                self._send([(cur, SQL[name], params)], commit=commit)
                yield cur
            else:
                yield cur.execute(SQL[name], params or {})

    def _gave_rows(self, cur: Any) -> bool:
        # Not ``description``: it makes an object a column, each time it is read.
        result = cur.pgresult
        return result is not None and result.status == self._tuples

    def _fetched(self, cur: Any) -> list[Any]:
        return list(cur.fetchall()) if self._gave_rows(cur) else []

    def one(self, name: str, params: Params | None = None) -> Row | None:
        with self._cursor(name, params) as cur:
            found: Row | None = cur.fetchone() if self._gave_rows(cur) else None
            return found

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        with self._cursor(name, params) as cur:
            return self._fetched(cur)

    def batch(self, queries: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """Each query's rows, the queries (and what the transaction has pending) sent in one
        round trip (psycopg's pipeline mode)."""
        with self.guard():
            cursors = self._reused(len(queries))
            self._send([(cur, SQL[name], params)
                        for cur, (name, params) in zip(cursors, queries, strict=True)])
            return [self._fetched(cur) for cur in cursors]

    def finish(self, name: str, params: Params | None = None) -> list[Row]:
        """Every row of the statement that ends the transaction, its COMMIT sent with it (one
        round trip, not two); inside a transaction begun around this one, as ``all``."""
        with self._lock, self._cursor(name, params, commit=self._depth == 1) as cur:
            return self._fetched(cur)

    def stream(self, name: str, params: Params | None = None) -> Iterator[Row]:
        with self.guard():
            if self._pending or self._finished:
                # A stream has no pipeline mode: what is pending goes first.
                self._send()
            yield from self.conn.cursor(row_factory=self._rows).stream(SQL[name], params or {})

    def execute(self, name: str, params: Params | None = None) -> int:
        with self._cursor(name, params) as cur:
            return int(cur.rowcount)

    @contextmanager
    def bulk(self, name: str) -> Iterator[Callable[[tuple[Any, ...]], None]]:
        """Rows by COPY.  A block that raises ends the COPY with a word of its own: the server's
        log never gets the exception's text (a refused check's problems may quote a row)."""
        failed: BaseException | None = None
        with self._lock:
            if self._pending or self._finished:
                # COPY has no pipeline mode: what is pending goes first.
                with self.guard():
                    self._send()
            try:
                with self.conn.cursor().copy(SQL[name]) as copy:
                    if name in COPY_TYPES:
                        copy.set_types(COPY_TYPES[name])
                    try:
                        yield copy.write_row
                    except BaseException as exc:  # noqa: BLE001 - raised again below, as it was
                        failed = exc
                        raise _Abandoned("the rows were not written") from None
            except _Abandoned:
                assert failed is not None
                raise failed from None

    @contextmanager
    def transaction(self) -> Iterator[PgConnector]:
        with self._lock:
            if self._depth:
                # Begun by this thread (the lock is its own): the same transaction.
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            self._depth += 1
            # BEGIN waits for the transaction's first statement, to go with it; a transaction
            # that sent nothing has nothing to commit.
            self._pending = [("BEGIN", {})]
            try:
                with self.guard():
                    yield self
                    if not self._pending and not self._finished:
                        self._plain.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            finally:
                self._pending = []
                self._finished = False
                self._depth -= 1

    def _rollback(self) -> None:
        if self._pending or self._finished:
            return
        # A connection that is gone rolled the transaction back as it went; the error that
        # ended the transaction is the one told.
        with suppress(self.error):
            self.conn.execute("ROLLBACK")

    def lock(self, task: str) -> None:
        with self._lock:
            if self._pending:
                # Sent with the transaction's first statement, before it.
                self._pending.append((SQL["lock_task"], {"task": task}))
            else:
                self.execute("lock_task", {"task": task})

    def json_in(self, value: Any) -> Any:
        # JSON, not JSONB: an entry keeps the order of its keys (a jsonb column casts it).
        return None if value is None else self._json(value)

    @staticmethod
    def json_out(value: Any) -> Any:
        """``jsonb`` comes back read already."""
        return value

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.guard():
            return self._fetched(self.conn.execute(sql, tuple(args)))


class _Abandoned(Exception):
    """What a COPY is ended with when the block writing its rows raised."""
