"""Per-call overhead: ``pooler run`` of 2,000 chained echo steps against a bare requests loop.

Both are separate processes, so both pay interpreter start-up; each call refers to the previous
one's ``detail.n``. Target: pooler / bare <= 1.10.
"""

from __future__ import annotations

import sys

from common import (
    BENCH,
    PYTHON,
    Sample,
    alternate,
    cpu,
    fmt_run,
    idle_estimate,
    median,
    run_pool,
    run_process,
    secs,
    series,
    store,
    work,
)
from generate import write_json_pool
from summary import Row, Settings, main_for

CALLS = 2000
TARGET = 1.10


def rate(samples: list[Sample], calls: int) -> float | None:
    """Calls a second by the run's own clock (``time.trip``), start-up left out."""
    trips = [s.extra["trip"] for s in samples if s.extra.get("trip")]
    return calls / median(trips) if trips else None


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("overhead") as w, store(w) as st:
        pool = write_json_pool(w.tmp / "echo.json", CALLS)
        bare = [PYTHON, str(BENCH / "bare_loop.py"), st.url, str(w.token_file), str(CALLS)]
        commands = {
            "pooler": lambda: run_pool(w, st, pool, CALLS),
            "bare": lambda: run_process(bare, w, label="bare", store=st)[0],
        }
        samples = alternate(commands, settings.runs)
    p, b = secs(samples["pooler"]), secs(samples["bare"])
    per_call_ms = (p - b) / CALLS * 1000
    cpu_ratio = cpu(samples["pooler"]) / cpu(samples["bare"])
    idle = idle_estimate(samples["pooler"], samples["bare"])
    calls_per_s = rate(samples["pooler"], CALLS)
    row = Row("per-call overhead (2,000 calls)", f"pooler run {fmt_run(samples['pooler'])}",
              f"bare loop {fmt_run(samples['bare'])}", p / b, f"≤ {TARGET:.2f}", p / b <= TARGET,
              {"pooler": series(samples["pooler"]), "bare": series(samples["bare"]),
               "pooler_trip_s": [s.extra.get("trip") for s in samples["pooler"]],
               "calls_per_s": calls_per_s, "idle_estimate": idle})
    notes = [
        (f"per-call overhead: pooler adds {per_call_ms:.2f} ms a call over the bare loop (start-up "
         f"included); by its own clock it does {calls_per_s or 0:.0f} calls/s; its CPU time is "
         f"{cpu_ratio:.2f} × the bare loop's"),
        f"per-call overhead as an idle machine would see it, from CPU times (client + store): {idle:.2f}",
    ]
    return [row], notes

if __name__ == "__main__":
    sys.exit(main_for("overhead", __doc__ or "", case))
