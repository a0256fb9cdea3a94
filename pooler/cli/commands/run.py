"""``pooler run POOL``: load, override, check, resolve, lock, run, render, exit status."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import (
    Context,
    add_json,
    add_store_options,
    add_traceback,
    add_variable_options,
    make_client,
    mask_variables,
    positive_int,
    render_error,
    variable_inputs,
)
from pooler.cli.commands.dry_run import show_plan
from pooler.cli.commands.monitoring import Monitoring, add_monitoring_options, start_tracing
from pooler.cli.commands.run_common import Interrupts, SentCounter, answered, open_log, run_again
from pooler.cli.commands.run_files import (
    add_run_files,
    check_run_files,
    write_run_files,
)
from pooler.cli.commands.run_shared import add_shared_options, handle_shared
from pooler.cli.outcome import outcome_document
from pooler.cli.preflight import check_out
from pooler.cli.render import make_reporter
from pooler.client.answer_budget import share_malloc_arenas
from pooler.errors import CheckFailed, PoolerError, UsageError
from pooler.exits import ExitStatus
from pooler.journal.api import journal_spec
from pooler.journal.dburl import is_postgres
from pooler.journal.sqlite.history import SqliteHistory
from pooler.journal.sqlite.journal import Journal
from pooler.plural import plural
from pooler.pool.compiler import Plan, plan_for_run
from pooler.pool.loader import load_pool
from pooler.pool.model import MODES, Pool
from pooler.redact import short_warning
from pooler.run.events import FanOut
from pooler.run.executor import RunConfig, StopSignal, run_plan
from pooler.run.lock import OutLock, PoolLock, lock_dir
from pooler.run.planstage import PlanStage
from pooler.run.taskplan import gone, planned_files
from pooler.statuses import TaskStatus

#: The exit status of a run stopped by each signal: 128 + the signal's number, as shells report it.
IN_DOUBT = ("retry", "stop", "skip")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "run",
        help=help_of("run"),
        description="Run a pool file (YAML or JSON) against a store. Every check runs before the first "
                    "call: a pool that fails them sends nothing. Exit 0 when every step is done; 1 when "
                    "the pool stopped or a step failed; 2 when refused before the first step; 3 when "
                    "another run of the same pool file holds its lock; 130/143 when interrupted by "
                    "SIGINT/SIGTERM (calls in flight finish, no new ones start).",
    )
    parser.add_argument("pool", metavar="POOL", help="the pool file")
    add_store_options(parser)
    parser.add_argument("--out", metavar="DIR", default="out",
                        help="where table and job files go (default ./out)")
    add_json(parser, "the answer (contract section 3)")
    add_variable_options(parser)
    parser.add_argument("--task", metavar="ID",
                        help="the task id (default: a new one, like 20261130-120001-3fa2)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the last unfinished task of this pool (or --task ID): keyed calls it "
                             "already completed are skipped; with none, a new task starts (and says so)")
    parser.add_argument("--journal", metavar="PATH|URL",
                        help="the journal: a SQLite file (default $XDG_STATE_HOME/pooler/journal.sqlite), "
                             "or postgresql://... to share the task with other runners (env POOLER_JOURNAL)")
    parser.add_argument("--dry-run", action="store_true",
                        help="show the plan (variables, rows, keys, order) and send nothing")
    parser.add_argument("--in-doubt", choices=IN_DOUBT, default=None,
                        help="on a rerun of a task, what to do with a call sent whose answer was never "
                             "recorded (default retry: send it again with the same Idempotency-Key)")
    parser.add_argument("--replan", action="store_true",
                        help="with --task or --resume: plan the task again from its files as they are now "
                             "(a task whose pool or data file changed since it was planned is refused "
                             "without it); rows already done are told by their keys and not sent again")
    parser.add_argument("--sample", type=positive_int, metavar="N",
                        help="run steps over rows on their first N rows only (default: every row)")
    batch = parser.add_argument_group("batch options (override the pool file)")
    batch.add_argument("--mode", choices=MODES, help="sequential (default) or parallel")
    batch.add_argument("--max-concurrency", type=positive_int, metavar="N",
                       help="parallel mode: calls at once (default 4, at most 16; no effect in sequential "
                            "mode)")
    batch.add_argument("--serialize-on", metavar="PATH",
                       help="parallel mode: a dotted path into params; equal values run one at a time "
                            "(default: none)")
    batch.add_argument("--stop-on-error", action=argparse.BooleanOptionalAction, default=None,
                       help="start no new calls after the first failure (default: on)")
    batch.add_argument("--include-results", action=argparse.BooleanOptionalAction, default=None,
                       help="inline every call's answer in the answer (default: on)")
    add_shared_options(parser)
    add_run_files(parser)
    add_monitoring_options(parser)
    parser.add_argument("--quiet", action="store_true",
                        help="print only failures, in-doubt calls and the summary of a run that did not "
                             "complete")
    parser.add_argument("--verbose", action="store_true",
                        help="also say what was left aside (names in --vars-file the pool does not declare)")
    parser.add_argument("--log", metavar="FILE",
                        help="also append plain timestamped lines to FILE (default: none)")
    add_traceback(parser)
    parser.set_defaults(handler=handle)


OVERRIDES = ("mode", "max_concurrency", "serialize_on", "stop_on_error", "include_results")


def apply_overrides(pool: Pool, args: argparse.Namespace, ctx: Context) -> Pool:
    """The pool with the batch flags given on the command line in place of the file's."""
    changes = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    for name, value in changes.items():
        old = getattr(pool.options, name)
        if name in pool.options_set and old != value:
            ctx.note(f"pooler: --{name.replace('_', '-')} {value} overrides {name}: {old} of {pool.file}")
    mode = changes.get("mode", pool.options.mode)
    if "max_concurrency" in changes and mode == "sequential":
        ctx.note(f"pooler: --max-concurrency {changes['max_concurrency']} has no effect: {pool.file} runs "
                 "in mode sequential, one call at a time - add --mode parallel to run calls side by side.")
    if not changes:
        return pool
    return dataclasses.replace(pool, options=dataclasses.replace(pool.options, **changes))


