"""The order of a run: which call may start now, and what a finished call changes.

One scheduler serves both modes.  Sequential is the same loop one call wide, with the calls run on
the scheduler's own thread (no hand-over cost per call).  Parallel runs up to ``width`` calls on a
pool of threads, in file order as far as the rules allow:

- a step waits until every step it refers to (``@name.field``, ``for_each.step``) is done; if one
  of them failed, was not run or is in doubt, the step is ``not_run``;
- calls whose ``serialize_on`` values are equal run one at a time, in file order;
- after a failure (with stop_on_error) or a stop request, no new call starts; calls in flight
  finish.

A step over rows is done when all its calls are; the detail it gives to references is that of its
last call in row order.  Its calls are added up as they come back, and its one summary entry is made
when it is done (or when the run ends with it unfinished); its keys are remembered without answers.
Every bookkeeping change happens on the scheduler's thread; workers only send calls and hand back
their outcomes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pooler.errors import PoolerError
from pooler.journal.records import DONE, CallRecord
from pooler.run.answer import Collector
from pooler.run.call import CallRunner
from pooler.run.callplan import Call, Outcome, Prepared, StepPlan
from pooler.run.entries import not_run
from pooler.run.events import Reporter
from pooler.statuses import LANDED, CallStatus, StepState, StepStatus


@dataclass
class StepRun:
    """A step's progress in this run."""

    plan: StepPlan
    #: Calls planned: the rows counted before the run (1 when not known), then the real count.
    planned: int = 1
    rows_total: int | None = None
    state: StepState = StepState.WAITING
    #: completed, failed, in_doubt or not_run, once the step is done.
    outcome: str = ""
    calls: Iterator[Call] | None = None
    peeked: Prepared | None = None
    exhausted: bool = False
    issued: int = 0
    rows_issued: int = 0
    inflight: int = 0
    rows_done: int = 0
    bad: str = ""
    last_row: int = -2
    detail: Any = None
    #: The tables the step's calls gave, by name (read by a later ``for_each.step``).
    tables: dict[str, Any] = field(default_factory=dict)
    #: When the step started (monotonic seconds): a step over rows reports its wall time.
    started: float | None = None
    #: Its data broke before the end: the rows after the break are not run.
    broken: bool = False

    @property
    def counted(self) -> int:
        """Calls this step stands for in ``total``."""
        return self.issued if self.exhausted else max(self.planned, self.issued)


Opener = Callable[[StepRun, dict[str, StepRun]], Iterator[Call]]
_Arrival = tuple[StepRun, Prepared, "Future[Outcome] | Outcome"]


