"""Flow control against a store that limits its callers: 600 keyed calls to a store started with
``--rate-limit 30`` (a token bucket of 30 calls a second; a call over it is answered 429 with a
Retry-After), at ``max_concurrency: 16``, with ``adaptive: true`` against the same pool without it.

For each: the share of calls answered 429 (the busy answers the run met, from its ``--json``
``flow.busy``; each 429 is a request the store turned away and the call waited for) and the rate
achieved (calls / the run's own clock, ``time.trip``) against the store's 30 a second.
Targets, for the adaptive run: at most 3 % of the calls answered 429, at least 80 % of 30 calls
a second, every call completed.  Both pools take the default attempts and stop at the first
failure: a busy answer fails no call (it is sent again behind the task's pause, using no
attempt), so both runs must complete every call.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from common import (
    BenchError,
    Sample,
    Store,
    Work,
    alternate,
    fmt_s,
    median,
    pooler_cmd,
    read_answer,
    run_process,
    store,
    work,
)
from summary import Row, Settings, main_for

CALLS = 600
LIMIT = 30
WIDTH = 16
BUSY_TARGET = 0.03
RATE_TARGET = 0.8
#: What the results keep of each run: (name in the results, name in the sample).
KEPT = (("busy", "busy"), ("done", "done"), ("trip_s", "trip"), ("throttled_s", "throttled"),
        ("highest_width", "highest"), ("final_width", "final"))


def write_pool(folder: Path, adaptive: bool) -> Path:
    rows = folder / "rows.csv"
    rows.write_text("n\n" + "".join(f"{i}\n" for i in range(CALLS)), encoding="utf-8")
    pool = folder / f"flow-{'adaptive' if adaptive else 'fixed'}.json"
    pool.write_text(json.dumps({
        "mode": "parallel", "max_concurrency": WIDTH, "adaptive": adaptive, "include_results": False,
        "pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "for_each": {"file": "rows.csv"},
                  "key": "echo-${row.n}", "params": {"n": "${row.n}"}}],
    }), encoding="utf-8")
    return pool


def one_run(w: Work, st: Store, pool: Path, label: str) -> Sample:
    folder = w.fresh(label)
    cmd = [*pooler_cmd(), "run", str(pool), "--store", st.url, "--token-file", str(w.token_file),
           "--out", str(folder / "out"), "--journal", str(folder / "journal.db"),
           "--task", f"bench-{folder.name}", "--json"]
    sample, out_path, err_path = run_process(cmd, w, label=label, store=st, check=False)
    answer = read_answer(out_path)
    # Busy is not failed: either width completes every call, with the default attempts.
    if answer.get("succeeded") != CALLS:
        tail = err_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise BenchError(f"{label}: {answer.get('succeeded')} of {CALLS} calls completed; "
                         f"stderr ends:\n{tail}")
    flow = answer.get("flow") or {}
    sample.extra.update(trip=answer["time"]["trip"] / 1000, busy=int(flow.get("busy", 0)),
                        done=int(answer.get("succeeded") or 0),
                        throttled=int(flow.get("throttled_ms", 0)) / 1000,
                        highest=int(flow.get("highest_width", WIDTH)),
                        final=int(flow.get("final_width", WIDTH)))
    return sample


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("flow") as w, store(w, "--rate-limit", str(LIMIT)) as st:
        commands: dict[str, Callable[[], Sample]] = {}
        for adaptive in (True, False):
            label = "adaptive" if adaptive else "fixed"
            folder = w.fresh(f"pool-{label}")
            commands[label] = partial(one_run, w, st, write_pool(folder, adaptive), label)
        samples = alternate(commands, max(1, min(settings.runs, 3)))
    rows, notes = [], []
    for label in ("adaptive", "fixed"):
        found = samples[label]

        def of(name: str, found: list[Sample] = found) -> list[float]:
            return [s.extra[name] for s in found]

        busy = median([b / CALLS for b in of("busy")])
        rate = median([d / t for d, t in zip(of("done"), of("trip"), strict=True)])
        gated = label == "adaptive"
        met = busy <= BUSY_TARGET and rate >= RATE_TARGET * LIMIT and min(of("done")) == CALLS
        rows.append(Row(f"flow control, {label} width", f"{busy:.1%} answered 429, {rate:.1f} calls/s",
                        f"the store's limit {LIMIT}/s", rate / LIMIT,
                        f"≤ {BUSY_TARGET:.0%} 429s, ≥ {RATE_TARGET:.0%} of {LIMIT}/s" if gated else "report",
                        met if gated else None,
                        {name: of(key) for name, key in KEPT}))
        notes.append(f"{label}: {median(of('done')):.0f} of {CALLS} calls completed, "
                     f"{median(of('busy')):.0f} busy answers, {fmt_s(median(of('trip')))} by the run's "
                     "clock, calls held back "
                     f"{fmt_s(median(of('throttled')))} in all, width at most {median(of('highest')):.0f}, "
                     f"{median(of('final')):.0f} at the end")
    return rows, notes


if __name__ == "__main__":
    sys.exit(main_for("flow", __doc__ or "", case))
