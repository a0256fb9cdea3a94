"""A step's probe: the read that settles a call in doubt, and what its answer proves.

The probe is sent as a call of its own (never under the call's Idempotency-Key): ``landed`` true
in its detail, the call landed; false in an answer that is ``result: true``, the call was proven
not carried out; anything else (a refusal, a crash, the probe itself in doubt, a ``landed`` that
is neither) settles nothing, and the call stays in doubt: unknown is not failed.

A read proves the call not carried out only if nothing of the call can still be running at the
store when it reads (``weigh``): a read that overlaps a write still in flight finds nothing and
proves nothing.
"""

from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.errors import PoolerError, StoreError
from pooler.journal.work import BUSY, WorkRow, WorkStore
from pooler.pool.model import Step
from pooler.pool.paramplan import ParamsPlan
from pooler.run.callplan import Prepared
from pooler.run.entries import LANDED, NOT_LANDED, UNSETTLED
from pooler.statuses import CallStatus

#: Seconds after its request left when pooler takes the store's work on a call as over, whatever
#: became of its answer: longer than a store lets a request run (PHP's max_execution_time, a web
#: server's or a gateway's timeout, are a minute or a few).
SETTLE = 600.0


@dataclass(frozen=True)
class Verdict:
    """What a probe said: one of ``entries.VERDICTS``, the detail standing for the call's (landed), and
    the probe's message."""

    said: str
    detail: Any = None
    message: str = ""


def probe_params(plan: ParamsPlan, data: Any, chunked: bool, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The probe's fields for a call of ``data`` (its row, or for a chunk its first row): templates
    filled as the step's params are."""
    scope: Mapping[str, Any] = variables
    if data is not None:
        scope = ChainMap({"row": data[0] if chunked else data}, dict(variables))
    return plan.fill(scope, {})


def send_probe(client: ToolRunClient, step: Step, params: dict[str, Any]) -> Verdict:
    """The step's probe sent once, and what its answer proves."""
    probe = step.probe
    assert probe is not None
    try:
        reply = client.tool_run(step.probe_unit, probe.command, params)
    except StoreError as exc:
        return Verdict(UNSETTLED, message=f"the probe {probe.command} got no answer: {exc.message}")
    try:
        data = reply.data
        detail = data.get("detail")
        message = str(data.get("message") or reply.kind.name)
        if reply.kind.status != CallStatus.COMPLETED or data.get("result") is not True \
                or not isinstance(detail, Mapping):
            return Verdict(UNSETTLED, message=f"the probe {probe.command} answered {message}")
        landed = detail.get(probe.landed)
        if landed is True:
            return Verdict(LANDED, detail.get(probe.detail) if probe.detail else {}, message)
        if landed is False:
            return Verdict(NOT_LANDED, message=message)
        return Verdict(UNSETTLED, message=f"the probe {probe.command} answered {probe.landed} = {landed!r}, "
                                          "neither true nor false")
    except PoolerError as exc:
        return Verdict(UNSETTLED, message=f"the probe {probe.command} could not be read: {exc.message}")
    finally:
        reply.release()


def weigh(verdict: Verdict, ready: Prepared, command: str, settle: float = SETTLE) -> Verdict:
    """What a probe's answer proves of ``ready``: its "not landed" only when no request of the call
    can still be running at the store, else nothing (the call stays in doubt).  In the run, the
    store's own answer to every try that left ended its work on them (``Kind.over``); a call an
    earlier run left in doubt, only once its request left ``settle`` seconds ago."""
    if verdict.said != NOT_LANDED:
        return verdict
    if ready.doubted:
        if ready.left_at is None:
            why = "when the call's request left is not known, and it may still be running at the store"
        elif (age := time.monotonic() - ready.left_at) < settle:
            why = (f"the call's request left {age:.0f} s ago and may still be running at the store; a probe "
                   f"{settle / 60:.0f} minutes after it left settles it")
        else:
            return verdict
    elif ready.lost:
        why = "the call's request lost its answer and may still be running at the store"
    else:
        return verdict
    return Verdict(UNSETTLED, message=f"the probe {command} found it not landed, but {why}")


def settled_text(verdict: Verdict, step_id: str | None, before: str = "") -> str:
    """The message of a call its probe found landed; or, of one it left in doubt, the message
    ``before`` it followed by the probe's sentence."""
    if verdict.said == LANDED:
        sent = f"the call {step_id}" if step_id else "the call"
        return f"Settled by its probe: {sent} was in doubt, and it landed ({verdict.message})."
    # The message before may be a client's, which ends without a full stop: the probe's is a sentence
    # of its own.
    before = before.rstrip()
    if before and not before.endswith((".", "!", "?")):
        before += "."
    return f"{before} Its probe settled nothing ({verdict.message}): the call stays in doubt.".lstrip()


def gate_again(work: WorkStore, row: WorkRow, got: Prepared) -> int | None:
    """A call its probe proved not carried out, gated again under its key's next round (so the
    journal keeps the round it goes under): its new fencing epoch, or None when it cannot go now
    (then it is recorded failed, as it stands, for a rerun to send)."""
    if got.epoch is None:
        return None
    got.ids = replace(got.ids, round=got.ids.round + 1)
    got.again = True
    epoch = work.gate(replace(row, epoch=got.epoch), got.ids.key, got.ids.step_id or "", got.ids.round)
    return None if epoch == BUSY else epoch
