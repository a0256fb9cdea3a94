"""How a run looks to a person: a rich live view on a terminal 80 columns or wider, plain lines elsewhere.

Both are ``Reporter``s the executor calls, from worker threads in parallel mode, so every event
takes a lock. Everything shown passes through the ``Redactor`` first.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from pooler.cli.results import listed, status_of, trip_ms, where
from pooler.journal.documents import Answer, Entry
from pooler.plural import plural
from pooler.pool.budget import budget_line, within_budget
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.events import CallEnd, FanOut
from pooler.statuses import LANDED, CallStatus
from pooler.statuses import TROUBLE as CALL_TROUBLE

if TYPE_CHECKING:
    from rich.console import Console

#: Statuses a person running with ``--quiet`` still wants to see.
TROUBLE = frozenset(CALL_TROUBLE)

Clock = Callable[[], datetime]
#: The narrowest terminal the live view is drawn on; a narrower one gets the plain lines.
MIN_LIVE_WIDTH = 80
#: The progress bar's own width: the counts and times beside it keep theirs.
BAR_WIDTH = 24


def stamp(clock: Clock = datetime.now) -> str:
    """Local time to the second, the way cron logs read: ``2026-11-30T12:00:01``."""
    return clock().strftime("%Y-%m-%dT%H:%M:%S")






def call_line(done: int, total: int, step: Step, result: Entry, *, at_least: bool = False) -> str:
    """``call 2/5 step 1 cur MELBIS_AGENT_CURRENCY.CmdAdd completed 12 ms`` (with the reason on failure).

    ``done``/``total`` count calls (a step over rows makes many); ``step`` is the step's number.
    With ``at_least`` the total is ``5+``: a step over an earlier step's table is still to come,
    and how many calls it makes is known only when it starts.
    """
    status = status_of(result)
    label = f" {step.name}" if step.name else ""
    of = f"{total}+" if at_least else f"{total}"
    # A chunk of a compare's sent rows names its first and last row, and how many it holds.
    size = f" ({plural(result['size'], 'row')})" if isinstance(result.get("size"), int) else ""
    text = f"call {done}/{of} step {step.num}{label} {step.unit}.{step.command}{where(result)}{size} {status}"
    ms = trip_ms(result)
    if ms is not None:
        text += f" {ms} ms"
    if result.get("key"):
        text += f" key {result['key']}"
    if result.get("sent_again"):
        text += f" ({sent_again(result)})"
    if status not in LANDED and result.get("message"):
        text += f": {result['message']}"
    return text


def sent_again(result: Mapping[str, Any]) -> str:
    """What a person must know about a call sent again after an earlier answer was lost."""
    return (f"sent again: the call {result['sent_again']} was in doubt; a store that ignores "
            "Idempotency-Key may have carried it out twice")




def summary_line(answer: Answer, pool: Pool | None = None) -> str:
    """One line for the end of a run: ``pool completed: 5 calls: 5 succeeded, 0 failed, ... in 145 ms``.

    The counts add up to the calls: the answer's ``failed`` holds the in-doubt calls too, told apart
    here. With the pool, a run that did not complete also says how to continue it, if that helps.
    """
    total = int(answer.get("total") or 0)
    doubtful = int(answer.get("calls_in_doubt") or 0)
    failed = max(int(answer.get("failed") or 0) - doubtful, 0)
    counts = (f"{answer.get('succeeded', 0):,} succeeded, {failed:,} failed, {answer.get('skipped', 0):,} "
              f"skipped, {doubtful:,} in doubt, {answer.get('not_run', 0):,} not run")
    ms = trip_ms(answer)
    took = f" in {ms} ms" if ms is not None else ""
    stopped = str(answer.get("interrupted") or "")
    why = f" (interrupted by {stopped})" if stopped.startswith("SIG") else f" ({stopped})" if stopped else ""
    # The rows a compare left unsent are no calls: told after the calls' counts and time.
    left = int(answer.get("unchanged") or 0)
    unchanged = f"; {plural(left, 'row')} unchanged, not sent" if left else ""
    text = f"pool {status_of_pool(answer)}{why}: {plural(total, 'call')}: {counts}{took}{unchanged}"
    conflicts = answer.get("conflicts")
    held = len(conflicts) if isinstance(conflicts, list) else 0
    if held:
        text += (f"; {plural(held, 'planned call')} not run as a conflict (rows moved in the store since the "
                 "plan: plan again)")
    earlier = [i for i in answer.get("in_doubt") or [] if isinstance(i, dict) and i.get("action") != "left"]
    if earlier:
        text += f"; {plural(len(earlier), 'call')} found in doubt from an earlier run"
    probes = answer.get("probes")
    if isinstance(probes, dict):
        text += (f"; probes: {probes.get('landed', 0):,} landed, {probes.get('not_landed', 0):,} not landed, "
                 f"{probes.get('unsettled', 0):,} unsettled")
    flow = answer.get("flow")
    if isinstance(flow, dict) and flow.get("busy"):
        resent = plural(int(flow.get("busy_resent") or 0), "call")
        text += (f"; the store answered busy {plural(int(flow['busy']), 'time')}: the task held "
                 f"{int(flow.get('held_ms') or 0) / 1000:.1f} s, {resent} sent again")
    tolerated = answer.get("tolerated") or {}
    told = [budget_line(row) for row in tolerated.get("budgets") or [] if row.get("calls")]
    if told:
        text += "; " + "; ".join(told)
    if within_budget(answer) and answer.get("task"):
        # Within its budget nothing is left not run: a redrive would send the failed calls (those
        # in doubt among them), and only when there are some is it worth telling.
        if int(answer.get("failed") or 0):
            text += f"; `pooler redrive {answer['task']}` sends them again"
    elif pool is not None and int(answer.get("not_run") or 0) + int(answer.get("failed") or 0) > held:
        # No run of the task sends a conflict: a resume is no way on for those alone.
        hint = resume_hint(answer, pool)
        if hint:
            text += f"; {hint}"
    return text


def resume_hint(answer: Answer, pool: Pool) -> str:
    """How to continue a run that did not complete, and what a resume repeats; ``""`` if it cannot help."""
    task = answer.get("task")
    if answer.get("result") or not task:
        return ""
    entries = [e for e in answer.get("steps") or [] if isinstance(e, dict)]
    bad = [e for e in listed(answer) if status_of(e) in TROUBLE]
    if any(str(e.get("message", "")).startswith("ACCESS_DENIED") for e in bad):
        return ("the store refused the token (ACCESS_DENIED): a resume would meet the same refusal - "
                f"fix the token, then continue with --task {task} --resume")
    keys = {s.num: s.key for s in pool.steps}
    repeats = []
    skips = False
    for e in entries:
        num = e.get("num")
        found = e.get("rows")
        rows: Mapping[str, Any] = found if isinstance(found, dict) else {}
        done = status_of(e) in LANDED or bool(rows.get("completed") or rows.get("skipped"))
        if not done or not isinstance(num, int):
            continue
        if keys.get(num) is None:
            repeats.append(f"{num}" + (f" {e['name']}" if e.get("name") else ""))
        else:
            skips = True
    text = f"to continue: --task {task} --resume"
    if repeats:
        which = ", ".join(repeats[:5]) + (f" and {len(repeats) - 5} more" if len(repeats) > 5 else "")
        return (f"{text} (it sends again the unkeyed {'steps' if len(repeats) > 1 else 'step'} already done: "
                f"{which}; give {'them keys' if len(repeats) > 1 else 'it a key'} to have "
                f"{'them' if len(repeats) > 1 else 'it'} skipped)")
    return f"{text} (keyed calls already done are skipped)" if skips else text


def status_of_pool(answer: Answer) -> str:
    return str(answer.get("status") or (CallStatus.COMPLETED if answer.get("result") else CallStatus.FAILED))


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
        self.pool: Pool | None = None
        #: Steps over an earlier step's table not started yet: until they start, the total is a floor.
        self.unknown: set[int] = set()
        # Reentrant: a signal's notice arrives on the main thread, possibly while it holds the lock.
        self._lock = threading.RLock()

    def notice(self, text: str) -> None:
        """A line for people in the middle of the run (a signal taken)."""
        with self._lock:
            self._write(text)

    def _write(self, text: str) -> None:
        # A store's text may hold line breaks; a log keeps one stamped line per event.
        flat = " ".join(self.redactor.text(text).splitlines())
        self.stream.write(f"{stamp(self.clock)} {flat}\n")
        self.stream.flush()

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        with self._lock:
            self.total, self.done, self.pool = total, 0, pool
            self.unknown = {s.num for s in pool.steps if s.for_each is not None and s.for_each.step}
            if not self.quiet:
                more = (", or more: a step over a table counts its calls when it starts" if self.unknown
                        else "")
                self._write(f"pool {pool.file} task {task_id}: {plural(total, 'call')} planned{more}")

    def step_started(self, step: Step, call: int) -> None:
        return None

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        return None

    def step_finished(self, step: Step, result: Entry) -> None:
        with self._lock:
            self.done += 1
            status = status_of(result)
            if not self.quiet or status in TROUBLE:
                self._write(call_line(self.done, max(self.total, self.done), step, result,
                                      at_least=bool(self.unknown)))

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        with self._lock:
            # Its rows are read when it starts: from here on its calls are counted in the total.
            self.unknown.discard(step.num)

    def calls_planned(self, total: int) -> None:
        with self._lock:
            self.total = total

    def pool_finished(self, answer: Answer) -> None:
        with self._lock:
            if not self.quiet or not answer.get("result"):
                self._write(summary_line(answer, self.pool))


def answer_lines(answer: Answer) -> list[str]:
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


def console_for(stream: TextIO, *, tty: bool | None = None,
                environ: Mapping[str, str] | None = None) -> Console:
    """A console on ``stream``: colours and animation only on a terminal.

    Off a terminal rich would assume 80 columns and fold every table; a file or a pipe has room,
    unless the command's environment (``environ``, the process's by default) sets ``COLUMNS``.
    """
    # Loaded here: a run that writes plain lines (a pipe, a file, cron) starts without rich.
    from rich.console import Console  # noqa: PLC0415

    live = stream.isatty() if tty is None else tty
    columns = (os.environ if environ is None else environ).get("COLUMNS", "")
    width = None if live else (int(columns) if columns.isdigit() and int(columns) > 0 else 200)
    # Text from the store and the pool ("Unknown command [CmdNope]") must never be read as markup.
    return Console(file=stream, force_terminal=tty, highlight=False, soft_wrap=False, width=width,
                   markup=False)


def make_reporter(stream: TextIO, redactor: Redactor, *, quiet: bool = False, tty: bool | None = None,
                  log: TextIO | None = None) -> Any:
    """The live view on a terminal, plain lines otherwise; the ``--log`` file always gets every line."""
    # --quiet wants the failures only: a progress bar would be noise, so it gets the plain lines.
    live = (stream.isatty() if tty is None else tty) and not quiet
    console = console_for(stream, tty=True) if live else None
    # Narrower than 80 columns a bar and a table cannot show their text whole: plain lines can.
    screen: Any
    if console is not None and console.width >= MIN_LIVE_WIDTH:
        from pooler.cli.live import LiveReporter  # noqa: PLC0415

        screen = LiveReporter(console, redactor)
    else:
        screen = PlainReporter(stream, redactor, quiet=quiet)
    if log is None:
        return screen
    return FanOut([screen, PlainReporter(log, redactor)])
