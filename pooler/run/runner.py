"""One runner of a task, on either journal: claim its calls in small batches, send them under a
live lease (each at its rate's slot, ``Pacer``), record them, and end when nothing is left that it
could claim.  A run on one host is a task with one runner; the runners of a task on PostgreSQL may
be on many hosts.  ``CallRunner`` makes the calls; the journal behind ``TaskJournal`` says where
they come from and keeps what they did.  See docs/multihost.md."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, cast

from pooler.client.http import ToolRunClient
from pooler.errors import JournalError
from pooler.journal.heartbeat import taken_back
from pooler.journal.work import BUSY, Done, LeaseLost, RunnerLease, TaskJournal, WorkRow
from pooler.pool.budget import Judge, stopping
from pooler.pool.model import Pool
from pooler.run.breaking import try_store
from pooler.run.busy import SendAgain
from pooler.run.call import CallRunner
from pooler.run.callplan import Outcome, Prepared, serial_value
from pooler.run.config import RunConfig, pool_base, runner_width
from pooler.run.events import Reporter, notice
from pooler.run.expansion import expand
from pooler.run.flow import STILL_BUSY, STORE_DOWN, Flow
from pooler.run.gated import GatedClient, KeepingWriter
from pooler.run.inflight import InFlight
from pooler.run.pacing import Pacer, Start, Unstarted
from pooler.run.probing import gate_again
from pooler.run.progress import Progress
from pooler.run.seen import SeenKeys, repeat
from pooler.run.serial import SerialGate
from pooler.run.unrecorded import Unrecorded, journal_gone
from pooler.run.unsent import Unsent, call_of
from pooler.run.workplan import serial_by_reference, serial_digest, step_plans
from pooler.statuses import CallStatus

#: How long a runner with nothing to claim waits before it looks again.
POLL = 0.05
#: How often (seconds) a runner that keeps finding calls also looks for expired leases.
TIDY = 1.0


class Runner:
    def __init__(self, journal: TaskJournal, pool: Pool, client: ToolRunClient, *, config: RunConfig,
                 lease: RunnerLease, reporter: Reporter, stop: threading.Event, began: bool = False,
                 key_scope: str | None = None, conflicts: Sequence[Any] = ()) -> None:
        self.journal = journal
        self.pool = pool
        self.config = config
        self.reporter = reporter
        self.stop = stop
        self.task = config.task_id or ""
        opts = pool.options
        self.parallel = opts.mode == "parallel"
        self.cap = opts.max_concurrency if self.parallel else 1
        self.width = runner_width(pool, lease.width)
        #: Taken as this runner joined the task (``join_task``).
        self.lease = lease
        self.work = journal.work(self.task, self.lease.id)
        self.plans = step_plans(pool)
        self.budgets = pool.budgets()
        self.steps = {s.num: s for s in pool.steps}
        self.base = pool_base(pool)
        self.writer = KeepingWriter(config.out)
        self.gated = GatedClient(client, self.lease)
        self.client = client
        self.flow = Flow(self.width, adaptive=opts.adaptive and self.parallel, breaker=pool.breaker,
                         tell=functools.partial(notice, reporter))
        self.pacer = Pacer(self.work, pool.paces(), stop, self.flow)
        run_no = journal.run_of(self.task)
        self.calls = CallRunner(client=cast(ToolRunClient, self.gated), task=self.task, run=int(run_no),
                                writer=self.writer, redactor=config.redactor, reporter=reporter, stop=stop,
                                variables=config.variables, base=self.base, key_task=key_scope,
                                probing=config.probe, flow=self.flow, conflicts=conflicts)
        self.unsent = Unsent(pool, self.plans, config, self.calls.run)
        self.again = SendAgain(pool, self.work, self.flow, self.task)
        self.broken: str | None = None
        #: Why the breaker stopped the task (the store looked down), or None.
        self.down: str | None = None
        #: This runner began a run again of the task: it tells the calls earlier runs did.
        self.began = began
        self.progress = Progress(journal, self.task, self.plans, reporter)
        self._pool = ThreadPoolExecutor(self.width, "pooler-call")
        self._inflight = InFlight()
        self._number = 0
        self._details: dict[int, Any] = {}
        self._empty = True
        self._tidied = 0.0
        self._pending: list[tuple[WorkRow, Outcome]] = []
        #: The ``serialize_on`` path (parallel mode), the resolved values of the calls in flight,
        #: and the calls waiting for theirs.
        self.serial_path = pool.options.serialize_on if self.parallel else None
        self.serial = SerialGate()
        self.by_reference = serial_by_reference(pool, self.plans)
        #: The keys this runner landed: a call of one of them later in the run is skipped with the
        #: entry and detail the journal recorded of it, not sent again.  Kept in a fixed size
        #: (the journal holds the calls), so the run's memory does not grow with its rows.
        self._landed = SeenKeys()
        #: The calls this runner sent whose outcome the journal did not take: in doubt.
        self.unrecorded = Unrecorded(config.redactor)

    def close(self) -> None:
        """The calls' threads end (the lease is run_task's to end, once the answer is recorded)."""
        self._pool.shutdown(wait=True)

    # The loop

    def run(self) -> None:
        self.reporter.pool_started(self.pool, self.task, self.journal.planned_calls(self.task))
        self.progress.started(self.began)
        while True:
            self._collect(block=False)
            if self.broken is None and self.lease.lost is not None:
                self.broken = self.lease.lost
            if self.broken is not None or self.stop.is_set():
                self._release_held()
                self._flush()
                self._collect(block=True, until_empty=True)
                if self.broken is not None:
                    self.broken = self.unrecorded.tally(self.broken)
                return
            if self.flow.tripped and self.down is None:
                self._breaker()
                continue
            free = min(self.width, self.flow.width) - len(self._inflight) - len(self.serial.held)
            rows: list[WorkRow] = []
            if free > 0:
                tidy = self._empty or time.monotonic() >= self._tidied + TIDY
                try:
                    rows = self._claim(free, tidy)
                except JournalError as exc:
                    self.broken = journal_gone(exc)
                    continue
                if tidy:
                    self._tidied = time.monotonic()
                if not rows and not self._empty:
                    # Nothing claimable: look again at once, tidying first.
                    self._empty = True
                    continue
                self._empty = not rows
            for row in rows:
                if self.stop.is_set():
                    # A stop heard while these were claimed (the call before them was recorded
                    # in the same round trip): none of them starts.
                    self._quiet(self.work.release, row)
                    continue
                self._take(row)
            if rows:
                continue
            self._flush()
            if not self._inflight and self.serial.held:
                # Calls whose value another runner had in flight: gated again.
                self._start_held()
            if not self._inflight:
                try:
                    ready, held, halted = self.work.open_counts()
                except JournalError as exc:
                    self.broken = journal_gone(exc)
                    continue
                if held == 0 and (ready == 0 or halted is not None):
                    if halted is not None and halted.startswith((STORE_DOWN, STILL_BUSY)):
                        self.down = halted  # another runner's breaker: the task stops for all
                    return
                self.stop.wait(POLL)
                continue
            self._collect(block=True)

    def _breaker(self) -> None:
        """The store looks down: no call starts while it is tried; the task stops if it stays down
        (the calls not started stay not run)."""
        self._collect(block=True, until_empty=True)
        assert self.pool.breaker is not None  # the flow trips only with a breaker
        self.down = try_store(self.client, self.pool.breaker, self.flow, self.stop, self.task)
        if self.down is not None:
            self._quiet(self.work.halt, self.down)

    def _claim(self, free: int, tidy: bool) -> list[WorkRow]:
        """Calls to send; a call's outcome waiting to be recorded goes in the same round trip."""
        if tidy or not self._pending:
            self._flush()
            return self.work.claim(free, self.cap, self.unsent.on_doubt, self.unsent.on_blocked, tidy=tidy,
                                   gate_run=self.calls.run)
        *earlier, (row, outcome) = self._pending
        self._pending = []
        # Those before the last in a transaction of their own (a journal that fails tells which
        # were recorded); the last with the claim.
        self._record_all(earlier)
        try:
            recorded, rows = self.work.done_and_claim(
                Done(row, outcome.status, outcome.entry, outcome.kept_detail(self.config.redactor),
                     outcome.in_doubt), limit=free, cap=self.cap, gate_run=self.calls.run)
        except JournalError:
            self.unrecorded.add(row, outcome)
            raise
        self._recorded(row, outcome, recorded)
        return rows

    def _flush(self) -> None:
        """The outcomes waiting for the next claim, recorded without it."""
        pending, self._pending = self._pending, []
        self._record_all(pending)

    def _record_all(self, pending: list[tuple[WorkRow, Outcome]]) -> None:
        """Outcomes with no tables and no halt: one transaction for all of them."""
        if len(pending) == 1:
            self._record(*pending[0])
            return
        if not pending:
            return
        try:
            masking = self.config.redactor
            recorded = self.work.done_all([Done(row, o.status, o.entry, o.kept_detail(masking), o.in_doubt)
                                           for row, o in pending])
        except JournalError as exc:
            self.broken = journal_gone(exc)
            for row, outcome in pending:
                self.unrecorded.add(row, outcome)
            return
        for (row, outcome), ok in zip(pending, recorded, strict=True):
            self._recorded(row, outcome, ok)

    def _take(self, row: WorkRow) -> None:
        try:
            if row.kind == "expand":
                self._expand(row)
                return
            if row.num in self.progress.uncounted:
                self.progress.counted(row.num)
            call = call_of(self.plans[row.num], row)
            got = self.calls.prepare(call, self._refs(row))
            if isinstance(got, Outcome):
                self._record(row, got, sent=False)
                return
            if got.ids.key is not None and self._landed.maybe(got.ids.key):
                landed = self.work.landed(got.ids.key)
                if landed is not None:
                    self._record(row, repeat(got, *landed), sent=False)
                    return
            got.doubted = row.doubted
            got.left_at = self.unsent.left.pop((row.num, row.idx), None)
            # The key's round is the work row's: a call that failed goes out again under the next.
            got.ids = replace(got.ids, round=row.round)
            value = serial_value(got.params, self.serial_path) if self.serial_path else None
            if row.num in self.by_reference:
                # Its value is known only now: gated with it as it starts.
                self._start(row, got, None, value)
                return
            epoch = row.epoch
            if epoch is None or (row.key_text, row.step_id, row.round) != (got.ids.key, got.ids.step_id,
                                                                           got.ids.round):
                # Not moved to sent by the claim, or under key material other than this runner's.
                epoch = self.work.gate(row, got.ids.key, got.ids.step_id or "", got.ids.round)
            if epoch is None:
                self.work.release(row)
                return
            self._start(row, got, epoch, value)
        except JournalError as exc:
            self.broken = journal_gone(exc)

    def _start(self, row: WorkRow, got: Prepared, epoch: int | None, value: str | None) -> None:
        """Send the call, unless a call of its ``serialize_on`` value is in flight or waits before
        it: it waits, still this runner's, and starts once that value is free.  A call whose value
        a reference gave (``epoch`` None) is gated with it: while a call of that value is claimed
        or sent by any runner it waits too, and is gated again when this runner next looks."""
        if self.serial.waits(value, epoch):
            self.serial.hold((row, got, epoch, value))
            return
        if epoch is None:
            try:
                epoch = self.work.gate(row, got.ids.key, got.ids.step_id or "", got.ids.round,
                                       None if value is None else serial_digest(value))
            except JournalError as exc:
                self.broken = journal_gone(exc)
                return
            if epoch == BUSY:
                self.serial.hold((row, got, None, value))
                return
            if epoch is None:
                self._quiet(self.work.release, row)
                return
        start: Start | None = self._quiet(self.pacer.wait, row, got)
        if start is None:
            self._unstarted(row, got)
            return
        self._number += 1
        got.number = self._number
        got.epoch = epoch
        if self.width == 1:
            # One call at a time: sent on this thread, with no hand-over to a worker.
            future: Future[Any] = Future()
            future.set_result(self._send(got, epoch, start))
        else:
            future = self._pool.submit(self._send, got, epoch, start)
        self._inflight.add(future, row, got)
        self.serial.started(future, value)

    def _unstarted(self, row: WorkRow, got: Prepared) -> None:
        """The run stopped (or the journal failed) before the call's slot: not sent; one the store
        turned away ends as its answer said (not run, or refused), not unlisted."""
        if self.pacer.failed is not None and self.broken is None:
            self.broken = journal_gone(self.pacer.failed)
        if got.turned_away is None:
            self._quiet(self.work.release, row)
        else:
            self._record(row, got.turned_away)

    def _start_held(self) -> None:
        """The calls that waited for a ``serialize_on`` value now free, in the order they came."""
        for row, got, epoch, value in self.serial.take():
            self._start(row, got, epoch, value)

    def _release_held(self) -> None:
        """Calls that waited and will not start now (the run stops): back to ready, unsent."""
        for row, *_ in self.serial.take():
            self._quiet(self.work.release, row)

    def _refs(self, row: WorkRow) -> dict[str, Any]:
        # Only a step whose params hold references (or templates) reads the details of the steps
        # it waits for; a step over an earlier step's table waits for it without reading them.
        if not row.deps or not self.plans[row.num].params.dynamic:
            return {}
        if missing := [n for n in row.deps if n not in self._details]:
            found = self.work.details(missing)
            self._details.update({num: found.get(num) or {} for num in missing})
        return {self.steps[num].name.lower(): self._details[num] for num in row.deps if self.steps[num].name}

    def _send(self, ready: Prepared, epoch: int, start: Start
              ) -> tuple[Outcome | None, dict[str, list[Any]] | None, bool]:
        """On a worker thread: the call, unless the lease is gone before it leaves (or the run
        stopped before its rate's slot); and whether a request of it left."""
        self.gated.begin(epoch, start)
        self.writer.begin()
        try:
            outcome = self.calls.execute(ready)
        except (LeaseLost, Unstarted):
            return None, None, self.gated.left()
        finally:
            start.close()
        return outcome, self.writer.kept(), True

    def _collect(self, *, block: bool, until_empty: bool = False) -> None:
        while self._inflight:
            for future, row, got in self._inflight.ended(block=block):
                value = self.serial.ended(future)
                outcome, kept, left = future.result()
                if outcome is not None and outcome.unsent and self.flow.holds_back():
                    # Never reached the store, which looks down: back to ready, for when it is up.
                    self._quiet(self.work.release, row)
                    continue
                if outcome is not None and (outcome.busy or outcome.next_round):
                    stopping = self.stop.is_set() or self.broken is not None or self.down is not None
                    epoch = self._quiet(self.again.epoch, row, got, outcome, stopping)  # the store busy
                    self.down = self.down or self.again.down
                    got.turned_away = outcome
                    if epoch is not None:
                        self._start(row, got, epoch, value)
                        continue
                if outcome is not None and outcome.send_again and not self.stop.is_set() and not self.broken:
                    epoch = self._quiet(gate_again, self.work, row, got)  # proven not carried out: once more
                    if epoch is not None:
                        self._start(row, got, epoch, value)
                        continue
                if outcome is None:
                    # A request that left is in doubt: the row stays sent, for the runner that
                    # takes it back once this lease has expired.
                    if not left:
                        self._unstarted(row, got)
                    else:
                        self.unrecorded.add(row, None, got)
                    continue
                if kept or any(self._stopping(row, outcome)) or self.broken:
                    self._record(row, outcome, kept)
                else:
                    # Recorded with the next claim, in one transaction (before anything reads it),
                    # with those that ended meanwhile.
                    self._pending.append((row, outcome))
            if self.serial.held and not self.stop.is_set() and self.broken is None:
                self._start_held()
            if not until_empty:
                return
        if until_empty:
            # Only at the end: a collect with nothing in flight keeps the outcome for the next claim.
            self._flush()

    def _quiet(self, action: Any, *args: Any) -> Any:
        try:
            return action(*args)
        except JournalError as exc:
            if self.broken is None:
                self.broken = journal_gone(exc)
            return None

    def _stopping(self, row: WorkRow, outcome: Outcome) -> tuple[str | None, Judge | None]:
        """Why this outcome stops the task now (stop_on_error, or a key in doubt under --in-doubt
        stop), or the judge of the budget that counts it."""
        return stopping(self.budgets, self.pool.options.stop_on_error, row.num, outcome.status,
                        forced=bool(outcome.halt))

    def _record(self, row: WorkRow, outcome: Outcome, kept: dict[str, list[Any]] | None = None, *,
                sent: bool = True) -> None:
        halt, judge = self._stopping(row, outcome)
        plan = self.plans[row.num]
        detail = outcome.kept_detail(self.config.redactor)
        try:
            recorded = self.work.done(row, outcome.status, outcome.entry, detail, doubt=outcome.in_doubt,
                                      tables=kept, prefix=plan.prefix, into=plan.step.into, halt=halt,
                                      sent=sent, judge=judge)
        except JournalError as exc:
            self.broken = journal_gone(exc)
            if sent:
                self.unrecorded.add(row, outcome)
            return
        self._recorded(row, outcome, recorded)

    def _recorded(self, row: WorkRow, outcome: Outcome, recorded: bool = True) -> None:
        if not recorded:
            # Refused: the call is no longer this runner's, so its lease was lost, whether or not
            # its heartbeat has woken to say so (a runner frozen past its lease wakes with both due).
            self.broken = self.broken or taken_back(self.lease.id)
            return
        plan = self.plans[row.num]
        key = outcome.entry.get("key")
        if outcome.status == CallStatus.COMPLETED and key is not None:
            self._landed.add(str(key))
        if outcome.status == CallStatus.COMPLETED and not plan.over_rows:
            # A step of one call is done: its detail is what references read - as received, not
            # as the journal keeps it (masked), so that a secret it echoes reaches the next call.
            self._details[row.num] = outcome.detail if outcome.detail is not None else {}
        self.progress.told(plan.step, outcome.entry, row.num, row.size)

    def _expand(self, row: WorkRow) -> None:
        expand(row, self.steps[row.num], pool=self.pool, task=self.task, journal=self.journal, work=self.work,
               config=self.config, unsent=self.unsent, progress=self.progress)

