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
from pooler.errors import JournalError
from pooler.exits import ExitStatus
from pooler.journal import Journal, TaskRow, default_journal_path
from pooler.render import STYLE, answer_lines, console_for, results_table, summary_line


def add_journal(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--journal", metavar="PATH",
                        help="the journal file (default $XDG_STATE_HOME/pooler/journal.sqlite)")


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
    add_json(show, "the recorded answer")
    add_traceback(show)
    show.set_defaults(handler=handle_show)


def open_journal(args: argparse.Namespace) -> Journal:
    path = Path(args.journal) if args.journal else default_journal_path()
    if not path.is_file():
        raise JournalError(f"no journal at {path} - nothing has run with it yet; "
                           "give the one 'pooler run --journal' wrote with --journal.")
    return Journal(path)


def counts(row: TaskRow) -> str:
    if row.total is None:
        return ""
    return (f"{row.succeeded or 0}/{row.total} done, {row.failed or 0} failed, "
            f"{row.skipped or 0} skipped, {row.not_run or 0} not run")


def handle_runs(args: argparse.Namespace, ctx: Context) -> int:
    with open_journal(args) as journal:
        rows = journal.tasks(args.limit)
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
    with open_journal(args) as journal:
        row = journal.task(args.task)
        if row is None:
            raise JournalError(f"no task {args.task} in the journal {journal.path} - "
                               "'pooler runs' lists the tasks it holds.")
        answer = journal.answer(args.task)
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
