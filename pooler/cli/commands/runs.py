"""``pooler runs`` and ``pooler show TASK``: what the journal remembers of earlier runs."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import Context, add_json, add_traceback, positive_int
from pooler.cli.render import answer_lines, console_for, summary_line
from pooler.cli.results import STYLE, results_table
from pooler.errors import JournalError, UsageError
from pooler.exits import ExitStatus
from pooler.journal.api import TaskView, journal_spec
from pooler.journal.dburl import is_postgres
from pooler.journal.prune import parse_age, prune
from pooler.journal.records import PlanCounts, TaskRow
from pooler.plural import plural
from pooler.run.journals import history_of, open_tasks
from pooler.run.storerate import StoreShare, last_share
from pooler.run.taskanswer import DEAD


def add_journal(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--journal", metavar="PATH|URL",
                        help="the journal file (default $XDG_STATE_HOME/pooler/journal.sqlite), or "
                             "postgresql://... (env POOLER_JOURNAL)")


def register(sub: Any) -> None:
    runs = sub.add_parser(
        "runs",
        help=help_of("runs"),
        description="List the latest tasks the journal holds, newest first: the task id, the pool "
                    "file, when it started, its status and its counts. A task id can be given to "
                    "'pooler run --task ID --resume' or to 'pooler show'.",
    )
    add_journal(runs)
    runs.add_argument("--limit", type=positive_int, default=20, metavar="N",
                      help="how many tasks to list (default 20)")
    runs.add_argument("--prune", action="store_true",
                      help="remove the tasks whose last run ended before --older-than, with their calls, "
                           "and shrink the file; a task still running (or dead) is never removed")
    runs.add_argument("--older-than", metavar="AGE", default="30d",
                      help="with --prune: the age of the tasks to remove, like 30d, 12h, 90m (default 30d)")
    add_json(runs, "the tasks")
    add_traceback(runs)
    runs.set_defaults(handler=handle_runs)

    show = sub.add_parser(
        "show",
        help=help_of("show"),
        description="Show the answer the journal recorded when the task last finished; or, given a plan "
                    "file ('pooler plan -o FILE'), its summary: per step its calls (new, changed, unchanged "
                    "with compare:), with a warning when it is stale.",
    )
    show.add_argument("task", metavar="TASK|FILE",
                      help="the task id, as 'pooler runs' lists it, or a plan file")
    add_journal(show)
    show.add_argument("--html", metavar="FILE",
                      help="write the task's report to FILE instead: one self-contained HTML page (a "
                           "timeline of the calls, per-step times, failures, calls in doubt, tables)")
    add_json(show, "the recorded answer (a plan file: its head, with what is stale)")
    show.add_argument("--markdown", action="store_true",
                      help="a plan file's summary as Markdown, fit for a pull request's comment")
    add_traceback(show)
    show.set_defaults(handler=handle_show)


def open_journal(args: argparse.Namespace, ctx: Context) -> TaskView:
    """The tasks of the journal ``--journal`` names, for reading."""
    return open_tasks(journal_spec(args.journal, ctx.environ))


def counts(row: TaskRow, planned: PlanCounts | None = None) -> str:
    # The rows a compare left unsent are no calls: told beside the calls' counts.
    unchanged = f"; {row.unchanged:,} rows unchanged, not sent" if row.unchanged else ""
    if planned is not None:
        return planned.text() + unchanged
    if row.total is None:
        return ""
    return (f"{row.succeeded or 0}/{row.total} done, {row.failed or 0} failed, "
            f"{row.skipped or 0} skipped, {row.not_run or 0} not run{unchanged}")


def handle_runs(args: argparse.Namespace, ctx: Context) -> int:
    spec = journal_spec(args.journal, ctx.environ)
    if args.prune:
        if is_postgres(spec):
            raise UsageError("--prune works on a SQLite journal; a PostgreSQL journal is pruned with "
                             "the database's own tools.")
        return handle_prune(args, ctx, Path(spec))
    rows: list[TaskRow] | None = None
    if not is_postgres(spec) and not Path(spec).is_file() and not args.journal:
        # A fresh install: nothing has run yet, which is no error.
        rows = []
    plans: dict[str, PlanCounts] = {}
    shares: dict[str, StoreShare] = {}
    if rows is None:
        journal = open_journal(args, ctx)
        try:
            rows = journal.tasks(args.limit)
            # Counted from the plan, so a task killed before it wrote its answer is counted too.
            plans = {r.id: p for r in rows if (p := journal.plan_counts(r.id)) is not None}
            history = history_of(journal)
            shares = {r.id: s for r in rows if (s := last_share(history.flows(r.id))) is not None}
        finally:
            journal.close()
    if args.json:
        ctx.emit_json({"tasks": [{**asdict(r), **({"plan": asdict(plans[r.id])} if r.id in plans else {}),
                                  **({"store_rate": asdict(shares[r.id])} if r.id in shares else {})}
                                 for r in rows]})
        return ExitStatus.OK
    if not rows:
        ctx.stdout.write("no tasks in the journal yet\n")
        return ExitStatus.OK
    if not ctx.stdout.isatty():
        for row in rows:
            share = f"  {shares[row.id].text()}" if row.id in shares else ""
            ctx.stdout.write(f"{row.id}  {row.status:<9}  started {row.started}  runs {row.runs}  "
                             f"{counts(row, plans.get(row.id)) or '-'}{share}  {row.pool_file}\n")
        return ExitStatus.OK
    # Loaded only for a terminal's table: the lines and --json of a pipe or cron need no rich.
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    table = Table(title="recent tasks", title_justify="left")
    for column in ("task", "pool", "started", "status", "runs", "counts"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = STYLE.get(row.status, "bold red" if row.status == DEAD else "")
        share = f"; {shares[row.id].text()}" if row.id in shares else ""
        table.add_row(row.id, row.pool_file, row.started, Text(row.status, style=style),
                      str(row.runs), counts(row, plans.get(row.id)) + share)
    console_for(ctx.stdout, environ=ctx.environ).print(table)
    return ExitStatus.OK


def handle_prune(args: argparse.Namespace, ctx: Context, path: Path) -> int:
    age = parse_age(args.older_than)
    if not path.is_file():
        raise JournalError(f"no journal at {path} - nothing to prune.")
    done = prune(path, age)
    if args.json:
        ctx.emit_json({"result": True, "journal": str(path), "removed_tasks": done.tasks,
                       "removed_calls": done.calls, "kept_running": done.kept_running,
                       "bytes_before": done.bytes_before, "bytes_after": done.bytes_after})
        return 0
    kept = f"; {plural(done.kept_running, 'task')} still running kept" if done.kept_running else ""
    ctx.stdout.write(f"pruned {path}: removed {plural(done.tasks, 'task')} ended more than {args.older_than} "
                     f"ago ({plural(done.calls, 'call')}){kept}; {done.bytes_before:,} -> "
                     f"{done.bytes_after:,} bytes\n")
    return 0


def handle_show(args: argparse.Namespace, ctx: Context) -> int:
    if Path(args.task).is_file():
        from pooler.cli.commands.plan_show import show_plan  # noqa: PLC0415 - only a plan file needs it

        if args.html:
            raise UsageError("--html writes a task's report ('pooler show TASK --html FILE'); a plan file is "
                             "shown as text, --json or --markdown.")
        return show_plan(args, ctx, Path(args.task))
    if args.markdown:
        raise UsageError("--markdown shows a plan file ('pooler show FILE --markdown'), not a task.")
    journal = open_journal(args, ctx)
    try:
        row = journal.task(args.task)
        if row is None:
            raise JournalError(f"no task {args.task} in the journal {journal.where()} - "
                               "'pooler runs' lists the tasks it holds.")
        if args.html:
            # Loaded only here: the report's templates (jinja2) are for --html alone.
            from pooler.report.html import write_report  # noqa: PLC0415

            # From the calls the journal holds, so a task that was killed has a report too.
            write_report(history_of(journal), args.task, Path(args.html))
            ctx.note(f"pooler: the report of task {args.task} written to {args.html}")
            return ExitStatus.OK
        answer = journal.answer(args.task)
        planned = journal.plan_counts(args.task)
        if answer is not None and planned is not None:
            answer = {**answer, "plan": asdict(planned)}
    finally:
        journal.close()
    if answer is None:
        raise JournalError(f"task {args.task} is running (a live run holds its pool's lock) - "
                           "'pooler show' tells its answer once it has finished.")
    if args.json:
        ctx.emit_json(answer)
        return ExitStatus.OK
    out = ctx.stdout
    if out.isatty():
        console = console_for(out, environ=ctx.environ)
        console.print(f"task {row.id}  pool {row.pool_file}  started {row.started}  runs {row.runs}",
                      markup=False)
        console.print(results_table(answer))
        console.print(summary_line(answer), markup=False)
        if isinstance(answer.get("plan"), dict):
            console.print(f"the task's plan: {PlanCounts(**answer['plan']).text()}", markup=False)
    else:
        out.write(f"task {row.id} pool {row.pool_file} started {row.started} runs {row.runs}\n")
        out.write("\n".join(answer_lines(answer)) + "\n")
        if isinstance(answer.get("plan"), dict):
            out.write(f"the task's plan: {PlanCounts(**answer['plan']).text()}\n")
    return ExitStatus.OK
