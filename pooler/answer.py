"""The answer of a run: the calls' entries in step order, the counts, and the size budget.

A call's result (detail, tables, files, extra keys) is inlined only while it is small and the
answer stays small (execute_tool_batch's limits); otherwise the entry says ``result_omitted`` and
the journal and the table files hold it.  Completed calls of a step over rows keep a compact entry,
so 100,000 rows never make 100,000 full entries in memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: A call's result is inlined only when its JSON is under this many bytes...
RESULT_LIMIT = 4 * 1024
#: ...and while the results inlined so far stay under this many.
TOTAL_LIMIT = 256 * 1024

#: The keys of an entry that are not the call's result.
ENTRY_KEYS = frozenset({"num", "name", "unit", "command", "row", "rows", "status", "key", "step_id",
                        "in_doubt", "result", "message", "time", "result_omitted"})
COMPACT_KEYS = ("num", "name", "row", "rows", "key", "status", "in_doubt")


def _row(entry: dict[str, Any]) -> int:
    """Where an entry stands among the calls of its step: its row, the first of its chunk, or -1."""
    if "rows" in entry:
        return int(entry["rows"][0])
    return int(entry.get("row", -1))


def result_part(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's result: detail, tables, files and the store's extra keys."""
    return {k: v for k, v in entry.items() if k not in ENTRY_KEYS}


@dataclass
class Collector:
    """Gathers the entries of one run (used by one thread: the scheduler's)."""

    include_results: bool = True
    entries: list[tuple[int, int, int, dict[str, Any]]] = field(default_factory=list)
    in_doubt: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("completed", "failed", "in_doubt", "skipped", "not_run"), 0))
    inlined: int = 0
    _order: int = 0

    def add(self, entry: dict[str, Any], *, calls: int = 1, compact: bool = False) -> None:
        """Count ``calls`` calls with the entry's status and keep the entry (compact or budgeted)."""
        status = entry["status"]
        self.counts[status] = self.counts.get(status, 0) + calls
        if compact and status in ("completed", "skipped"):
            kept = {k: entry[k] for k in COMPACT_KEYS if k in entry}
        else:
            kept = self._budgeted(entry)
        self._order += 1
        self.entries.append((int(entry["num"]), _row(entry), self._order, kept))

    def add_in_doubt(self, entry: dict[str, Any], action: str, step_id: str | None) -> None:
        """A call found in doubt, and what was done about it (retried, stopped, skipped)."""
        item: dict[str, Any] = {"num": entry["num"], "name": entry["name"]}
        for extra in ("row", "rows"):
            if extra in entry:
                item[extra] = entry[extra]
        item.update({"key": entry.get("key"), "step_id": step_id, "action": action})
        self.in_doubt.append((int(entry["num"]), _row(entry), item))

    def _budgeted(self, entry: dict[str, Any]) -> dict[str, Any]:
        part = result_part(entry)
        if not part:
            return entry
        if self.include_results:
            size = len(json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode())
            if size < RESULT_LIMIT and self.inlined + size < TOTAL_LIMIT:
                self.inlined += size
                return entry
        kept = {k: v for k, v in entry.items() if k in ENTRY_KEYS}
        kept["result_omitted"] = True
        if "time" in kept:
            # Keep ``time`` last, where it stands in a full entry.
            kept["time"] = kept.pop("time")
        return kept

    def answer(self, *, total: int, task: str, trip_ms: int,
               interrupted: str | None = None) -> dict[str, Any]:
        """The run's answer (contract §3 with the batch summary)."""
        c = self.counts
        landed = c["completed"] + c["skipped"]
        # Calls never started (the pool stopped before them) are counted here, not listed.
        counted = landed + c["failed"] + c["in_doubt"] + c["not_run"]
        not_run = c["not_run"] + max(total - counted, 0)
        total = max(total, counted)
        if landed == total:
            status = "completed"
        elif landed == 0:
            status = "failed"
        else:
            status = "partial"
        answer: dict[str, Any] = {
            "result": status == "completed",
            "status": status,
            "total": total,
            "succeeded": c["completed"],
            # In-doubt calls did not land as far as anyone knows: they count with the failed ones.
            "failed": c["failed"] + c["in_doubt"],
            "skipped": c["skipped"],
            "not_run": not_run,
            "in_doubt": [item for _, _, item in sorted(self.in_doubt, key=lambda t: (t[0], t[1]))],
            "task": task,
            "steps": [e for *_, e in sorted(self.entries, key=lambda t: (t[0], t[1], t[2]))],
            "time": {"trip": trip_ms},
        }
        if interrupted:
            answer["interrupted"] = interrupted
        return answer
