"""The live view of a run on a terminal 80 columns or wider: a progress bar over the calls, the
step at work, and a table of results at the end (rich).  Loaded only when a run draws it."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text

from pooler.cli.render import BAR_WIDTH, TROUBLE, status_of_pool, summary_line
from pooler.cli.results import STYLE, results_table, status_of, where
from pooler.journal.documents import Answer, Entry
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.events import CallEnd


class RateColumn(ProgressColumn):
    """Calls per second, once there is something to measure."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f}/s" if speed else "", style="progress.data.speed")


class LiveReporter:
    """A progress bar over the calls, the step at work, and a table of results at the end."""

    def __init__(self, console: Console, redactor: Redactor, *, quiet: bool = False) -> None:
        self.console = console
        self.redactor = redactor
        self.quiet = quiet
        # The counts and times keep their width; the description (the step at work) takes what is
        # left and is cut with an ellipsis, so at 80 columns "736/3001" is never cut to "736/30…".
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False,
                       table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis", min_width=5)),
            BarColumn(bar_width=BAR_WIDTH),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            RateColumn(table_column=Column(no_wrap=True)),
            TimeElapsedColumn(table_column=Column(no_wrap=True)),
            TimeRemainingColumn(table_column=Column(no_wrap=True)),
            console=console,
            transient=False,
            expand=True,
        )
        self._calls: TaskID | None = None
        self._rows: dict[int, TaskID] = {}
        self._done = 0
        self._total = 0
        self.pool: Pool | None = None
        # Reentrant: a signal's notice arrives on the main thread, possibly while it holds the lock.
        self._lock = threading.RLock()

    def notice(self, text: str) -> None:
        """A line above the live area, which would otherwise draw over it."""
        with self._lock:
            self.progress.console.print(Text(self.redactor.text(text)))

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        with self._lock:
            self.console.print(Text.assemble(("pool ", "bold"), self.redactor.text(pool.file),
                                             (f"  task {task_id}", "dim")))
            self.pool, self._total, self._done = pool, total, 0
            self._calls = self.progress.add_task("calls", total=total or None)
            self.progress.start()

    def step_started(self, step: Step, call: int) -> None:
        with self._lock:
            if self._calls is not None:
                label = self.redactor.text(f"{step.label} {step.unit}.{step.command}")
                self.progress.update(self._calls, description=f"calls  {label}")

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        return None

    def step_finished(self, step: Step, result: Entry) -> None:
        with self._lock:
            self._done += 1
            if self._calls is not None:
                # Rows of a table read at run time are known only then: the total grows, never below.
                self._total = max(self._total, self._done)
                self.progress.update(self._calls, completed=self._done, total=self._total)
            status = status_of(result)
            if status in TROUBLE:
                why = self.redactor.text(str(result.get("message", "")))
                self.progress.console.print(
                    Text.assemble((f"{step.label} {step.unit}.{step.command}{where(result)} {status}",
                                   STYLE[status]),
                                  f": {why}" if why else "")
                )

    def calls_planned(self, total: int) -> None:
        with self._lock:
            self._total = max(total, self._done)
            if self._calls is not None:
                self.progress.update(self._calls, total=self._total)

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        with self._lock:
            if self.pool is not None and len(self.pool.steps) < 2:
                return  # the one step's rows are the calls: a second bar would repeat the first
            task = self._rows.get(step.num)
            if task is None:
                task = self.progress.add_task(f"rows of {step.label}", total=total)
                self._rows[step.num] = task
            self.progress.update(task, completed=done, total=total)

    def pool_finished(self, answer: Answer) -> None:
        with self._lock:
            if self._calls is not None:
                # The bar ends on what the answer counts: calls ended, of the calls there were.
                total = int(answer.get("total") or self._done)
                ended = total - int(answer.get("not_run") or 0)
                self.progress.update(self._calls, description="calls", completed=ended, total=total)
            self.progress.stop()
            if not self.quiet:
                self.console.print(results_table(self.redactor.value(answer)))
            if not self.quiet or not answer.get("result"):
                style = STYLE.get(status_of_pool(answer), "bold")
                self.console.print(Text(self.redactor.text(summary_line(answer, self.pool)), style=style))