def prepare(args: argparse.Namespace, ctx: Context, stage: PlanStage | None = None) -> Plan:
    """Load the pool, apply the flags, and compile it with its variables and data files: the plan
    the run carries out, or every problem at once.  ``stage`` takes the rows the check reads, for
    the task's plan (not for a dry run, which writes nothing)."""
    pool = apply_overrides(load_pool(Path(args.pool), partial=True), args, ctx)
    inputs = variable_inputs(args, ctx)
    # A runner of a shared task (PostgreSQL journal) needs no data file: the runner that plans the
    # task reads the rows (shared_plan) and the others take them from the journal.
    shared = not args.dry_run and is_postgres(journal_spec(args.journal, ctx.environ))
    try:
        try:
            plan = plan_for_run(pool, inputs, sample=args.sample, data_files=not shared,
                                rows=None if args.dry_run or shared else stage)
        except CheckFailed as exc:
            if not _only_gone(args, exc):
                raise
            # A task run again takes its rows from its recorded plan: a data file gone since is
            # fine, once the journal shows the plan holds its rows (checked in handle).
            plan = plan_for_run(pool, inputs, sample=args.sample, data_files=False)
            args.gone_files = exc
    except CheckFailed:
        # Secrets the problems may quote are masked even when the plan was refused.
        mask_variables(pool, inputs, ctx.redactor)
        raise
    assert plan.variables is not None  # inputs were given
    for secret in plan.variables.secrets:
        ctx.redactor.add(secret)
    for name in plan.variables.secret_names:
        warning = short_warning(f"the secret variable [{name}]", plan.variables.values[name])
        if warning:
            ctx.note(warning)
    if getattr(args, "verbose", False):
        for note in plan.variables.ignored:
            ctx.note(note.headline())
    return plan


def _only_gone(args: argparse.Namespace, exc: CheckFailed) -> bool:
    """A rerun refused only because data files are missing (their rows may be in the task's plan)."""
    if args.dry_run or not (args.task or args.resume) or args.replan:
        return False
    return all(p.message.startswith("No such file:") and "- for_each.file of step" in p.message
               for p in exc.problems())


def _plan_holds_gone(args: argparse.Namespace, plan: Plan, journal: Journal, ctx: Context) -> None:
    """The refusal of a missing data file stands unless the task's plan holds that step's rows."""
    refused = getattr(args, "gone_files", None)
    if refused is None:
        return
    task = args.task or journal.last_unfinished(plan.pool.file)
    files = planned_files(journal, task) if task is not None else {}
    steps = {s.num for s in plan.pool.steps if s.for_each is not None and isinstance(s.for_each.file, str)}
    if not steps <= set(files):
        raise refused
    for name in gone(files):
        ctx.note(f"pooler: {name} is not there any more; task {task} takes its rows from its plan.")


