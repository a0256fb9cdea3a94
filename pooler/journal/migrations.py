"""A journal's schema as numbered migrations: ``NNNN_what.sql`` files beside each backend, read in
order, with the tables, functions and added columns each one makes (what a journal of its
version must hold).  The schema version is the last one's number, so it changes whenever the
schema does.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^(\d{4})_\w+\.sql$")
_TABLE = re.compile(r"^CREATE TABLE IF NOT EXISTS (\w+)", re.M | re.I)
_FUNCTION = re.compile(r"^CREATE OR REPLACE FUNCTION (\w+)\(", re.M | re.I)
_DROPPED = re.compile(r"^DROP FUNCTION IF EXISTS (\w+)\(", re.M | re.I)
_COLUMN = re.compile(r"^ALTER TABLE (\w+) ADD COLUMN (?:IF NOT EXISTS )?(\w+)", re.M | re.I)


@dataclass(frozen=True)
class Migration:
    """One numbered step of the schema, and what it makes."""

    number: int
    name: str
    sql: str
    tables: tuple[str, ...]
    functions: tuple[str, ...]
    #: ``(table, column)`` of each ``ALTER TABLE ... ADD COLUMN``.
    columns: tuple[tuple[str, str], ...]
    #: The functions of earlier migrations it drops (a journal of its version no longer has them).
    dropped: tuple[str, ...] = ()

    @property
    def makes(self) -> tuple[str, ...]:
        """Its tables, functions and added columns (``table.column``), by name."""
        return (*self.tables, *self.functions, *(f"{t}.{c}" for t, c in self.columns))

    def statements(self) -> list[str]:
        """The migration's statements one by one (SQLite runs one statement a call)."""
        out: list[str] = []
        buffer = ""
        for line in self.sql.splitlines(keepends=True):
            buffer += line
            if sqlite3.complete_statement(buffer):
                out.append(buffer.strip())
                buffer = ""
        return out


def read_migrations(folder: Path) -> list[Migration]:
    """The migrations of ``folder`` in order; their numbers run 1, 2, 3 ... without a gap."""
    found: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise RuntimeError(f"{path}: a migration is named NNNN_what.sql")
        sql = path.read_text(encoding="utf-8")
        found.append(Migration(int(match[1]), path.name, sql, tuple(_TABLE.findall(sql)),
                               tuple(_FUNCTION.findall(sql)), tuple(_COLUMN.findall(sql)),
                               tuple(_DROPPED.findall(sql))))
    numbers = [m.number for m in found]
    if not found or numbers != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{folder}: the migrations are numbered {numbers}, not 1 to {len(found)}")
    return found


def promised(migrations: list[Migration]) -> list[str]:
    """The functions a journal of the last migration's version holds: those made, but for those a
    later migration dropped."""
    gone = {name for m in migrations for name in m.dropped}
    return [f for m in migrations for f in m.functions if f not in gone]
