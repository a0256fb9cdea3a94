"""What the engine asks of any journal that holds a task's plan as work rows, one a call: the
task's journal (``TaskJournal``), one runner's view of the task's work (``WorkStore``) and its lease
(``RunnerLease``).  A SQLite file (one host, any number of processes) and a PostgreSQL database
(many hosts) each implement them; the runner in ``pooler/run/runner.py`` knows only these.

The states of a work row are ``statuses.WorkState``: ``ready`` to be claimed, ``claimed`` by a
runner, ``sent`` (its request may have left), ``doubt`` (sent by an earlier run, its outcome not
recorded: ruled by the runner's first tidy), ``beyond`` (after a sampled plan's sample) and
``done``.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from pooler.errors import JournalError
from pooler.journal.api import CallHistory
from pooler.journal.comparerows import CompareRows
from pooler.journal.documents import Answer, AnswerState, Entry, TaskDoc
from pooler.journal.records import AnswerRow, FlowDoc, PlanCounts, TaskRow
from pooler.pool.budget import Counts, Judge

#: Takes one work row, as the planner makes it (``WORK_COLUMNS``).
Write = Callable[[tuple[Any, ...]], None]

#: The columns of a work row a plan writes, in the order the planner gives them.
WORK_COLUMNS = ("task", "num", "idx", "kind", "row_first", "row_last", "size", "data", "deps", "serial",
                "key_text", "key_planned", "state")
#: Where a work row the planner makes has its key (None: its runner makes it).
KEY_COLUMN = WORK_COLUMNS.index("key_text")


@dataclass
class WorkRow:
    """One call of the task as the journal holds it."""

    num: int
    idx: int
    kind: str
    row_first: int | None
    row_last: int | None
    size: int
    data: Any
    deps: list[int]
    serial: str | None
    round: int
    #: The step id of the call an expired runner left in doubt, when this one sends it again.
    doubted: str | None
    key_text: str | None
    step_id: str | None
    #: The fencing epoch when the claim moved the call to sent (``gate_run``); None: claimed.
    epoch: int | None = None
    #: Seconds since the request of a call found in doubt left, as the journal tells it when the
    #: call is ruled (None: not known, or not a call found in doubt).
    sent_age: float | None = None


@dataclass
class Seat:
    """A runner's lease, taken in the transaction that creates or joins its task (so a runner
    joining meanwhile finds it there, and joins the run it is in rather than beginning one
    again): who, for how long, with how many calls in flight at most.  The journal sets ``taken``
    (monotonic) as it takes it: the lease's local deadline counts from there."""

    id: str
    seconds: float
    width: int | None
    taken: float | None = None

    @classmethod
    def new(cls, seconds: float, width: int | None) -> Seat:
        return cls(f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}", seconds, width)


@dataclass(frozen=True)
class Redrive:
    """What a redrive sends again of its task (``pooler redrive``): its failed calls (under the
    next key round), those in doubt (by the run's --in-doubt, or their probe) and those not run,
    of one step and rows (``rows``: first and last, as the run numbers them) or of all.  Nothing
    that completed or was skipped is sent again."""

    failed: bool = True
    in_doubt: bool = True
    not_run: bool = True
    step: int | None = None
    rows: tuple[int, int] | None = None

    def params(self, task: str, policy: str) -> dict[str, Any]:
        """The named parameters of the backends' ``redrive_*`` statements."""
        lo, hi = self.rows if self.rows is not None else (None, None)
        return {"task": task, "failed": int(self.failed), "in_doubt": int(self.in_doubt),
                "not_run": int(self.not_run), "step": self.step, "lo": lo, "hi": hi,
                "in_doubt_policy": policy}


@dataclass(frozen=True)
class Done:
    """A call's outcome to record: no tables, no halt (``WorkStore.done_all``)."""

    row: WorkRow
    status: str
    entry: Entry
    detail: Any
    doubt: str | None


@dataclass
class Settled:
    """How a call is ended without being sent (found in doubt, or its step cannot run)."""

    status: str
    entry: Entry | None
    doubt: str | None = None
    halt: str | None = None
    #: Tells from the task's counts, this call among them, why it halts the task (a budget).
    judge: Judge | None = None


@dataclass(frozen=True)
class Planned:
    """What a task's plan holds of one step: its rows, the ``idx`` its next call takes, and
    whether the placeholder of a step over a table is still there."""

    rows: int
    next_idx: int
    placeholder: bool


#: What ``WorkStore.gate`` gives for a call whose ``serialize_on`` value another call has in
#: flight (an epoch is never below 1).
BUSY = 0


@dataclass(frozen=True)
class OverTable:
    """A step over an earlier step's table (``source``), and the placeholder row that stands for
    its calls until that step has given its table."""

    num: int
    source: int
    placeholder: tuple[Any, ...]


#: What a runner does with a call sent without its answer recorded (by a runner whose lease
#: expired, when the flag says so; else by an earlier run): None puts it back to be sent again
#: (same key, same round); a ``Settled`` ends it.
DoubtPolicy = Callable[[WorkRow, bool], Settled | None]
#: A ready call whose step cannot run (a step it refers to did not complete): how it ends.
BlockedPolicy = Callable[[WorkRow, int, str], Settled]


