"""Every status word pooler writes, in one place: a call's, a step's, a task's, a journal record's.

Used by the executor, the journal, the answer, the shared runner, the reports and the CLI.  Each
is a ``str`` enum: a status compares equal to its word and is written as that word in JSON, in the
journal and in the answer, which keep the wire and file formats as documented.  A leaf: it imports
nothing of pooler.
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    def __str__(self) -> str:
        return str(self.value)


class CallStatus(_Word):
    """completed, failed, skipped (its key already done in this task), not_run, in_doubt (sent,
    answer lost)."""

    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_RUN = "not_run"
    IN_DOUBT = "in_doubt"


class InDoubtAction(_Word):
    """What was done with a call found in doubt (the answer's ``in_doubt`` list, and the journal's
    ``doubt`` column): counted done without its answer (``--in-doubt skip``), the pool stopped at
    it (``--in-doubt stop``), sent again under its key (``retry``), or its key asked of the store
    first (a probe)."""

    SKIPPED = "skipped"
    STOPPED = "stopped"
    RETRIED = "retried"
    PROBED = "probed"


class StepStatus(_Word):
    """The status of a step's entry, and of the answer itself, is a call's (``CallStatus``) or this
    one: some of its calls landed and the others did not (or were never sent)."""

    PARTIAL = "partial"


class CompareClass(_Word):
    """What a step's ``compare`` found a row of its data file to be: new (no row of the store's
    table matches it) and changed (its fields differ) are sent; unchanged is counted, never sent."""

    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"


class StepState(_Word):
    """Where a step stands in a run on one host: not started, calls going, over."""

    WAITING = "waiting"
    ACTIVE = "active"
    DONE = "done"


class WorkState(_Word):
    """Where a call of a task stands in its journal's ``work`` table."""

    READY = "ready"
    CLAIMED = "claimed"
    SENT = "sent"
    #: Recorded in doubt by an earlier run: a task run again leaves it to its runners' rule.
    DOUBT = "doubt"
    #: Planned after the task's sample: a run that asks for more rows releases it.
    BEYOND = "beyond"
    DONE = "done"


class TaskStatus(_Word):
    """A task's status in the journal: ``running`` while a run goes on, then its answer's
    (completed, failed, partial), or ``sampled`` (a sample of its rows completed); ``dead`` is
    what ``pooler runs`` tells of a task left ``running`` by a run that died."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    PARTIAL = "partial"
    SAMPLED = "sampled"
    DEAD = "dead"


class RecordStatus(_Word):
    """A journal record's status is a call's final status (``CallStatus``) or this one: the
    request left and no answer is recorded yet."""

    SENT = "sent"


class McpTaskStatus(_Word):
    """A task's status as the MCP Tasks extension (2026-07-28) tells it to a client: ``working``,
    ``input_required`` (the client's word is asked), then ``completed`` (the tool's result, whatever
    the pool's outcome) or ``cancelled``."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class PlanState(_Word):
    """A plan ``pooler mcp`` made for an agent: waiting to be committed,
    committed (running), done, or failed."""

    PLANNED = "planned"
    COMMITTED = "committed"
    DONE = "done"
    FAILED = "failed"


#: Every final status, in the order the answer counts them.
FINAL: tuple[CallStatus, ...] = (CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.IN_DOUBT,
                                 CallStatus.SKIPPED, CallStatus.NOT_RUN)
#: The statuses after which a call's command is known to have been carried out (or skipped as done).
LANDED: tuple[CallStatus, ...] = (CallStatus.COMPLETED, CallStatus.SKIPPED)
#: The statuses a step's outcome is trouble with: what it did is not known to be done.
TROUBLE: tuple[CallStatus, ...] = (CallStatus.FAILED, CallStatus.IN_DOUBT)
#: A journal record's statuses whose call may or may not have been carried out.
DOUBTFUL: tuple[str, ...] = (RecordStatus.SENT, CallStatus.IN_DOUBT)


def final_status(record_status: str) -> CallStatus:
    """What a journal record's status means as its call's final status: ``sent`` with no answer
    recorded is ``in_doubt`` (nobody knows whether the store carried it out)."""
    if record_status == RecordStatus.SENT:
        return CallStatus.IN_DOUBT
    return CallStatus(record_status)
