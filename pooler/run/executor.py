"""Runs a pool: the task in the journal, the plan of every step, the scheduler, and the answer.

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
- The task is opened in the journal only after the pool is planned: a pool refused while
  planning (a data file missing) sent nothing and leaves no task that looks unfinished.
- Steps over rows: the detail a later step refers to is that of the call with the last row.  A
  step over rows is one entry of the answer, a summary with its failed calls (see answer.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pooler.client.http import ToolRunClient
from pooler.errors import JournalError
from pooler.journal.records import pool_identity
from pooler.journal.sqlite.journal import Journal
from pooler.journal.timeline import run_facts
from pooler.pool.compiler import Plan, data_of
from pooler.pool.model import Pool, Step
from pooler.pool.paramplan import plan_params
from pooler.pool.references import refs_to
from pooler.pool.rows import count_rows
from pooler.redact import Redactor
from pooler.run.answer import Collector
from pooler.run.call import CallRunner
from pooler.run.callplan import StepPlan
from pooler.run.events import Reporter, listener
from pooler.run.identity import table_prefix
from pooler.run.opener import CallOpener, count_planned
from pooler.run.planstage import PlanStage
from pooler.run.replan import replan
from pooler.run.scheduler import Scheduler, StepRun
from pooler.run.storeid import store_identity
from pooler.run.tables import TableWriter
from pooler.run.taskplan import (
    POOL_FILE,
    PlannedFile,
    changes,
    plan_rows,
    planned_files,
    record_plan,
    refuse_changed,
    write_plan,
)
from pooler.statuses import StepState, TaskStatus


@dataclass
class RunConfig:
    """How to run a pool, beside its own options (which the CLI has already overridden)."""

    #: Tables go to ``<out>/tables``, ``into`` jobs to ``<out>``.
    out: Path
    #: None: a new task with a generated id.  An id the journal holds: that task runs again.
    task_id: str | None = None
    #: Continue the last unfinished task of this pool file (a new task when there is none).
    resume: bool = False
    #: What to do with a key an earlier run sent without recording its answer.
    in_doubt: Literal["retry", "stop", "skip"] = "retry"
    #: Resolved ``${var}`` values (a mapping, or an object whose ``values`` is one).
    variables: Mapping[str, Any] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=Redactor)
    #: Only the first N rows of every step over rows.
    sample: int | None = None
    #: Remove the step tables of ``out`` before the run.  None: when the task is new (a task run
    #: again keeps the rows of the calls it skips).  True for a caller whose every run is a new
    #: pool under one task, as the MCP server's tool_pool calls are.
    clear_tables: bool | None = None
    #: The command-line options that name where the run went (``--store`` as given, ``--out``,
    #: ``--journal``), kept with the run so the report's commands run as written.
    again: tuple[str, ...] = ()
    #: A task whose files changed since it was planned is planned again from them (see replan.py)
    #: instead of refused.
    replan: bool = False
    #: Every run of the task is a pool of its own (the MCP server's tool_pool calls): each run
    #: plans the task anew from its own files, the keys of the earlier runs still holding.
    plan_each_run: bool = False
    #: The rows the check's pass staged for the task's plan (a new task copies them from there).
    stage: PlanStage | None = None


class StopSignal(threading.Event):
    """A stop request that remembers why, so the answer can say ``"interrupted": "SIGINT"``.

    Any ``threading.Event`` stops a run; this one also names the cause.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        """Ask the run to stop (no new call starts; calls in flight finish)."""
        if self.reason is None:
            self.reason = reason
        self.set()


def run_pool(pool: Pool, client: ToolRunClient, config: RunConfig, *, journal: Journal | None = None,
             reporter: Reporter | None = None, stop: threading.Event | None = None) -> dict[str, Any]:
    """Run a pool the caller has checked (see ``run_plan``): only its data files are found here.

    A data file missing raises ``CheckFailed`` and leaves the journal as it was.  ``pooler run``,
    ``check`` and ``tool_pool`` build their plan with every check in ``pooler.pool.compiler``.
    """
    plan = data_of(pool, _values(config.variables), config.sample)
    return run_plan(plan, client, config, journal=journal, reporter=reporter, stop=stop)