class Scheduler:
    """Runs the steps of one run to the end (or to the stop)."""

    def __init__(self, runs: list[StepRun], runner: CallRunner, collector: Collector, reporter: Reporter,
                 opener: Opener, *, width: int, parallel: bool, stop_on_error: bool,
                 stop: threading.Event) -> None:
        self.runs = runs
        self.by_name = {r.plan.step.name.lower(): r for r in runs if r.plan.step.name}
        self.runner = runner
        self.collector = collector
        self.reporter = reporter
        self.opener = opener
        self.width = max(width, 1) if parallel else 1
        self.parallel = parallel
        self.stop_on_error = stop_on_error
        self.stop = stop
        #: Details of the steps done, by lower-case name: what references read.
        self.details: dict[str, Any] = {}
        self.halted = False
        self._inflight = 0
        self._number = 0
        self._busy: Counter[str] = Counter()
        self._free = set(range(self.width))
        self._cond = threading.Condition()
        self._arrived: list[_Arrival] = []
        self._first = 0
        self._pool = ThreadPoolExecutor(self.width, "pooler-call") if parallel else None

    def run(self) -> None:
        try:
            while True:
                self._dispatch()
                with self._cond:
                    while not self._arrived and self._inflight > 0:
                        self._cond.wait()
                    batch, self._arrived = self._arrived, []
                if not batch:
                    self._close_unfinished()
                    return
                for run, ready, got in batch:
                    self._complete(run, ready, got)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    # Starting calls

    def _stopping(self) -> bool:
        return self.halted or self.stop.is_set()

    def _dispatch(self) -> None:
        while self._first < len(self.runs) and self.runs[self._first].state == StepState.DONE:
            self._first += 1
        for index in range(self._first, len(self.runs)):
            run = self.runs[index]
            if self._stopping() or self._inflight >= self.width:
                return
            if run.state == StepState.WAITING:
                ready = self._deps(run)
                if ready is None:
                    continue
                if ready is not True:
                    self._not_run(run, ready)
                    continue
                self._activate(run)
            if run.state == StepState.ACTIVE:
                self._feed(run)
            if not self.parallel and run.state != StepState.DONE:
                return

    def _deps(self, run: StepRun) -> StepRun | Literal[True] | None:
        """True when every step ``run`` refers to completed; the first that did not; None: wait."""
        waiting = False
        for name in sorted(run.plan.deps):
            dep = self.by_name.get(name)
            if dep is None:
                continue
            if dep.state != StepState.DONE:
                waiting = True
            elif dep.outcome != CallStatus.COMPLETED:
                return dep
        return None if waiting else True

    def _not_run(self, run: StepRun, dep: StepRun) -> None:
        step = run.plan.step
        entry = self.runner.redactor.value(not_run(Call(run.plan).head(), step.key, dep.plan.step.name,
                                                   dep.plan.step.num, dep.outcome))
        ids = self.runner.call_ids(Call(run.plan), None, None)
        self.runner.journal.record(ids, CallStatus.NOT_RUN, entry)
        if run.plan.over_rows:
            self.collector.open_rows(Call(run.plan).head())
            self.collector.close_rows(step.num, status=CallStatus.NOT_RUN, rows_total=run.rows_total,
                                      whole=False, why=entry["message"], calls=run.counted)
        else:
            self.collector.add(entry, calls=run.counted)
        self.reporter.step_finished(step, entry)
        run.state, run.outcome = StepState.DONE, CallStatus.NOT_RUN
        run.exhausted, run.issued = True, run.counted

    def _activate(self, run: StepRun) -> None:
        run.state = StepState.ACTIVE
        run.started = time.monotonic()
        if run.plan.over_rows:
            self.collector.open_rows(Call(run.plan).head())
        try:
            run.calls = self.opener(run, self.by_name)
        except PoolerError as exc:
            self._broken(run, exc)
            return
        if run.plan.over_rows:
            self.reporter.calls_planned(sum(r.counted for r in self.runs))
            self.reporter.rows_progress(run.plan.step, 0, run.rows_total)

    def _broken(self, run: StepRun, exc: PoolerError) -> None:
        """The step's rows cannot be read (any more): one failed call, and the step ends."""
        # The row the data broke at: the first one no call has taken.
        call = Call(run.plan, row=run.rows_issued if run.plan.over_rows else None)
        run.issued += 1
        run.exhausted = run.broken = True
        ids = self.runner.call_ids(call, None, None)
        self._handle(run, self.runner.not_sent(call, ids, CallStatus.FAILED, exc.message))
        self._finish_if_done(run)

    def _feed(self, run: StepRun) -> None:
        while self._inflight < self.width and not self._stopping():
            if run.peeked is None:
                assert run.calls is not None
                try:
                    call = next(run.calls, None)
                except PoolerError as exc:
                    self._broken(run, exc)
                    return
                if call is None:
                    run.exhausted = True
                    self._finish_if_done(run)
                    return
                run.issued += 1
                run.rows_issued += call.size
                got = self.runner.prepare(call, self.details)
                if isinstance(got, Outcome):
                    self._handle(run, got)
                    continue
                run.peeked = got
            ready = run.peeked
            if ready.serial is not None and self._busy[ready.serial]:
                return
            run.peeked = None
            self._start(run, ready)

    def _start(self, run: StepRun, ready: Prepared) -> None:
        self._number += 1
        ready.number = self._number
        # The lowest free slot: the report's timeline draws one lane per slot.
        lane = min(self._free)
        self._free.discard(lane)
        serial = None if ready.serial is None else self.runner.redactor.text(ready.serial)
        ready.ids = replace(ready.ids, lane=lane, serial=serial)
        run.inflight += 1
        self._inflight += 1
        if ready.serial is not None:
            self._busy[ready.serial] += 1
        if self._pool is None:
            self._arrived.append((run, ready, self.runner.execute(ready)))
            return
        future = self._pool.submit(self.runner.execute, ready)
        future.add_done_callback(lambda f: self._arrive(run, ready, f))

    def _arrive(self, run: StepRun, ready: Prepared, future: Future[Outcome]) -> None:
        with self._cond:
            self._arrived.append((run, ready, future))
            self._cond.notify()

    # Finished calls

    def _complete(self, run: StepRun, ready: Prepared, got: Future[Outcome] | Outcome) -> None:
        run.inflight -= 1
        self._inflight -= 1
        if ready.ids.lane is not None:
            self._free.add(ready.ids.lane)
        if ready.serial is not None:
            self._busy[ready.serial] -= 1
        # A worker's exception is a bug: it surfaces here, on the caller's thread.
        outcome = got.result() if isinstance(got, Future) else got
        self._handle(run, outcome)
        self._finish_if_done(run)

    def _handle(self, run: StepRun, outcome: Outcome) -> None:
        step = run.plan.step
        entry = outcome.entry
        if run.plan.over_rows:
            self.collector.add_row(entry, outcome.call.size)
        else:
            self.collector.add(entry)
        # A call whose answer was lost in this run is named at once, not only by the next run.
        self.collector.add_in_doubt(entry, outcome.in_doubt, outcome.doubted or outcome.step_id)
        self.reporter.step_finished(step, entry)
        if run.plan.over_rows:
            run.rows_done += outcome.call.size
            self.reporter.rows_progress(step, run.rows_done, run.rows_total)
        if outcome.status in LANDED:
            if isinstance(entry.get("tables"), dict):
                run.tables.update(entry["tables"])
            row = outcome.call.row if outcome.call.row is not None else -1
            if row >= run.last_row:
                run.last_row, run.detail = row, outcome.detail
            key = entry.get("key")
            if outcome.status == CallStatus.COMPLETED and isinstance(key, str):
                # A key runs at most once per task, also when two rows of one run share it.  A step
                # over rows keeps only its keys (100,000 rows must not hold 100,000 records): a key
                # met again is read back from the journal.
                self.runner.keyed[key] = DONE if run.plan.over_rows else CallRecord(
                    key, step.num, outcome.call.row, outcome.step_id, 1, CallStatus.COMPLETED, False, entry,
                    entry.get("detail"))
            return
        if outcome.status == CallStatus.IN_DOUBT or not run.bad:
            run.bad = outcome.status
        if self.stop_on_error or outcome.halt:
            self.halted = True

    def _finish_if_done(self, run: StepRun) -> None:
        if not run.exhausted or run.inflight or run.peeked is not None or run.state == StepState.DONE:
            return
        run.state = StepState.DONE
        run.outcome = run.bad or CallStatus.COMPLETED
        if run.outcome == CallStatus.COMPLETED and run.plan.step.name:
            self.details[run.plan.step.name.lower()] = {} if run.detail is None else run.detail
        if run.plan.over_rows:
            self._close_rows(run, whole=not run.broken)

    def _close_unfinished(self) -> None:
        """Steps over rows the run ended in (stopped, or halted on a failure) get their summary too."""
        for run in self.runs:
            if run.plan.over_rows and run.state == StepState.ACTIVE:
                self._close_rows(run, whole=False)

    def _close_rows(self, run: StepRun, *, whole: bool) -> None:
        status = run.outcome
        if not status:
            # Unfinished: its rows not sent are not run, unless every row had been sent already.
            planned = run.rows_total
            if run.bad:
                status = run.bad
            elif planned is not None and run.rows_done >= planned:
                status = CallStatus.COMPLETED
            else:
                # Cut short (a signal, a stop): rows that landed make it partial, not "not run".
                status = StepStatus.PARTIAL if run.rows_done else CallStatus.NOT_RUN
        trip = None if run.started is None else round((time.monotonic() - run.started) * 1000)
        # The detail references read, shown only where they may read it.
        detail = run.detail if status == CallStatus.COMPLETED and run.last_row >= 0 else None
        self.collector.close_rows(run.plan.step.num, status=status, rows_total=run.rows_total, whole=whole,
                                  detail=self.runner.redactor.value(detail), trip_ms=trip)
