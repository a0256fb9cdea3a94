"""How the executor tells the world what it is doing, without knowing who listens.

The executor never imports rich: the CLI passes a reporter that renders, a test passes one that
records, a library user passes ``NullReporter`` or their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pooler.journal.documents import Answer, Entry
from pooler.pool.model import Pool, Step


@dataclass(frozen=True)
class CallEnd:
    """What a call that left tells beside its entry, for metrics and traces."""

    #: Its number in the run, as ``step_started`` gave it.
    number: int
    #: The kind of answer it met (``answer_kinds``: done, refused, crashed, reset, timeout...).
    kind: str
    #: The requests sent for it: more than 1 when it was tried again.
    attempts: int


class Reporter(Protocol):
    """Events of one run, in the order they happen.  Called from worker threads in parallel mode."""

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        """Before the first call; ``total`` counts the calls planned (rows included)."""

    def step_started(self, step: Step, call: int) -> None:
        """A call leaves; ``call`` is its 1-based number in the run."""

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        """A call that left (``step_started``) has its answer or has lost it; called on the thread
        that sent it, before ``step_finished``."""

    def step_finished(self, step: Step, result: Entry) -> None:
        """A call has its one status; ``result`` is its entry in the answer's ``steps``."""

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        """A step over rows has finished ``done`` of ``total`` rows (``None``: not yet known)."""

    def calls_planned(self, total: int) -> None:
        """The calls of the run, counted again: a step over an earlier step's table knows its rows
        only when it starts."""

    def pool_finished(self, answer: Answer) -> None:
        """The answer is complete."""


class NullReporter:
    """Listens to nothing."""

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        return None

    def step_started(self, step: Step, call: int) -> None:
        return None

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        return None

    def step_finished(self, step: Step, result: Entry) -> None:
        return None

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        return None

    def calls_planned(self, total: int) -> None:
        return None

    def pool_finished(self, answer: Answer) -> None:
        return None


class _Before:
    """A reporter written before ``call_ended`` existed: told every other event, that one dropped."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        return None


def listener(reporter: Reporter | None) -> Reporter:
    """The reporter a run tells its events to: ``NullReporter`` for none, and one that lacks an
    event added since it was written gets that event as a no-op."""
    if reporter is None:
        return NullReporter()
    if not hasattr(reporter, "call_ended"):
        found: Reporter = _Before(reporter)
        return found
    return reporter


def notice(reporter: Reporter, text: str) -> None:
    """A line for people in the middle of the run (flow control acting, a signal taken), for a
    reporter that tells such lines (``notice``); the others let it go."""
    told = getattr(reporter, "notice", None)
    if told is not None:
        told(text)


class FanOut:
    """Passes every event on to several reporters (the screen and the ``--log`` file)."""

    def __init__(self, reporters: Sequence[Any]) -> None:
        self.reporters = list(reporters)

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        for r in self.reporters:
            r.pool_started(pool, task_id, total)

    def step_started(self, step: Step, call: int) -> None:
        for r in self.reporters:
            r.step_started(step, call)

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        for r in self.reporters:
            r.call_ended(step, end, result)

    def step_finished(self, step: Step, result: Entry) -> None:
        for r in self.reporters:
            r.step_finished(step, result)

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        for r in self.reporters:
            r.rows_progress(step, done, total)

    def calls_planned(self, total: int) -> None:
        for r in self.reporters:
            r.calls_planned(total)

    def pool_finished(self, answer: Answer) -> None:
        for r in self.reporters:
            r.pool_finished(answer)

    def notice(self, text: str) -> None:
        for r in self.reporters:
            notice(r, text)
