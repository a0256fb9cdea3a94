"""The answer of a run: the steps' entries in step order, the counts, and the size budget.

A call's result (detail, tables, files, extra keys) is inlined only while it is small and the
answer stays small (execute_tool_batch's limits); otherwise the entry says ``result_omitted`` and
the journal and the table files hold it.

A step over rows is one step, so it has one entry however many rows it has: a summary, with the
full entries of its failed and in-doubt calls only.  The journal still holds every call::

    {"num": 1, "name": "goods", "unit": "...", "command": "...", "status": "failed", "key": null,
     "result": false, "message": "1,000 rows: 998 completed, 2 failed (first at row 17)",
     "rows": {"total": 1000, "completed": 998, "skipped": 0, "failed": 2, "in_doubt": 0, "not_run": 0},
     "calls": 1000, "detail": {...}, "tables": {...},
     "failures": [{<the full entry of a failed call, with its "row" or "rows">}, ...],
     "failures_omitted": 0, "time": {"trip": 5230}}

- ``status`` is the step's outcome: ``completed`` (every row completed or skipped), ``failed``,
  ``in_doubt`` (a call's answer was lost), ``partial`` (the pool stopped after some of its rows
  landed), or ``not_run`` (the step never started because a step it refers to did not complete,
  or the pool stopped before any of its rows were sent).
- ``rows`` counts rows by the status of the call that carried them (a chunk's rows share its call's
  status); ``total`` is ``null`` when the rows were never counted (a table that was never written).
- ``calls``: the calls that ended with a status in this run, one a row or one a chunk.
- ``detail``: the last row's detail (what ``@name.field`` reads), for a step that completed, when
  it fits the result budget; ``result_omitted`` says when it did not.
- ``tables``: the tables the step's calls wrote in this run, added up: ``rows`` in all, the shared
  ``file``, the first rows as ``head``, and ``job``/``job_rows`` as the last call left them.
- ``failures``: the entries of failed and in-doubt calls, in row order, at most ``MAX_FAILURES``;
  ``failures_omitted`` counts the rest (the journal has them all).
- ``time.trip``: the step's wall time, from its first call to its last answer.

The counts at the top of the answer (``total``, ``succeeded``, ``failed``, ``skipped``,
``not_run``) count calls, as execute_tool_batch does.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from pooler.journal.documents import Answer, Entry, InDoubtItem, RowsCount, RowsEntry
from pooler.run.entries import ENTRY_KEYS, VERDICTS, head_of, in_doubt_item, where
from pooler.statuses import FINAL, LANDED, CallStatus, StepStatus

#: A call's result is inlined only when its JSON is under this many bytes...
RESULT_LIMIT = 4 * 1024
#: ...and while the results inlined so far stay under this many.
TOTAL_LIMIT = 256 * 1024
#: The failed and in-doubt calls a step over rows lists in full; the rest are only counted.
MAX_FAILURES = 100
#: The rows a step's tables show as ``head``, as one call's tables do.
HEAD_ROWS = 3

#: How the rows of a step over rows are counted, in the order its message names them.
ROW_STATUSES = tuple(s.value for s in (CallStatus.COMPLETED, CallStatus.SKIPPED, CallStatus.FAILED,
                                        CallStatus.IN_DOUBT, CallStatus.NOT_RUN))
_WORDS = {CallStatus.IN_DOUBT: "in doubt", CallStatus.NOT_RUN: "not run"}


def _row(entry: Mapping[str, Any]) -> int:
    """Where an entry stands among the calls of its step: its row, the first of its chunk, or -1."""
    if isinstance(entry.get("rows"), list):
        return int(entry["rows"][0])
    return int(entry.get("row", -1))


def result_part(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry's result: detail, tables, files and the store's extra keys."""
    return {k: v for k, v in entry.items() if k not in ENTRY_KEYS}


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass
class RowsTally:
    """What the calls of one step over rows add up to, kept as they come back."""

    head: Entry
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROW_STATUSES, 0))
    calls: int = 0
    #: The failed and in-doubt entries with the lowest rows: a heap on (-row, -order).
    failures: list[tuple[int, int, Entry]] = field(default_factory=list)
    omitted: int = 0
    first_bad: dict[str, Any] | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    chunked: bool = False

    def add(self, entry: Entry, size: int) -> bool:
        """Count one call of ``size`` rows; True when its entry is one to list in full."""
        status = entry["status"]
        self.calls += 1
        self.chunked = self.chunked or "rows" in entry
        self.rows[status] = self.rows.get(status, 0) + size
        if status not in LANDED:
            if self.first_bad is None or _row(entry) < _row(self.first_bad):
                self.first_bad = {k: entry[k] for k in ("row", "rows") if k in entry}
            return True
        if status == CallStatus.COMPLETED and isinstance(entry.get("tables"), dict):
            self._merge(entry["tables"])
        return False

    def keep_failure(self, entry: Entry, order: int) -> None:
        item = (-_row(entry), -order, entry)
        if len(self.failures) < MAX_FAILURES:
            heapq.heappush(self.failures, item)
            return
        self.omitted += 1
        # Past the cap the lowest rows stay listed, whatever order a parallel run finished them in.
        heapq.heappushpop(self.failures, item)

    def _merge(self, tables: dict[str, Any]) -> None:
        for name, got in tables.items():
            if not isinstance(got, dict):
                continue
            kept = self.tables.get(name)
            if kept is None:
                self.tables[name] = {**got, "head": list(got.get("head") or [])}
                continue
            rows = got.get("rows")
            for k, v in got.items():
                if k == "rows" and isinstance(rows, int) and isinstance(kept.get("rows"), int):
                    kept["rows"] += rows
                elif k == "head":
                    if isinstance(v, list):
                        kept["head"].extend(v[: max(0, HEAD_ROWS - len(kept["head"]))])
                else:
                    kept[k] = v

    def summary(self, *, status: str, rows_total: int | None, whole: bool, detail: Any,
                trip_ms: int | None, why: str = "") -> RowsEntry:
        """The step's one entry (``detail`` is ``None`` to leave it out, ``...`` when it was omitted)."""
        rows = dict(self.rows)
        seen = sum(rows.values())
        if rows_total is None and seen == 0:
            total: int | None = None
        else:
            # A step whose rows all came out counts what came; one cut short, what was planned.
            total = seen if whole else max(rows_total or 0, seen)
            rows["not_run"] += total - seen
        counted: RowsCount = {"total": total, **rows}  # type: ignore[typeddict-item]
        entry: RowsEntry = {**self.head, "status": status, "key": None,  # type: ignore[typeddict-item]
                            "result": status == CallStatus.COMPLETED,
                            "message": self.message(rows, total, why), "rows": counted, "calls": self.calls}
        if detail is ...:
            entry["result_omitted"] = True
        elif detail is not None:
            entry["detail"] = detail
        entry["tables"] = self.tables
        entry["failures"] = [e for *_, e in sorted(self.failures, key=lambda t: (-t[0], -t[1]))]
        entry["failures_omitted"] = self.omitted
        if trip_ms is not None:
            entry["time"] = {"trip": trip_ms}
        return entry

    def message(self, rows: dict[str, int], total: int | None, why: str) -> str:
        """``1,000 rows: 998 completed, 2 failed (first at row 17)``, after ``why`` if given."""
        counted = "rows not counted" if total is None else f"{total:,} row{'' if total == 1 else 's'}"
        if self.chunked:
            counted += f" in {self.calls:,} call{'' if self.calls == 1 else 's'}"
        parts = [f"{rows[s]:,} {_WORDS.get(s, s)}" for s in ROW_STATUSES if rows[s]]
        if self.first_bad is not None:
            # After the last of the failed and in-doubt counts, before the rows not run.
            at = len(parts) - (1 if rows["not_run"] else 0) - 1
            parts[at] += f" (first at {where(self.first_bad)})"
        text = f"{counted}: {', '.join(parts)}" if parts else counted
        return f"{why} {text}." if why else text


