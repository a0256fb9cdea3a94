"""A redrive of a task (``pooler redrive TASK``): what it will send again, told before the first
call, and the pool it runs, from the task's journal alone (the pool file and the data files are
not needed: the task keeps its pool as one document, and its plan holds every row).

The run itself is a run of the task like any other (``join_task`` begins it with the ``Redrive``
the journal applies in the transaction that begins it), so ``pooler show``, the history and the
report tell each redrive as a run of the task, every attempt of a call in its own run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pooler.errors import JournalError, UsageError, did_you_mean
from pooler.journal.work import Redrive, TaskJournal
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import Pool
from pooler.run.planfiles import POOL_FILE, digest
from pooler.statuses import CallStatus, WorkState

#: The kinds of call a redrive tells, in the order it tells them; a conflict is a call of a saved
#: plan's apply whose rows moved in the store since the plan: never sent by the task.
CONFLICT = "conflict"
KINDS = ("completed", "skipped", "failed", "in doubt", "not run", CONFLICT)
#: The kinds ``--only`` names, in the order ``Redrive`` takes them.
ONLY = ("failed", "in-doubt", "not-run")
#: What a redrive does with each kind it sends again.
SENT = {"failed": "sent again", "not run": "sent"}
#: What a redrive does with a call in doubt, by the run's --in-doubt.
IN_DOUBT = {"retry": "sent again under their keys", "skip": "counted done (--in-doubt skip)",
            "stop": "stop the run (--in-doubt stop)"}


@dataclass
class RedrivePlan:
    """The calls of a task by kind: how many a redrive sends, how many it keeps."""

    sent: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    #: Of the calls in doubt it sends, those of steps with a probe: probed first.
    probed: int = 0

    @property
    def sends(self) -> int:
        return sum(self.sent.values())

    def text(self, in_doubt: str) -> str:
        """``1,203 completed: kept; 37 failed: sent again; 4 in doubt: probed first; ...``: every
        kind the task has, completed always."""
        parts = []
        for kind in KINDS:
            sent, kept = self.sent[kind], self.kept[kind]
            if not sent and not kept and kind != KINDS[0]:
                continue
            if kind == "in doubt":
                parts.append(self._in_doubt(in_doubt))
                continue
            if kind == CONFLICT:
                parts.append(f"{kept:,} not run as a conflict of the plan: not sent (their rows moved in the "
                             "store since the plan: plan again with pooler plan)")
                continue
            does = SENT.get(kind, "sent")
            if sent and kept:
                parts.append(f"{sent + kept:,} {kind}: {sent:,} {does}, {kept:,} kept")
            else:
                parts.append(f"{sent + kept:,} {kind}: {does if sent else 'kept'}")
        return "; ".join(parts)

    def _in_doubt(self, policy: str) -> str:
        """The calls in doubt: those of steps with a probe probed first, the others by --in-doubt."""
        sent, kept, probed = self.sent["in doubt"], self.kept["in doubt"], self.probed
        ways = [(probed, "probed first"), (sent - probed, IN_DOUBT.get(policy, "sent again")), (kept, "kept")]
        told = [(n, does) for n, does in ways if n]
        if len(told) == 1:
            return f"{sent + kept:,} in doubt: {told[0][1]}"
        return f"{sent + kept:,} in doubt: " + ", ".join(f"{n:,} {does}" for n, does in told)

    def document(self) -> dict[str, Any]:
        """The plan as ``--json`` gives it: each kind's calls sent and kept."""
        return {kind.replace(" ", "_"): {"sent": self.sent[kind], "kept": self.kept[kind]} for kind in KINDS
                if kind != CONFLICT or self.kept[kind]}


#: The kind a redrive tells a call done with each status (any other: not run).
DONE_KINDS: dict[str, str] = {CallStatus.COMPLETED: "completed", CallStatus.SKIPPED: "skipped",
                              CallStatus.FAILED: "failed", CallStatus.IN_DOUBT: "in doubt"}


def _kind(state: str, status: str | None) -> str:
    if state == WorkState.DONE:
        return DONE_KINDS.get(str(status), "not run")
    # Left in doubt by an earlier run, or sent by a runner that is gone; else never sent.
    return "in doubt" if state in (WorkState.DOUBT, WorkState.SENT) else "not run"


