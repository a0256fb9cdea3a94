"""What a task's HTML report shows, read from the journal alone: the summary, the calls in doubt,
per run the calls on a timeline and per step their counts and times, and the tables written.

The calls are read one row at a time without their answers; only the few calls the report names
(in doubt, slowest, failed) have their entries read back, so a 100,000-call task reads in a
moment.  A journal written before the timeline columns (see journal_timeline.py) still gives a
report: the times come from its ``sent_at``/``done_at`` stamps and the slots are worked out from
them.
"""

from __future__ import annotations

import heapq
import json
import math
import shlex
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pooler.journal.api import CallHistory, RunFacts
from pooler.journal.documents import Answer, Entry
from pooler.journal.records import FlowDoc, TaskRow
from pooler.pool.budget import budget_line
from pooler.statuses import DOUBTFUL, CallStatus, RecordStatus, final_status

#: Statuses of a call that reached the store, as the timeline colours them.  ``sent`` is a call
#: whose answer was never recorded (the run was killed): in doubt too.
SENT_STATUSES = (CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.IN_DOUBT, RecordStatus.SENT)
FAILURES_SHOWN = 100
#: Failed calls the top of the page lists (the in-doubt ones are all listed: each needs a look).
TROUBLE_SHOWN = 50
SLOWEST_SHOWN = 10


@dataclass(slots=True)
class CallRow:
    """One record of a call, without its answer."""

    id: int
    run: int
    num: int
    row: int | None
    key: str | None
    step_id: str | None
    status: str
    in_doubt: bool
    lane: int | None
    serial: str | None
    sent: int | None
    done: int | None
    message: str = ""
    entry: Entry | None = None
    #: Which attempt of the call this is (a run again or a redrive sends it once more), and the
    #: run of the attempt before it.
    attempt: int = 1
    before: int | None = None

    @property
    def ms(self) -> int | None:
        """How long the call took, from leaving to its answer."""
        if self.sent is None or self.done is None:
            return None
        return max(self.done - self.sent, 0)


@dataclass
class StepInfo:
    num: int
    name: str | None
    unit: str
    command: str
    over_rows: bool = False

    @property
    def label(self) -> str:
        named = f" {self.name}" if self.name else ""
        return f"{self.num}{named} {self.unit}.{self.command}"


@dataclass
class StepStats:
    step: StepInfo
    calls: int
    rows: int | None
    counts: Counter[str]
    p50: int | None
    p95: int | None
    max: int | None
    slowest: list[CallRow]
    failures: list[CallRow]
    failures_more: int


@dataclass
class RunData:
    run: int
    mode: str
    width: int
    serialize_on: str | None
    calls: list[CallRow]
    steps: list[StepStats] = field(default_factory=list)

    @property
    def sent(self) -> list[CallRow]:
        return [c for c in self.calls if c.sent is not None and c.status in SENT_STATUSES]


@dataclass
class ReportData:
    task: TaskRow
    store: str | None
    answer: Answer | None
    steps: dict[int, StepInfo]
    runs: list[RunData]
    in_doubt: list[CallRow]
    tables: list[dict[str, Any]]
    counts: dict[str, int]
    #: The latest run's failed calls (the first ``TROUBLE_SHOWN``), for the top of the page.
    failed: list[CallRow] = field(default_factory=list)
    failed_more: int = 0
    #: The options to run the task again as its latest run went, shell-quoted (``--store shop --out ...``).
    again: str = ""
    #: What the error budgets counted, as words (``5 of 100 calls failed, within the pool's ...``),
    #: and whether each held.
    budgets: list[tuple[str, bool]] = field(default_factory=list)
    #: What each runner's flow control did, by run (a run without a record is not here).
    flows: dict[int, list[FlowDoc]] = field(default_factory=dict)


