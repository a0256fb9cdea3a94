"""Runs a pool: its task found or made in the journal, planned there once, and run by one runner.

The behaviour is the seeds': steps go in order (or side by side in parallel mode), a reference
``@name.field`` takes the detail of an earlier step, the first failure stops the pool unless
``stop_on_error`` is off, and a keyed call runs at most once per task, so a task run again skips
what it already did.  The answer is contract §3's.  Nothing here prints: progress goes to the
``Reporter``.

Decisions the seeds leave open:

- Every call ends with one status: completed, failed, in_doubt (sent, answer lost), skipped (its
  key already done in this task), not_run.  ``failed`` in the answer counts the in-doubt calls
  too (neither landed as far as anyone knows); ``not_run`` counts the calls never started because
  the pool stopped, which are not listed.
- The answer's ``in_doubt`` lists what was done about calls found in doubt: a key an earlier run
  sent without an answer (``retried``, ``stopped`` or ``skipped`` by ``RunConfig.in_doubt``), and
  a call retried in this run after a lost answer (``retry.on_in_doubt``).  A call that ends this
  run in doubt is in ``steps`` with that status.
- References are read only in the pool file's own strings, and filled after templates: a row's
  data or a variable's value is never taken for a reference, nor a detail's text for a template.
- A keyed call is sent with ``Idempotency-Key: <task>:<key>``; after the store refused it, a later
  run of the task sends it as ``<task>:<key>/2`` (``/3``...), so the store does not answer the
  rerun with the refusal it kept.  A call whose answer was lost keeps its key, so a store that
  honours keys answers the repeat without carrying it out twice.
- A new task clears the step tables of ``out``; a task run again keeps them, so the rows written
  by calls it now skips stay where the skipped entries say they are (``RunConfig.clear_tables``
  overrides this for a caller whose every run is a new pool).
- The task is created with its plan in one transaction: a pool refused while planning (a data
  file missing, a bad row) sent nothing and leaves no task that looks unfinished.
- Steps over rows: the detail a later step refers to is that of the call with the last row.  A
  step over rows is one entry of the answer, a summary with its failed calls (see answer.py).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, replace

from pooler.client.http import ToolRunClient
from pooler.errors import JournalError
from pooler.journal.documents import Answer, TaskDoc
from pooler.journal.opening import open_journal
from pooler.journal.records import pool_identity
from pooler.journal.timeline import run_facts
from pooler.journal.work import Seat, TaskJournal
from pooler.pool.compiler import Plan, data_of
from pooler.pool.model import Pool
from pooler.run.config import RunConfig, values_of
from pooler.run.events import Reporter, listener
from pooler.run.join import join_task
from pooler.run.runner import Runner
from pooler.run.storeid import store_identity
from pooler.run.storerate import StorePace
from pooler.run.taskanswer import task_answer
from pooler.statuses import TaskStatus


def run_pool(pool: Pool, client: ToolRunClient, config: RunConfig, *, journal: TaskJournal | None = None,
             reporter: Reporter | None = None, stop: threading.Event | None = None) -> Answer:
    """Run a pool the caller has checked (see ``run_plan``): only its data files are found here.

    A data file missing raises ``CheckFailed`` and leaves the journal as it was.  ``pooler run``,
    ``check`` and ``tool_pool`` build their plan with every check in ``pooler.pool.compiler``.
    """
    plan = data_of(pool, values_of(config.variables), config.sample)
    return run_plan(plan, client, replace(config, checked=True), journal=journal, reporter=reporter,
                    stop=stop)


def run_plan(plan: Plan, client: ToolRunClient, config: RunConfig, *, journal: TaskJournal | None = None,
             reporter: Reporter | None = None, stop: threading.Event | None = None,
             taking: RunnerConfig | None = None) -> Answer:
    """Carry out a compiled plan and return its answer (contract section 3); every call ends with
    exactly one status.  The task is ``config.task_id`` (with ``config.resume``, the last unfinished
    task of the pool file; else a new one): planned by its first run, claimed from by every run.

    Without a journal the keys hold within this run only.
    """
    own = journal is None
    journal = journal or open_journal(":memory:")
    try:
        task = task_to_run(journal, plan.pool, config)
        config = replace(config, task_id=task, variables=values_of(config.variables))
        return run_task(journal, plan.pool, client, config, taking, reporter=reporter, stop=stop,
                        store=store_identity(client.store))
    finally:
        if own:
            journal.close()


def task_to_run(journal: TaskJournal, pool: Pool, config: RunConfig) -> str:
    """The task a run takes part in: the one named, else (``--resume``) the last unfinished task of
    the pool file, else a new one."""
    task = config.task_id
    if task is None and config.resume:
        task = journal.last_unfinished(pool_identity(pool.file))
    return task or new_task_id()


_MADE: dict[str, set[str]] = {}
_MADE_LOCK = threading.Lock()


def new_task_id() -> str:
    """A readable unique task id: when it was made, and six hex digits.

    Six digits, since a task id met again joins the task that has it: two cron pools started in
    the same second on one journal must not share one. The ids this process made in the second
    are kept so that it never draws one twice.
    """
    with _MADE_LOCK:
        second = time.strftime("%Y%m%d-%H%M%S-")
        made = _MADE.setdefault(second, set())
        for old in [s for s in _MADE if s != second]:
            del _MADE[old]
        while (task := second + secrets.token_hex(3)) in made:
            pass
        made.add(task)
        return task


@dataclass
class RunnerConfig:
    """How this runner takes part, beside the executor's ``RunConfig``."""

    #: Calls this runner has in flight at most; None: the cap (the claim holds it to its fair share).
    width: int | None = None
    #: Seconds a lease lasts without renewal.
    lease: float = 120.0
    #: The tasks whose landed keys a new task's calls skip: the MCP server's session, whose every
    #: pool is a task of its own and whose keys hold across them.
    key_scope: str | None = None


