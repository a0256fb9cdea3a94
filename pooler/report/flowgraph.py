"""The report's picture of what flow control did in one run, laid out in pixels as the timeline is
(``pooler.report.timeline``): from the runners' flow records (``FlowDoc``), added up over the
runners, one panel a measure over the run's wall-clock seconds - the calls started a second, the
width allowed, the milliseconds calls waited a second, the busy and gateway answers a second -
with a mark at each event (a cut, a pause, the breaker), the events listed with their clock
times, and the line that sums the run up.

A long run adds its seconds up into columns of at least ``COLUMN`` pixels, so the page holds a
bounded number of shapes however long the run went on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pooler.journal.records import FlowDoc
from pooler.plural import plural
from pooler.report.data import clock
from pooler.report.timeline import WIDTH, Shape, ticks_for
from pooler.run.storerate import store_share

PANEL = 48
GAP = 14
AXIS = 22
COLUMN = 2
#: The columns of a second's row of ``FlowDoc.seconds``.
_STARTED, _BUSY, _GATEWAY, _UNREACHED, _WAITED, _WIDTH = 1, 2, 3, 4, 5, 6


@dataclass
class Panel:
    """One measure over the run: its bars (each with its hover text) under a top of ``top``."""

    name: str
    y: float
    top: int
    bars: list[Shape] = field(default_factory=list)
    #: The width's level as one stepped line (the width panel only).
    path: str = ""


@dataclass
class EventLine:
    """An event as the list under the graph tells it."""

    at: str
    what: str
    runner: str
    line: str


@dataclass
class FlowGraph:
    width: int
    height: int
    runners: int
    #: Seconds a column (1 unless the run was too long for a column a second).
    per: int
    summary: str
    #: From the first second to the end of the last, as clock times.
    span: str = ""
    panels: list[Panel] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)
    marks: list[Shape] = field(default_factory=list)
    events: list[EventLine] = field(default_factory=list)


def summary_line(flows: list[FlowDoc]) -> str:
    """What flow control did in the run, over its runners, in one line."""
    throttled = sum(f["throttled_ms"] for f in flows)
    highest, final = sum(f["highest"] for f in flows), sum(f["final"] for f in flows)
    busy, trips = sum(f["busy"] for f in flows), sum(f["trips"] for f in flows)
    text = (f"throttled for {throttled / 1000:,.1f} s in all, highest width {highest:,}, "
            f"final width {final:,}, {plural(busy, 'busy answer')}, breaker opened {plural(trips, 'time')}")
    held = sum(f.get("held_ms", 0) for f in flows)
    resent, left = sum(f.get("busy_resent", 0) for f in flows), sum(f.get("busy_not_run", 0) for f in flows)
    if held or resent or left:
        text += (f"; held behind busy answers for {held / 1000:,.1f} s, {plural(resent, 'busy call')} sent "
                 f"again, {plural(left, 'busy call')} left not run")
    share = store_share(flows)
    if share is not None:
        text += f"; {share.text()}"
    return text


def flow_graph(flows: list[FlowDoc]) -> FlowGraph | None:
    """The run's flow picture, or None when no runner of it kept a flow record."""
    if not flows:
        return None
    events = sorted(((e, f["runner"]) for f in flows for e in f["events"]), key=lambda p: p[0]["at"])
    graph = FlowGraph(WIDTH, 0, len(flows), 1, summary_line(flows),
                      events=[EventLine(clock(round(e["at"] * 1000)), e["what"], runner, e["line"])
                              for e, runner in events])
    seconds = [int(r[0]) for f in flows for r in f["seconds"]]
    moments = [*seconds, *(int(e["at"]) for e, _ in events)]
    if not moments:
        return graph
    start, end = min(moments), max(moments)
    total = end - start + 1
    graph.span = f"{clock(start * 1000)} to {clock((end + 1) * 1000)}"
    graph.per = per = max(1, math.ceil(total * COLUMN / WIDTH))
    columns = math.ceil(total / per)
    scale = WIDTH / (columns * per)
    graph.ticks = ticks_for(columns * per * 1000, scale / 1000)
    summed = _summed(flows, start, total)
    stretches = [summed[i * per:(i + 1) * per] for i in range(columns)]
    y = float(AXIS)
    for name, measure in (("started", _rate(_STARTED)), ("width", _last_width), ("waited", _rate(_WAITED)),
                          ("busy", _rate(_BUSY, _GATEWAY))):
        panel = Panel(name, y, max(1, *(measure(s) for s in stretches)))
        for index, stretch in enumerate(stretches):
            _bars(panel, name, stretch, x=index * per * scale, w=per * scale, first=start + index * per)
        graph.panels.append(panel)
        y += PANEL + GAP
    width = graph.panels[1]
    width.path = _level(width, [_last_width(s) for s in stretches], per * scale)
    bottom = y - GAP
    for e, runner in events:
        x = min(max((e["at"] - start) * scale, 0.0), float(WIDTH))
        graph.marks.append(Shape(x, AXIS - 4, 1, bottom - AXIS + 4, e["what"].replace(" ", "-"),
                                 f"{clock(round(e['at'] * 1000))} {e['what']} ({runner}): {e['line']}"))
    graph.height = int(bottom + 4)
    return graph


