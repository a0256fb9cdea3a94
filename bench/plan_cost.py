"""Planning a big task: a 1,000,000-row CSV planned into its task, written to the journal.

``pooler run --sample 1`` of one keyed step over the file: the run records the task's whole plan
(every row, its key, the file's digest) and sends one call.  Against ``plain_plan.py``: the same
file read with the csv module, a key and the row inserted per line into SQLite in one transaction.
Both are processes, so both pay start-up.  Reported beside them: ``plan_full.py``, what a run
without ``--sample`` does before its first call (every row checked by the compile step, then the
plan recorded: two passes over the file).  Targets: pooler / plain <= 2, peak RSS <= 150 MB.
"""

from __future__ import annotations

import sys

from common import (
    BENCH,
    PYTHON,
    Sample,
    alternate,
    fmt_mb,
    fmt_s,
    median,
    run_pool,
    run_process,
    secs,
    store,
    work,
)
from summary import Row, Settings, main_for

ROWS = 1_000_000
QUICK_ROWS = 100_000
RATIO_TARGET = 2.0
LIMIT_BYTES = 150e6
POOL = """\
pool:
  - name: goods
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    key: "goods-${row.ref}"
    params: {sku: "${row.sku}"}
"""


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    rows = QUICK_ROWS if settings.quick else ROWS
    with work("plan") as w, store(w, "--latency-ms", "0") as st:
        source = w.tmp / "goods.csv"
        with source.open("w", encoding="utf-8") as out:
            out.write("ref,sku,name,price\n")
            for i in range(rows):
                out.write(f"r{i:07d},SKU-{i:07d},\"Goods, item {i}\",{i * 0.37 % 1000:.2f}\n")
        pool = w.tmp / "plan.yaml"
        pool.write_text(POOL, encoding="utf-8")

        def plain() -> Sample:
            folder = w.fresh("plain")
            cmd = [PYTHON, str(BENCH / "plain_plan.py"), str(source), str(folder / "rows.db")]
            return run_process(cmd, w, label="plain", peak_memory=True)[0]

        def full() -> Sample:
            folder = w.fresh("full")
            cmd = [PYTHON, str(BENCH / "plan_full.py"), str(pool), str(folder / "journal.db")]
            return run_process(cmd, w, label="full", peak_memory=True)[0]

        samples = alternate({
            "pooler": lambda: run_pool(w, st, pool, 1, label="pooler", peak_memory=True,
                                       extra=("--sample", "1")),
            "plain": plain,
            "full": full,
        }, min(settings.runs, 3))
    took, floor, whole = secs(samples["pooler"]), secs(samples["plain"]), secs(samples["full"])
    whole_peak = median([float(s.peak_rss or 0) for s in samples["full"]])
    peak = median([float(s.peak_rss or 0) for s in samples["pooler"]])
    plain_peak = median([float(s.peak_rss or 0) for s in samples["plain"]])
    data = {"rows": rows, "pooler_s": [s.seconds for s in samples["pooler"]],
            "plain_s": [s.seconds for s in samples["plain"]],
            "full_s": [s.seconds for s in samples["full"]],
            "pooler_peak": [s.peak_rss for s in samples["pooler"]],
            "full_peak": [s.peak_rss for s in samples["full"]]}
    out = [
        Row(f"planning {rows:,} CSV rows into the journal", f"pooler run --sample 1 {fmt_s(took)}",
            f"csv + sqlite script {fmt_s(floor)}", took / floor, "≤ 2.0 × the script",
            took / floor <= RATIO_TARGET, data),
        Row(f"planning {rows:,} CSV rows, memory", f"peak RSS {fmt_mb(peak)}",
            f"limit {fmt_mb(LIMIT_BYTES)} (script {fmt_mb(plain_peak)})", peak / LIMIT_BYTES, "≤ 150 MB",
            peak <= LIMIT_BYTES, data),
        Row(f"checked and planned: {rows:,} rows", f"every row checked, then planned {fmt_s(whole)} "
            f"(peak {fmt_mb(whole_peak)})", f"csv + sqlite script {fmt_s(floor)}", whole / floor,
            "report (two passes over the file)", None, data),
    ]
    return out, []


if __name__ == "__main__":
    sys.exit(main_for("plan_cost", __doc__ or "", case))
