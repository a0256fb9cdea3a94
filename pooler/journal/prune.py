"""``pooler runs --prune``: the journal shrinks by the tasks that ended long ago.

The journal keeps about 400 bytes a call; a nightly import fills it for ever. A task whose last run
ended before the cut-off goes, with its calls, and the file is vacuumed. A task still ``running``
(a live run, or a dead one to be looked at) is never removed: its calls are what a resume needs.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from pooler.errors import JournalError, UsageError
from pooler.journal.sqlite.journal import Journal

_AGE = re.compile(r"(\d+)([dhm])")
_SECONDS = {"d": 86400, "h": 3600, "m": 60}


def parse_age(text: str) -> int:
    """``30d``, ``12h``, ``90m`` as seconds; raises ``UsageError``."""
    found = _AGE.fullmatch(text.strip())
    if found is None:
        raise UsageError(f"--older-than {text!r}: give an age like 30d (days), 12h (hours) or 90m (minutes)")
    return int(found.group(1)) * _SECONDS[found.group(2)]


@dataclass(frozen=True)
class Pruned:
    tasks: int
    calls: int
    kept_running: int
    bytes_before: int
    bytes_after: int


#: The tables that keep rows of a task, emptied of the pruned tasks' rows before the tasks go.
OF_A_TASK = ("calls", "plan_rows", "plan_files", "work", "table_rows", "runners", "buckets", "flows",
             "task_runs", "runs")


def prune(path: Path, older_than: int, *, now: float | None = None) -> Pruned:
    """Remove the tasks that ended more than ``older_than`` seconds ago, then vacuum the file."""
    # The journal writes local time as text (2026-11-30T12:00:01.123): so is the cut-off.
    moment = (time.time() if now is None else now) - older_than
    # To the millisecond, as the journal writes it: a task that ended within the cut-off's second
    # is older than the cut-off or not by its milliseconds.
    cutoff = {"cutoff": f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(moment))}."
                        f"{int(moment * 1000) % 1000:03d}"}
    before = _size(path)
    try:
        with Journal(path) as db:
            with db.transaction():
                removed = {table: db.execute(f"prune_{table}", cutoff) for table in OF_A_TASK}
                tasks = db.execute("prune_tasks", cutoff)
                running = db.one("running_tasks")
            db.execute("vacuum")
            db.execute("checkpoint")
    except JournalError as exc:
        raise JournalError(f"cannot prune the journal {path}: {exc.message} - try again when no run is "
                           "writing to it") from exc
    return Pruned(tasks, removed["calls"], 0 if running is None else int(running["n"]), before, _size(path))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
