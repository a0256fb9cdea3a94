"""The journal: the same sequential 2,000 calls keyed (one journal row and commit a call) and unkeyed.

Each run has a fresh journal and task, so no key is ever skipped and the store never answers a
repeat from its idempotency table. Target: keyed / unkeyed <= 1.3.
"""

from __future__ import annotations

import sys

from common import alternate, fmt_run, idle_estimate, run_pool, secs, series, store, work
from generate import write_json_pool
from summary import Row, Settings, main_for

CALLS = 2000
TARGET = 1.3


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("journal") as w, store(w) as st:
        keyed = write_json_pool(w.tmp / "keyed.json", CALLS, keyed=True)
        unkeyed = write_json_pool(w.tmp / "unkeyed.json", CALLS, keyed=False)
        samples = alternate({
            "keyed": lambda: run_pool(w, st, keyed, CALLS, label="keyed"),
            "unkeyed": lambda: run_pool(w, st, unkeyed, CALLS, label="unkeyed"),
        }, settings.runs)
    k, u = secs(samples["keyed"]), secs(samples["unkeyed"])
    idle = idle_estimate(samples["keyed"], samples["unkeyed"])
    row = Row("journal: keyed vs unkeyed (2,000 calls)", f"keyed {fmt_run(samples['keyed'])}",
              f"unkeyed {fmt_run(samples['unkeyed'])}", k / u, f"≤ {TARGET:.2f}", k / u <= TARGET,
              {"keyed": series(samples["keyed"]), "unkeyed": series(samples["unkeyed"]),
               "idle_estimate": idle})
    notes = [
        (f"journal: a key costs {(k - u) / CALLS * 1000:.2f} ms a call (the journal's row and commit, "
         "and the store's idempotency record)"),
        f"journal as an idle machine would see it, from CPU times (client + store): {idle:.2f}",
    ]
    return [row], notes

if __name__ == "__main__":
    sys.exit(main_for("journal_cost", __doc__ or "", case))
