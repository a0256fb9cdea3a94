"""Big imports: a 100,000-row JSONL file through one ``for_each`` step, a keyed CmdEcho a row.

The store answers at once (``--latency-ms 0``). Targets: peak RSS of the pooler process <= 150 MB,
and calls a second (by the run's own clock) within 10 % of the per-call case's 2,000 chained
calls, which this case runs beside the import so both meet the same machine. Every row is keyed,
so the same chained calls with a key each run beside them too: the gap between the two per-call
runs is what keys cost, the rest is the rows' own.
"""

from __future__ import annotations

import sys

from common import Sample, alternate, cpu, fmt_mb, median, run_pool, series, store, work
from generate import write_import_pool, write_json_pool, write_rows
from summary import Row, Settings, main_for

ROWS = 100_000
WARMUP_ROWS = 2_000
PER_CALL = 2_000
LIMIT_BYTES = 150e6
RATE_TARGET = 0.9
#: An import takes minutes: at most this many measured runs of it, whatever --runs says.
IMPORT_RUNS = 3


def rate(samples: list[Sample], calls: int) -> float:
    return calls / median([s.extra["trip"] or s.seconds for s in samples])


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("imports") as w, store(w, "--latency-ms", "0") as st:
        data_bytes = write_rows(w.tmp / "rows.jsonl", ROWS)
        write_rows(w.tmp / "warm.jsonl", WARMUP_ROWS)
        big = write_import_pool(w.tmp / "import.yaml", "rows.jsonl")
        warm = write_import_pool(w.tmp / "warm.yaml", "warm.jsonl")
        chained = write_json_pool(w.tmp / "echo.json", PER_CALL)
        keyed = write_json_pool(w.tmp / "echo-keyed.json", PER_CALL, keyed=True)
        # A warm-up import of a small file: what it warms (imports, caches) does not grow with rows.
        run_pool(w, st, warm, WARMUP_ROWS, label="warm")
        run_pool(w, st, chained, PER_CALL, label="chained")
        run_pool(w, st, keyed, PER_CALL, label="keyed")
        samples = alternate({
            "import": lambda: run_pool(w, st, big, ROWS, label="import", peak_memory=True),
            "chained": lambda: run_pool(w, st, chained, PER_CALL, label="chained"),
            "keyed": lambda: run_pool(w, st, keyed, PER_CALL, label="keyed"),
        }, min(settings.runs, IMPORT_RUNS), warmup=False)
    peaks = [float(s.peak_rss or 0) for s in samples["import"]]
    peak = median(peaks)
    imp, per_call = rate(samples["import"], ROWS), rate(samples["chained"], PER_CALL)
    per_keyed = rate(samples["keyed"], PER_CALL)
    data = {"peak_rss": peaks, "rows_file_bytes": data_bytes,
            "import": series(samples["import"]), "chained": series(samples["chained"]),
            "import_trip_s": [s.extra["trip"] for s in samples["import"]],
            "chained_trip_s": [s.extra["trip"] for s in samples["chained"]],
            "keyed_trip_s": [s.extra["trip"] for s in samples["keyed"]]}
    rows = [
        Row(f"big imports: {ROWS:,} rows, memory", f"peak RSS {fmt_mb(peak)}", f"limit {fmt_mb(LIMIT_BYTES)}",
            peak / LIMIT_BYTES, "≤ 150 MB", peak <= LIMIT_BYTES, data),
        Row(f"big imports: {ROWS:,} rows, speed", f"{imp:.0f} calls/s",
            f"per-call case {per_call:.0f} calls/s", imp / per_call, f"≥ {RATE_TARGET:.2f}",
            imp / per_call >= RATE_TARGET, {"import_calls_per_s": imp, "per_call_calls_per_s": per_call}),
        # Every row of the import is keyed (that is what makes it resumable); beside the target, the
        # same chained calls with a key each show what is the keys' cost and what the rows' own.
        Row(f"big imports: {ROWS:,} rows, speed against keyed calls", f"{imp:.0f} calls/s",
            f"per-call case, keyed, {per_keyed:.0f} calls/s", imp / per_keyed, "report", None,
            {"import_calls_per_s": imp, "keyed_calls_per_s": per_keyed}),
    ]
    took = median([s.seconds for s in samples["import"]])
    per_row, per_call = cpu(samples["import"]) / ROWS * 1000, cpu(samples["chained"]) / PER_CALL * 1000
    notes = [f"big imports: the rows file is {fmt_mb(data_bytes)}; an import takes {took:.0f} s",
             (f"big imports: pooler's CPU time is {per_row:.2f} ms a row, {per_call:.2f} ms a call "
              "in the chained run (start-up included there)")]
    return rows, notes


if __name__ == "__main__":
    sys.exit(main_for("big_imports", __doc__ or "", case))
