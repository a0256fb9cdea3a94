"""Parallel scaling: 200 calls to a store that takes 20 ms a call, at max_concurrency 1, 4, 8, 16.

Speed-up at a level = time at max_concurrency 1 / time at that level; the ideal speed-up is the
level itself. Runs are timed by their own clock (``time.trip``), so process start-up stays out.
Target: at 16, speed-up >= 0.9 × 16. Beside it, each level's time against a client that costs
nothing at all (calls × latency / concurrency), the stricter yardstick.
Beside each level, the same calls from a bare thread pool of that width on one requests.Session
(bench/bare_loop.py) show what this machine allows a Python client at all.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial

from common import (
    BENCH,
    PYTHON,
    Sample,
    Store,
    Work,
    alternate,
    fmt_s,
    median,
    run_pool,
    run_process,
    store,
    work,
)
from generate import write_json_pool
from summary import Row, Settings, main_for

CALLS = 200
LATENCY_MS = 20
LEVELS = (1, 4, 8, 16)
TARGET = 0.9


def bare(w: Work, st: Store, level: int) -> Sample:
    """The same calls from a bare thread pool on one requests.Session: the floor of this machine."""
    cmd = [PYTHON, str(BENCH / "bare_loop.py"), st.url, str(w.token_file), str(CALLS), str(level)]
    sample, out, _ = run_process(cmd, w, label="bare", store=st)
    sample.extra["trip"] = json.loads(out.read_text(encoding="utf-8"))["trip_ms"] / 1000
    return sample


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("scaling") as w, store(w, "--latency-ms", str(LATENCY_MS)) as st:
        commands: dict[str, Callable[[], Sample]] = {}
        for level in LEVELS:
            pool = write_json_pool(w.tmp / f"parallel-{level}.json", CALLS, refer=False,
                                   options={"mode": "parallel", "max_concurrency": level})
            commands[str(level)] = partial(run_pool, w, st, pool, CALLS)
            commands[f"bare {level}"] = partial(bare, w, st, level)
        samples = alternate(commands, settings.runs)
    rows, notes = [], []
    serial = CALLS * LATENCY_MS / 1000
    first = 0.0
    for level in LEVELS:
        trips = [s.extra["trip"] or s.seconds for s in samples[str(level)]]
        measured = median(trips)
        floor = median([s.extra["trip"] for s in samples[f"bare {level}"]])
        first = first or measured
        ideal = serial / level
        efficiency = first / measured / level
        gated = level == LEVELS[-1]
        rows.append(Row(f"parallel scaling, max_concurrency {level}", f"{fmt_s(measured)} (trip)",
                        f"1 wide / {level}: {fmt_s(first / level)}; bare loop {fmt_s(floor)}", efficiency,
                        f"≥ {TARGET:.2f} × {level}" if gated else "report",
                        efficiency >= TARGET if gated else None,
                        {"trip_s": trips, "wall_s": [s.seconds for s in samples[str(level)]],
                         "bare_trip_s": [s.extra["trip"] for s in samples[f"bare {level}"]],
                         "ideal_s": ideal, "speed_up": first / measured}))
        notes.append(f"max_concurrency {level}: speed-up {first / measured:.1f}× against max_concurrency 1 "
                     f"(ideal {level}×); against a client that costs nothing ({CALLS} × {LATENCY_MS} ms "
                     f"/ {level} = {fmt_s(ideal)}) {ideal / measured:.2f}, the bare thread pool "
                     f"{ideal / floor:.2f}")
    return rows, notes


if __name__ == "__main__":
    sys.exit(main_for("scaling", __doc__ or "", case))
