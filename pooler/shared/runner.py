"""One runner of a shared task (a PostgreSQL journal): join or plan the task, then claim its calls
in small batches, send them under a live lease, record them, and end when nothing is left that it
could claim, with the task's answer so far.

The calls themselves are made by the executor's ``CallRunner`` (params, references, the request
and its retries, tables, the entry): only where they come from and where they are recorded
differs from a single-host run.  See docs/multihost.md.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any, cast

from pooler.client.http import ToolRunClient
from pooler.errors import JournalError
from pooler.journal.postgres.history import PgHistory
from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.lease import Lease, LeaseLost
from pooler.journal.postgres.schema import SQL
from pooler.journal.postgres.work import Settled, WorkRow, WorkStore
from pooler.journal.timeline import run_facts
from pooler.pool.model import Pool
from pooler.run.call import CallRunner
from pooler.run.callplan import Call, Outcome, Prepared
from pooler.run.entries import Entry, not_run, not_sent
from pooler.run.events import Reporter, listener
from pooler.run.executor import RunConfig, pool_base
from pooler.run.rulings import BY_EXPIRED_RUNNER, rule_in_doubt, table_to_read
from pooler.shared.answer import task_answer
from pooler.shared.io import GatedClient, KeepingWriter, NoCallLog
from pooler.shared.join import join_task
from pooler.shared.plan import PLACEHOLDER, Planner, step_plans
from pooler.statuses import TROUBLE, CallStatus, TaskStatus

#: How long a runner with nothing to claim waits before it looks again.
POLL = 0.05
#: How often (seconds) a runner that keeps finding calls also looks for expired leases.
TIDY = 1.0


@dataclass
class SharedConfig:
    """How this runner takes part, beside the executor's ``RunConfig``."""

    url: str
    #: Calls this runner has in flight at most; None: the cap (the claim holds it to its fair share).
    width: int | None = None
    #: Seconds a lease lasts without renewal.
    lease: float = 120.0
    #: The tasks whose landed keys a new task's calls skip: the MCP server's session, whose every
    #: pool is a task of its own and whose keys hold across them, as they do on SQLite.
    key_scope: str | None = None


