"""How a run looks to a person: a rich live view on a terminal, plain timestamped lines elsewhere.

Both are ``Reporter``s the executor calls, from worker threads in parallel mode, so every event
takes a lock. Everything shown passes through the ``Redactor`` first.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TextIO

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
from rich.table import Table
from rich.text import Text

from pooler.model import Pool, Step
from pooler.redact import Redactor

#: Statuses a person running with ``--quiet`` still wants to see.
TROUBLE = frozenset({"failed", "in_doubt"})
STYLE = {"completed": "green", "failed": "bold red", "skipped": "cyan", "not_run": "dim",
         "in_doubt": "bold yellow", "partial": "yellow"}

Clock = Callable[[], datetime]


def stamp(clock: Clock = datetime.now) -> str:
    """Local time to the second, the way cron logs read: ``2026-11-30T12:00:01``."""
    return clock().strftime("%Y-%m-%dT%H:%M:%S")


def trip_ms(result: dict[str, Any]) -> int | None:
    time = result.get("time")
    if isinstance(time, dict) and isinstance(time.get("trip"), int | float):
        return int(time["trip"])
    return None


def where(result: dict[str, Any]) -> str:
    """`` row 3`` or `` rows 0-499`` for a call of a step over rows, else ``""``."""
    if isinstance(result.get("rows"), list) and len(result["rows"]) == 2:
        return f" rows {result['rows'][0]}-{result['rows'][1]}"
    if result.get("row") is not None:
        return f" row {result['row']}"
    return ""


def call_line(done: int, total: int, step: Step, result: dict[str, Any]) -> str:
    """``step 2/5 cur MELBIS_AGENT_CURRENCY.CmdAdd completed 12 ms`` (with the reason on failure)."""
    status = status_of(result)
    text = f"step {done}/{total} {step.label} {step.unit}.{step.command}{where(result)} {status}"
    ms = trip_ms(result)
    if ms is not None:
        text += f" {ms} ms"
    if result.get("key"):
        text += f" key {result['key']}"
    if status not in ("completed", "skipped") and result.get("message"):
        text += f": {result['message']}"
    return text


def status_of(result: dict[str, Any]) -> str:
    return str(result.get("status") or ("completed" if result.get("result") else "failed"))


def summary_line(answer: dict[str, Any]) -> str:
    """One line for the end of a run: ``pool completed: 5 calls, 5 succeeded, ... in 145 ms``."""
    counts = ", ".join(f"{answer.get(k, 0)} {k}" for k in ("succeeded", "failed", "skipped", "not_run"))
    doubtful = answer.get("in_doubt")
    if doubtful:
        counts += f", {len(doubtful) if isinstance(doubtful, list) else doubtful} in doubt"
    ms = trip_ms(answer)
    took = f" in {ms} ms" if ms is not None else ""
    why = f" (interrupted by {answer['interrupted']})" if answer.get("interrupted") else ""
    text = f"pool {status_of_pool(answer)}{why}: {answer.get('total', 0)} calls, {counts}{took}"
    if not answer.get("result") and answer.get("task"):
        text += f"; to continue: --task {answer['task']} --resume"
    return text


def status_of_pool(answer: dict[str, Any]) -> str:
    return str(answer.get("status") or ("completed" if answer.get("result") else "failed"))


class PlainReporter:
    """One timestamped line per call, no animation: for pipes, files and cron logs."""

    def __init__(self, stream: TextIO, redactor: Redactor, *, quiet: bool = False,
                 clock: Clock = datetime.now) -> None:
        self.stream = stream
        self.redactor = redactor
        self.quiet = quiet
        self.clock = clock
        self.total = 0
        self.done = 0
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        # A store's text may hold line breaks; a log keeps one stamped line per event.
        flat = " ".join(self.redactor.text(text).splitlines())
        self.stream.write(f"{stamp(self.clock)} {flat}\n")
        self.stream.flush()

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        with self._lock:
            self.total, self.done = total, 0
            if not self.quiet:
                self._write(f"pool {pool.file} task {task_id}: {total} calls")

    def step_started(self, step: Step, call: int) -> None:
        return None

    def step_finished(self, step: Step, result: dict[str, Any]) -> None:
        with self._lock:
            self.done += 1
            status = status_of(result)
            if not self.quiet or status in TROUBLE:
                self._write(call_line(self.done, max(self.total, self.done), step, result))

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        return None

    def pool_finished(self, answer: dict[str, Any]) -> None:
        with self._lock:
            if not self.quiet or not answer.get("result"):
                self._write(summary_line(answer))


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
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._calls: TaskID | None = None
        self._rows: dict[int, TaskID] = {}
        self._lock = threading.Lock()

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        with self._lock:
            self.console.print(Text.assemble(("pool ", "bold"), self.redactor.text(pool.file),
                                             (f"  task {task_id}", "dim")))
            self._calls = self.progress.add_task("calls", total=total or None)
            self.progress.start()

    def step_started(self, step: Step, call: int) -> None:
        with self._lock:
            if self._calls is not None:
                label = self.redactor.text(f"{step.label} {step.unit}.{step.command}")
                self.progress.update(self._calls, description=f"calls  {label}")

    def step_finished(self, step: Step, result: dict[str, Any]) -> None:
        with self._lock:
            if self._calls is not None:
                self.progress.advance(self._calls)
            status = status_of(result)
            if status in TROUBLE:
                why = self.redactor.text(str(result.get("message", "")))
                self.progress.console.print(
                    Text.assemble((f"{step.label} {step.unit}.{step.command}{where(result)} {status}",
                                   STYLE[status]),
                                  f": {why}" if why else "")
                )

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        with self._lock:
            task = self._rows.get(step.num)
            if task is None:
                task = self.progress.add_task(f"rows of {step.label}", total=total)
                self._rows[step.num] = task
            self.progress.update(task, completed=done, total=total)

    def pool_finished(self, answer: dict[str, Any]) -> None:
        with self._lock:
            if self._calls is not None:
                self.progress.update(self._calls, description="calls")
            self.progress.stop()
            if not self.quiet:
                self.console.print(results_table(self.redactor.value(answer)))
            if not self.quiet or not answer.get("result"):
                style = STYLE.get(status_of_pool(answer), "bold")
                self.console.print(Text(self.redactor.text(summary_line(answer)), style=style))


class FanOut:
    """Passes every event on to several reporters (the screen and the ``--log`` file)."""

    def __init__(self, reporters: Sequence[Any]) -> None:
        self.reporters = list(reporters)

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        for r in self.reporters:
            r.pool_started(pool, task_id, total)

    def step_started(self, step: Step, call: int) -> None:
        for r in self.reporters:
            r.step_started(step, call)

    def step_finished(self, step: Step, result: dict[str, Any]) -> None:
        for r in self.reporters:
            r.step_finished(step, result)

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        for r in self.reporters:
            r.rows_progress(step, done, total)

    def pool_finished(self, answer: dict[str, Any]) -> None:
        for r in self.reporters:
            r.pool_finished(answer)


def listed(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's steps, each step over rows followed by the calls it lists as failures."""
    out: list[dict[str, Any]] = []
    for entry in answer.get("steps") or []:
        out.append(entry)
        failures = entry.get("failures")
        if isinstance(failures, list):
            out.extend(f for f in failures if isinstance(f, dict))
            more = entry.get("failures_omitted")
            if isinstance(more, int) and more > 0:
                out.append({"num": entry.get("num"), "name": entry.get("name"), "unit": entry.get("unit"),
                            "command": entry.get("command"), "status": status_of(entry),
                            "message": f"{more:,} more failed or in-doubt calls: the journal has them all"})
    return out