@dataclass
class Collector:
    """Gathers the entries of one run (used by one thread: the scheduler's)."""

    include_results: bool = True
    entries: list[tuple[int, int, int, Entry | RowsEntry]] = field(default_factory=list)
    in_doubt: list[tuple[int, int, InDoubtItem]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        (s.value for s in FINAL), 0))
    inlined: int = 0
    #: The steps over rows, by number, until their summary is made.
    tallies: dict[int, RowsTally] = field(default_factory=dict)
    #: What the probes of calls in doubt said: landed, not landed, unsettled.
    probes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    _order: int = 0

    def add(self, entry: Entry, *, calls: int = 1) -> None:
        """Count ``calls`` calls with the entry's status and keep the entry (within the budget)."""
        self._count(entry["status"], calls)
        self._probed(entry)
        self._keep(int(entry["num"]), _row(entry), self._budgeted(entry))

    def open_rows(self, head: Entry) -> None:
        """A step over rows starts: its calls are added up from now on."""
        self.tallies.setdefault(int(head["num"]), RowsTally(Entry(**head)))

    def add_row(self, entry: Entry, size: int = 1) -> None:
        """One call of a step over rows, carrying ``size`` rows: counted, and listed if it failed."""
        self._count(entry["status"], 1)
        self._probed(entry)
        num = int(entry["num"])
        tally = self.tallies.get(num)
        if tally is None:
            tally = self.tallies[num] = RowsTally(head_of(entry))
        self._order += 1
        if tally.add(entry, size):
            tally.keep_failure(self._budgeted(entry), self._order)

    def close_rows(self, num: int, *, status: str, rows_total: int | None, whole: bool, detail: Any = None,
                   trip_ms: int | None = None, why: str = "", calls: int = 0) -> None:
        """The step over rows ``num`` is over: its summary entry takes its place among the steps.

        ``calls`` counts the calls of a step that never started as ``not_run``.
        """
        tally = self.tallies.pop(num)
        self._count("not_run", calls)
        kept: Any = None
        if detail is not None:
            kept = detail if self._fits(detail) else ...
        self._keep(num, -1, tally.summary(status=status, rows_total=rows_total, whole=whole, detail=kept,
                                          trip_ms=trip_ms, why=why))

    def add_in_doubt(self, entry: Entry, action: str | None, step_id: str | None) -> None:
        """A call found in doubt, and what was done about it (retried, stopped, skipped); with no
        action, a call whose answer was lost in this run is listed as ``left`` (in doubt it stays),
        whichever journal the run keeps, and any other call is not listed."""
        if action is None:
            if entry.get("status") != CallStatus.IN_DOUBT:
                return
            action = "left"
        self.in_doubt.append((int(entry["num"]), _row(entry), in_doubt_item(entry, action, step_id)))

    def _probed(self, entry: Entry) -> None:
        # A call an earlier run settled is told skipped now: its probe is that run's.
        said = entry.get("probe")
        if said in self.probes and entry.get("status") != CallStatus.SKIPPED:
            self.probes[str(said)] += 1

    def _count(self, status: str, calls: int) -> None:
        self.counts[status] = self.counts.get(status, 0) + calls

    def _keep(self, num: int, row: int, entry: Entry | RowsEntry) -> None:
        self._order += 1
        self.entries.append((num, row, self._order, entry))

    def _fits(self, part: Any) -> bool:
        """Whether ``part`` may be inlined; if so it is counted against the budget."""
        if not self.include_results:
            return False
        size = _size(part)
        if size < RESULT_LIMIT and self.inlined + size < TOTAL_LIMIT:
            self.inlined += size
            return True
        return False

    def _budgeted(self, entry: Entry) -> Entry:
        part = result_part(entry)
        if not part or self._fits(part):
            return entry
        # The entry's own keys, without its result.
        kept = cast(Entry, {k: v for k, v in entry.items() if k in ENTRY_KEYS})
        kept["result_omitted"] = True
        if "time" in kept:
            # Keep ``time`` last, where it stands in a full entry.
            kept["time"] = kept.pop("time")
        return kept

    def answer(self, *, total: int, task: str, trip_ms: int,
               interrupted: str | None = None) -> Answer:
        """The run's answer (contract §3 with the batch summary)."""
        c = self.counts
        landed = c["completed"] + c["skipped"]
        # Calls never started (the pool stopped before them) are counted here, not listed.
        counted = landed + c["failed"] + c["in_doubt"] + c["not_run"]
        not_run = c["not_run"] + max(total - counted, 0)
        total = max(total, counted)
        # The pool's own status: a call's, or "partial" when some landed and some did not.
        status: str
        if landed == total:
            status = CallStatus.COMPLETED
        elif landed == 0:
            status = CallStatus.FAILED
        else:
            status = StepStatus.PARTIAL
        answer: Answer = {
            "result": status == CallStatus.COMPLETED,
            "status": status,
            "total": total,
            "succeeded": c["completed"],
            # In-doubt calls did not land as far as anyone knows: they count with the failed ones.
            "failed": c["failed"] + c["in_doubt"],
            "skipped": c["skipped"],
            "not_run": not_run,
            # Of the failed: the calls whose answer was lost, so a summary can tell them apart.
            "calls_in_doubt": c["in_doubt"],
            "in_doubt": [item for _, _, item in sorted(self.in_doubt, key=lambda t: (t[0], t[1]))],
            "task": task,
            "steps": [e for *_, e in sorted(self.entries, key=lambda t: (t[0], t[1], t[2]))],
            "time": {"trip": trip_ms},
        }
        if interrupted:
            answer["interrupted"] = interrupted
        if any(self.probes.values()):
            answer["probes"] = {said.replace(" ", "_"): n for said, n in self.probes.items()}
        return answer