def run_plan(plan: Plan, client: ToolRunClient, config: RunConfig, *, journal: Journal | None = None,
             reporter: Reporter | None = None, stop: threading.Event | None = None) -> dict[str, Any]:
    """Carry out a compiled plan and return its answer (contract §3); every call ends with exactly
    one status.  Nothing is checked again here: the plan is what the compile step accepted.

    Without a journal the keys hold within this run only.
    """
    pool = plan.pool
    started = time.monotonic()
    reporter = listener(reporter)
    stop = stop or threading.Event()
    own = journal is None
    journal = journal or Journal.in_memory()
    try:
        store = store_identity(client.store)
        task_id, rerun = _find_task(journal, pool, config, store)
        clear = not rerun if config.clear_tables is None else config.clear_tables
        base = pool_base(pool)
        files = (_check_plan(journal, plan, task_id, config)
                 if rerun and task_id is not None and not config.plan_each_run else {})
        values = _values(config.variables)
        # A new task is created with its plan, in one transaction: another process that finds the
        # task finds its plan too.
        write = None if journal.path is None else (
            lambda db, tid: write_plan(db, tid, plan, values, config.redactor, stage=config.stage))
        with (config.stage.attached(journal) if config.stage is not None and write is not None
              else contextlib.nullcontext()):
            task, run_no, continued = _open_task(journal, pool, task_id, rerun, store, write=write)
        if continued and config.plan_each_run and journal.path is not None:
            record_plan(journal, task, plan, values, config.redactor, first_run=run_no)
            files = planned_files(journal, task)
        elif continued and not rerun:
            # Another process created the task a moment ago: its plan is the task's.
            files = _check_plan(journal, plan, task, config)
        elif not continued and journal.path is not None:
            files = planned_files(journal, task)
        elif files and config.replan:
            replan(journal, task, plan, values, config.redactor, run=run_no)
            files = planned_files(journal, task)
        rerun = continued
        runs = _step_runs(plan, keep_tables=rerun and not clear,
                          counts={n: f.rows for n, f in files.items() if n != POOL_FILE})
        journal.record_run(task, run_no, config.redactor.value(run_facts(pool, client, config.again)))
        writer = TableWriter(config.out)
        if clear:
            writer.clear_step_tables()
        runner = CallRunner(client=client, journal=journal, task=task, run=run_no, writer=writer,
                            redactor=config.redactor, reporter=reporter, stop=stop,
                            variables=_values(config.variables), base=base,
                            keyed=journal.keyed(task) if rerun else {},
                            live_runs=journal.live_runs(task) if rerun else frozenset(),
                            in_doubt_policy=config.in_doubt,
                            serialize_on=pool.options.serialize_on if pool.options.mode == "parallel"
                            else None)
        collector = Collector(include_results=pool.options.include_results)
        reporter.pool_started(pool, task, sum(r.counted for r in runs))
        opener = CallOpener(plan, writer, config.sample, runner.recorded_span,
                         planned=lambda num: plan_rows(journal, task, num) if num in files else None)
        scheduler = Scheduler(runs, runner, collector, reporter, opener,
                              width=pool.options.max_concurrency,
                              parallel=pool.options.mode == "parallel",
                              stop_on_error=pool.options.stop_on_error, stop=stop)
        scheduler.run()
        interrupted = None
        if stop.is_set() and any(r.state != StepState.DONE for r in runs):
            interrupted = getattr(stop, "reason", None) or "stop"
        answer = collector.answer(total=sum(r.counted for r in runs), task=task,
                                  trip_ms=round((time.monotonic() - started) * 1000),
                                  interrupted=interrupted)
        answer = dict(config.redactor.value(answer))
        sampled = config.sample is not None and any(r.plan.over_rows for r in runs)
        # A sample is not the whole task: --resume continues it with the rows it has not sent.
        journal.finish_task(task, answer,
                            status=TaskStatus.SAMPLED if sampled and answer.get("result") else None)
        reporter.pool_finished(answer)
        return answer
    finally:
        if own:
            journal.close()


def pool_base(pool: Pool) -> Path:
    """The folder the pool's relative data files are read from: the loader's, else the file's."""
    return Path(pool.base).absolute() if pool.base is not None else Path(pool.file).absolute().parent


