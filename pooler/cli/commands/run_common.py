"""What every ``pooler run`` of a task shares, on either journal: the signals that stop it, the log
file, the count of calls that left, and the exit status of its answer."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TextIO

from pooler.cli.commands.common import Context, render_error
from pooler.cli.render import PlainReporter
from pooler.errors import PoolerError, UsageError
from pooler.exits import ExitStatus
from pooler.journal.documents import Answer
from pooler.pool.budget import within_budget
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.config import StopSignal
from pooler.run.events import NullReporter

SIGNAL_STATUS = {signal.SIGINT: ExitStatus.INTERRUPTED, signal.SIGTERM: ExitStatus.TERMINATED}


def answered(args: argparse.Namespace, ctx: Context, answer: Answer, interrupts: Interrupts) -> int:
    """The answer printed (with --json) and the run's exit status."""
    if args.json:
        ctx.emit_json(answer)
    if interrupts.signum is not None:
        return SIGNAL_STATUS[signal.Signals(interrupts.signum)]
    return ExitStatus.OK if answer.get("result") or within_budget(answer) else ExitStatus.FAILED


class SentCounter(NullReporter):
    """Counts the calls that left, so an error can tell a refused pool from a stopped one, and
    keeps the task's id for the outcome document of a run that stopped."""

    def __init__(self) -> None:
        self.calls = 0
        self.task: str | None = None
        self._lock = threading.Lock()

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        self.task = task_id

    def step_started(self, step: Step, call: int) -> None:
        with self._lock:
            self.calls += 1


class open_log:  # noqa: N801 - used as a context manager, named like open()
    """The ``--log`` file opened for appending (owner-only when new), or nothing."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.file: TextIO | None = None

    def __enter__(self) -> TextIO | None:
        if self.path is None:
            return None
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UsageError(f"cannot open the log file {self.path}: {exc.strerror} - "
                             "check that its folder exists and can be written") from None
        self.file = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        return self.file

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()


def log_refusal(path: str | None, redactor: Redactor, error: PoolerError) -> None:
    """A start refused (the run lock's exit 3) told in the ``--log`` file, if there is one, as the
    screen tells it: a cron log then shows the nights that did not start, not only those that did."""
    if path is None:
        return
    # A log that cannot be written does not hide the refusal itself (exit 3, on stderr).
    with contextlib.suppress(UsageError, OSError), open_log(path) as log:
        assert log is not None
        PlainReporter(log, redactor).notice(render_error(error))


class Interrupts:
    """SIGINT/SIGTERM during a run: the first asks the executor to stop starting calls; the second
    leaves at once with the same status, after flushing what can be flushed."""

    def __init__(self, stop: StopSignal, ctx: Context, flush: list[TextIO | None],
                 say: Callable[[str], None] | None = None) -> None:
        self.stop = stop
        self.ctx = ctx
        # Through the reporter: a notice printed past a live view is drawn over at its next refresh.
        self.say = say or ctx.note
        self.flush = flush
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            for stream in self.flush:
                if stream is not None:
                    with contextlib.suppress(OSError, ValueError):
                        stream.flush()
            os._exit(SIGNAL_STATUS[signal.Signals(self.signum)])
        self.signum = signum
        self.stop.request(signal.Signals(signum).name)
        self.say(f"pooler: {signal.Signals(signum).name}: no new calls start; the calls in flight "
                 "finish (signal again to leave at once)")

    def __enter__(self) -> Interrupts:
        # Signal handlers can only be set from the main thread; a library caller keeps its own.
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNAL_STATUS:
                self._old[signum] = signal.signal(signum, self.handler)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for signum, old in self._old.items():
            signal.signal(signum, old)


def run_again(args: argparse.Namespace, ctx: Context, url: str, journal: str) -> tuple[str, ...]:
    """The options that say where this run went, for the report's commands to run as written from
    any folder after cron: ``--store`` as given (a name or a URL, never a token), and the paths
    (``journal`` as messages show it: a PostgreSQL URL without its password)."""
    store = args.store or ctx.environ.get("POOLER_STORE") or url
    if "@" in store.partition("://")[2].partition("/")[0]:
        store = url  # a URL with a user or a password in it: as messages show it, without them
    again = ["--store", store, "--out", str(Path(args.out).absolute()), "--journal", journal]
    if args.config:
        again += ["--config", str(Path(args.config).absolute())]
    if args.vars_file:
        again += ["--vars-file", str(Path(args.vars_file).absolute())]
    if getattr(args, "store_rate", None) is not None:
        again += ["--store-rate", f"{args.store_rate:g}"]
    return tuple(again)
