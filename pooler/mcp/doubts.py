"""What a task taken up asks of the calls an earlier run left in doubt (``input_required``): which
they are, and for a step with a probe what the probe says of each now, so the client's ``retry``
or ``skip`` is a decision on what the store holds, not a guess.

A probe is the read ``pooler run`` settles a call in doubt with (pooler/run/probing.py), sent here
with the call's row from the data file the task was planned from, and weighed by the same rule:
"not landed" proves nothing while the call's request may still be running at the store.  Only the
calls the question names are probed (a read each); sending nothing else, the question changes
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pooler.errors import InputError, PoolerError
from pooler.journal.records import CallId
from pooler.pool.datafiles import locate
from pooler.run.callplan import Call, Prepared
from pooler.run.config import step_plan
from pooler.run.entries import LANDED, NOT_LANDED
from pooler.run.planfiles import digest
from pooler.run.probing import SETTLE, Verdict, probe_params, send_probe, weigh
from pooler.statuses import CallStatus, WorkState

if TYPE_CHECKING:
    from pooler.client.http import ToolRunClient
    from pooler.journal.work import TaskJournal
    from pooler.pool.compiler import Plan
    from pooler.pool.model import Step

#: How many calls in doubt the question names (and probes).
NAMED = 5


@dataclass(frozen=True)
class Doubt:
    """A call in doubt as the journal holds it."""

    num: int
    idx: int
    key: str | None
    step_id: str | None
    first: int | None
    last: int | None
    #: When its request left (ms since the epoch), when the journal knows.
    sent_ms: int | None
    #: What the run that left it in doubt recorded of it (None: it never recorded an outcome).
    entry: Mapping[str, Any] | None

    def name(self) -> str:
        rows = "" if self.first is None else (
            f" row {self.first}" if self.last is None or self.last == self.first else
            f" rows {self.first}-{self.last}")
        return f"step {self.num}{rows}" + (f" (key {self.key})" if self.key is not None else "")


def in_doubt(journal: TaskJournal, task_id: str, limit: int = NAMED) -> list[Doubt]:
    """The first ``limit`` calls of the task in doubt, in file order: sent with no outcome recorded,
    or recorded in doubt (the journal's own count of them)."""
    found: list[Doubt] = []
    rows = journal.answer_rows(task_id)
    for row in rows:
        if row.state in (WorkState.SENT, WorkState.DOUBT) or (row.state == WorkState.DONE and
                                                               row.status == CallStatus.IN_DOUBT):
            found.append(Doubt(row.num, row.idx, row.key, row.step_id, row.first, row.last,
                               None if row.sent_ms is None else int(row.sent_ms), row.entry))
            if len(found) == limit:
                break
    close = getattr(rows, "close", None)
    if close is not None:
        # A streamed read left before its end lets go of its cursor now.
        close()
    return found


def question(task_id: str, total: int, named: list[Doubt], probes: Mapping[tuple[int, int], str]) -> str:
    """The question: the calls in doubt, what their probes say, and what each answer does."""
    listed = ", ".join(d.name() for d in named)
    more = total - len(named)
    said = "; ".join(f"{d.name()}: {probes[(d.num, d.idx)]}" for d in named if (d.num, d.idx) in probes)
    told = f" Their steps' probes, read now: {said}." if said else ""
    others = f", and {more:,} more" if more > 0 else ""
    return (f"{total:,} calls of task {task_id} were sent by an earlier run whose answers were never "
            f"recorded: they may or may not have been carried out ({listed}{others}).{told} retry: send them "
            "again under their keys (a store carries out a key once); skip: leave "
            "them in doubt and send the rest.")


def probe_all(client: ToolRunClient, journal: TaskJournal, task_id: str, plan: Plan | None,
              named: list[Doubt]) -> dict[tuple[int, int], str]:
    """What the probe of each named call's step says of it now, by (step, idx); a step without a
    probe says nothing.  A call that cannot be probed (its row unread, its probe's fields unfilled)
    is told why, with what the run that left it recorded of its probe, when it did."""
    if plan is None:
        return {}
    steps = {step.num: step for step in plan.pool.steps}
    probed = [d for d in named if d.num in steps and steps[d.num].probe is not None]
    if not probed:
        return {}
    variables: Mapping[str, Any] = plan.variables.values if plan.variables is not None else {}
    shared = journal.shared(task_id)
    files = (None if shared is None else shared.get("files")) or []
    planned = {int(f["num"]): str(f["sha256"]) for f in files}
    told: dict[tuple[int, int], str] = {}
    for doubt in probed:
        step = steps[doubt.num]
        try:
            data = _row(plan, step, doubt, variables, planned.get(step.num))
        except PoolerError as exc:
            told[(doubt.num, doubt.idx)] = _unsent(doubt, f"its row could not be read: {exc.message}")
            continue
        told[(doubt.num, doubt.idx)] = _said(client, step, doubt, data, variables)
    return told


def _said(client: ToolRunClient, step: Step, doubt: Doubt, data: Any, variables: Mapping[str, Any]) -> str:
    """One call's probe sent, and what it proves, as a clause of the question."""
    assert step.probe is not None
    plan = step_plan(step, set(), keep_tables=False)
    assert plan.probe is not None
    chunked = doubt.last is not None
    try:
        params = probe_params(plan.probe, data, chunked, variables)
    except PoolerError as exc:
        return _unsent(doubt, f"its params could not be filled: {exc.message}")
    call = Call(plan, row=doubt.first, last=doubt.last if chunked else None, data=data)
    # Weighed as the run weighs a call an earlier run left in doubt: by when its request left.
    age = None if doubt.sent_ms is None else max(0.0, time.time() - doubt.sent_ms / 1000)
    left_at = None if age is None else time.monotonic() - age
    ready = Prepared(call, params, doubt.key, CallId("", 0, doubt.num, doubt.first, doubt.key, doubt.step_id),
                     doubted=doubt.step_id or "in doubt", left_at=left_at)
    command = step.probe.command
    verdict: Verdict = weigh(send_probe(client, step, params), ready, command,
                             max(SETTLE, float(client.read_timeout)))
    if verdict.said == LANDED:
        return f"its probe {command} found it landed ({verdict.message})"
    if verdict.said == NOT_LANDED:
        return f"its probe {command} proved it not carried out ({verdict.message})"
    return f"its probe settled nothing ({verdict.message})"


def _unsent(doubt: Doubt, why: str) -> str:
    """A call whose probe was not sent: why, and what its probe said when the run ran it."""
    before = (doubt.entry or {}).get("probe")
    if before is None:
        return f"its probe was not sent ({why.rstrip('.')})"
    return f"its probe was not sent ({why.rstrip('.')}); the run that left it in doubt probed it: {before}"


def _row(plan: Plan, step: Step, doubt: Doubt, variables: Mapping[str, Any], planned: str | None) -> Any:
    """The call's row, as the probe reads it (a chunk: its rows from the first, the one a probe
    reads), from the data file the task was planned from - read up to that row, never whole."""
    each = step.for_each
    if each is None or doubt.first is None:
        return None
    if each.file is None:
        raise InputError(f"its rows come from the table of step {each.step}, which is not read here")
    data, problems = locate(plan.pool, step, variables)
    if data is None:
        raise InputError(problems[0].message if problems else f"step {step.num} has no data file")
    if planned is not None and digest(data.path) != planned:
        raise InputError(f"{data.path} changed since the task was planned")
    for n, (_, row) in enumerate(data.numbered()):
        if n == doubt.first:
            return [row] if doubt.last is not None else row
    raise InputError(f"{data.path} has no row {doubt.first}")
