"""``pooler redrive TASK``: send again what did not land of a task (failed, in doubt, not run),
and nothing that completed or was skipped, from its journal alone; the plan told first."""

from __future__ import annotations

import argparse
from contextlib import closing
from typing import Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import (
    Context,
    add_json,
    add_run_output,
    add_store_options,
    add_variable_options,
)
from pooler.cli.commands.monitoring import add_monitoring_options
from pooler.cli.commands.run import IN_DOUBT, prepare, run_locks, run_prepared
from pooler.cli.commands.run_files import add_run_files
from pooler.cli.commands.run_runner import add_shared_options
from pooler.cli.commands.store_rate import add_store_rate
from pooler.errors import UsageError
from pooler.exits import ExitStatus
from pooler.journal.api import journal_spec
from pooler.journal.dburl import is_postgres, shown
from pooler.journal.documents import TaskDoc
from pooler.journal.opening import open_journal
from pooler.journal.work import Redrive
from pooler.pool.model import Pool
from pooler.run.redrive import (
    parse_only,
    parse_rows,
    pool_changed,
    probed_steps,
    redrive_plan,
    step_number,
    stored_pool,
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "redrive",
        help=help_of("redrive"),
        description="Send again the calls of a task that did not land - failed calls under a new key "
                    "round, calls in doubt by --in-doubt (or their step's probe), calls not run - and "
                    "nothing that completed or was skipped. The plan is told before the first call. "
                    "The task's journal holds its pool and its rows: the pool file and the data files "
                    "are not needed. Any task, any age, as often as needed; runners on several hosts "
                    "may redrive a task on PostgreSQL together. Exit 0 when every call is done, 1 when "
                    "one failed or the run stopped, 2 when refused.",
    )
    parser.add_argument("task", metavar="TASK", help="the task id, as 'pooler runs' lists it")
    add_store_options(parser)
    parser.add_argument("--journal", metavar="PATH|URL",
                        help="the task's journal: a SQLite file (default "
                             "$XDG_STATE_HOME/pooler/journal.sqlite), or postgresql://... "
                             "(env POOLER_JOURNAL)")
    parser.add_argument("--out", metavar="DIR", default="out",
                        help="where table and job files go (default ./out)")
    add_json(parser, "the answer (contract section 3) with the redrive's plan")
    add_variable_options(parser)
    parser.add_argument("--dry-run", action="store_true", help="tell the plan and send nothing")
    parser.add_argument("--only", metavar="KINDS",
                        help="send only these kinds of call: some of failed,in-doubt,not-run (default all)")
    parser.add_argument("--step", metavar="NAME",
                        help="send only the calls of this step (its name or number)")
    parser.add_argument("--rows", metavar="FIRST-LAST",
                        help="send only the calls of these rows (like 10-20), numbered as the run's lines "
                             "number them")
    parser.add_argument("--in-doubt", choices=IN_DOUBT, default=None,
                        help="what to do with a call in doubt (default retry: send it again with the same "
                             "Idempotency-Key)")
    add_store_rate(parser)
    add_shared_options(parser)
    add_run_files(parser)
    add_monitoring_options(parser)
    add_run_output(parser)
    parser.set_defaults(handler=handle, resume=False, replan=False, sample=None)


def handle(args: argparse.Namespace, ctx: Context) -> int:
    failed, in_doubt, not_run = parse_only(args.only)
    rows = parse_rows(args.rows)
    spec = journal_spec(args.journal, ctx.environ)
    with closing(open_journal(spec)) as journal:
        found = journal.shared(args.task)
    if found is None:
        raise UsageError(f"the journal {shown(spec)} has no task {args.task} - 'pooler runs' lists its "
                         "tasks.")
    pool = stored_pool(found, args.task)
    redrive = Redrive(failed, in_doubt, not_run, step_number(pool, args.step), rows)
    # The task's own pool, its rows and its sample: a redrive sends what the plan holds.
    args.pool, args.sample = found.get("pool_file") or args.task, found.get("sample")
    if args.dry_run:
        return redrive_or_tell(args, ctx, spec, found, pool=pool, redrive=redrive, locked=False)
    # The locks first: a redrive that loses the race to another tells the refusal only, not a plan
    # read while the other sends it.
    with run_locks(args, ctx, shared=is_postgres(spec)):
        return redrive_or_tell(args, ctx, spec, found, pool=pool, redrive=redrive, locked=True)


def redrive_or_tell(args: argparse.Namespace, ctx: Context, spec: str, found: TaskDoc, *, pool: Pool,
                    redrive: Redrive, locked: bool) -> int:
    """The redrive's plan read from the journal and told; then, unless it is a dry run or sends
    nothing, the run of it (``locked``: under the run locks the caller holds)."""
    with closing(open_journal(spec)) as journal:
        plan = redrive_plan(journal, args.task, redrive, probed_steps(pool, args.in_doubt))
    changed = pool_changed(found)
    if changed is not None:
        ctx.note(f"pooler: {changed} changed since task {args.task} was planned; the redrive runs the steps "
                 "the task was planned with, as its journal keeps them.")
    told = f"task {args.task}: {plan.text(args.in_doubt or 'retry')}"
    if args.dry_run or not plan.sends:
        if not plan.sends:
            told += " - nothing to redrive, nothing sent"
        if args.json:
            ctx.emit_json({"task": args.task, "redrive": plan.document(), "sends": plan.sends})
        else:
            print(told, file=ctx.stdout)
        return ExitStatus.OK
    ctx.note(f"pooler: redrive of {told}")
    return run_prepared(args, ctx, prepare(args, ctx, pool), redrive=redrive, locked=locked,
                        told=plan.document())