def handle(args: argparse.Namespace, ctx: Context) -> int:
    # The check's pass stages each data file's rows, so a new task's plan does not read them again.
    spec = journal_spec(args.journal, ctx.environ)
    with PlanStage(ctx.redactor, None if is_postgres(spec) else Path(spec).absolute().parent) as stage:
        return _handle(args, ctx, stage)


def _handle(args: argparse.Namespace, ctx: Context, stage: PlanStage) -> int:
    if args.replan and not (args.task or args.resume):
        raise UsageError("--replan plans a task again: give it with --task ID or --resume.")
    plan = prepare(args, ctx, stage)
    if args.dry_run:
        return show_plan(plan, args, ctx)
    # Up to 16 threads read big answers side by side: without a cap on glibc's arenas each keeps
    # its own freed memory, and a parallel run of 96 answers of 3.8 MB peaked at 164 MB instead
    # of 131-144 MB. A setting of the whole process, so the command makes it, not the client.
    share_malloc_arenas()
    variables = plan.variables
    assert variables is not None
    check_run_files(args)
    check_out(Path(args.out))
    tracing = start_tracing(args, ctx)
    spec = journal_spec(args.journal, ctx.environ)
    if is_postgres(spec):
        return handle_shared(args, ctx, plan.pool, variables, spec, tracing=tracing)
    journal_path = Path(spec)
    # The executor masks everything it writes (tables, jobs, journal, answer, reporter) and must act
    # on the store's own answer: a client masking it as well could hide the very keys it reads.
    locks = lock_dir(ctx.environ)
    with make_client(args, ctx, masking=False, need_token=True) as client, \
            PoolLock(Path(args.pool), locks), OutLock(Path(args.out), locks), \
            Journal(journal_path) as journal, open_log(args.log) as log, \
            Monitoring(args, ctx, client, plan.pool.file, tracing) as monitoring:
        say_what_resume_does(args, plan.pool, journal, ctx)
        note_sampled(args, journal, ctx)
        _plan_holds_gone(args, plan, journal, ctx)
        sent = SentCounter()
        screen = make_reporter(ctx.human(args), ctx.redactor, quiet=args.quiet, log=log)
        reporter = FanOut([screen, sent, *monitoring.reporters])
        config = RunConfig(out=Path(args.out), task_id=args.task, resume=args.resume,
                           in_doubt=args.in_doubt or "retry", variables=variables.values,
                           redactor=ctx.redactor, sample=args.sample, replan=args.replan, stage=stage,
                           again=run_again(args, ctx, client.shown_url,
                                                           str(journal_path.absolute())))
        stop = StopSignal()
        try:
            with Interrupts(stop, ctx, flush=[ctx.stdout, ctx.stderr, log],
                            say=reporter.notice) as interrupts:
                answer = run_plan(plan, client, config, journal=journal, reporter=reporter, stop=stop)
        except PoolerError as error:
            if not sent.calls:
                raise
            # Calls have reached the store: this is a pool that stopped, not one refused.
            ctx.note(render_error(error))
            ctx.note(f"pooler: the run stopped after {plural(sent.calls, 'call')} had been sent; "
                     f"'pooler runs --journal {journal_path}' lists the task.")
            if args.json:
                document = outcome_document(ExitStatus.FAILED, list(error.problems()))
                document["task"] = sent.task
                ctx.emit_json(document)
            return ExitStatus.FAILED
        write_run_files(args, ctx, SqliteHistory(journal), answer, args.pool)
    return answered(args, ctx, answer, interrupts)


def note_sampled(args: argparse.Namespace, journal: Journal, ctx: Context) -> None:
    """A full run that starts a new task beside a sampled one is told how to continue the sample."""
    if args.task is not None or args.resume or args.sample is not None:
        return
    last = journal.last_unfinished(args.pool)
    row = journal.task(last) if last is not None else None
    if row is not None and row.status == TaskStatus.SAMPLED:
        ctx.note(f"pooler: the last task of {args.pool}, {row.id}, ran a sample (--sample) and this run "
                 "starts a new task; --resume continues the sampled one with its keys instead.")


def say_what_resume_does(args: argparse.Namespace, pool: Pool, journal: Journal, ctx: Context) -> None:
    """``--resume`` with nothing to resume starts a new task: say so rather than seem to continue."""
    if not args.resume:
        return
    if args.task is not None:
        if journal.task(args.task) is None:
            ctx.note(f"pooler: --resume: the journal has no task {args.task}; this run starts it as a "
                     "new task.")
        return
    if journal.last_unfinished(pool.file) is None:
        ctx.note(f"pooler: --resume: no unfinished task of {pool.file} in the journal; this run starts a "
                 "new task.")
