"""What a run decides about a call without sending it, written once for every journal: a call an
earlier run (or a runner whose lease expired) sent and never recorded, weighed by the task's
``--in-doubt`` policy; and which table of an earlier step a ``for_each.step`` reads.

The single-host run and the shared runner both ask here, so their messages and their choices
cannot drift apart; each then records the ruling in its own journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pooler.journal.documents import Entry
from pooler.pool.model import Step
from pooler.run.entries import counted_done, not_sent
from pooler.statuses import CallStatus, InDoubtAction

#: How a ruling names a sender other than an earlier run of the task.
BY_EXPIRED_RUNNER = " by a runner whose lease expired"


@dataclass(frozen=True)
class InDoubtRuling:
    """A call found in doubt, ended without being sent."""

    status: CallStatus
    entry: Entry
    #: What the answer's ``in_doubt`` list says was done: skipped, stopped, or None.
    action: InDoubtAction | None
    #: The pool stops at this call (``--in-doubt stop``).
    halt: bool


def rule_in_doubt(head: Entry, step: Step, key: str | None, step_id: str | None, policy: str, *,
                  sender: str = "") -> InDoubtRuling | None:
    """The task's policy applied to a call sent as ``step_id`` whose answer never came back; None
    when it goes out again under its same Idempotency-Key (``retry``: only a keyed call can, since
    nothing else tells the store it is a repeat).  ``sender``: who sent it, when not an earlier run."""
    if key is not None and policy == "retry":
        return None
    if policy == "skip":
        entry = counted_done(head, key, step_id, f"counted done without its answer: the call {step_id} "
                             f"was sent{sender} and its answer never came back (--in-doubt skip).")
        return InDoubtRuling(CallStatus.SKIPPED, entry, InDoubtAction.SKIPPED, halt=False)
    named = f" ({step.name})" if step.name else ""
    message = (f"Step {step.num}{named} was sent as {step_id}{sender} and its answer never came back: "
               "it may or may not have been carried out. Check the store, then run the task again "
               "with --in-doubt skip (it was done) or --in-doubt retry (send it again with the "
               "same Idempotency-Key).")
    stopped = policy == "stop"
    entry = not_sent(head, CallStatus.IN_DOUBT, key, message, step_id=step_id)
    return InDoubtRuling(CallStatus.IN_DOUBT, entry, InDoubtAction.STOPPED if stopped else None,
                         halt=stopped)


def table_to_read(step: Step, source: str, written: Sequence[str]) -> tuple[str | None, str | None]:
    """The table of the step labelled ``source`` that ``step`` (a ``for_each.step``) reads, among
    those it ``written``; or why none can be read."""
    assert step.for_each is not None
    name = step.for_each.table
    if name is None:
        if len(written) != 1:
            return None, (f"step {step.num} reads the rows of step {source}, which wrote {len(written)} "
                          f"tables ({', '.join(written) or 'none'}) - name one with for_each.table.")
        return written[0], None
    if name not in written:
        return None, f"step {step.num} reads the table {name} of step {source}, which wrote no such table."
    return name, None
