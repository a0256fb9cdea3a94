"""The documents a task's journal keeps and every stage passes on: a call's entry, the answer
(contract section 3) and its steps' entries, and the task's own document (what it keeps of its pool
and of the command that planned it).

Typed here, below the engine, so that the journal, the runner, the report, the command line and
the MCP server name one shape each; what builds them is ``pooler.run.entries`` and
``pooler.run.join``.  An entry is open: a store's extra keys join it beside these.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, TypedDict, cast

from pooler.pool.model import Mode

#: What a run does with a key an earlier run sent without recording its answer (``--in-doubt``).
InDoubt = Literal["retry", "stop", "skip"]


class _EntryKeys(TypedDict):
    """The keys every Entry carries."""

    num: int
    name: str
    unit: str
    command: str


class Entry(_EntryKeys, total=False):
    """One call's entry: its step, its place among the rows, its status and key, and its result."""

    #: A call of a step over rows: its row, or the first and last rows of its chunk.
    row: int
    rows: list[int]
    status: str
    key: str | None
    step_id: str | None
    #: Counted done without its answer (``--in-doubt skip``).
    in_doubt: bool
    #: The step id of a call in doubt this one sent again.
    sent_again: str
    #: What the step's probe said of the call in doubt: landed, not landed, unsettled.
    probe: str
    result: bool
    message: str
    time: dict[str, Any]
    result_omitted: bool
    # The call's result, as the store answered it.
    detail: Any
    tables: dict[str, Any]
    files: Any
    #: The rows a chunk carries when they are fewer than its span (a compare left some unsent):
    #: what reporters count (``Progress.told``).
    size: int


class RowsCount(TypedDict):
    """A step over rows' rows by the status of the call that carried them."""

    total: int | None
    completed: int
    skipped: int
    failed: int
    in_doubt: int
    not_run: int


class _RowsEntryKeys(TypedDict):
    """The keys every RowsEntry carries."""

    num: int
    name: str
    unit: str
    command: str
    status: str
    key: None
    result: bool
    message: str
    rows: RowsCount
    calls: int


class RowsEntry(_RowsEntryKeys, total=False):
    """The one entry of a step over rows: a summary, with its failed and in-doubt calls in full."""

    detail: Any
    result_omitted: bool
    tables: dict[str, Any]
    failures: list[Entry]
    failures_omitted: int
    time: dict[str, Any]
    #: With a compare: its rows new, changed (both sent) and unchanged (counted, never sent).
    compare: dict[str, int]


class _InDoubtItemKeys(TypedDict):
    """The keys every InDoubtItem carries."""

    num: int
    name: str


class InDoubtItem(_InDoubtItemKeys, total=False):
    """A call found in doubt, and what was done about it: retried, stopped, skipped, or left."""

    row: int
    rows: list[int]
    key: str | None
    step_id: str | None
    action: str


class _AnswerKeys(TypedDict):
    """The keys every Answer carries."""

    result: bool
    status: str
    total: int
    succeeded: int
    failed: int
    skipped: int
    not_run: int
    calls_in_doubt: int
    in_doubt: list[InDoubtItem]
    task: str
    steps: list[Entry | RowsEntry]


class Answer(_AnswerKeys, total=False):
    """A run's answer: the batch summary's counts (of calls), then the steps' entries."""

    #: Failed or in doubt.
    time: dict[str, Any]
    #: Why the pool stopped before its end (SIGINT, SIGTERM, stop).
    interrupted: str
    #: What the probes of calls in doubt said (only when a probe was sent): landed, not_landed,
    #: unsettled.
    probes: dict[str, int]
    #: The rows the steps' compares found unchanged, and did not send (only with a compare).
    unchanged: int
    #: The calls a reviewed plan found changed since it was reviewed (see ``TaskDoc``).
    conflicts: list[Conflict]
    #: The error budgets' counts (``Budgets.tolerated``), when the pool has any.
    tolerated: dict[str, Any]
    #: What flow control did over the run's runners (``flow_summary``).
    flow: dict[str, int]
    #: What the MCP server's plan said beside the answer.
    notes: list[dict[str, Any]]
    #: The task counted against its plan (``pooler show``).
    plan: dict[str, int]
    #: What a redrive sent and kept (``pooler redrive``).
    redrive: dict[str, Any]


class Conflict(TypedDict):
    """A planned call not sent: its rows moved in the store since the plan."""

    step: int
    #: The call's number within its step, from 1 (as the plan file numbers it).
    call: int
    rows: list[int]
    key: str | None
    #: Each row that moved: ``row 17 (sku G17): price 10.5 in the plan, 12 in the store now``.
    moved: list[str]


class StepDoc(TypedDict):
    """What a task keeps of one of its steps, so ``pooler show`` needs no pool file."""

    num: int
    name: str
    unit: str
    command: str
    over_rows: bool
    #: The step's error budget (``Tolerate.doc()``), or None.
    tolerate: dict[str, Any] | None


class OptionsDoc(TypedDict):
    """The pool's options as the task keeps them (a run again may change ``stop_on_error``)."""

    mode: Mode
    max_concurrency: int
    serialize_on: str | None
    stop_on_error: bool
    include_results: bool


class _TaskDocKeys(TypedDict):
    """The keys every task's document carries."""

    fingerprint: str
    pool_file: str
    options: OptionsDoc
    in_doubt: InDoubt
    sample: int | None
    steps: list[StepDoc]
    planned_all: bool
    tolerate: dict[str, Any] | None


class TaskDoc(_TaskDocKeys, total=False):
    """What a task keeps of its pool and of the command that planned it (``journal.shared``);
    documents written by older versions lack the keys added since."""

    #: The pool's document (masked) and the folder its data files are read from: what
    #: ``pooler redrive`` runs with no pool file.
    document: dict[str, Any]
    base: str
    #: The tasks that share this one's keys, and the store the task runs against.
    key_scope: str
    store: str
    #: Each compared step's rows by class (``CompareClass``), by step number as text.
    compare: dict[str, dict[str, int]]
    #: The calls a reviewed plan found changed since.
    conflicts: list[Conflict]
    #: The data files the plan read (``PlannedFile``).
    files: list[dict[str, Any]]


class AnswerState(NamedTuple):
    """What tells whether a task's answer is built from its calls (``answer_state``)."""

    #: The task's document (None: planned before tasks kept one).
    shared: TaskDoc | None
    status: str
    #: No answer recorded yet.
    unanswered: bool


def as_entry(value: Any) -> Entry:
    """A call's entry as its JSON column reads back, ``{}`` for none: what the journal wrote as an
    ``Entry`` is one."""
    return cast(Entry, value or {})
