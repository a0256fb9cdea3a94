"""A run's answer as a person reads it at the end: every step, its status, time and message, in a
table that fits the terminal, every character of every message shown.

The table's fixed columns (number, name, command, status, time) take what they need; the message
gets the rest of the width, folded over as many lines as it needs.  Where the rest is too narrow
for a message to read (a long command at 80 columns), the messages go under the table instead,
each on lines of the whole width, rather than in a column a few letters wide.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pooler.journal.documents import Answer
from pooler.run import entries
from pooler.statuses import CallStatus, StepStatus

if TYPE_CHECKING:
    # The table is drawn with rich, loaded when it is drawn: a run that prints plain lines (a pipe,
    # a file, cron) needs the status words of this module, not rich.
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.table import Table
    from rich.text import Text

STYLE: dict[str, str] = {CallStatus.COMPLETED: "green", CallStatus.FAILED: "bold red",
                         CallStatus.SKIPPED: "cyan", CallStatus.NOT_RUN: "dim",
                         CallStatus.IN_DOUBT: "bold yellow", StepStatus.PARTIAL: "yellow"}
#: The narrowest message column worth having: below it, messages go under the table.
MESSAGE_COLUMN = 24


def trip_ms(result: Mapping[str, Any]) -> int | None:
    time = result.get("time")
    if isinstance(time, dict) and isinstance(time.get("trip"), int | float):
        return int(time["trip"])
    return None


def where(result: Mapping[str, Any]) -> str:
    """`` row 3`` or `` rows 0-499`` for a call of a step over rows, else ``""``."""
    place = entries.where(result)
    return f" {place}" if place else ""


def status_of(result: Mapping[str, Any]) -> str:
    return str(result.get("status") or (CallStatus.COMPLETED if result.get("result") else CallStatus.FAILED))


def listed(answer: Answer) -> list[Mapping[str, Any]]:
    """The answer's steps, each step over rows followed by the calls it lists as failures."""
    out: list[Mapping[str, Any]] = []
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


class Results:
    """The results of an answer, laid out for the width it is drawn at."""

    def __init__(self, answer: Answer) -> None:
        self.entries = listed(answer)

    def _table(self, message_width: int | None) -> Table:
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        # No outer edge: at 80 columns the characters go to the message.  Names are never broken
        # across lines (MELBIS_AGENT_STORE.Cm / dAdd); a unit too long for the screen is cut with
        # an ellipsis rather than split.
        table = Table(title="results", title_justify="left", expand=False, show_edge=False)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("name", overflow="fold", max_width=20)
        table.add_column("unit.command", no_wrap=True, overflow="ellipsis")
        table.add_column("status", no_wrap=True)
        table.add_column("ms", justify="right", no_wrap=True)
        if message_width is not None:
            table.add_column("message", overflow="fold", width=message_width)
        for entry in self.entries:
            status = status_of(entry)
            ms = trip_ms(entry)
            cells: list[Any] = [str(entry.get("num", "")), str(entry.get("name") or "") + where(entry),
                                f"{entry.get('unit', '')}.{entry.get('command', '')}",
                                Text(status, style=STYLE.get(status, "")), "" if ms is None else str(ms)]
            if message_width is not None:
                cells.append(Text(str(entry.get("message") or "")))
            table.add_row(*cells)
        return table

    def _messages(self) -> Iterator[Text]:
        from rich.text import Text  # noqa: PLC0415

        for entry in self.entries:
            message = str(entry.get("message") or "")
            if message:
                name = f" {entry['name']}" if entry.get("name") else ""
                yield Text.assemble((f"{entry.get('num', '')}{name}{where(entry)}: ", "bold"), message)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.measure import Measurement  # noqa: PLC0415

        fixed = Measurement.get(console, options, self._table(None)).maximum
        # A column more: one separator and a space of padding either side.
        room = options.max_width - fixed - 3
        if room >= MESSAGE_COLUMN:
            longest = max((len(str(e.get("message") or "")) for e in self.entries), default=0)
            yield self._table(max(min(room, longest), len("message")))
            return
        yield self._table(None)
        yield from self._messages()


def results_table(answer: Answer) -> Results:
    """Every step of the answer: number, name, command, status, time, and what it said."""
    return Results(answer)
