"""``make bench``: every case in one run, then one table (case, measured, compared, ratio, target, met).

``--runs N`` (default 5) or ``--quick`` (2) sets the measured runs of each command; ``--only``
takes a comma-separated list of case names. Results go to bench/results/bench.md and .json.
Exits 1 when a case cannot measure (with ``--strict`` also when a target is missed).
"""

from __future__ import annotations

import argparse
import sys
import time

import big_imports
import big_tables
import check_speed
import compare_cost
import flow
import journal_cost
import lsp
import monitoring_cost
import overhead
import plan_cost
import plan_cost_pg
import scaling
import shared_runners
import startup
import versus_newman
from common import ROOT, BenchError, end_on_sigterm
from summary import Case, Row, parse_settings, save, table

CASES: dict[str, Case] = {
    "overhead": overhead.case,
    "newman": versus_newman.case,
    "scaling": scaling.case,
    "journal": journal_cost.case,
    "monitoring": monitoring_cost.case,
    "startup": startup.case,
    "check": check_speed.case,
    "lsp": lsp.case,
    "tables": big_tables.case,
    "imports": big_imports.case,
    "plan": plan_cost.case,
    "plan-pg": plan_cost_pg.case,
    "postgres": shared_runners.case,
    "flow": flow.case,
    "compare": compare_cost.case,
}


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", metavar="CASES",
                        help=f"comma-separated cases to run, of: {', '.join(CASES)}")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a target is missed, not only when a case cannot measure")


def main(argv: list[str] | None = None) -> int:
    settings, args = parse_settings(__doc__ or "", argv, options)
    chosen = list(CASES)
    if args.only:
        chosen = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in CASES]
        if unknown:
            print(f"bench: unknown case {', '.join(unknown)}; the cases are {', '.join(CASES)}",
                  file=sys.stderr)
            return 2
    end_on_sigterm()
    rows: list[Row] = []
    notes: list[str] = []
    started = time.perf_counter()
    for name in chosen:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            got, said = CASES[name](settings)
        except BenchError as exc:
            got, said = [Row(name, "failed", "—", None, "—", False, {"error": str(exc)})], [f"{name}: {exc}"]
        rows += got
        notes += said
        print(table(got), file=sys.stderr)
        print(f"bench: {name} took {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    notes.append(f"the whole run took {time.perf_counter() - started:.0f} s")
    print()
    print(table(rows))
    for note in notes:
        print(f"- {note}")
    path = save("bench", rows, {**settings.as_dict(), "cases": chosen}, notes)
    print(f"\nsaved {path.relative_to(ROOT)} and {path.with_suffix('.json').relative_to(ROOT)}")
    failed = any(r.measured == "failed" for r in rows)
    missed = any(r.met is False for r in rows)
    return 1 if failed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
