"""What the journal holds: its tables, and the records of tasks and calls it reads and writes.

The SQLite journal (``pooler.journal.sqlite.journal``) and what reads its rows share these, so the shapes of a
task and of a call are written once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from pooler import strictjson
from pooler.folders import state_dir
from pooler.journal.connector import Row
from pooler.journal.documents import Entry
from pooler.plural import plural
from pooler.statuses import FINAL, CallStatus

#: Statuses a call can end with, and ``sent`` for a call whose answer is not recorded (yet).
FINAL_STATUSES = tuple(s.value for s in FINAL)


class FlowEvent(TypedDict):
    """A change in a runner's flow: ``what`` is one of ``FLOW_EVENTS``; ``line`` tells it."""

    at: float
    what: str
    line: str


#: What a flow event tells: the width cut (a busy or gateway answer), every
#: new call paused (a Retry-After), the breaker opened, the store answering again, the store down.
FLOW_EVENTS = ("cut", "pause", "breaker open", "store back", "store down")


class _FlowRecord(TypedDict):
    """What one runner's flow control did in one run (``record_flow``), for the answer and the
    report.  ``seconds`` has a row a wall-clock second the runner started or ended calls in:
    ``[second (epoch, whole), calls started, busy answers (429, 503 with Retry-After), gateway
    answers, requests that never reached the store, ms calls waited before they started, the
    width (calls it allowed in flight) at the end of that second]``."""

    run: int
    runner: str
    seconds: list[list[int]]
    events: list[FlowEvent]
    #: Milliseconds calls waited before they started (a rate's slot, a pause, the learnt rate).
    throttled_ms: int
    #: The widths it allowed: the highest, and the one at its end.
    highest: int
    final: int
    busy: int
    trips: int


class StoreFlow(TypedDict):
    """What a runner took of its store's bucket (a store's ``rate:``, run/storerate.py): the
    store's limit, its slots, the store's numbers of its first and last slot (every task's slots
    are numbered in one count), and the most tasks that shared the store at once (those that wanted
    more of it than they got, its own included)."""

    per_second: float
    burst: int
    slots: int
    first: int
    last: int
    sharing: int


class FlowDoc(_FlowRecord, total=False):
    """A runner's flow record with what later versions added (records older than them lack it):
    milliseconds calls were held behind the task's pause; busy calls sent again, and those left
    not run (their ``busy_for`` ran out); what it took of its store's rate."""

    held_ms: int
    busy_resent: int
    busy_not_run: int
    store: StoreFlow


def flow_of(run: int, doc: Any) -> FlowDoc:
    """A recorded flow document under the run the journal kept it in."""
    flow: FlowDoc = doc
    flow["run"] = int(run)
    return flow


@dataclass(frozen=True)
class CallId:
    """Which call a record is about: task, run of the task, step number, row, key and step id."""

    task: str
    run: int
    num: int
    row: int | None
    key: str | None
    step_id: str | None
    #: A keyed call's round: 1 at first, one more after each refusal, so a task run again sends a
    #: refused call anew instead of getting the refusal the store kept for its Idempotency-Key.
    round: int = 1
    #: The concurrent slot the call ran in (0 to width - 1), for the report's timeline.
    lane: int | None = None
    #: Its ``serialize_on`` value (masked), when the pool has one.
    serial: str | None = None


@dataclass(frozen=True)
class TaskRow:
    """One task as ``pooler runs`` lists it."""

    id: str
    pool_file: str
    started: str
    finished: str | None
    status: str
    runs: int
    total: int | None
    succeeded: int | None
    failed: int | None
    skipped: int | None
    not_run: int | None
    #: The store the task runs against (None for a task made before tasks recorded theirs).
    store: str | None = None
    #: The rows its compares found unchanged and did not send (None: no compare).
    unchanged: int | None = None


