"""``pooler run POOL``: load, override, check, resolve, lock, run, render, exit status."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import (
    Context,
    add_json,
    add_run_output,
    add_store_options,
    add_variable_options,
    calls_a_second,
    make_client,
    mask_variables,
    positive_int,
    render_error,
    variable_inputs,
)
from pooler.cli.commands.monitoring import Monitoring, add_monitoring_options, start_tracing
from pooler.cli.commands.run_common import (
    Interrupts,
    SentCounter,
    answered,
    log_refusal,
    open_log,
    run_again,
)
from pooler.cli.commands.run_files import (
    add_run_files,
    check_run_files,
    write_run_files,
)
from pooler.cli.commands.run_runner import add_shared_options, check_shared_options, runner_stopped, told_gone
from pooler.cli.commands.store_rate import add_store_rate, store_rate
from pooler.cli.outcome import outcome_document
from pooler.cli.preflight import check_out, make_folders_in_out
from pooler.cli.render import make_reporter
from pooler.client.answer_budget import share_malloc_arenas
from pooler.errors import CheckFailed, LockedError, PoolerError, UsageError
from pooler.exits import ExitStatus
from pooler.journal.api import journal_spec
from pooler.journal.dburl import is_postgres, shown
from pooler.journal.documents import Conflict
from pooler.journal.opening import open_journal
from pooler.journal.records import pool_identity
from pooler.journal.work import Redrive, TaskJournal
from pooler.plural import plural
from pooler.pool.compiler import Inputs, Plan, plan_for_run
from pooler.pool.loader import load_pool
from pooler.pool.model import MODES, Pool
from pooler.pool.rate import Rate
from pooler.redact import short_warning
from pooler.run.config import RunConfig, StopSignal
from pooler.run.events import FanOut
from pooler.run.executor import RunnerConfig, RunnerStopped, new_task_id, run_plan
from pooler.run.journals import told_history
from pooler.run.lock import OutLock, PoolLock, lock_dir
from pooler.statuses import TaskStatus

#: The exit status of a run stopped by each signal: 128 + the signal's number, as shells report it.
IN_DOUBT = ("retry", "stop", "skip")

if TYPE_CHECKING:
    from pooler.run.compare import Classified


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
                        help="the task id (default: a new one, like 20261130-120001-3fa2c1)")
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
    add_batch_options(parser)
    add_shared_options(parser)
    add_run_files(parser)
    add_monitoring_options(parser)
    add_run_output(parser)
    parser.set_defaults(handler=handle)


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    """The batch options that override the pool file's: ``run``'s, and ``plan``'s that keeps them."""
    batch = parser.add_argument_group("batch options (override the pool file)")
    batch.add_argument("--mode", choices=MODES, help="sequential (default) or parallel")
    batch.add_argument("--max-concurrency", type=positive_int, metavar="N",
                       help="parallel mode: calls at once (default 4, at most 16; no effect in sequential "
                            "mode)")
    batch.add_argument("--serialize-on", metavar="PATH",
                       help="parallel mode: a dotted path into params; equal values run one at a time "
                            "(default: none)")
    batch.add_argument("--rate", type=calls_a_second, metavar="N",
                       help="start at most N calls a second, for the task as a whole (in place of the "
                            "pool's rate; default: the pool's, else no limit)")
    add_store_rate(batch)
    batch.add_argument("--stop-on-error", action=argparse.BooleanOptionalAction, default=None,
                       help="start no new calls after the first failure (default: on)")
    batch.add_argument("--include-results", action=argparse.BooleanOptionalAction, default=None,
                       help="inline every call's answer in the answer (default: on)")


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
    rate = getattr(args, "rate", None)
    if rate is not None:
        if pool.rate is not None:
            ctx.note(f"pooler: --rate {rate:g} overrides rate.per_second: {pool.rate.per_second:g} of "
                     f"{pool.file}")
        burst = pool.rate.burst if pool.rate is not None else 1
        pool = dataclasses.replace(pool, rate=Rate(rate, burst, pool.rate.key if pool.rate else None))
    if not changes:
        return pool
    return dataclasses.replace(pool, options=dataclasses.replace(pool.options, **changes))