class RunnerStopped(JournalError):
    """The runner stopped before the task ended: its lease was lost or the journal went away."""

    def __init__(self, message: str, answer: Answer | None) -> None:
        super().__init__(message)
        self.answer = answer


def run_task(journal: TaskJournal, pool: Pool, client: ToolRunClient, config: RunConfig,
             taking: RunnerConfig | None = None, *, reporter: Reporter | None = None,
             stop: threading.Event | None = None, store: str | None = None) -> Answer:
    """Run this runner's part of the task ``config.task_id`` (planned by its first runner); the
    task's answer so far."""
    started = time.monotonic()
    reporter = listener(reporter)
    stop = stop or threading.Event()
    taking = taking or RunnerConfig()
    seat = Seat.new(taking.lease, taking.width)
    pool, planned, began = join_task(journal, pool, config, key_scope=taking.key_scope, store=store,
                                     seat=seat, client=client)
    lease = journal.lease(config.task_id or "", seat.seconds, seat.width, seat)
    try:
        journal.record_run(config.task_id or "", config.redactor.value(run_facts(pool, client, config.again)))
        kept = _shared(journal, config.task_id or "")
        in_doubt = kept.get("in_doubt", config.in_doubt)
        # The task's document is read once: it holds the pool (a pool of 10,000 steps is megabytes).
        runner = Runner(journal, pool, client, config=replace(config, in_doubt=in_doubt), lease=lease,
                        reporter=reporter, stop=stop, began=began and not planned,
                        key_scope=kept.get("key_scope"), conflicts=kept.get("conflicts") or ())
        if planned if config.clear_tables is None else config.clear_tables:
            # A new task's tables start empty; a task run again keeps the rows of the calls it skips.
            runner.writer.clear_step_tables()
        answer = _run_to_its_answer(runner, journal, client, config, kept=kept, started=started)
    finally:
        # Held until the task's answer is recorded: a runner's lease ended while the task is still
        # running tells every reader (another server's tasks/get, ``pooler runs``) that the run died.
        lease.close()
    reporter.pool_finished(answer)
    return answer.copy()


def _run_to_its_answer(runner: Runner, journal: TaskJournal, client: ToolRunClient, config: RunConfig, *,
                       kept: TaskDoc, started: float) -> Answer:
    """The runner's calls, then the task's answer, recorded as the task's end once no runner holds
    a call."""
    try:
        # Its slots in its store's rate, which every task that calls the store shares.
        runner.pacer.store = StorePace.of(config.store_rate, store_identity(client.store), runner.task)
        runner.run()
    finally:
        runner.close()
        if runner.pacer.store is not None:
            runner.pacer.store.close()
    trip = round((time.monotonic() - started) * 1000)
    stop = runner.stop
    interrupted = getattr(stop, "reason", None) or "stop" if stop.is_set() else runner.down
    try:
        paced = runner.pacer.store
        if runner.flow.worth_keeping(bool(runner.pool.paces()) or paced is not None):
            flow = runner.flow.doc(runner.lease.id)
            if paced is not None:
                flow["store"] = paced.doc()
            journal.record_flow(runner.task, flow)
        answer: Answer = config.redactor.value(task_answer(journal, runner.task, kept, trip_ms=trip,
                                                           interrupted=interrupted,
                                                           unrecorded=runner.unrecorded.entries))
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
    return answer


def _shared(journal: TaskJournal, task: str) -> TaskDoc:
    """The task's document: there, since this runner has just joined the task."""
    found = journal.shared(task)
    if found is None:
        raise JournalError(f"the task {task} is gone from {journal.where()}")
    return found


def _sampled(journal: TaskJournal, task: str, answer: Answer) -> str | None:
    """``sampled`` for a task whose plan holds a sample of its rows and completed: a full run of
    the task (``--task``) sends the rest."""
    shared = journal.shared(task)
    if shared is None or shared.get("sample") is None or not answer.get("result"):
        return None
    return TaskStatus.SAMPLED if any(step["over_rows"] for step in shared["steps"]) else None