class LeaseLost(JournalError):
    """The runner's lease expired or could not be renewed: it may send nothing more."""


class Split(Protocol):
    """Cuts a chunk of step ``num`` planned beyond a sample at the wider sample's end ``at``: the
    work rows of its two parts (the second under the step's ``next_idx``)."""

    def __call__(self, at: int, num: int, *, idx: int, next_idx: int, first: int, data: list[Any]
                 ) -> Iterable[tuple[Any, ...]]: ...


def narrower(planned: int | None, asked: int | None) -> bool:
    """Whether a plan of ``planned`` rows a step (None: all of them) holds fewer than are asked."""
    return planned is not None and (asked is None or asked > planned)


class RunnerLease(Protocol):
    """A runner's hold on its task: while it is alive, the calls it claimed are its own."""

    id: str
    lost: str | None
    #: The calls it has in flight at most (None: the task's cap).
    width: int | None

    def alive(self) -> bool:
        """Whether a request may leave now."""

    def check(self) -> None:
        """Raise ``LeaseLost`` unless a request may leave now."""

    def close(self) -> None:
        """Give the lease up (its calls are all recorded by now)."""


class WorkStore(Protocol):
    """The work of one task as one runner sees it."""

    def claim(self, limit: int, cap: int, on_doubt: DoubtPolicy, on_blocked: BlockedPolicy, *,
              tidy: bool = True, gate_run: int | None = None) -> list[WorkRow]:
        """Up to ``limit`` calls this runner may send, within the task-wide ``cap``, in file order
        (the steps they wait for completed, no earlier call of their ``serialize_on`` value open,
        the runner's fair share of the cap); with ``gate_run``, those whose key the plan holds
        already moved to sent, as ``gate`` does.  With ``tidy``, first take back the calls of
        runners that are gone (sent ones ruled by ``on_doubt``) and end the calls whose step
        cannot run (``on_blocked``)."""

    def gate(self, row: WorkRow, key: str | None, step_id: str, rnd: int, serial: str | None = None
             ) -> int | None:
        """``claimed → sent``, only while this runner's lease is alive and the task not halted:
        the call's fencing epoch, or None.  ``serial``: the digest of the call's ``serialize_on``
        value where a reference gave it, kept on the row; ``BUSY`` while another call of that
        value is claimed or sent (the call stays claimed, to be gated again)."""

    def release(self, row: WorkRow) -> None:
        """A call this runner claimed and will not send: back to ready for any runner."""

    def pace(self, bucket: str, interval: float, tolerance: float) -> float:
        """The next slot of the task's rate bucket ``bucket`` reserved, for every runner of the
        task alike (a call ``interval`` seconds after the one before, ``tolerance`` seconds of
        them at once: the generic cell rate algorithm): the seconds this call waits for it."""

    def hold(self, bucket: str, seconds: float) -> None:
        """No slot of ``bucket`` before ``seconds`` from now: a pause every runner of the task
        keeps."""

    def held(self, bucket: str) -> float:
        """The seconds left of ``bucket``'s hold (0 when it holds nothing), read without a write."""

    def done_and_claim(self, outcome: Done, *, limit: int, cap: int,
                       gate_run: int | None = None) -> tuple[bool, list[WorkRow]]:
        """A call's outcome recorded and the next calls claimed in one transaction (one round trip
        for one call at a time): whether the outcome was recorded, and the calls claimed."""

    def done_all(self, outcomes: Sequence[Done]) -> list[bool]:
        """Outcomes recorded in one transaction: whether each was (False: taken back)."""

    def done(self, row: WorkRow, status: str, entry: Entry, detail: Any, *, doubt: str | None,
             tables: dict[str, list[Any]] | None = None, prefix: str = "", into: str | None = None,
             halt: str | None = None, sent: bool = True, judge: Judge | None = None) -> bool:
        """Record a call's outcome (with the table rows it gave, and why it halts the task, or the
        ``judge`` of the task's counts with it, read in the transaction, that tells it); False when
        the call is no longer this runner's (taken back).  ``sent`` False: no request of it left."""

    def expand(self, row: WorkRow, work: list[tuple[Any, ...]]) -> bool:
        """Put the calls of a step over an earlier step's table in place of its placeholder."""

    def landed(self, key: str) -> tuple[Entry, Any] | None:
        """The entry and detail of a call of ``key`` that completed in the run the task is in, or
        None."""

    def kept_keys(self, num: int) -> set[str]:
        """The keys of the calls step ``num`` holds (done, in doubt or in flight): a placeholder
        a run again put back makes its calls again without them."""

    def planned(self, num: int) -> Planned:
        """What the plan holds of step ``num``."""

    def halt(self, reason: str) -> None: ...

    def open_counts(self) -> tuple[int, int, str | None]:
        """Calls ready, calls claimed or sent (by anyone), and why the task halted (or None)."""

    def details(self, nums: list[int]) -> dict[int, Any]:
        """The detail each step gives references: that of its last call that completed."""

    def table(self, num: int, name: str | None) -> tuple[list[str], list[Any]]:
        """The names of the tables step ``num`` gave, and the rows of ``name`` in call order."""


