"""The files ``pooler run`` writes about a run beside its answer: ``--report`` (the HTML report of
the task, from the journal) and ``--junit`` (the run as JUnit XML)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pooler.cli.commands.common import Context
from pooler.errors import UsageError
from pooler.journal.api import CallHistory
from pooler.journal.documents import Answer


def add_run_files(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--report", metavar="FILE",
                        help="also write the task's HTML report (one self-contained file) to FILE")
    parser.add_argument("--junit", metavar="FILE",
                        help="also write the run as JUnit XML (one test case per step) to FILE")


def check_run_files(args: argparse.Namespace) -> None:
    """Refuse before anything is sent when a file asked for cannot be written where it goes."""
    for flag in ("report", "junit"):
        name = getattr(args, flag, None)
        if name and not Path(name).absolute().parent.is_dir():
            raise UsageError(f"--{flag} {name}: the folder {Path(name).absolute().parent} does not exist - "
                             "create it, or name a file in a folder that exists")


def write_run_files(args: argparse.Namespace, ctx: Context, journal: CallHistory,
                    answer: Answer, pool_file: str) -> None:
    """The files asked for, once the run has its answer; the report drawn from ``journal``."""
    task = answer.get("task")
    # Loaded only when asked for: a run without --report starts without the template engine.
    if args.junit:
        from pooler.report.junit import run_junit_xml  # noqa: PLC0415

        text = ctx.redactor.text(run_junit_xml(answer, pool_file))
        _write(Path(args.junit), text, "--junit")
        ctx.note(f"pooler: JUnit XML of the run written to {args.junit}")
    if args.report and isinstance(task, str):
        from pooler.report.html import write_report  # noqa: PLC0415

        write_report(journal, task, Path(args.report), ctx.redactor)
        ctx.note(f"pooler: the report of task {task} written to {args.report}")


def _write(path: Path, text: str, flag: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {flag} {path}: {exc.strerror}") from None