class RunnerStopped(JournalError):
    """The runner stopped before the task ended: its lease was lost or the journal went away."""

    def __init__(self, message: str, answer: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.answer = answer


def run_shared(pool: Pool, client: ToolRunClient, config: RunConfig, shared: SharedConfig, *,
               reporter: Reporter | None = None, stop: threading.Event | None = None) -> dict[str, Any]:
    """Run this runner's part of the task ``config.task_id``; the task's answer so far."""
    started = time.monotonic()
    reporter = listener(reporter)
    stop = stop or threading.Event()
    with PgJournal(shared.url) as journal:
        pool = join_task(journal, pool, config, key_scope=shared.key_scope)
        PgHistory(journal).record_run(config.task_id or "",
                                      config.redactor.value(run_facts(pool, client, config.again)))
        kept = journal.shared(config.task_id or "") or {}
        in_doubt = kept.get("in_doubt", config.in_doubt)
        runner = _Runner(journal, pool, client, config=replace(config, in_doubt=in_doubt), shared=shared,
                         reporter=reporter, stop=stop)
        try:
            runner.run()
        finally:
            runner.close()
        trip = round((time.monotonic() - started) * 1000)
        interrupted = getattr(stop, "reason", None) or "stop" if stop.is_set() else None
        try:
            answer = config.redactor.value(task_answer(journal, runner.task, kept, trip_ms=trip,
                                                       interrupted=interrupted))
        except JournalError as exc:
            # Nothing can be reported done that the journal cannot show.
            raise RunnerStopped(runner.broken or exc.message, None) from None
        if runner.broken is not None:
            raise RunnerStopped(runner.broken, answer)
        try:
            _, held, _ = runner.work.open_counts()
            if held == 0:
                journal.finish_task(runner.task, answer, status=_sampled(journal, runner.task, answer))
        except JournalError as exc:
            raise RunnerStopped(exc.message, answer) from None
        reporter.pool_finished(answer)
        return dict(answer)


def _sampled(journal: PgJournal, task: str, answer: dict[str, Any]) -> str | None:
    """``sampled`` for a task whose plan holds a sample of its rows and completed: a full run of
    the task (``--task``) sends the rest."""
    shared = journal.shared(task) or {}
    if shared.get("sample") is None or not answer.get("result"):
        return None
    return TaskStatus.SAMPLED if any(step["over_rows"] for step in shared["steps"]) else None


class _Runner:
    def __init__(self, journal: PgJournal, pool: Pool, client: ToolRunClient, *, config: RunConfig,
                 shared: SharedConfig, reporter: Reporter, stop: threading.Event) -> None:
        self.journal = journal
        self.pool = pool
        self.config = config
        self.reporter = reporter
        self.stop = stop
        self.task = config.task_id or ""
        opts = pool.options
        self.parallel = opts.mode == "parallel"
        self.cap = opts.max_concurrency if self.parallel else 1
        self.width = min(shared.width or self.cap, self.cap)
        self.lease = Lease(shared.url, self.task, shared.lease, self.width)
        self.work = WorkStore(journal, self.task, self.lease.id)
        self.plans = step_plans(pool)
        self.steps = {s.num: s for s in pool.steps}
        self.base = pool_base(pool)
        self.writer = KeepingWriter(config.out)
        self.gated = GatedClient(client, self.lease)
        run_no = journal.query(SQL["runs_of_task"], (self.task,))[0][0]
        self.calls = CallRunner(client=cast(ToolRunClient, self.gated), journal=cast(Any, NoCallLog()),
                                task=self.task, run=int(run_no), writer=self.writer,
                                redactor=config.redactor, reporter=reporter, stop=stop,
                                variables=config.variables, base=self.base, keyed={},
                                in_doubt_policy=config.in_doubt)
        self.broken: str | None = None
        self._pool = ThreadPoolExecutor(self.width, "pooler-shared")
        self._inflight: dict[Future[Any], tuple[WorkRow, Prepared]] = {}
        self._number = 0
        self._details: dict[int, Any] = {}
        self._empty = True
        self._tidied = 0.0
        self._pending: tuple[WorkRow, Outcome] | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.lease.close()

    # The loop

    def run(self) -> None:
        total = self.journal.query(SQL["planned_calls"], (self.task,))[0][0]
        self.reporter.pool_started(self.pool, self.task, int(total))
        while True:
            self._collect(block=False)
            if self.broken is None and self.lease.lost is not None:
                self.broken = self.lease.lost
            if self.broken is not None or self.stop.is_set():
                self._flush()
                self._collect(block=True, until_empty=True)
                return
            free = self.width - len(self._inflight)
            rows: list[WorkRow] = []
            if free > 0:
                tidy = self._empty or time.monotonic() >= self._tidied + TIDY
                try:
                    rows = self._claim(free, tidy)
                except JournalError as exc:
                    self.broken = self._journal_gone(exc)
                    continue
                if tidy:
                    self._tidied = time.monotonic()
                if not rows and not self._empty:
                    # Nothing claimable: look again at once, tidying first.
                    self._empty = True
                    continue
                self._empty = not rows
            for row in rows:
                self._take(row)
            if rows:
                continue
            self._flush()
            if not self._inflight:
                try:
                    ready, held, halted = self.work.open_counts()
                except JournalError as exc:
                    self.broken = self._journal_gone(exc)
                    continue
                if held == 0 and (ready == 0 or halted is not None):
                    return
                self.stop.wait(POLL)
                continue
            self._collect(block=True)

    def _claim(self, free: int, tidy: bool) -> list[WorkRow]:
        """Calls to send; a call's outcome waiting to be recorded goes in the same round trip."""
        if tidy or self._pending is None:
            self._flush()
            return self.work.claim(free, self.cap, self._on_doubt, self._on_blocked, tidy=tidy,
                                   gate_run=self.calls.run)
        row, outcome = self._pending
        self._pending = None
        detail = self.config.redactor.value(outcome.detail)
        recorded, rows = self.work.done_and_claim(row, outcome.status, outcome.entry, detail,
                                                  doubt=outcome.in_doubt, limit=free, cap=self.cap,
                                                  gate_run=self.calls.run)
        if recorded:
            self._recorded(row, outcome, detail)
        return rows

    def _flush(self) -> None:
        """The outcome waiting for the next claim, recorded on its own."""
        if self._pending is not None:
            row, outcome = self._pending
            self._pending = None
            self._record(row, outcome)

    def _journal_gone(self, exc: JournalError) -> str:
        flying = len(self._inflight)
        return (f"{exc.message} - this runner stopped sending; "
                f"{flying} call(s) in flight end in doubt (another runner, or this task run again, "
                "takes them back once this runner's lease expires).")

    def _take(self, row: WorkRow) -> None:
        try:
            if row.kind == "expand":
                self._expand(row)
                return
            call = self._call(row)
            got = self.calls.prepare(call, self._refs(row))
            if isinstance(got, Outcome):
                self._record(row, got)
                return
            got.doubted = row.doubted
            # The key's round is the work row's: a call that failed goes out again under the next.
            got.ids = replace(got.ids, round=row.round)
            epoch = row.epoch
            if epoch is None or (row.key_text, row.step_id, row.round) != (got.ids.key, got.ids.step_id,
                                                                           got.ids.round):
                # Not moved to sent by the claim, or under key material other than this runner's.
                epoch = self.work.gate(row, got.ids.key, got.ids.step_id or "", got.ids.round)
            if epoch is None:
                self.work.release(row)
                return
            self._number += 1
            got.number = self._number
            self._inflight[self._pool.submit(self._send, got, epoch)] = (row, got)
        except JournalError as exc:
            self.broken = self._journal_gone(exc)

    def _call(self, row: WorkRow) -> Call:
        plan = self.plans[row.num]
        if row.row_last is not None:
            return Call(plan, row=row.row_first, last=row.row_last, data=row.data, size=row.size)
        return Call(plan, row=row.row_first, data=row.data)

    def _refs(self, row: WorkRow) -> dict[str, Any]:
        # Only a step whose params hold references (or templates) reads the details of the steps
        # it waits for; a step over an earlier step's table waits for it without reading them.
        if not row.deps or not self.plans[row.num].params.dynamic:
            return {}
        missing = [n for n in row.deps if n not in self._details]
        if missing:
            found = self.work.details(missing)
            for num in missing:
                self._details[num] = found.get(num) or {}
        out: dict[str, Any] = {}
        for num in row.deps:
            step = self.steps[num]
            if step.name:
                out[step.name.lower()] = self._details[num]
        return out

    def _send(self, ready: Prepared, epoch: int) -> tuple[Outcome | None, dict[str, list[Any]] | None, bool]:
        """On a worker thread: the call, unless the lease is gone before it leaves; and whether a
        request of it left."""
        self.gated.begin(epoch)
        self.writer.begin()
        try:
            outcome = self.calls.execute(ready)
        except LeaseLost:
            return None, None, self.gated.left()
        return outcome, self.writer.kept(), True

    def _collect(self, *, block: bool, until_empty: bool = False) -> None:
        while self._inflight:
            done, _ = wait(list(self._inflight), timeout=None if block else 0, return_when=FIRST_COMPLETED)
            for future in done:
                row, _ = self._inflight.pop(future)
                outcome, kept, left = future.result()
                if outcome is None:
                    # A request that left is in doubt: the row stays sent, for the runner that
                    # takes it back once this lease has expired.
                    if not left:
                        self._quiet(self.work.release, row)
                    continue
                if kept or self._halt_for(row, outcome) or self._pending is not None or self.broken:
                    self._record(row, outcome, kept)
                else:
                    # Recorded with the next claim, in one round trip (before anything reads it).
                    self._pending = (row, outcome)
            if not until_empty:
                return
        if until_empty:
            # Only at the end: a collect with nothing in flight keeps the outcome for the next claim.
            self._flush()

    def _quiet(self, action: Any, *args: Any) -> None:
        try:
            action(*args)
        except JournalError as exc:
            if self.broken is None:
                self.broken = self._journal_gone(exc)

    def _halt_for(self, row: WorkRow, outcome: Outcome) -> str | None:
        """Why this outcome stops the task (stop_on_error, or a key in doubt under --in-doubt stop)."""
        if outcome.halt or (outcome.status in TROUBLE and self.pool.options.stop_on_error):
            return f"step {row.num} {outcome.status}"
        return None

    def _record(self, row: WorkRow, outcome: Outcome, kept: dict[str, list[Any]] | None = None) -> None:
        halt = self._halt_for(row, outcome)
        plan = self.plans[row.num]
        detail = self.config.redactor.value(outcome.detail)
        try:
            recorded = self.work.done(row, outcome.status, outcome.entry, detail, doubt=outcome.in_doubt,
                                      tables=kept, prefix=plan.prefix, into=plan.step.into, halt=halt)
        except JournalError as exc:
            self.broken = self._journal_gone(exc)
            return
        if recorded:
            self._recorded(row, outcome, detail)

    def _recorded(self, row: WorkRow, outcome: Outcome, detail: Any) -> None:
        plan = self.plans[row.num]
        if outcome.status == CallStatus.COMPLETED and not plan.over_rows:
            # A step of one call is done: its detail, as recorded, is what references read.
            self._details[row.num] = detail if detail is not None else {}
        self.reporter.step_finished(plan.step, outcome.entry)

    # Ending calls without sending them

    def _head(self, row: WorkRow) -> Entry:
        return self._call(row).head()

    def _on_doubt(self, row: WorkRow, expired: bool) -> Settled | None:
        """A call sent and never recorded, by a runner whose lease expired or by an earlier run of
        the task: the task's --in-doubt policy, by the rule a single-host run follows."""
        ruling = rule_in_doubt(self._head(row), self.steps[row.num], row.key_text, row.step_id,
                               self.config.in_doubt, sender=BY_EXPIRED_RUNNER if expired else "")
        if ruling is None:
            return None
        stopping = ruling.halt or (ruling.status == CallStatus.IN_DOUBT and self.pool.options.stop_on_error)
        return Settled(ruling.status, self.config.redactor.value(ruling.entry), doubt=ruling.action,
                       halt=f"step {row.num} in doubt" if stopping else None)

    def _on_blocked(self, row: WorkRow, dep: int, status: str) -> Settled:
        step = self.steps[dep]
        entry = not_run(self._head(row), self.steps[row.num].key, step.name, step.num, status)
        return Settled(CallStatus.NOT_RUN, self.config.redactor.value(entry))

    def _expand(self, row: WorkRow) -> None:
        """A step over an earlier step's table: its calls, from the rows the journal keeps."""
        step = self.steps[row.num]
        fe = step.for_each
        assert fe is not None
        assert fe.step is not None
        source = self.pool.step_named(fe.step)
        assert source is not None
        names, _ = self.work.table(source.num, None)
        name, problem = table_to_read(step, source.label, names)
        if problem is not None:
            # As a step whose data broke: one failed call at its first row.
            entry = self.config.redactor.value(
                not_sent(self._head(replace(row, row_first=0)), CallStatus.FAILED, None, problem))
            halt = f"step {row.num} failed" if self.pool.options.stop_on_error else None
            self.work.done(replace(row, idx=PLACEHOLDER), CallStatus.FAILED, entry, None, doubt=None,
                           halt=halt)
            return
        assert name is not None
        _, data = self.work.table(source.num, name)
        # The task's sample as it is now (a full run may have widened it since this runner joined);
        # the calls a sampled plan made of the table stay, and its rows after them are planned.
        sample = (self.journal.shared(self.task) or {}).get("sample")
        planner = Planner(self.pool, self.task, self.config.variables, sample, redactor=self.config.redactor)
        held = self.work.planned(row.num)
        self.work.expand(row, list(planner.rows_of(step, data[held.rows:], first=held.rows,
                                                   idx=held.next_idx)))