def results_table(answer: dict[str, Any]) -> Table:
    """Every step of the answer: number, name, command, status, time, and what it said."""
    table = Table(title="results", title_justify="left", expand=False)
    for column in ("#", "name", "unit.command", "status", "ms", "message"):
        table.add_column(column, overflow="fold", justify="right" if column in ("#", "ms") else "left")
    for entry in listed(answer):
        status = status_of(entry)
        ms = trip_ms(entry)
        table.add_row(
            str(entry.get("num", "")) + where(entry),
            str(entry.get("name") or ""),
            f"{entry.get('unit', '')}.{entry.get('command', '')}",
            Text(status, style=STYLE.get(status, "")),
            "" if ms is None else str(ms),
            str(entry.get("message") or ""),
        )
    return table


def answer_lines(answer: dict[str, Any]) -> list[str]:
    """The answer as plain text lines: one per step, then the summary."""
    lines = []
    for entry in listed(answer):
        ms = trip_ms(entry)
        took = f" {ms} ms" if ms is not None else ""
        name = entry.get("name") or f"#{entry.get('num')}"
        lines.append(f"{entry.get('num')}. {name} {entry.get('unit')}.{entry.get('command')}{where(entry)} "
                     f"{status_of(entry)}{took}: {entry.get('message', '')}")
    lines.append(summary_line(answer))
    return lines


def console_for(stream: TextIO, *, tty: bool | None = None) -> Console:
    """A console on ``stream``: colours and animation only on a terminal.

    Off a terminal rich would assume 80 columns and fold every table; a file or a pipe has room.
    """
    live = stream.isatty() if tty is None else tty
    width = None if live or os.environ.get("COLUMNS") else 200
    # Text from the store and the pool ("Unknown command [CmdNope]") must never be read as markup.
    return Console(file=stream, force_terminal=tty, highlight=False, soft_wrap=False, width=width,
                   markup=False)


def make_reporter(stream: TextIO, redactor: Redactor, *, quiet: bool = False, tty: bool | None = None,
                  log: TextIO | None = None) -> Any:
    """The live view on a terminal, plain lines otherwise; the ``--log`` file always gets every line."""
    # --quiet wants the failures only: a progress bar would be noise, so it gets the plain lines.
    live = (stream.isatty() if tty is None else tty) and not quiet
    screen: Any = (LiveReporter(console_for(stream, tty=True), redactor) if live
                   else PlainReporter(stream, redactor, quiet=quiet))
    if log is None:
        return screen
    return FanOut([screen, PlainReporter(log, redactor)])
