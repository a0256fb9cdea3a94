"""The report's timeline of one run, laid out in pixels: one lane per concurrent slot, a bar per
call from its send to its answer, coloured by status, with its step and ``serialize_on`` group.

When the bars would be thinner than a pixel (many calls, or very short ones) the calls are added
up instead: each lane is cut into cells of ``CELL`` pixels coloured by the worst status in them,
and a chart below counts the calls answered in each stretch of time by status.  Either way the
page holds a bounded number of shapes, so 100,000 calls make a page of a few hundred kilobytes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pooler.report.data import CallRow, RunData, StepInfo, clock
from pooler.statuses import CallStatus, final_status

WIDTH = 1100
LANE = 18
SPAN = 9
AXIS = 22
CHART = 60
CELL = 2
COLUMN = 10
#: More calls than this are added up whatever their widths.
MOST_BARS = 2000
#: Worst first: a cell holding a failed call is drawn failed.
_WORST = tuple(s.value for s in (CallStatus.FAILED, CallStatus.IN_DOUBT, CallStatus.COMPLETED))
_TICKS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000,
          120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 86_400_000)


@dataclass
class Shape:
    """A rectangle of the picture, with the text shown on hover and click."""

    x: float
    y: float
    w: float
    h: float
    kind: str
    title: str = ""
    step: int = 0
    group: int | None = None
    lane: int = 0


@dataclass
class Timeline:
    width: int
    height: int
    lanes: int
    start: int
    end: int
    calls: int
    aggregated: bool
    ticks: list[tuple[float, str]] = field(default_factory=list)
    lane_y: list[float] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    spans: list[Shape] = field(default_factory=list)
    columns: list[Shape] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    chart_y: float = 0
    #: Pixels a millisecond.
    scale: float = 1.0


def status_of(call: CallRow) -> str:
    return final_status(call.status).value


def _ms(value: int) -> str:
    if value < 1000:
        return f"{value} ms"
    if value < 120_000:
        return f"{value / 1000:.3g} s"
    return f"{value / 60_000:.3g} min"


def describe(call: CallRow, step: StepInfo, last: int) -> str:
    """A call's hover text: step, row, key, group, status, times and message."""
    lines = [f"step {step.label}"]
    where = []
    if call.row is not None:
        where.append(f"row {call.row}")
    if call.key is not None:
        where.append(f"key {call.key}")
    if call.lane is not None:
        where.append(f"slot {call.lane + 1}")
    if where:
        lines.append(" · ".join(where))
    if call.serial is not None:
        lines.append(f"serialize_on {call.serial}")
    status = status_of(call)
    took = f" · {_ms(call.ms)}" if call.ms is not None else ""
    lines.append(f"{status.replace('_', ' ')}{took}")
    answered = clock(call.done) if call.done is not None else f"no answer recorded (run ended {clock(last)})"
    lines.append(f"sent {clock(call.sent)} · answered {answered}")
    if call.before is not None:
        lines.append(f"attempt {call.attempt} · attempt {call.attempt - 1} in run {call.before}")
    if call.step_id:
        lines.append(f"step id {call.step_id}")
    if call.message:
        lines.append(call.message)
    return "\n".join(lines)


