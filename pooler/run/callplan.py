"""What a call is: a step's plan (worked out once, frozen) and what a run changes of it, one call
of it, a call made ready to send, and its outcome; and the value a call is serialized on.

The executor, the scheduler, the call runner and a shared task's runner all pass these around.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pooler.journal.documents import Entry
from pooler.journal.records import CallId
from pooler.pool.model import Step
from pooler.pool.paramplan import ParamsPlan, shape_rows
from pooler.redact import Redactor
from pooler.run.entries import head


@dataclass(frozen=True)
class StepPlan:
    """What is worked out once per step and reused by each of its calls: the same for every run
    and every runner of a task (what a run changes of a step is its ``StepState``)."""

    step: Step
    prefix: str
    #: The params walked once: only templates and references are filled per call.
    params: ParamsPlan
    #: Lower-case names of the earlier steps this one waits for (references and for_each.step).
    deps: frozenset[str]
    over_rows: bool
    #: For a step over rows sent in chunks: the params field that takes each chunk's rows.
    chunk_field: str | None = None
    #: Rerun of a task with a keyed step over rows: its table file keeps the rows of earlier runs.
    keep_tables: bool = False
    #: The params of the step's probe, walked once as its own params are (None: no probe).
    probe: ParamsPlan | None = None
    #: The shape of each row a chunk sends (``chunk_row``), walked once; None: the rows as they are.
    chunk_row: ParamsPlan | None = None

    def chunk_params(self, params: dict[str, Any], rows: list[Any], variables: Mapping[str, Any]
                     ) -> dict[str, Any]:
        """``params`` with the chunk's rows, each in the step's shape, in the chunk's field."""
        assert self.chunk_field is not None
        return {**params, self.chunk_field: shape_rows(self.chunk_row, rows, variables)}


@dataclass
class StepState:
    """What one run changes of a step's table files: whether a call of this run has started them
    (the calls of a step over rows after it append), under the lock their appends take."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    written: bool = False


@dataclass
class Call:
    """One call of a step: for a step over rows, its row (or chunk of rows)."""

    plan: StepPlan
    row: int | None = None
    last: int | None = None
    data: Any = None
    size: int = 1

    def head(self) -> Entry:
        step = self.plan.step
        return head(step.num, step.name, step.unit, step.command, row=self.row, last=self.last)


@dataclass
class Prepared:
    """A call ready to leave."""

    call: Call
    params: dict[str, Any]
    key: str | None
    ids: CallId
    serial: str | None = None
    #: The request's JSON, encoded before the call is recorded as sent: what cannot be, never is.
    body: bytes | None = None
    #: The step id of the call an earlier run left in doubt, when this one sends it again.
    doubted: str | None = None
    number: int = 0
    #: The requests sent for this call so far (its tries).
    attempts: int = 0
    #: A try of it may have been carried out (it left and its answer was lost, or was no proof).
    maybe_ran: bool = False
    #: A try of it left and the store's end of it was never seen (its answer lost, or a gateway's):
    #: the store may still be carrying it out.
    lost: bool = False
    #: When (``time.monotonic``) the request of the call an earlier run left in doubt left, as the
    #: journal told it; None: not known.
    left_at: float | None = None
    #: The fencing epoch its gate gave it.
    epoch: int | None = None
    #: Sent again because its probe proved it not carried out (not probed again).
    again: bool = False
    #: When (monotonic) the store first answered it busy: its patience (``busy_for``) counts from there.
    busy_since: float | None = None
    #: A try whose answer was lost was tried again (kept across the sends a busy answer asks for).
    retried: bool = False
    #: Sent again after a busy answer or a busy refusal: it goes on counting its tries.
    carried: bool = False
    #: Refused with a refusal its step's ``retry.refusals`` names, attempts left: the runner sends it
    #: again under its key's next round.
    next_round: bool = False
    #: The store's last answer that turned it away (busy, or a busy refusal), while it waits to be
    #: sent again: what it ends with if the run stops before it goes.
    turned_away: Outcome | None = None


@dataclass
class Outcome:
    """A call's one status, its entry in the answer, and the detail that feeds references."""

    call: Call
    status: str
    entry: Entry
    detail: Any = None
    #: Stops the pool whatever stop_on_error says (a key in doubt under ``--in-doubt stop``).
    halt: bool = False
    #: What was done about a call found in doubt: retried, stopped or skipped.
    in_doubt: str | None = None
    step_id: str | None = None
    #: The call an earlier run left in doubt, which this one sent again: the in-doubt list names it.
    doubted: str | None = None
    #: Proven not carried out by its step's probe: the runner sends it again, once, under the
    #: key's next round (recorded as it is when the runner cannot).
    send_again: bool = False
    #: No request of it ever reached the store (connection refused, unknown host, TLS): the
    #: runner may put it back unsent while the breaker is open.
    unsent: bool = False
    #: Answered busy (429, 503 with Retry-After): not carried out, and sent again by the runner
    #: behind the task's pause while its step's patience lasts (recorded not run when it does not).
    busy: bool = False
    #: Refused as busy (``retry.refusals``) with attempts left: sent again under the next key round.
    next_round: bool = False

    def kept_detail(self, redactor: Redactor) -> Any:
        """The detail as the journal keeps it: the entry's, masked with it already when the entry
        holds it (the store's detail), so it is not looked through twice."""
        if "detail" in self.entry and self.detail is not None:
            return self.entry["detail"]
        return redactor.value(self.detail)


def serial_value(params: Any, path: str) -> str | None:
    """The JSON-canonical value at the dotted ``path`` of ``params``; None puts no constraint."""
    value: Any = params
    rest = path
    while rest:
        if isinstance(value, dict) and rest in value:
            value, rest = value[rest], ""
            break
        part, _, rest = rest.partition(".")
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    if value is None or isinstance(value, dict | list):
        return None
    return json.dumps(value, sort_keys=True)