def load_report(journal: CallHistory, task_id: str) -> ReportData | None:
    """The report's facts of one task, or None when the journal does not hold it."""
    task = journal.task(task_id)
    if task is None:
        return None
    facts = journal.run_facts(task_id)
    by_run: dict[int, list[CallRow]] = defaultdict(list)
    for r in journal.call_records(task_id):
        sent, done = r.sent_ms, r.done_ms
        if sent is None and r.sent_at is not None:
            sent, done = _stamp(r.sent_at), _stamp(r.done_at)
        by_run[r.run].append(CallRow(r.id, r.run, r.num, r.row, r.key, r.step_id, r.status, r.in_doubt,
                                     r.lane, r.serial, sent, done))
    _number_attempts(by_run)
    flows: dict[int, list[FlowDoc]] = defaultdict(list)
    for flow in journal.flows(task_id):
        flows[flow["run"]].append(flow)
    steps = _steps(journal, task_id, facts)
    answer = journal.answer(task_id)
    runs: list[RunData] = []
    for number in sorted(set(by_run) | set(facts) | set(flows), reverse=True):
        fact = facts.get(number)
        calls = by_run.get(number, [])
        run = RunData(number, (fact and fact.mode) or "sequential", int((fact and fact.width) or 1),
                      fact.serialize_on if fact else None, calls)
        _fill_lanes(run)
        runs.append(run)
    last = runs[0].calls if runs else []
    in_doubt = [c for c in last if c.status in DOUBTFUL]
    failed_all = [c for c in last if c.status == CallStatus.FAILED]
    failed = failed_all[:TROUBLE_SHOWN]
    named = [*in_doubt, *failed]
    for run in runs:
        run.steps = [_stats(steps[num], calls, answer if run is runs[0] else None)
                     for num, calls in _by_step(run.calls, steps).items()]
        for s in run.steps:
            named.extend(s.slowest)
            named.extend(s.failures)
    _read_entries(journal, task_id, named)
    store = next((str(f.store) for _, f in sorted(facts.items(), reverse=True) if f.store), None)
    tables = _tables(answer, journal, task_id, last)
    latest = facts.get(max(facts)) if facts else None
    again = shlex.join(latest.again) if latest is not None and latest.again else ""
    budgets = [(budget_line(row), bool(row["within"]))
               for row in (({} if answer is None else answer.get("tolerated")) or {}).get("budgets") or []]
    return ReportData(task, store, answer, steps, runs, in_doubt, tables, _counts(task, last, answer), failed,
                      len(failed_all) - len(failed), again, budgets, dict(flows))


def _number_attempts(by_run: dict[int, list[CallRow]]) -> None:
    """Each record its attempt of its call (a step's row, or its one call), runs in order."""
    last: dict[tuple[int, int | None], CallRow] = {}
    for number in sorted(by_run):
        for call in by_run[number]:
            before = last.get((call.num, call.row))
            if before is not None:
                call.attempt, call.before = before.attempt + 1, before.run
            last[(call.num, call.row)] = call


def _stamp(text: str | None) -> int | None:
    """A ``sent_at``/``done_at`` stamp of an older journal (local time) in epoch milliseconds."""
    if not text:
        return None
    try:
        return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f").timestamp() * 1000)
    except ValueError:
        return None


def _steps(journal: CallHistory, task_id: str, facts: dict[int, RunFacts]) -> dict[int, StepInfo]:
    """Every step of the task: from the runs' facts, else from the first entry of each step."""
    steps: dict[int, StepInfo] = {}
    for fact in facts.values():
        for s in fact.steps:
            steps[int(s["num"])] = StepInfo(int(s["num"]), s.get("name"), str(s.get("unit", "")),
                                            str(s.get("command", "")), bool(s.get("over_rows")))
    for num, entry in journal.first_entries(task_id):
        if num in steps:
            continue
        steps[num] = StepInfo(num, entry.get("name"), str(entry.get("unit", "")),
                              str(entry.get("command", "")), "row" in entry or "rows" in entry)
    return steps


def _fill_lanes(run: RunData) -> None:
    """Slots for calls an older journal recorded without one: the lowest slot free when it left."""
    missing = [c for c in run.sent if c.lane is None]
    if not missing:
        run.width = max([run.width, *(c.lane + 1 for c in run.calls if c.lane is not None)])
        return
    missing.sort(key=lambda c: c.sent or 0)
    busy: list[tuple[int, int]] = []
    free: list[int] = []
    lanes = 0
    for call in missing:
        while busy and busy[0][0] <= (call.sent or 0):
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, lanes = lanes, lanes + 1
        call.lane = lane
        heapq.heappush(busy, (call.done if call.done is not None else call.sent or 0, lane))
    run.width = max(run.width, lanes)


def _by_step(calls: list[CallRow], steps: dict[int, StepInfo]) -> dict[int, list[CallRow]]:
    out: dict[int, list[CallRow]] = {}
    for call in calls:
        out.setdefault(call.num, []).append(call)
        steps.setdefault(call.num, StepInfo(call.num, None, "", ""))
    return dict(sorted(out.items()))


def percentile(sorted_ms: list[int], q: float) -> int | None:
    """The nearest-rank percentile of a sorted list."""
    if not sorted_ms:
        return None
    return sorted_ms[max(math.ceil(q * len(sorted_ms)) - 1, 0)]


