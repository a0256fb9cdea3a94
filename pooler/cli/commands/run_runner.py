"""What ``pooler run`` says and takes of a runner of a task: its width and lease, a data file its
plan holds, and a runner that stopped before the task ended."""

from __future__ import annotations

import argparse

from pooler.cli.commands.common import Context, positive_float, positive_int, render_error
from pooler.cli.outcome import outcome_document
from pooler.errors import UsageError
from pooler.exits import ExitStatus
from pooler.journal.work import TaskJournal
from pooler.plural import plural
from pooler.pool.model import Pool
from pooler.pool.variables import Variables
from pooler.run.executor import RunnerStopped
from pooler.run.join import files_gone

#: Seconds a runner's lease lasts without renewal, unless --lease says otherwise.
DEFAULT_LEASE = 120.0


def add_shared_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "runners of a task (several processes, or hosts with --journal postgresql://...)")
    group.add_argument("--width", type=positive_int, metavar="N",
                       help="calls this runner has in flight at once at most (default: "
                            "max_concurrency); the task's cap is shared fairly among its live runners")
    group.add_argument("--lease", type=positive_float, metavar="SECONDS", default=None,
                       help=f"how long this runner's calls stay its own without a heartbeat (default "
                            f"{DEFAULT_LEASE:g}); the store's read timeout must be shorter")


def check_shared_options(args: argparse.Namespace, pool: Pool, read_timeout: float) -> float:
    """The lease, once the options that would break its promise are refused."""
    # Without --lease the lease outlasts the read timeout, as it must.
    lease = args.lease or max(DEFAULT_LEASE, read_timeout * 2)
    if read_timeout >= lease:
        raise UsageError(f"the store's read timeout ({read_timeout:g} s, --timeout) must be shorter than "
                         f"the lease ({lease:g} s, --lease): a call still waiting for its answer when "
                         "its lease runs out would be taken back while it may yet be carried out")
    cap = pool.options.max_concurrency
    if args.width is not None and pool.options.mode == "parallel" and args.width > cap:
        raise UsageError(f"--width {args.width} is more than max_concurrency {cap}: a runner's share is "
                         "at most the task's cap")
    return lease


def told_gone(journal: TaskJournal, task: str, pool: Pool, variables: Variables, ctx: Context) -> None:
    """A data file of the task's plan that is not where this run would read it: the plan holds its
    rows, and says so."""
    for name in files_gone(journal, task, pool, variables.values):
        ctx.note(f"pooler: {name} is not there any more; task {task} takes its rows from its plan.")


def runner_stopped(args: argparse.Namespace, ctx: Context, stopped: RunnerStopped, task: str, *,
                   sent: int = 0, where: str = "") -> int:
    """A runner that stopped before its task ended (its lease lost, the journal gone), after
    ``sent`` of its calls had left."""
    ctx.note(render_error(stopped))
    if sent:
        ctx.note(f"pooler: the run stopped after {plural(sent, 'call')} had been sent; "
                 f"'pooler runs --journal {where}' lists the task.")
    ctx.note("pooler: this runner stopped; nothing it did not record in the journal is reported "
             "done. Any runner of the task (pooler run ... --task " + task + ") carries on.")
    if args.json:
        # Exactly one document: the answer so far, or (none could be read) the outcome's, which
        # says why the runner stopped and names the task.
        if stopped.answer is not None:
            ctx.emit_json(stopped.answer)
            return ExitStatus.FAILED
        document = outcome_document(ExitStatus.FAILED, list(stopped.problems()))
        document["task"] = task
        ctx.emit_json(document)
    return ExitStatus.FAILED
