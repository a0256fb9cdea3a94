"""``pooler runs`` and ``pooler show TASK``: what the journal remembers of earlier runs."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from pooler.commands import help_of
from pooler.commands.common import Context, add_json, add_traceback, positive_int
from pooler.errors import JournalError, UsageError
from pooler.exits import ExitStatus
from pooler.journal import Journal, TaskRow
from pooler.journal_api import JournalStore, journal_spec, open_existing
from pooler.render import STYLE, answer_lines, console_for, results_table, summary_line
from pooler.report_html import write_report


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
    add_json(runs, "the tasks")
    add_traceback(runs)
    runs.set_defaults(handler=handle_runs)

    show = sub.add_parser(
        "show",
        help=help_of("show"),
        description="Show the answer the journal recorded when the task last finished.",
    )
    show.add_argument("task", metavar="TASK", help="the task id, as 'pooler runs' lists it")
    add_journal(show)
    show.add_argument("--html", metavar="FILE",
                      help="write the task's report to FILE instead: one self-contained HTML page (a "
                           "timeline of the calls, per-step times, failures, calls in doubt, tables)")
    add_json(show, "the recorded answer")
    add_traceback(show)
    show.set_defaults(handler=handle_show)


def open_journal(args: argparse.Namespace, ctx: Context) -> JournalStore:
    return open_existing(journal_spec(args.journal, ctx.environ))


def counts(row: TaskRow) -> str:
    if row.total is None:
        return ""
    return (f"{row.succeeded or 0}/{row.total} done, {row.failed or 0} failed, "
            f"{row.skipped or 0} skipped, {row.not_run or 0} not run")


def handle_runs(args: argparse.Namespace, ctx: Context) -> int:
    journal = open_journal(args, ctx)
    try:
        rows = journal.tasks(args.limit)
    finally:
        journal.close()
    if args.json:
        ctx.emit_json({"tasks": [asdict(r) for r in rows]})
        return ExitStatus.OK
    if not rows:
        ctx.stdout.write("no tasks in the journal yet\n")
        return ExitStatus.OK
    if not ctx.stdout.isatty():
        for row in rows:
            ctx.stdout.write(f"{row.id}  {row.status:<9}  started {row.started}  runs {row.runs}  "
                             f"{counts(row) or '-'}  {row.pool_file}\n")
        return ExitStatus.OK
    table = Table(title="recent tasks", title_justify="left")
    for column in ("task", "pool", "started", "status", "runs", "counts"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row.id, row.pool_file, row.started, Text(row.status, style=STYLE.get(row.status, "")),
                      str(row.runs), counts(row))
    console_for(ctx.stdout).print(table)
    return ExitStatus.OK


def handle_show(args: argparse.Namespace, ctx: Context) -> int:
    from pooler.commands.run_shared import shared_answer_of  # noqa: PLC0415

    journal = open_journal(args, ctx)
    try:
        row = journal.task(args.task)
        if row is None:
            raise JournalError(f"no task {args.task} in the journal {journal.where()} - "
                               "'pooler runs' lists the tasks it holds.")
        if args.html:
            sqlite = getattr(journal, "journal", journal)
            if not isinstance(sqlite, Journal):
                raise UsageError("--html reads a SQLite journal; a task on a PostgreSQL journal has no "
                                 "report yet - use 'pooler show TASK --json' there.")
            # From the calls the journal holds, so a task that was killed has a report too.
            write_report(sqlite, args.task, Path(args.html))
            ctx.note(f"pooler: the report of task {args.task} written to {args.html}")
            return 0
        # A shared task's answer is built from its calls: whole, from any host, even while it runs.
        answer = shared_answer_of(journal, args.task) or journal.answer(args.task)
    finally:
        journal.close()
    if answer is None:
        raise JournalError(f"task {args.task} has no recorded answer: it is {row.status} "
                           "(a run still going, or one that was killed) - run it again with "
                           f"--task {args.task} --resume.")
    if args.json:
        ctx.emit_json(answer)
        return ExitStatus.OK
    out = ctx.stdout
    if out.isatty():
        console = console_for(out)
        console.print(f"task {row.id}  pool {row.pool_file}  started {row.started}  runs {row.runs}",
                      markup=False)
        console.print(results_table(answer))
        console.print(summary_line(answer), markup=False)
    else:
        out.write(f"task {row.id} pool {row.pool_file} started {row.started} runs {row.runs}\n")
        out.write("\n".join(answer_lines(answer)) + "\n")
    return ExitStatus.OK
