"""``pooler run POOL --journal postgresql://…``: this process joins the task as one of its runners."""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pooler.cli.commands.common import Context, make_client, positive_float, positive_int, render_error
from pooler.cli.commands.monitoring import Monitoring
from pooler.cli.commands.run_common import Interrupts, SentCounter, answered, open_log, run_again
from pooler.cli.commands.run_files import write_run_files
from pooler.cli.outcome import outcome_document
from pooler.cli.render import make_reporter
from pooler.errors import UsageError
from pooler.exits import ExitStatus
from pooler.journal.dburl import shown
from pooler.pool.model import Pool
from pooler.pool.variables import Variables
from pooler.run.events import FanOut
from pooler.run.executor import RunConfig, StopSignal

if TYPE_CHECKING:
    from pooler.report.tracing import Tracing

#: Seconds a runner's lease lasts without renewal, unless --lease says otherwise.
DEFAULT_LEASE = 120.0


def add_shared_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("runners sharing a task (with --journal postgresql://...)")
    group.add_argument("--width", type=positive_int, metavar="N",
                       help="calls this runner has in flight at once at most (default: "
                            "max_concurrency); the task's cap is shared fairly among its live runners")
    group.add_argument("--lease", type=positive_float, metavar="SECONDS", default=None,
                       help=f"how long this runner's calls stay its own without a heartbeat (default "
                            f"{DEFAULT_LEASE:g}); the store's read timeout must be shorter")


def check_shared_options(args: argparse.Namespace, pool: Pool, read_timeout: float) -> float:
    """The lease, once the options that would break its promise are refused."""
    lease = args.lease or DEFAULT_LEASE
    if read_timeout >= lease:
        raise UsageError(f"the store's read timeout ({read_timeout:g} s, --timeout) must be shorter than "
                         f"the lease ({lease:g} s, --lease): a call still waiting for its answer when "
                         "its lease runs out would be taken back while it may yet be carried out")
    cap = pool.options.max_concurrency
    if args.width is not None and pool.options.mode == "parallel" and args.width > cap:
        raise UsageError(f"--width {args.width} is more than max_concurrency {cap}: a runner's share is "
                         "at most the task's cap")
    return lease


def _unfinished(pool: Pool, url: str, ctx: Context) -> str | None:
    """``--resume``: the last task of this pool file that did not complete, as on SQLite."""
    from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415
    from pooler.journal.records import pool_identity  # noqa: PLC0415

    with PgJournal(url) as journal:
        found = journal.last_unfinished(pool_identity(pool.file))
    if found is None:
        ctx.note(f"pooler: --resume: no unfinished task of {pool.file} in the journal; this run starts a "
                 "new task.")
    return found


def _told_gone(url: str, task: str, pool: Pool, variables: Variables, ctx: Context) -> None:
    from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415
    from pooler.shared.join import files_gone  # noqa: PLC0415

    with PgJournal(url) as journal:
        for name in files_gone(journal, task, pool, variables.values):
            ctx.note(f"pooler: {name} is not there any more; task {task} takes its rows from its plan.")


def handle_shared(args: argparse.Namespace, ctx: Context, pool: Pool, variables: Variables, url: str,
                  *, tracing: Tracing | None = None) -> int:
    from pooler.journal.postgres.history import PgHistory  # noqa: PLC0415
    from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415
    from pooler.shared.runner import RunnerStopped, SharedConfig, run_shared  # noqa: PLC0415

    task = args.task or (_unfinished(pool, url, ctx) if args.resume else None)
    if task is not None:
        _told_gone(url, task, pool, variables, ctx)
    if task is None:
        task = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        ctx.note(f"pooler: task {task}: more runners join it with --task {task}")
    with make_client(args, ctx, masking=False) as client, open_log(args.log) as log, \
            Monitoring(args, ctx, client, pool.file, tracing, runner=True) as monitoring:
        lease = check_shared_options(args, pool, client.read_timeout)
        sent = SentCounter()
        reporter = FanOut([make_reporter(ctx.human(args), ctx.redactor, quiet=args.quiet, log=log), sent,
                           *monitoring.reporters])
        config = RunConfig(out=Path(args.out), task_id=task, in_doubt=args.in_doubt or "retry",
                           variables=variables.values, redactor=ctx.redactor, sample=args.sample,
                           again=run_again(args, ctx, client.shown_url, shown(url)), replan=args.replan)
        stop = StopSignal()
        shared = SharedConfig(url=url, width=args.width, lease=lease)
        try:
            with Interrupts(stop, ctx, flush=[ctx.stdout, ctx.stderr, log]) as interrupts:
                answer = run_shared(pool, client, config, shared, reporter=reporter, stop=stop)
        except RunnerStopped as stopped:
            ctx.note(render_error(stopped))
            ctx.note("pooler: this runner stopped; nothing it did not record in the journal is reported "
                     "done. Any runner of the task (pooler run ... --task " + task + ") carries on.")
            if args.json:
                # Exactly one document: the answer so far, or (none could be read) the outcome's,
                # which says why the runner stopped and names the task.
                document = stopped.answer
                if document is None:
                    document = outcome_document(ExitStatus.FAILED, list(stopped.problems()))
                    document["task"] = task
                ctx.emit_json(document)
            return ExitStatus.FAILED
        with PgJournal(url) as journal:
            write_run_files(args, ctx, PgHistory(journal), answer, args.pool)
    return answered(args, ctx, answer, interrupts)


