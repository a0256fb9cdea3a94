"""Planning a big task on PostgreSQL: a 1,000,000-row CSV planned into a task of a PostgreSQL
journal, one work row per call with its row (``plan_full.py``: the first runner's start, every
row checked by the compile step and its call planned in that one pass), against
``plain_plan_pg.py``: the same file read with the csv module and COPYed into a table, a key and the
row per line, in one transaction.  Both are processes, so both pay start-up.  Beside them, the
check's pass alone (``plan_full.py --check-only``), and with ``BENCH_PLAN_BEFORE=DIR`` (an
earlier tree: ``git archive COMMIT | tar -x -C DIR``) the same script run against that tree's
package, in the same session.  Targets: pooler / plain <= 2, peak RSS <= 150 MB."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pgbench
from common import BENCH, PYTHON, Sample, alternate, cpu, fmt_mb, fmt_s, median, run_process, secs, work
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

            def with_server(run: Callable[[], Sample]) -> Sample:
                """The run, with the CPU time the server spent meanwhile (``extra["server_cpu"]``)."""
                before = pgbench.server_cpu(server)
                sample = run()
                sample.extra["server_cpu"] = pgbench.server_cpu(server) - before
                return sample

            def plain() -> Sample:
                url = pgbench.database(server, w, "plain")
                cmd = [PYTHON, str(BENCH / "plain_plan_pg.py"), str(source), url]
                return with_server(lambda: run_process(cmd, w, label="plain", peak_memory=True)[0])

            def full() -> Sample:
                url = pgbench.database(server, w, "full")
                cmd = [PYTHON, str(BENCH / "plan_full.py"), str(pool), url]
                return with_server(lambda: run_process(cmd, w, label="full", peak_memory=True)[0])

            def check() -> Sample:
                cmd = [PYTHON, str(BENCH / "plan_full.py"), "--check-only", str(pool)]
                return run_process(cmd, w, label="check", peak_memory=True)[0]

            before_tree = os.environ.get("BENCH_PLAN_BEFORE")

            def earlier() -> Sample:
                assert before_tree is not None
                tree = Path(before_tree).absolute()
                url = pgbench.database(server, w, "before", tree)
                # This tree's script, that tree's package: the same work measured on both.
                argv = [str(BENCH / "plan_full.py"), str(pool), url]
                code = (f"import runpy, sys; sys.path.insert(0, {str(tree)!r}); sys.argv = {argv!r}; "
                        f"runpy.run_path({argv[0]!r}, run_name='__main__')")
                return with_server(lambda: run_process([PYTHON, "-c", code], w, label="before",
                                                       peak_memory=True)[0])

            commands = {"full": full, "plain": plain, "check": check}
            if before_tree:
                commands["before"] = earlier
            samples = alternate(commands, min(settings.runs, 3))
    finally:
        server.stop()
    took, floor, checked = secs(samples["full"]), secs(samples["plain"]), secs(samples["check"])
    took_cpu, floor_cpu, checked_cpu = cpu(samples["full"]), cpu(samples["plain"]), cpu(samples["check"])
    peak = median([float(s.peak_rss or 0) for s in samples["full"]])
    plain_peak = median([float(s.peak_rss or 0) for s in samples["plain"]])
    data = {"rows": rows, "full_s": [s.seconds for s in samples["full"]],
            "plain_s": [s.seconds for s in samples["plain"]],
            "check_s": [s.seconds for s in samples["check"]],
            "full_cpu": [s.cpu for s in samples["full"]], "plain_cpu": [s.cpu for s in samples["plain"]],
            "check_cpu": [s.cpu for s in samples["check"]],
            "full_peak": [s.peak_rss for s in samples["full"]]}
    data["server_cpu"] = {name: [s.extra.get("server_cpu") for s in runs] for name, runs in samples.items()}
    script = (f"csv + COPY script {fmt_s(floor)} (cpu {fmt_s(floor_cpu)}, "
              f"server {fmt_s(served(samples['plain']))})")
    out = [
        Row(f"planning {rows:,} CSV rows into a PostgreSQL task",
            f"checked and planned {fmt_s(took)} (cpu {fmt_s(took_cpu)}, "
            f"server {fmt_s(served(samples['full']))})", script, took / floor,
            "≤ 2.0 × the script", took / floor <= RATIO_TARGET, data),
        Row(f"planning {rows:,} CSV rows into PostgreSQL, memory", f"peak RSS {fmt_mb(peak)}",
            f"limit {fmt_mb(LIMIT_BYTES)} (script {fmt_mb(plain_peak)})", peak / LIMIT_BYTES, "≤ 150 MB",
            peak <= LIMIT_BYTES, data),
        Row(f"the check's pass alone: {rows:,} rows",
            f"every row read and its key checked {fmt_s(checked)} (cpu {fmt_s(checked_cpu)})", script,
            checked / floor, "report (the floor of one pass)", None, data),
    ]
    if "before" in samples:
        earlier, earlier_cpu = secs(samples["before"]), cpu(samples["before"])
        earlier_peak = median([float(s.peak_rss or 0) for s in samples["before"]])
        data["before_s"] = [s.seconds for s in samples["before"]]
        data["before_cpu"] = [s.cpu for s in samples["before"]]
        name = Path(os.environ.get("BENCH_PLAN_BEFORE", "")).name
        out.append(Row(f"planning {rows:,} CSV rows into PostgreSQL, the earlier tree",
                       f"{name}: {fmt_s(earlier)} (cpu {fmt_s(earlier_cpu)}, server "
                       f"{fmt_s(served(samples['before']))}, peak {fmt_mb(earlier_peak)})",
                       script, earlier / floor, "report (before)", None, data))
    return out, []


def served(samples: list[Sample]) -> float:
    """The median CPU time the server spent on a command's runs."""
    return median([float(s.extra.get("server_cpu", 0.0)) for s in samples])


if __name__ == "__main__":
    sys.exit(main_for("plan_cost_pg", __doc__ or "", case))