def _touches(redrive: Redrive, num: int, first: int | None, last: int | None) -> bool:
    if redrive.step is not None and num != redrive.step:
        return False
    if redrive.rows is None:
        return True
    lo, hi = redrive.rows
    return first is not None and (last if last is not None else first) >= lo and first <= hi


def redrive_plan(journal: TaskJournal, task: str, redrive: Redrive, probing: frozenset[int] = frozenset()
                 ) -> RedrivePlan:
    """What ``redrive`` sends of the task as its journal holds it now, by the rule the journal's
    ``redrive_*`` statements follow; ``probing``: the steps whose calls in doubt are probed first."""
    plan = RedrivePlan()
    chosen = {"failed": redrive.failed, "in doubt": redrive.in_doubt, "not run": redrive.not_run}
    shared = journal.shared(task)
    held = {(c["step"], c["call"] - 1) for c in (None if shared is None else shared.get("conflicts")) or ()}
    for row in journal.answer_rows(task):
        num = row.num
        kind = _kind(row.state, row.status)
        if kind == "not run" and (num, row.idx) in held:
            # Its runner ends it not run again: the plan it was reviewed in no longer holds.
            kind = CONFLICT
        sends = chosen.get(kind, False) and _touches(redrive, num, row.first, row.last)
        (plan.sent if sends else plan.kept)[kind] += 1
        if sends and kind == "in doubt" and num in probing:
            plan.probed += 1
    return plan


def probed_steps(pool: Pool, given: str | None) -> frozenset[int]:
    """The steps whose calls in doubt a run probes first: those with a probe, unless the command
    line's ``--in-doubt`` (``given``) said what to do."""
    if given is not None:
        return frozenset()
    return frozenset(s.num for s in pool.steps if s.probe is not None)


def parse_only(text: str | None) -> tuple[bool, bool, bool]:
    """``--only failed,in-doubt,not-run``: which kinds a redrive sends (failed, in doubt, not run)."""
    if text is None:
        return True, True, True
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = ONLY
    for name in names:
        if name not in known:
            raise UsageError(f"--only {text}: {name} is not a kind of call a redrive sends; write some of "
                             f"{', '.join(known)}, separated by commas{did_you_mean(name, known)}")
    failed, in_doubt, not_run = (name in names for name in ONLY)
    return failed, in_doubt, not_run


def parse_rows(text: str | None) -> tuple[int, int] | None:
    """``--rows 10-20`` (or ``--rows 10``): the rows, as a run numbers them, a redrive keeps to."""
    if text is None:
        return None
    lo, sep, hi = text.partition("-")
    try:
        first, last = int(lo), int(hi if sep else lo)
    except ValueError:
        first, last = -1, -1
    if first < 0 or last < first:
        raise UsageError(f"--rows {text}: write the rows as FIRST-LAST (like 10-20) or one row (like 10), "
                         "numbered as the run's lines number them")
    return first, last


def step_number(pool: Pool, given: str | None) -> int | None:
    """``--step NAME`` (or its number) as the task's step number."""
    if given is None:
        return None
    if given.isdigit() and 1 <= int(given) <= len(pool.steps):
        return int(given)
    found = pool.step_named(given)
    if found is None:
        names = [s.name for s in pool.steps if s.name]
        raise UsageError(f"--step {given}: the task has no such step - give a step's name or its number "
                         f"(1 to {len(pool.steps)}){did_you_mean(given, names)}")
    return found.num


def stored_pool(found: Mapping[str, Any], task: str) -> Pool:
    """The pool the task was planned with: the document it keeps, else (a task planned before
    tasks kept it) its pool file, where it still is."""
    file = str(found.get("pool_file") or task)
    document = found.get("document")
    if isinstance(document, dict):
        base = Path(found.get("base") or Path(file).parent)
        return load_pool_value(document, file=file, base=base)
    if Path(file).is_file():
        return load_pool(Path(file))
    raise JournalError(f"the task {task} keeps no copy of its pool, and its pool file {file} is not there - "
                       f"run it again with 'pooler run POOL --task {task}'.")


def pool_changed(found: Mapping[str, Any]) -> str | None:
    """The pool file, when it is there and differs from the one the task was planned with."""
    for planned in found.get("files") or []:
        if planned.get("num") == POOL_FILE:
            path = Path(str(planned.get("path") or ""))
            if path.is_file() and planned.get("sha256") and digest(path) != planned["sha256"]:
                return str(path)
    return None
