"""Planning a big task on PostgreSQL: a 1,000,000-row CSV planned into a task of a PostgreSQL
journal, one work row per call with its row (``plan_full_pg.py``: the first runner's start, every
row checked by the compile step and then planned), against ``plain_plan_pg.py``: the same file read
with the csv module and COPYed into a table, a key and the row per line, in one transaction.  Both
are processes, so both pay start-up.  Targets: pooler / plain <= 2, peak RSS <= 150 MB."""

from __future__ import annotations

import sys

import pgbench
from common import BENCH, PYTHON, Sample, alternate, fmt_mb, fmt_s, median, run_process, secs, work
from generate import write_goods_csv
from plan_cost import POOL, QUICK_ROWS, ROWS
from summary import Row, Settings, main_for

RATIO_TARGET = 2.0
LIMIT_BYTES = 150e6


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    rows = QUICK_ROWS if settings.quick else ROWS
    server = pgbench.server()
    try:
        with work("plan-pg") as w:
            source = w.tmp / "goods.csv"
            write_goods_csv(source, rows)
            pool = w.tmp / "plan.yaml"
            pool.write_text(POOL, encoding="utf-8")

            def plain() -> Sample:
                url = pgbench.database(server, w, "plain")
                cmd = [PYTHON, str(BENCH / "plain_plan_pg.py"), str(source), url]
                return run_process(cmd, w, label="plain", peak_memory=True)[0]

            def full() -> Sample:
                url = pgbench.database(server, w, "full")
                cmd = [PYTHON, str(BENCH / "plan_full_pg.py"), str(pool), url]
                return run_process(cmd, w, label="full", peak_memory=True)[0]

            samples = alternate({"full": full, "plain": plain}, min(settings.runs, 3))
    finally:
        server.stop()
    took, floor = secs(samples["full"]), secs(samples["plain"])
    peak = median([float(s.peak_rss or 0) for s in samples["full"]])
    plain_peak = median([float(s.peak_rss or 0) for s in samples["plain"]])
    data = {"rows": rows, "full_s": [s.seconds for s in samples["full"]],
            "plain_s": [s.seconds for s in samples["plain"]],
            "full_peak": [s.peak_rss for s in samples["full"]]}
    return [
        Row(f"planning {rows:,} CSV rows into a PostgreSQL task", f"checked and planned {fmt_s(took)}",
            f"csv + COPY script {fmt_s(floor)}", took / floor, "≤ 2.0 × the script",
            took / floor <= RATIO_TARGET, data),
        Row(f"planning {rows:,} CSV rows into PostgreSQL, memory", f"peak RSS {fmt_mb(peak)}",
            f"limit {fmt_mb(LIMIT_BYTES)} (script {fmt_mb(plain_peak)})", peak / LIMIT_BYTES, "≤ 150 MB",
            peak <= LIMIT_BYTES, data),
    ], []


if __name__ == "__main__":
    sys.exit(main_for("plan_cost_pg", __doc__ or "", case))
