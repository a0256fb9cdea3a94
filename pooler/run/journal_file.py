"""The journal's file as pooler's own: another program's SQLite file told apart before a byte is
written to it, an older journal brought up to date, and which process on which machine makes a run.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

from pooler.errors import JournalError

#: ``PRAGMA application_id`` of a pooler journal ("pool").
APPLICATION_ID = 0x706F6F6C
#: The tables of a journal made before it carried its application id, and columns only pooler's have.
_TABLES = frozenset({"tasks", "calls"})
_OLD_COLUMNS = frozenset({"tasks.pool_file", "tasks.runs", "calls.step_id", "calls.in_doubt",
                          "calls.round"})


def own_file(db: sqlite3.Connection, target: str) -> None:
    """Refuse a SQLite file that is not a pooler journal (WAL mode and pooler's tables would change
    another program's database); mark a new or older journal as pooler's."""
    # One read transaction: a pooler opening the same new file at once writes its id first.
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
        if app == 0:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        return
    held = f"it holds the tables {', '.join(sorted(tables))}" if tables else \
        f"its application id is {app:#x}"
    raise JournalError(f"{target} is not a pooler journal ({held}) - pooler leaves it as it is; "
                       "give a file of pooler's own with --journal.")


def upgrade(db: sqlite3.Connection) -> None:
    """Columns added since the journal was made: a task's store."""
    columns = {str(r[1]) for r in db.execute("PRAGMA table_info(tasks)")}
    if "store" not in columns:
        db.execute("ALTER TABLE tasks ADD COLUMN store TEXT")


def host() -> str:
    """This machine since its last boot: a pid names one process only within it."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()} {boot}".strip()


def alive(pid: int) -> bool:
    """Whether a process of this machine is still there."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