def prepare(args: argparse.Namespace, ctx: Context, loaded: Pool | None = None, *,
            inputs: Inputs | None = None, tools: list[dict[str, Any]] | None = None) -> Plan:
    """Load the pool, apply the flags, and compile it with its variables: the plan the run carries
    out, or every problem at once.  A run reads its data files once, as the task is planned (the
    check of every row included); a task run again takes its rows from its plan, and a dry run
    reads them here.  ``loaded``: the pool as a redrive has it (from its task), not from a file;
    ``inputs``: the variables' sources, when not the flags' alone (``pooler apply``); ``tools``: the
    store's declarations to check the pool against (``pooler plan``)."""
    pool = loaded or apply_overrides(load_pool(Path(args.pool), partial=True), args, ctx)
    inputs = inputs or variable_inputs(args, ctx)
    try:
        plan = plan_for_run(pool, inputs, sample=args.sample, data_files=args.dry_run, tools=tools)
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


def handle(args: argparse.Namespace, ctx: Context) -> int:
    if args.replan and not (args.task or args.resume):
        raise UsageError("--replan plans a task again: give it with --task ID or --resume.")
    plan = prepare(args, ctx)
    if args.dry_run:
        # Loaded only here: a run that sends its calls starts without the plan's tables.
        from pooler.cli.commands.dry_run import show_plan  # noqa: PLC0415

        return show_plan(plan, args, ctx)
    return run_prepared(args, ctx, plan)


@contextlib.contextmanager
def run_locks(args: argparse.Namespace, ctx: Context, *, shared: bool) -> Iterator[None]:
    """One run of a pool file, and of an ``--out`` folder, at a time on this host (the runners of a
    task shared on PostgreSQL share it on purpose); a start refused is told in the ``--log`` file too,
    so a cron log shows the nights that did not start."""
    if shared:
        yield
        return
    locks = lock_dir(ctx.environ)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(PoolLock(Path(args.pool), locks))
            held.enter_context(OutLock(Path(args.out), locks))
        except LockedError as error:
            log_refusal(args.log, ctx.redactor, error)
            raise
        yield


