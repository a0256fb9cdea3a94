"""``pooler journal upgrade`` (create or upgrade a PostgreSQL journal) and ``pooler gather TASK``
(a task's tables and jobs, from every runner, into one folder, from any journal)."""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path
from typing import Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import Context, add_json, add_traceback
from pooler.errors import JournalError, UsageError
from pooler.journal.api import journal_spec
from pooler.journal.dburl import is_postgres, shown
from pooler.plural import plural


def _add_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--journal", metavar="URL",
                        help="the PostgreSQL journal, postgresql://user@host:port/db (env POOLER_JOURNAL)")


def register(sub: Any) -> None:
    journal = sub.add_parser(
        "journal", help=help_of("journal"),
        description="Create the tables of a journal in a PostgreSQL database, or upgrade older ones to "
                    "this pooler's schema version. Stop every runner of the journal before an upgrade.")
    verbs = journal.add_subparsers(dest="verb", metavar="VERB", required=True)
    upgrade = verbs.add_parser("upgrade", help="create or upgrade the journal's tables")
    _add_url(upgrade)
    add_traceback(upgrade)
    upgrade.set_defaults(handler=handle_upgrade)

    gather = sub.add_parser(
        "gather", help=help_of("gather"),
        description="Write every table and job of a task, whichever runners made its calls, into one "
                    "folder: DIR/tables/step<N>.<unit>.<command>.<table>.jsonl, in the order of the "
                    "calls, and DIR/<into>.<table>.jsonl for a step's `into` job.")
    gather.add_argument("task", metavar="TASK", help="the task id")
    gather.add_argument("--journal", metavar="PATH|URL",
                        help="the journal: a SQLite file (default $XDG_STATE_HOME/pooler/journal.sqlite), "
                             "or postgresql://... (env POOLER_JOURNAL)")
    gather.add_argument("--out", metavar="DIR", required=True, help="the folder to write (created)")
    add_json(gather, "the files written")
    add_traceback(gather)
    gather.set_defaults(handler=handle_gather)


def _url(args: argparse.Namespace, ctx: Context) -> str:
    spec = journal_spec(args.journal, ctx.environ)
    if not is_postgres(spec):
        raise UsageError(f"pooler {args.command} works on a PostgreSQL journal: give --journal "
                         "postgresql://user@host:port/db (or set POOLER_JOURNAL)")
    return spec


def handle_upgrade(args: argparse.Namespace, ctx: Context) -> int:
    from pooler.journal.postgres.schema import upgrade  # noqa: PLC0415

    url = _url(args, ctx)
    done = upgrade(url)
    if done.before is None:
        ctx.stdout.write(f"created the journal {shown(url)} (schema version {done.after})\n")
    elif done.remade:
        ctx.stdout.write(f"repaired the journal {shown(url)} at schema version {done.after}: made "
                         f"{', '.join(done.remade)} again\n")
    elif done.before == done.after:
        ctx.stdout.write(f"the journal {shown(url)} is at schema version {done.after} already\n")
    else:
        ctx.stdout.write(f"upgraded the journal {shown(url)} from schema version {done.before} to "
                         f"{done.after}\n")
    return 0


def handle_gather(args: argparse.Namespace, ctx: Context) -> int:
    from pooler.journal.opening import open_existing  # noqa: PLC0415
    from pooler.run.tables import TableWriter  # noqa: PLC0415

    with closing(open_existing(journal_spec(args.journal, ctx.environ))) as journal:
        if journal.task(args.task) is None:
            raise JournalError(f"no task {args.task} in the journal {journal.where()} - "
                               "'pooler runs' lists the tasks it holds.")
        parts = journal.table_rows(args.task)
        writer = TableWriter(Path(args.out))
        written: dict[str, int] = {}
        started: set[tuple[int, str]] = set()
        for num, _idx, name, prefix, into, rows in parts:
            # The first part of each table starts its file afresh; the rest are appended in call order.
            append = (num, name) in started
            started.add((num, name))
            got = writer.write(prefix, {name: rows}, into=into, append=append)
            for info in got.values():
                written[info["file"]] = written.get(info["file"], 0) + int(info["rows"])
                if "job" in info:
                    written[info["job"]] = int(info["job_rows"])
    if args.json:
        ctx.emit_json({"task": args.task, "files": written})
        return 0
    for path, rows in written.items():
        ctx.stdout.write(f"{path}  {plural(rows, 'row')}\n")
    if not written:
        ctx.stdout.write(f"task {args.task} gave no tables\n")
    return 0
