"""The journal's timeline columns: when each call left and was answered, in which concurrent slot,
in which ``serialize_on`` group, and one row per run of a task (store, batch options, steps).

They were added after the first journals were written, so ``migrate`` adds them to a journal that
lacks them; nothing else changes, and a journal without them still opens (its report falls back
to the older ``sent_at``/``done_at`` stamps and works the slots out from the times).

Schema additions (a PostgreSQL journal needs the same):

- ``calls.lane INTEGER`` the slot, 0 to width - 1; NULL for a call never sent
- ``calls.serial TEXT`` the call's ``serialize_on`` value (JSON text, masked); NULL without one
- ``calls.sent_ms INTEGER`` when the request left, milliseconds since the epoch (UTC)
- ``calls.done_ms INTEGER`` when its answer (or its failure) came back; NULL while unanswered
- ``task_runs (task TEXT, run INTEGER, started_ms INTEGER, store TEXT, mode TEXT, width INTEGER,
  serialize_on TEXT, steps TEXT, again TEXT, PRIMARY KEY (task, run))`` with ``steps`` a JSON list
  of ``{"num", "name", "unit", "command", "over_rows", "key"}`` and ``again`` a JSON list of the
  options that name where the run went (``--store`` as given, ``--out``, ``--journal``)
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pooler.client.http import ToolRunClient
    from pooler.pool.model import Pool

_CALL_COLUMNS = (("lane", "INTEGER"), ("serial", "TEXT"), ("sent_ms", "INTEGER"), ("done_ms", "INTEGER"))

_RUNS = """
CREATE TABLE IF NOT EXISTS task_runs (
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    started_ms INTEGER NOT NULL,
    store TEXT,
    mode TEXT,
    width INTEGER,
    serialize_on TEXT,
    steps TEXT,
    again TEXT,
    PRIMARY KEY (task, run)
)
"""

RECORD_RUN = ("INSERT OR REPLACE INTO task_runs (task, run, started_ms, store, mode, width, serialize_on, "
              "steps, again) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


def epoch_ms() -> int:
    """Now, in whole milliseconds since the epoch."""
    return int(time.time() * 1000)


def migrate(db: sqlite3.Connection) -> None:
    """Add the timeline columns and the runs table to a journal written before them."""
    have = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
    for name, kind in _CALL_COLUMNS:
        if name not in have:
            db.execute(f"ALTER TABLE calls ADD COLUMN {name} {kind}")
    db.execute(_RUNS)
    if "again" not in {row[1] for row in db.execute("PRAGMA table_info(task_runs)")}:
        db.execute("ALTER TABLE task_runs ADD COLUMN again TEXT")
    db.execute("CREATE INDEX IF NOT EXISTS calls_task ON calls (task, run)")


def run_row(task_id: str, run: int, facts: dict[str, Any]) -> tuple[Any, ...]:
    """The ``task_runs`` row of ``Journal.record_run``'s facts."""
    return (task_id, run, epoch_ms(), facts.get("store"), facts.get("mode"), facts.get("width"),
            facts.get("serialize_on"),
            json.dumps(facts.get("steps") or [], ensure_ascii=False, separators=(",", ":")),
            json.dumps(list(facts.get("again") or ()), ensure_ascii=False) if facts.get("again") else None)


def run_facts(pool: Pool, client: ToolRunClient, again: tuple[str, ...] = ()) -> dict[str, Any]:
    """What ``Journal.record_run`` keeps of a run about to start (the caller masks it): ``again``
    is the options a command needs to run the task again as this run went."""
    options = pool.options
    parallel = options.mode == "parallel"
    return {
        "again": list(again),
        "store": client.shown_url,
        "mode": options.mode,
        "width": options.max_concurrency if parallel else 1,
        "serialize_on": options.serialize_on if parallel else None,
        "steps": [{"num": s.num, "name": s.name, "unit": s.unit, "command": s.command,
                   "over_rows": s.for_each is not None, "key": s.key} for s in pool.steps],
    }
