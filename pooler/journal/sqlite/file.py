"""The journal's file as pooler's own: another program's SQLite file told apart before a byte is
written to it, an older journal brought up to date by the numbered migrations in
``sql/migrations`` (the rule is ``pooler.journal.schema``'s).
"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

from pooler.errors import JournalError
from pooler.journal.migrations import Migration, read_migrations
from pooler.journal.queries import read_queries

#: The journal's SQL, ``sql/migrations/NNNN_what.sql``; its version is ``PRAGMA user_version``.
MIGRATIONS = read_migrations(Path(__file__).with_name("sql") / "migrations")
#: The journal's queries, by name (``sql/queries.sql``).
SQL = read_queries(Path(__file__).with_name("sql") / "queries.sql")
SCHEMA_VERSION = MIGRATIONS[-1].number
_ADD_COLUMN = re.compile(r"^(?:--[^\n]*\n)*ALTER TABLE (\w+) ADD COLUMN (\w+)", re.I)
#: ``PRAGMA application_id`` of a pooler journal ("pool").
APPLICATION_ID = 0x706F6F6C
#: The tables of a journal made before it carried its application id, and columns only pooler's have.
_TABLES = frozenset({"tasks", "calls"})
_OLD_COLUMNS = frozenset({"tasks.pool_file", "tasks.runs", "calls.step_id", "calls.in_doubt",
                          "calls.round"})


def own_file(db: sqlite3.Connection, target: str) -> bool:
    """Refuse a SQLite file that is not a pooler journal (WAL mode and pooler's tables would change
    another program's database); True when the file is a new or older journal that ``mark`` must
    make pooler's."""
    # One read transaction: a pooler opening the same new file at once marks it with its tables, in
    # one write transaction, so this reads either an empty file or a marked journal.
    db.execute("BEGIN")
    try:
        app = int(db.execute("PRAGMA application_id").fetchone()[0])
        tables = {str(r[0]) for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        columns = {f"{t}.{r[1]}" for t in sorted(tables & _TABLES)
                   for r in db.execute(f"PRAGMA table_info({t})")}
        ours = tables == _TABLES and columns >= _OLD_COLUMNS
    finally:
        db.execute("COMMIT")
    if app == APPLICATION_ID or (app == 0 and (not tables or ours)):
        return app == 0
    held = f"it holds the tables {', '.join(sorted(tables))}" if tables else \
        f"its application id is {app:#x}"
    raise JournalError(f"{target} is not a pooler journal ({held}) - pooler leaves it as it is; "
                       "give a file of pooler's own with --journal.")


def mark(db: sqlite3.Connection) -> None:
    """The file marked as pooler's, inside the caller's write transaction: in WAL mode and with the
    tables, a write of its own in the rollback journal would cost four more disk syncs."""
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def wal(db: sqlite3.Connection, seconds: float) -> None:
    """The file in WAL mode.  Processes switching a new file at the same moment may be told
    "database is locked" at once, past SQLite's busy timeout: tried again until ``seconds`` end."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
        else:
            return


class Catalog:
    """The file's version (``PRAGMA user_version``), its tables and columns, for the schema's rule
    (``pooler.journal.schema``), inside the caller's write transaction."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self.db.execute(f"PRAGMA table_info({table})")}

    def lacking(self, migrations: list[Migration]) -> set[str]:
        tables = {str(r[0]) for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {t for m in migrations for t in m.tables if t not in tables} | {
            f"{t}.{c}" for m in migrations for t, c in m.columns if c not in self.columns(t)}

    def apply(self, migration: Migration, version: int) -> None:
        # An ADD COLUMN has no IF NOT EXISTS on SQLite: a column the file has is left as it is.
        for statement in migration.statements():
            added = _ADD_COLUMN.match(statement)
            if not (added and added[2] in self.columns(added[1])):
                self.db.execute(statement)
        self.db.execute(f"PRAGMA user_version = {version}")
