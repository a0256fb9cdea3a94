"""SQLite for the reference store: its tables, and a pool of connections in WAL mode."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pooler.errors import InputError

#: The store's own tables; the tools are modules over them (a tool may add its own with SCHEMA).
SCHEMA = """
CREATE TABLE IF NOT EXISTS currency (
    id INTEGER PRIMARY KEY AUTOINCREMENT, skey TEXT NOT NULL DEFAULT '', name TEXT NOT NULL,
    multiplex REAL NOT NULL DEFAULT 1, division INTEGER NOT NULL DEFAULT 0, pos INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS goods (
    id INTEGER PRIMARY KEY AUTOINCREMENT, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
    price REAL NOT NULL DEFAULT 0, curr_id INTEGER);
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT, contract TEXT NOT NULL, qty INTEGER NOT NULL,
    created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files_store (
    id INTEGER PRIMARY KEY AUTOINCREMENT, elem_id INTEGER NOT NULL, kind_key TEXT NOT NULL,
    file_name TEXT NOT NULL DEFAULT '', path TEXT NOT NULL, real_name TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0, pos INTEGER NOT NULL, created TEXT NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS ops (
    id INTEGER PRIMARY KEY AUTOINCREMENT, unit TEXT NOT NULL, command TEXT NOT NULL,
    params TEXT NOT NULL, idempotency_key TEXT, time TEXT NOT NULL, traceparent TEXT);
CREATE TABLE IF NOT EXISTS idempotency (
    owner TEXT NOT NULL, key TEXT NOT NULL, status INTEGER NOT NULL, content_type TEXT NOT NULL,
    body BLOB NOT NULL, created TEXT NOT NULL, PRIMARY KEY (owner, key));
"""

#: How long a writer waits for another one before SQLite gives up; calls are short, so this is generous.
BUSY_TIMEOUT_MS = 15000


#: Columns added to the store's tables since their first version: a ``--db`` written by an older
#: store gets them when it is opened, and its rows keep their values (the new column is null).
ADDED_COLUMNS = (("ops", "traceparent", "TEXT"),)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a database an older store wrote up to this store's tables."""
    for table, column, kind in ADDED_COLUMNS:
        have = {str(name) for (name,) in conn.execute("SELECT name FROM pragma_table_info(?)", (table,))}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


class Database:
    """A pool of connections to one SQLite file; each call borrows one for its whole length."""

    def __init__(self, path: Path, extra_schemas: tuple[str, ...] = ()) -> None:
        self.path = path
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._open()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA + "".join(extra_schemas))
            migrate(conn)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot open the store's database {path}: {exc} - pass --db a writable file",
                             file=str(path)) from exc
        self._idle.append(conn)

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: every statement commits by itself unless a transaction is opened,
        # so a slow command never holds the write lock longer than its own statements.
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """Borrow a connection; it goes back to the pool afterwards."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.rollback()
            with self._lock:
                self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back if the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