@dataclass(slots=True)
class AnswerRow:
    """One call of a task as its answer reads it (``answer_rows``), by the names of its columns.
    Read, never changed: a call told otherwise (in doubt, skipped) is a new record
    (``dataclasses.replace``).  Not frozen: a million of them stream past, and a frozen record
    costs some six times as much to make."""

    num: int
    idx: int
    #: ``call``, or a placeholder of a step over a table not read yet.
    kind: str
    #: The rows the call carries (1 for a step of one call).
    size: int
    #: Its work state (``WorkState``): planned, claimed, sent, doubt, done, beyond.
    state: str
    #: The status it ended with (None until it is done).
    status: str | None
    entry: Entry | None
    #: What was done about it in doubt (retried, stopped, skipped), and the step id it was in doubt under.
    doubt: str | None
    doubted: str | None
    step_id: str | None
    detail: Any
    #: When it was sent and done, in ms since the epoch (None: not yet).
    sent_ms: int | None
    done_ms: int | None
    #: Done in an earlier run than the task's current one.
    earlier: bool
    key: str | None
    #: Its first and last row (None for a step of one call).
    first: int | None
    last: int | None

    @classmethod
    def from_row(cls, row: Row, json_out: Callable[[Any], Any]) -> AnswerRow:
        """The record of an ``answer_rows`` row, its JSON columns read by ``json_out``."""
        return cls(int(row["num"]), int(row["idx"]), row["kind"], int(row["size"]), row["state"],
                   row["status"], json_out(row["entry"]), row["doubt"], row["doubted"], row["step_id"],
                   json_out(row["detail"]), row["sent_ms"], row["done_ms"], bool(row["earlier"]),
                   row["key_text"], row["row_first"], row["row_last"])


def default_journal_path(environ: Mapping[str, str] | None = None) -> Path:
    """``journal.sqlite`` in the state folder (``$XDG_STATE_HOME/pooler``, else
    ``~/.local/state/pooler``), read from ``environ`` (the process's environment by default)."""
    return state_dir(environ) / "journal.sqlite"


def pool_identity(pool_file: str | Path) -> str:
    """The pool file as the journal knows it: resolved, so a path through a symlink or with ``..``
    names the same pool (and its keys) as the real path does."""
    return str(Path(pool_file).resolve())


_SECOND: tuple[int, str] = (-1, "")


def now_text() -> str:
    global _SECOND  # noqa: PLW0603 - a one-entry cache: two stamps a call, formatted once a second
    now = time.time()
    whole = int(now)
    second, text = _SECOND
    if second != whole:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(whole))
        _SECOND = (whole, text)
    return f"{text}.{int(now * 1000) % 1000:03d}"


def dumps(value: Any) -> str:
    return strictjson.dumps(value, ensure_ascii=False, separators=(",", ":"))


def split_entry(entry: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """An entry as two JSON texts: without its detail, and the detail (NULL when it has none).

    The detail has a column of its own (references read it); it is not written twice.
    """
    if entry is None:
        return None, None
    if "detail" not in entry:
        return dumps(entry), None
    return dumps({k: v for k, v in entry.items() if k != "detail"}), dumps(entry["detail"])


def join_entry(body: str | None, detail: str | None) -> dict[str, Any] | None:
    """The entry ``split_entry`` wrote, its detail back in its place (after ``message``)."""
    if body is None:
        return None
    entry: dict[str, Any] = json.loads(body)
    if detail is None:
        return entry
    value = json.loads(detail)
    out: dict[str, Any] = {}
    for k, v in entry.items():
        out[k] = v
        if k == "message":
            out["detail"] = value
    out.setdefault("detail", value)
    return out


PLAN_ORDER = tuple(s.value for s in (CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.IN_DOUBT,
                                     CallStatus.SKIPPED, CallStatus.NOT_RUN))
_WORDS = {CallStatus.IN_DOUBT: "in doubt", CallStatus.NOT_RUN: "not run"}


@dataclass(frozen=True)
class PlanCounts:
    """The calls of a task's plan, by status (a chunk is one call, however many rows it carries)."""

    planned: int
    completed: int
    failed: int
    in_doubt: int
    skipped: int
    not_run: int

    def text(self) -> str:
        """``20,000 calls planned: 1,984 completed, 1 in doubt, 18,015 not run`` (zero counts left
        out)."""
        parts = [f"{getattr(self, name):,} {_WORDS.get(name, name)}" for name in PLAN_ORDER
                 if getattr(self, name)]
        return f"{plural(self.planned, 'call')} planned: {', '.join(parts) or 'nothing yet'}"