def layout(run: RunData, steps: dict[int, StepInfo]) -> Timeline | None:
    """The run's timeline, or None when no call of it reached the store."""
    calls = run.sent
    if not calls:
        return None
    start = min(c.sent or 0 for c in calls)
    end = max(*(c.done or c.sent or 0 for c in calls), start + 1)
    scale = WIDTH / (end - start)
    order = sorted(steps)
    spans_y = AXIS
    lanes_y = spans_y + len(order) * (SPAN + 2) + 6
    lanes = max(run.width, *((c.lane or 0) + 1 for c in calls))
    t = Timeline(WIDTH, 0, lanes, start, end, len(calls), False, scale=scale)
    t.lane_y = [lanes_y + i * (LANE + 4) for i in range(lanes)]
    t.chart_y = lanes_y + lanes * (LANE + 4) + 10
    widths = sorted(((c.done or end) - (c.sent or 0)) * scale for c in calls)
    # Added up when there are too many bars, or when most are under a pixel and the lanes could not
    # show them side by side; a few quick calls (a run of 2 ms) stay bars, each with its details.
    crowded = widths[len(widths) // 2] < 1 and len(calls) > lanes * (WIDTH // CELL)
    t.aggregated = len(calls) > MOST_BARS or crowded
    t.ticks = ticks_for(end - start, scale)
    _spans(t, run, steps, spans_y)
    if t.aggregated:
        _cells(t, calls)
        _chart(t, calls)
        t.height = int(t.chart_y + CHART + 4)
    else:
        _bars(t, calls, steps)
        t.height = int(t.chart_y)
    return t


def ticks_for(span: int, scale: float) -> list[tuple[float, str]]:
    """About ten ticks at round steps along ``span`` ms drawn at ``scale`` pixels a ms."""
    step = next((s for s in _TICKS if span / s <= 10), _TICKS[-1])
    return [(i * step * scale, "0" if i == 0 else f"+{_ms(i * step)}") for i in range(span // step + 1)]


def _spans(t: Timeline, run: RunData, steps: dict[int, StepInfo], top: float) -> None:
    """One thin track per step: from its first send to its last answer in this run."""
    start, scale = t.start, t.scale
    order = sorted(steps)
    for index, num in enumerate(order):
        mine = [c for c in run.sent if c.num == num]
        if not mine:
            continue
        first = min(c.sent or 0 for c in mine)
        last = max(c.done or c.sent or 0 for c in mine)
        title = (f"step {steps[num].label}: {len(mine)} calls sent, "
                 f"{clock(first)} to {clock(last)} ({_ms(last - first)})")
        t.spans.append(Shape((first - start) * scale, top + index * (SPAN + 2),
                             max((last - first) * scale, 2), SPAN, "span", title, step=index))


def _bars(t: Timeline, calls: list[CallRow], steps: dict[int, StepInfo]) -> None:
    start, end, scale = t.start, t.end, t.scale
    order = {num: i for i, num in enumerate(sorted(steps))}
    groups: dict[str, int] = {}
    for call in sorted(calls, key=lambda c: c.sent or 0):
        group = None
        if call.serial is not None:
            group = groups.setdefault(call.serial, len(groups))
        x = ((call.sent or start) - start) * scale
        w = max(((call.done or end) - (call.sent or start)) * scale, 1.0)
        t.shapes.append(Shape(x, t.lane_y[call.lane or 0], w, LANE, status_of(call),
                              describe(call, steps[call.num], end), step=order[call.num], group=group,
                              lane=call.lane or 0))
    t.groups = list(groups)


def _cells(t: Timeline, calls: list[CallRow]) -> None:
    """Each lane cut into cells of CELL pixels; runs of cells of one colour become one shape."""
    start, scale = t.start, t.scale
    last_cell = WIDTH // CELL - 1
    cells: dict[tuple[int, int], Counter[str]] = {}
    for call in calls:
        first = min(int(((call.sent or start) - start) * scale) // CELL, last_cell)
        final = min(int(((call.done or t.end) - start) * scale) // CELL, last_cell)
        status = status_of(call)
        for cell in range(first, final + 1):
            key = (call.lane or 0, cell)
            found = cells.get(key)
            if found is None:
                found = cells[key] = Counter()
            found[status] += 1
    ms_per_cell = CELL / scale
    current: tuple[int, int, str, Counter[str]] | None = None
    for (lane, cell) in sorted(cells):
        counts = cells[(lane, cell)]
        worst = next(s for s in _WORST if counts[s])
        if current is not None and current[0] == lane and current[2] == worst and \
                cell == current[1] + _width_cells(current[3]):
            current[3].update(counts)
            current[3]["_cells"] += 1
            continue
        _flush(t, current, start, ms_per_cell)
        current = (lane, cell, worst, Counter(counts) + Counter({"_cells": 1}))
    _flush(t, current, start, ms_per_cell)


def _width_cells(counts: Counter[str]) -> int:
    return counts["_cells"]


def _flush(t: Timeline, run: tuple[int, int, str, Counter[str]] | None, start: int,
           ms_per_cell: float) -> None:
    if run is None:
        return
    lane, cell, worst, counts = run
    cells = counts.pop("_cells")
    first = start + round(cell * ms_per_cell)
    last = start + round((cell + cells) * ms_per_cell)
    title = (f"slot {lane + 1} · {clock(first)} to {clock(last)}\n"
             f"{_tally(counts)} (a call over several cells is counted in each)")
    t.shapes.append(Shape(cell * CELL, t.lane_y[lane], cells * CELL, LANE, worst, title, lane=lane))


def _tally(counts: Counter[str]) -> str:
    total = sum(counts.values())
    parts = ", ".join(f"{counts[s]:,} {s.replace('_', ' ')}" for s in _WORST if counts[s])
    return f"{total:,} calls: {parts}"


def _chart(t: Timeline, calls: list[CallRow]) -> None:
    """Calls answered per stretch of COLUMN pixels, stacked by status."""
    start, end, scale = t.start, t.end, t.scale
    columns = WIDTH // COLUMN
    counts = [Counter[str]() for _ in range(columns)]
    for call in calls:
        x = ((call.done or end) - start) * scale
        counts[min(int(x) // COLUMN, columns - 1)][status_of(call)] += 1
    top = max(sum(c.values()) for c in counts) or 1
    ms = COLUMN / scale
    for index, found in enumerate(counts):
        total = sum(found.values())
        if not total:
            continue
        first = start + round(index * ms)
        rate = total * 1000 / ms if ms else 0
        title = (f"{clock(first)} to {clock(start + round((index + 1) * ms))}: "
                 f"{_tally(found)} answered ({rate:,.0f} a second)")
        base = t.chart_y + CHART
        for status in reversed(_WORST):
            if not found[status]:
                continue
            h = found[status] / top * CHART
            base -= h
            t.columns.append(Shape(index * COLUMN, base, COLUMN - 1, h, status, title))