class Replanning(Protocol):
    """``--replan`` of a task, in one transaction the journal holds while no runner holds the
    task (``TaskJournal.replanning``)."""

    def step_calls(self, num: int) -> list[tuple[Any, ...]]:
        """The calls of step ``num``: (idx, state, status, key_text, data, round), by idx."""

    def drop_calls(self, num: int, idxs: list[int]) -> None: ...

    def write(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """New work rows (``WORK_COLUMNS``)."""

    def set_round(self, rnd: int, num: int, idx: int) -> None: ...

    def update_doc(self, doc: dict[str, Any]) -> None:
        """Merge ``doc`` into what the task keeps of its pool."""


class TaskJournal(Protocol):
    """A journal as the engine uses it to plan, join, run and answer a task."""

    def where(self) -> str:
        """How messages name this journal (a path, or a URL without its password)."""

    def close(self) -> None: ...

    def task(self, task_id: str) -> TaskRow | None: ...

    def tasks(self, limit: int = 20) -> list[TaskRow]:
        """The latest tasks, newest first."""

    def last_unfinished(self, pool_file: str) -> str | None:
        """The latest task of ``pool_file`` (as ``pool_identity`` gives it) that did not complete."""

    def shared(self, task_id: str) -> TaskDoc | None:
        """What the task keeps of its pool (its document); None when there is no such task."""

    def creating(self, task_id: str, pool_file: str, doc: TaskDoc, seat: Seat | None = None
                 ) -> AbstractContextManager[Write | None]:
        """The task created with its plan (the caller writes its rows with what this gives), in
        one transaction that commits when the block ends and leaves nothing when it raises; None
        when another runner created the task first.  ``seat``: the planner's lease, taken as the
        transaction ends."""

    def widening(self, task_id: str, sample: int | None
                 ) -> AbstractContextManager[tuple[dict[int, Planned], Write] | None]:
        """A plan of a sample alone (made before every row was planned) widened to ``sample``."""

    def release(self, task_id: str, sample: int | None, split: Split) -> bool:
        """A sampled plan widened to ``sample`` from the calls it planned beyond it."""

    def planned(self, task_id: str) -> dict[int, Planned]: ...

    def join(self, task_id: str, in_doubt: str, over: Sequence[OverTable] = (), *, seat: Seat | None = None,
             again: dict[str, Any] | None = None, redrive: Redrive | None = None) -> bool:
        """One more runner of the task; whether it starts a new run of it (``plan_again`` is
        that run's, over the steps ``over`` a table, and ``again`` is merged into the task's
        document, in the transaction that starts it).  ``seat``: this runner's lease, taken in
        the same transaction, under the task's lock.  ``redrive``: the new run sends only what
        it says (``redrive_again``), not what a run again would."""

    def run_of(self, task_id: str) -> int:
        """The run of the task its runners are in now."""

    def planned_calls(self, task_id: str) -> int:
        """The calls of the task's plan (but those beyond its sample)."""

    def budget_counts(self, task_id: str) -> dict[int, Counts]:
        """What the task's error budgets count, by step (see ``budget_counts``)."""

    def answer_rows(self, task_id: str) -> Iterator[AnswerRow]:
        """Every call of the task, streamed, in file order (but those beyond its sample)."""

    def answer_state(self, task_id: str) -> AnswerState | None:
        """The task's document, its status, and whether it has no recorded answer yet."""

    def answer(self, task_id: str) -> Answer | None:
        """The answer the task's last run recorded."""

    def finish_task(self, task_id: str, answer: Answer, status: str | None = None) -> None: ...

    def record_run(self, task_id: str, facts: dict[str, Any]) -> None:
        """The facts of the run the task is in (``run_facts``, masked), for its report."""

    def record_flow(self, task_id: str, flow: FlowDoc) -> None:
        """What one runner's flow control did in the run the task is in (``flow["run"]`` is
        ignored: the journal's run of the task is kept)."""

    def flows(self, task_id: str) -> list[FlowDoc]:
        """As ``CallHistory.flows``: every runner's flow, by run."""

    def live_runners(self, task_id: str) -> int: ...

    def plan_counts(self, task_id: str) -> PlanCounts | None: ...

    def table_rows(self, task_id: str) -> list[tuple[Any, ...]]:
        """The table rows the task's calls gave, in call order: (num, idx, name, prefix, into, rows),
        a part a call (``pooler gather``)."""

    def lease(self, task_id: str, seconds: float, width: int | None, seat: Seat | None = None
              ) -> RunnerLease:
        """This process registered as a runner of the task (by ``seat``: taken already, as the
        task was created or joined)."""

    def work(self, task_id: str, runner: str) -> WorkStore: ...

    def history(self) -> CallHistory:
        """The journal's call history, as a task's report reads it."""

    def replanning(self, task_id: str) -> AbstractContextManager[Replanning]:
        """The task's plan in one transaction for ``--replan``; refused while runners hold it."""

    def compare_rows(self) -> CompareRows:
        """Where a step's compare matches its rows, in this journal."""
