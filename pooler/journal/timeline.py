"""The journal's timeline columns: when each call left and was answered, in which concurrent slot,
in which ``serialize_on`` group, and one row per run of a task (store, batch options, steps).

Their columns and table are the journal's migrations ``sql/migrations/0003_timeline.sql`` and
``0004_run_again.sql`` (the options each run went with, for the commands a report suggests); a
journal without them still reads (its report falls back to the older ``sent_at``/``done_at``
stamps and works the slots out from the times).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pooler.client.http import ToolRunClient
    from pooler.pool.model import Pool

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