def _stats(step: StepInfo, calls: list[CallRow], answer: Answer | None) -> StepStats:
    counts = Counter(final_status(c.status).value for c in calls)
    pairs = sorted(((c.done - c.sent, c.id, c) for c in calls
                    if c.sent is not None and c.done is not None and c.status in SENT_STATUSES),
                   key=lambda p: p[0])
    timed = [p[2] for p in pairs]
    ms = [max(p[0], 0) for p in pairs]
    bad = sorted((c for c in calls if c.status in (CallStatus.FAILED, *DOUBTFUL)),
                 key=lambda c: (c.row if c.row is not None else -1, c.id))
    rows: int | None = None
    if step.over_rows:
        rows = _answer_rows(answer, step.num)
        if rows is None:
            rows = sum(1 for c in calls if c.row is not None)
    return StepStats(step, len(calls), rows, counts, percentile(ms, 0.5), percentile(ms, 0.95),
                     ms[-1] if ms else None, timed[::-1][:SLOWEST_SHOWN], bad[:FAILURES_SHOWN],
                     max(len(bad) - FAILURES_SHOWN, 0))


def _answer_rows(answer: Answer | None, num: int) -> int | None:
    steps: Sequence[Mapping[str, Any]] = [] if answer is None else answer.get("steps") or []
    for entry in steps:
        if isinstance(entry, dict) and entry.get("num") == num and isinstance(entry.get("rows"), dict):
            total = entry["rows"].get("total")
            return total if isinstance(total, int) else None
    return None


def _read_entries(journal: CallHistory, task_id: str, calls: list[CallRow]) -> None:
    """The entries (message, tables...) of the calls the report names, read by their ids."""
    wanted: dict[int, list[CallRow]] = defaultdict(list)
    for c in calls:
        wanted[c.id].append(c)
    ids = sorted(wanted)
    for start in range(0, len(ids), 500):
        for rid, entry in journal.entries(task_id, ids[start:start + 500]):
            for call in wanted[rid]:
                call.entry = entry
                message = entry.get("message", "")
                call.message = message if isinstance(message, str) else json.dumps(message,
                                                                                   ensure_ascii=False)


def _counts(task: TaskRow, last: list[CallRow], answer: Answer | None) -> dict[str, int]:
    """The task's counts: its answer's (recorded, or so far: as ``pooler show`` tells them), else
    those of its last run's records."""
    if answer is not None and isinstance(answer.get("total"), int):
        doubt = int(answer.get("calls_in_doubt") or 0)
        return {"total": answer["total"], "completed": int(answer.get("succeeded") or 0),
                "failed": int(answer.get("failed") or 0) - doubt, "in_doubt": doubt,
                "skipped": int(answer.get("skipped") or 0), "not_run": int(answer.get("not_run") or 0)}
    seen = Counter(final_status(c.status).value for c in last)
    if task.total is not None:
        return {"total": task.total, "completed": task.succeeded or 0, "failed": seen["failed"],
                "in_doubt": seen["in_doubt"], "skipped": task.skipped or 0, "not_run": task.not_run or 0}
    return {"total": len(last), "completed": seen["completed"], "failed": seen["failed"],
            "in_doubt": seen["in_doubt"], "skipped": seen["skipped"], "not_run": seen["not_run"]}


def _tables(answer: Answer | None, journal: CallHistory, task_id: str,
            last: list[CallRow]) -> list[dict[str, Any]]:
    """The tables the last run wrote: from its answer, else added up from its calls' entries."""
    found: dict[tuple[int, str], dict[str, Any]] = {}
    entries: Sequence[Mapping[str, Any]] = []
    if answer is not None:
        entries = [e for e in answer.get("steps") or [] if isinstance(e, dict)]
    elif last:
        # No answer (a run killed): the entries of its calls that wrote a table.
        entries = list(journal.table_entries(task_id, last[0].run))
    for entry in entries:
        for name, table in (entry.get("tables") or {}).items():
            if not isinstance(table, dict):
                continue
            slot = found.setdefault((int(entry.get("num") or 0), str(name)), {
                "num": entry.get("num"), "name": name, "rows": 0, "file": table.get("file")})
            rows = table.get("rows")
            slot["rows"] += rows if isinstance(rows, int) else 0
    return [found[k] for k in sorted(found)]


def clock(ms: int | None) -> str:
    """Epoch milliseconds as local time, as the journal's stamps read."""
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ms // 1000)) + f".{ms % 1000:03d}"