def _values(variables: Any) -> Mapping[str, Any]:
    if isinstance(variables, Mapping):
        return variables
    found = getattr(variables, "values", None)
    return found if isinstance(found, Mapping) else {}


def _find_task(journal: Journal, pool: Pool, config: RunConfig, store: str) -> tuple[str | None, bool]:
    """The id of the task to run (None: a new one, named by the journal) and whether it ran before.

    Only reads the journal: the task is opened once the pool has been planned.
    """
    task_id = config.task_id
    if task_id is None and config.resume:
        task_id = journal.last_unfinished(pool.file)
    if task_id is None:
        return None, False
    if not _is_ours(journal, task_id, pool, store):
        return task_id, False
    return task_id, True


def _check_plan(journal: Journal, plan: Plan, task: str, config: RunConfig) -> dict[int, PlannedFile]:
    """The files of the task's plan, once nothing changed since it was planned (or ``--replan``
    plans it again): a changed file refuses the run before anything is sent."""
    files = planned_files(journal, task)
    if not files:
        if config.replan:
            raise JournalError(f"--replan: task {task} has no plan in the journal (it was planned before "
                               "tasks recorded theirs) - run it without --replan, or start a new task.")
        return files
    told = changes(plan.pool, plan.data, files, task)
    if told and not config.replan:
        raise refuse_changed(told, task)
    return files


def _is_ours(journal: Journal, task_id: str, pool: Pool, store: str) -> bool:
    """Whether the journal holds the task; refused when it belongs to another pool or store."""
    known = journal.task(task_id)
    if known is None:
        return False
    here = pool_identity(pool.file)
    if known.pool_file != here:
        raise JournalError(f"the task {task_id} ran {known.pool_file}, not {here} - keys belong to "
                           "one pool: give this pool a task id of its own.")
    if known.store is not None and known.store != store:
        # Its keys say what this store has done: against another store they would skip calls
        # that store never received.
        raise JournalError(f"the task {task_id} ran against the store {known.store}, not {store} - "
                           "a task belongs to one store: give this run a task id of its own.")
    return True


def _open_task(journal: Journal, pool: Pool, task_id: str | None, rerun: bool, store: str, *,
               write: Callable[[sqlite3.Connection, str], None] | None) -> tuple[str, int, bool]:
    """The task's id, the number of this run of it, and whether it ran before.

    A task another process created since ``_find_task`` looked is continued, not refused.
    """
    if not rerun:
        try:
            return journal.new_task(pool.file, task_id, store, also=write), 1, False
        except JournalError:
            if task_id is None or not _is_ours(journal, task_id, pool, store):
                raise
    assert task_id is not None
    return task_id, journal.open_task(task_id, store), True


def step_plan(step: Step, known: set[str], *, keep_tables: bool) -> StepPlan:
    """A step's plan: the steps it waits for (of the ``known`` earlier ones, lower-case names) and
    its params compiled once, references and templates included."""
    fe = step.for_each
    deps = {r.key for r in refs_to(step.params, known)}
    if fe is not None and fe.step and fe.step.lower() in known:
        deps.add(fe.step.lower())
    return StepPlan(step=step, prefix=table_prefix(step),
                    params=plan_params(step.params, known, step), deps=frozenset(deps),
                    over_rows=fe is not None, chunk_field=fe.field if fe and fe.chunk else None,
                    keep_tables=keep_tables)


def _step_runs(plan: Plan, *, keep_tables: bool, counts: Mapping[int, int | None]) -> list[StepRun]:
    """Every step's run, worked out once from the plan: references, dependencies, rows to come
    (``counts``: the rows of the task's recorded plan, by step)."""
    runs: list[StepRun] = []
    known: set[str] = set()
    for step in plan.pool.steps:
        fe = step.for_each
        run = StepRun(step_plan(step, known,
                                keep_tables=keep_tables and fe is not None and step.key is not None))
        data = plan.data.get(step.num)
        if step.num in counts:
            count_planned(run, counts[step.num], plan.sample)
        elif data is not None:
            rows = data.rows if data.rows is not None else count_rows(data.path, data.format)
            count_planned(run, rows, plan.sample)
        runs.append(run)
        if step.name:
            known.add(step.name.lower())
    return runs