def _summed(flows: list[FlowDoc], start: int, total: int) -> list[list[int]]:
    """A row a second from ``start``, over every runner: the counts added up, and the widths of
    the runners alive then (a runner holds its last width from its first second to its last)."""
    rows = [[start + i, 0, 0, 0, 0, 0, 0] for i in range(total)]
    for flow in flows:
        mine = {int(r[0]): r for r in flow["seconds"]}
        if not mine:
            continue
        width = 0
        for second in range(min(mine), max(mine) + 1):
            row, found = rows[second - start], mine.get(second)
            if found is not None:
                for col in (_STARTED, _BUSY, _GATEWAY, _UNREACHED, _WAITED):
                    row[col] += int(found[col])
                width = int(found[_WIDTH])
            row[_WIDTH] += width
    return rows


def _rate(*cols: int) -> Callable[[list[list[int]]], int]:
    """A panel's measure of a column: the columns ``cols`` added up, a second."""
    def measure(stretch: list[list[int]]) -> int:
        return round(sum(r[c] for r in stretch for c in cols) / len(stretch))
    return measure


def _last_width(stretch: list[list[int]]) -> int:
    return stretch[-1][_WIDTH]


def _when(first: int, seconds: int) -> str:
    told = time.strftime("%H:%M:%S", time.localtime(first))
    if seconds == 1:
        return told
    return f"{told} to {time.strftime('%H:%M:%S', time.localtime(first + seconds - 1))}"


def _number(value: float) -> str:
    """A column's value: a column of several seconds gives an average (``2.5``)."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def _count(value: float, word: str) -> str:
    return f"{_number(value)} {word if value == 1 else word + 's'}"


def _bars(panel: Panel, name: str, stretch: list[list[int]], *, x: float, w: float, first: int) -> None:
    """The bars of one column of a panel, with what they count on hover."""
    n = len(stretch)
    a_second = "" if n == 1 else " a second"

    def each(col: int) -> float:
        return sum(r[col] for r in stretch) / n

    when = _when(first, n)
    if name == "width":
        parts = [("width", float(_last_width(stretch)), f"{when}: width {_last_width(stretch):,} at its end")]
    elif name == "started":
        parts = [("started", each(_STARTED), f"{when}: {_count(each(_STARTED), 'call')} started{a_second}")]
    elif name == "waited":
        parts = [("waited", each(_WAITED), f"{when}: calls waited {_number(each(_WAITED))} ms{a_second}")]
    else:
        told = (f"{when}: {_count(each(_BUSY), 'busy answer')} (429), "
                f"{_count(each(_GATEWAY), 'gateway answer')}, "
                f"{_count(each(_UNREACHED), 'request')} that never reached the store{a_second}")
        parts = [("busy", each(_BUSY), told), ("gateway", each(_GATEWAY), told)]
    base = panel.y + PANEL
    for kind, value, title in parts:
        if value <= 0:
            continue
        h = value / panel.top * PANEL
        base -= h
        panel.bars.append(Shape(x, base, max(w - (1 if w > 3 else 0), 1.0), h, kind, title))


def _level(panel: Panel, widths: list[int], w: float) -> str:
    """The width's level as a stepped path over the panel."""
    bottom = panel.y + PANEL

    def at(value: int) -> str:
        return f"{bottom - value / panel.top * PANEL:.1f}"

    steps = [f"M0 {at(widths[0])}"]
    for index, value in enumerate(widths):
        if index:
            steps.append(f"V{at(value)}")
        steps.append(f"H{(index + 1) * w:.1f}")
    return " ".join(steps)
