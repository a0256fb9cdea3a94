"""Planning a big task: a 1,000,000-row CSV planned into its task, written to the journal.

``pooler run --sample 1`` of one keyed step over the file: the run records the task's whole plan
(every row, its key, the file's digest) and sends one call.  Against ``plain_plan.py``: the same
file read with the csv module, a key and the row inserted per line into SQLite in one transaction.
Both are processes, so both pay start-up.  Reported beside them: ``plan_full.py``, what a run
without ``--sample`` does before its first call (every row checked by the compile step's pass and
written as the work row of its call in that pass), and ``plan_full.py --check-only``, the check's
pass alone (the part of the time that is the check's, not the plan's).
Targets: pooler / plain <= 2 for both, peak RSS <= 150 MB.  With ``BENCH_PLAN_BEFORE`` naming the
folder of an earlier tree of the project (``git archive COMMIT | tar -x -C DIR``), its own
``bench/plan_full.py`` runs beside them on its own ``pooler`` package: before and after in one run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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

        def check_alone() -> Sample:
            cmd = [PYTHON, str(BENCH / "plan_full.py"), "--check-only", str(pool)]
            return run_process(cmd, w, label="check", peak_memory=True)[0]

        before_tree = os.environ.get("BENCH_PLAN_BEFORE")

        def earlier() -> Sample:
            assert before_tree is not None
            folder = w.fresh("before")
            tree = Path(before_tree).absolute()
            argv = [str(tree / "bench" / "plan_full.py"), str(pool), str(folder / "journal.db")]
            code = (f"import runpy, sys; sys.path.insert(0, {str(tree)!r}); sys.argv = {argv!r}; "
                    f"runpy.run_path({argv[0]!r}, run_name='__main__')")
            return run_process([PYTHON, "-c", code], w, label="before", peak_memory=True)[0]

        commands = {
            "pooler": lambda: run_pool(w, st, pool, 1, label="pooler", peak_memory=True,
                                       extra=("--sample", "1")),
            "plain": plain,
            "full": full,
            "check": check_alone,
        }
        if before_tree:
            commands["before"] = earlier
        samples = alternate(commands, min(settings.runs, 3))
    took, floor, whole = secs(samples["pooler"]), secs(samples["plain"]), secs(samples["full"])
    whole_peak = median([float(s.peak_rss or 0) for s in samples["full"]])
    check, check_peak = secs(samples["check"]), median([float(s.peak_rss or 0) for s in samples["check"]])
    peak = median([float(s.peak_rss or 0) for s in samples["pooler"]])
    plain_peak = median([float(s.peak_rss or 0) for s in samples["plain"]])
    data = {"rows": rows, "pooler_s": [s.seconds for s in samples["pooler"]],
            "plain_s": [s.seconds for s in samples["plain"]],
            "full_s": [s.seconds for s in samples["full"]],
            "check_s": [s.seconds for s in samples["check"]],
            "pooler_peak": [s.peak_rss for s in samples["pooler"]],
            "full_peak": [s.peak_rss for s in samples["full"]]}
    out = [
        Row(f"planning {rows:,} CSV rows into the journal", f"pooler run --sample 1 {fmt_s(took)}",
            f"csv + sqlite script {fmt_s(floor)}", took / floor, "≤ 2.0 × the script",
            took / floor <= RATIO_TARGET, data),
        Row(f"planning {rows:,} CSV rows, memory", f"peak RSS {fmt_mb(peak)}",
            f"limit {fmt_mb(LIMIT_BYTES)} (script {fmt_mb(plain_peak)})", peak / LIMIT_BYTES, "≤ 150 MB",
            peak <= LIMIT_BYTES, data),
        Row(f"checked and planned: {rows:,} rows", f"every row checked and planned, one pass {fmt_s(whole)} "
            f"(peak {fmt_mb(whole_peak)})", f"csv + sqlite script {fmt_s(floor)}", whole / floor,
            "≤ 2.0 × the script", whole / floor <= RATIO_TARGET, data),
        Row(f"checked alone: {rows:,} rows", f"every row checked, nothing planned {fmt_s(check)} "
            f"(peak {fmt_mb(check_peak)})", f"csv + sqlite script {fmt_s(floor)}",
            check / floor, "report (the check's part)", None, data),
    ]
    if "before" in samples:
        earlier_s = secs(samples["before"])
        data["before_s"] = [s.seconds for s in samples["before"]]
        out.append(Row(f"checked and planned: {rows:,} rows, the earlier tree",
                       f"{before_tree}: {fmt_s(earlier_s)}", f"csv + sqlite script {fmt_s(floor)}",
                       earlier_s / floor, "report (before)", None, data))
    return out, []


if __name__ == "__main__":
    sys.exit(main_for("plan_cost", __doc__ or "", case))
