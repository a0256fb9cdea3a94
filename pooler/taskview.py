"""A task as the journal and the lock tell it: alive or dead, and a dead run's partial answer.

A run killed with SIGKILL (or a crash, a power cut) never writes its answer and leaves its task
``running`` in the journal. The pool's lock tells the truth: the kernel drops a ``flock`` with its
process, and the lock file names the task its holder works on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pooler.answer import Collector
from pooler.journal import Journal, TaskRow
from pooler.lock import holder, lock_dir, lock_path

#: What ``pooler runs`` says of a task whose run died without finishing.
DEAD = "dead"
DIED = "the run died before it finished (killed, or the machine went down)"


def alive(row: TaskRow, journal_path: Path) -> bool:
    """Whether a run of the task holds its pool's lock now."""
    held = holder(lock_path(Path(row.pool_file), lock_dir(journal_path)))
    return bool(held) and held.get("task", row.id) == row.id


def told(row: TaskRow, journal_path: Path) -> TaskRow:
    """The row with ``running`` replaced by ``dead`` when no live run holds the task."""
    if row.status != "running" or alive(row, journal_path):
        return row
    return dataclasses.replace(row, status=DEAD)


def partial_answer(journal: Journal, row: TaskRow) -> dict[str, Any]:
    """The answer of the task's last run as far as the journal recorded it.

    A call recorded as sent with no answer is in doubt: the run died while it was in flight.
    """
    records = [r for r in journal.calls(row.id) if r["run"] == row.runs]
    heads: dict[int, dict[str, Any]] = {}
    for rec in records:
        entry = rec["result"] or {}
        if entry.get("unit"):
            heads.setdefault(rec["num"], {k: entry.get(k) for k in ("num", "name", "unit", "command")})
    collector = Collector()
    over_rows: dict[int, list[str]] = {}
    for rec in records:
        entry = dict(rec["result"] or {})
        if not entry or rec["status"] == "sent":
            entry = {**heads.get(rec["num"], {"num": rec["num"], "name": "", "unit": "", "command": ""}),
                     "status": "in_doubt", "key": rec["key"], "step_id": rec["step_id"], "result": False,
                     "message": f"sent, and {DIED} with no answer recorded: it may or may not have been "
                                "carried out"}
            if rec["row"] is not None:
                entry["row"] = rec["row"]
        entry["status"] = "in_doubt" if rec["status"] == "sent" else rec["status"]
        if rec["row"] is None:
            collector.add(entry)
        else:
            collector.add_row(entry, len(range(entry["rows"][0], entry["rows"][1] + 1))
                              if isinstance(entry.get("rows"), list) else 1)
            over_rows.setdefault(rec["num"], []).append(entry["status"])
        if entry["status"] == "in_doubt":
            collector.add_in_doubt(entry, "left", rec["step_id"])
    for num, statuses in over_rows.items():
        bad = next((s for s in ("in_doubt", "failed") if s in statuses), None)
        collector.close_rows(num, status=bad or "partial", rows_total=None, whole=False)
    answer = collector.answer(total=len(records), task=row.id, trip_ms=0, interrupted=DIED)
    del answer["time"]
    return answer