def run_prepared(args: argparse.Namespace, ctx: Context, plan: Plan, *,
                 redrive: Redrive | None = None, locked: bool = False,
                 told: dict[str, Any] | None = None, applies: str | None = None,
                 compared: Mapping[int, Classified] | None = None,
                 conflicts: Sequence[Conflict] = ()) -> int:
    """The run of a plan made ready (``prepare``): locked (unless the caller holds the locks,
    ``locked``), its task joined, run, rendered, its exit status.  ``redrive``: a redrive of the task
    ``--task`` names (``pooler redrive``), whose plan ``told`` its answer carries as ``redrive``;
    ``applies``: the saved plan this run applies (``pooler apply``), whose task must be new, and
    ``compared`` its steps' compares as the apply read them (the task is planned from them), and
    ``conflicts`` its calls not sent (their rows moved in the store since the plan), which end
    not_run and which its answer lists."""
    # Up to 16 threads read big answers side by side: without a cap on glibc's arenas each keeps
    # its own freed memory, and a parallel run of 96 answers of 3.8 MB peaked at 164 MB instead
    # of 131-144 MB. A setting of the whole process, so the command makes it, not the client.
    share_malloc_arenas()
    variables = plan.variables
    assert variables is not None
    check_out(Path(args.out))
    make_folders_in_out(Path(args.out), (args.report, args.junit, args.metrics_file))
    check_run_files(args)
    tracing = start_tracing(args, ctx)
    spec = journal_spec(args.journal, ctx.environ)
    # Runners of a task shared across hosts share it on purpose; on one host, one run of a pool
    # file (and of an out folder) at a time.
    shared = is_postgres(spec)
    where = shown(spec) if shared else str(Path(spec).absolute())
    # The executor masks everything it writes (tables, jobs, journal, answer, reporter) and must act
    # on the store's own answer: a client masking it as well could hide the very keys it reads.
    with make_client(args, ctx, masking=False, need_token=True) as client, \
            (contextlib.nullcontext() if locked else run_locks(args, ctx, shared=shared)), \
            closing(open_journal(spec)) as journal, open_log(args.log) as log, \
            Monitoring(args, ctx, client, plan.pool.file, tracing, runner=shared) as monitoring:
        lease = check_shared_options(args, plan.pool, client.read_timeout)
        task = task_of(args, ctx, plan.pool, journal, shared=shared)
        told_gone(journal, task, plan.pool, variables, ctx)
        note_sampled(args, journal, ctx)
        sent = SentCounter()
        screen = make_reporter(ctx.human(args), ctx.redactor, quiet=args.quiet, log=log)
        reporter = FanOut([screen, sent, *monitoring.reporters])
        config = RunConfig(out=Path(args.out), task_id=task, in_doubt=args.in_doubt or "retry",
                           probe=args.in_doubt is None,
                           variables=variables.values, redactor=ctx.redactor, sample=args.sample,
                           replan=args.replan, again=run_again(args, ctx, client.shown_url, where),
                           redrive=redrive, applies=applies, store_rate=store_rate(args, ctx, spec),
                           compared=compared,
                           conflicts=conflicts)
        stop = StopSignal()
        try:
            with Interrupts(stop, ctx, flush=[ctx.stdout, ctx.stderr, log],
                            say=reporter.notice) as interrupts:
                answer = run_plan(plan, client, config, journal=journal, reporter=reporter, stop=stop,
                                  taking=RunnerConfig(width=args.width, lease=lease))
        except RunnerStopped as stopped:
            return runner_stopped(args, ctx, stopped, task, sent=sent.calls, where=where)
        except PoolerError as error:
            if not sent.calls:
                raise
            # Calls have reached the store: this is a pool that stopped, not one refused.
            ctx.note(render_error(error))
            ctx.note(f"pooler: the run stopped after {plural(sent.calls, 'call')} had been sent; "
                     f"'pooler runs --journal {where}' lists the task.")
            if args.json:
                document = outcome_document(ExitStatus.FAILED, list(error.problems()))
                document["task"] = sent.task
                ctx.emit_json(document)
            return ExitStatus.FAILED
        write_run_files(args, ctx, told_history(journal), answer, args.pool)
    if told is not None:
        answer = {**answer, "redrive": told}
    return answered(args, ctx, answer, interrupts)


def note_sampled(args: argparse.Namespace, journal: TaskJournal, ctx: Context) -> None:
    """A full run that starts a new task beside a sampled one is told how to continue the sample."""
    if args.task is not None or args.resume or args.sample is not None:
        return
    last = journal.last_unfinished(pool_identity(args.pool))
    row = journal.task(last) if last is not None else None
    if row is not None and row.status == TaskStatus.SAMPLED:
        ctx.note(f"pooler: the last task of {args.pool}, {row.id}, ran a sample (--sample) and this run "
                 "starts a new task; --resume continues the sampled one with its keys instead.")


def task_of(args: argparse.Namespace, ctx: Context, pool: Pool, journal: TaskJournal, *, shared: bool) -> str:
    """The task this run takes part in (``--task``, ``--resume``, else a new one); ``--resume`` with
    nothing to resume says that it starts a new task rather than seem to continue."""
    if args.task is not None:
        if args.resume and journal.task(args.task) is None:
            ctx.note(f"pooler: --resume: the journal has no task {args.task}; this run starts it as a "
                     "new task.")
        return str(args.task)
    found = journal.last_unfinished(pool_identity(pool.file)) if args.resume else None
    if args.resume and found is None:
        ctx.note(f"pooler: --resume: no unfinished task of {pool.file} in the journal; this run starts a "
                 "new task.")
    if found is not None:
        return found
    task = new_task_id()
    if shared:
        ctx.note(f"pooler: task {task}: more runners join it with --task {task}")
    return task
