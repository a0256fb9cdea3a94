"""What a task asks its client (``input_required`` of the Tasks extension): the word on calls an
earlier run left in doubt, and the confirmation of a plan's counts - the commit of a plan of more
than ``LONG_CALLS`` calls, by a client that declares the extension, first asks the client to
confirm what it will send; a confirmation runs it, a decline ends the task with nothing sent and
the plan still planned.

Until it is answered the task is not in the journal (nothing was planned there yet): the server
that was asked holds the question, as it holds the calls it runs.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pooler.journal.records import PlanCounts
from pooler.plural import plural
from pooler.statuses import McpTaskStatus

if TYPE_CHECKING:
    from pooler.pool.compiler import Plan

#: What a client may say of calls in doubt.
DECISIONS = ("retry", "skip")
IN_DOUBT = {"type": "object", "required": ["decision"], "properties": {"decision": {
    "type": "string", "enum": list(DECISIONS),
    "description": "retry: send them again under their keys; skip: leave them in doubt."}}}
#: What the form asks: true runs the plan; a decline (or false) ends the task, nothing sent.
SCHEMA = {"type": "object", "required": ["confirm"], "properties": {"confirm": {
    "type": "boolean", "description": "true: send the calls; false (or decline): send nothing."}}}
ACCEPT = '{"action": "accept", "content": {"confirm": true}}'
DECLINE = '{"action": "decline"}'
#: How many unit.command pairs the question names before it counts the rest.
NAMED = 5


@dataclass(frozen=True)
class Counts:
    """What a commit will send, asked before it does."""

    plan_id: str
    calls: int
    message: str


def counts(plan: Plan, plan_id: str, classes: str = "", *,
           calls_by: Mapping[str, int] | None = None) -> Counts:
    """``60 calls: 58 MELBIS_AGENT_TEST.CmdEcho, 2 MELBIS_AGENT_CURRENCY.CmdAdd - ...``; with the
    plan's compare ``classes`` (``12 new, 40 changed, 8 unchanged``) after the count.  ``calls_by``:
    the calls of each unit.command as a plan file counts them (else one a step)."""
    by_command = Counter(calls_by) if calls_by is not None else \
        Counter(f"{step.unit}.{step.command}" for step in plan.pool.steps)
    calls = sum(by_command.values())
    named = ", ".join(f"{n:,} {command}" for command, n in by_command.most_common(NAMED))
    rest = len(by_command) - NAMED
    more = f", and {plural(rest, 'other command')}" if rest > 0 else ""
    told = f"{plural(calls, 'call')} ({classes})" if classes else plural(calls, "call")
    return Counts(plan_id, calls, f"{told}: {named}{more} - the plan {plan_id}, "
                                  "to be sent to the store. confirm true sends them; false (or decline) "
                                  "ends the task with nothing sent, the plan still planned.")


def confirmed(answer: Any) -> bool | None:
    """The client's word: True (send), False (send nothing), None when it is not a word of the form."""
    if not isinstance(answer, Mapping):
        return None
    if answer.get("action") == "decline":
        return False
    content = answer.get("content")
    if answer.get("action") == "accept" and isinstance(content, Mapping) and \
            isinstance(content.get("confirm"), bool):
        return bool(content["confirm"])
    return None


def unsent(task_id: str, asked: Counts, since: str, now: str) -> dict[str, Any]:
    """The task of a commit not sent (asked, or declined): its calls, none sent."""
    return {"taskId": task_id, "createdAt": since, "lastUpdatedAt": now, "ttlMs": None,
            "counts": dataclasses.asdict(PlanCounts(asked.calls, 0, 0, 0, 0, asked.calls))}


def declined(task_id: str, asked: Counts, since: str, now: str) -> dict[str, Any]:
    """The task of a commit the client declined: ended, nothing sent, the plan still planned."""
    return {**unsent(task_id, asked, since, now), "status": McpTaskStatus.CANCELLED,
            "statusMessage": f"declined: nothing was sent of the {plural(asked.calls, 'call')} of the plan "
                             f"{asked.plan_id}, which stays planned."}


def asking(key: str, message: str, confirm: bool, found: dict[str, Any]) -> dict[str, Any]:
    """The task waiting for the client's word: its one input request, an elicitation form."""
    return {**found, "status": McpTaskStatus.INPUT_REQUIRED, "statusMessage": message,
            "inputRequests": {key: {"method": "elicitation/create", "params": {
                "mode": "form", "message": message, "requestedSchema": SCHEMA if confirm else IN_DOUBT}}}}
