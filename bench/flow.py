"""Flow control against a store that limits its callers, at calls of 0, 20 and 200 ms, and against
a limit that halves mid-run and rises again; ``adaptive: true`` against the same pool at a fixed
width, side by side.

- **A fixed limit**: 600 keyed calls to a store started with ``--rate-limit 30`` (a token bucket
  of 30 calls a second; a call over it is answered 429 with a Retry-After) and ``--latency-ms``
  0, 20 and 200, at ``max_concurrency: 16``.
- **A limit that changes**: 900 keyed calls of 20 ms to a store started with ``--rate-limit
  30,15@10,30@20`` (30 a second, 15 from 10 s after the first call, 30 again from 20 s).

Each run has a store of its own (a schedule counts from its first call) and the default attempts:
a busy answer fails no call (it is sent again behind the task's pause, using no attempt), so both
widths must complete every call, and what differs is how often the store had to turn them away.
For each run, from the store's side: the share of the requests
it answered busy (the run's ``flow.busy`` over the calls it carried out plus those busy answers),
and the share of its limit the run reached: the calls it carried out after its first second's
burst (the bucket's L calls, answered at once) over what the limit allows from the first call to
the last.  The changing limit adds: when the run settled after the halving (the first second from
which two seconds in a row met no busy answer, by the run's own record of its seconds), the share
of the halved limit reached in the halved phase after it settled, how long after the rise two
seconds carried 85 % of L again, and the share of L reached from the rise on.
Targets, for the adaptive run: at most 3 % busy and at least 85 % of the limit at 0, 20 and 200
ms, every call completed; settled within 10 s of the halving.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import requests
from common import (
    TOKEN,
    BenchError,
    Sample,
    Work,
    alternate,
    median,
    pooler_cmd,
    read_answer,
    run_process,
    store,
    work,
)
from summary import Row, Settings, main_for

from pooler.journal.opening import open_journal

CALLS = 600
LIMIT = 30
WIDTH = 16
LATENCIES = (0, 20, 200)
#: The changing limit: L, L/2 from HALVED s after the first call, L again from RISEN s.
HALVED, RISEN = 10.0, 20.0
SCHEDULE = f"{LIMIT},{LIMIT // 2}@{HALVED:g},{LIMIT}@{RISEN:g}"
SCHEDULE_CALLS = 900
SCHEDULE_LATENCY = 20
BUSY_TARGET = 0.03
RATE_TARGET = 0.85
SETTLE_TARGET = 10.0


def write_pool(folder: Path, adaptive: bool, calls: int) -> Path:
    rows = folder / "rows.csv"
    rows.write_text("n\n" + "".join(f"{i}\n" for i in range(calls)), encoding="utf-8")
    pool = folder / f"flow-{'adaptive' if adaptive else 'fixed'}.json"
    pool.write_text(json.dumps({
        "mode": "parallel", "max_concurrency": WIDTH, "adaptive": adaptive, "include_results": False,
        "pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "for_each": {"file": "rows.csv"},
                  "key": "echo-${row.n}", "params": {"n": "${row.n}"}}],
    }), encoding="utf-8")
    return pool


def carried_out(url: str) -> list[float]:
    """The wall-clock times of the CmdEcho calls the store carried out, oldest first."""
    answer = requests.post(f"{url}/tool_run", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60,
                           json={"unit": "MELBIS_AGENT_TEST", "command": "CmdOps", "params": {}}).json()
    ops = answer["data"]["tables"]["ops"]
    return sorted(datetime.fromisoformat(op["time"]).timestamp() for op in ops if op["command"] == "CmdEcho")


def allowed(limits: list[tuple[float, float]], start: float, end: float) -> float:
    """The calls a schedule (seconds after the first call, calls a second) allows from start to end."""
    total = 0.0
    for (at, rate), (until, _) in zip(limits, [*limits[1:], (float("inf"), 0.0)], strict=True):
        total += rate * max(0.0, min(until, end) - max(at, start))
    return total


def one_run(w: Work, label: str, calls: int, limits: list[tuple[float, float]], latency: int,
            adaptive: bool) -> Sample:
    folder = w.fresh(label)
    pool = write_pool(folder, adaptive, calls)
    limit = ",".join(f"{rate:g}" + (f"@{at:g}" if at else "") for at, rate in limits)
    with store(w, "--rate-limit", limit, "--latency-ms", str(latency)) as st:
        journal = folder / "journal.db"
        task = f"bench-{folder.name}"
        cmd = [*pooler_cmd(), "run", str(pool), "--store", st.url, "--token-file", str(w.token_file),
               "--out", str(folder / "out"), "--journal", str(journal), "--task", task, "--json"]
        sample, out_path, err_path = run_process(cmd, w, label=label, store=st, check=False)
        answer = read_answer(out_path)
        # Busy is not failed: either width completes every call, with the default attempts.
        if answer.get("succeeded") != calls:
            tail = err_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise BenchError(f"{label}: {answer.get('succeeded')} of {calls} calls completed; "
                             f"stderr ends:\n{tail}")
        times = carried_out(st.url)
    flow = answer.get("flow") or {}
    busy = int(flow.get("busy", 0))
    first, last = times[0], times[-1]
    # The bucket's first L calls are answered at once: the rate is what comes after them.
    burst = limits[0][1]
    sample.extra.update(busy=busy, done=len(times), busy_share=busy / max(1, len(times) + busy),
                        span=last - first,
                        share=(len(times) - burst) / max(1.0, allowed(limits, 0.0, last - first)),
                        highest=int(flow.get("highest_width", WIDTH)),
                        final=int(flow.get("final_width", WIDTH)))
    if len(limits) > 1:
        sample.extra.update(phases(limits, times, first, busy_seconds(journal, task)))
    return sample


def busy_seconds(journal: Path, task: str) -> dict[int, int]:
    """The busy answers the run met in each wall-clock second (its flow record)."""
    opened = open_journal(str(journal))
    try:
        found: dict[int, int] = {}
        for doc in opened.flows(task):
            for row in doc["seconds"]:
                found[row[0]] = found.get(row[0], 0) + row[2]
        return found
    finally:
        opened.close()


def phases(limits: list[tuple[float, float]], times: list[float], first: float, busy: dict[int, int]
           ) -> dict[str, float]:
    """The halved phase and the last one: when the run settled after the halving, and the share of
    each phase's limit reached."""
    (_, _), (halved_at, halved), (risen_at, risen) = limits[:3]
    halving = first + halved_at
    second = int(halving)
    while busy.get(second, 0) or busy.get(second + 1, 0):
        second += 1
    settled = max(0.0, second - halving)
    in_halved = sum(1 for t in times if halving + settled <= t < first + risen_at)
    halved_span = max(1.0, risen_at - halved_at - settled)
    after = [t for t in times if t >= first + risen_at]
    risen_span = max(1.0, (after[-1] - first - risen_at) if after else 0.0)
    # Climbed back: the first 2 s after the rise that carried 85 % of the risen limit.
    climbed = next((t - first - risen_at for n, t in enumerate(after)
                    if sum(1 for u in after[n:] if u < t + 2) >= RATE_TARGET * risen * 2), float("nan"))
    return {"settled": settled, "halved_share": in_halved / (halved * halved_span),
            "risen_share": len(after) / (risen * risen_span), "climbed": climbed}


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    runs = max(1, min(settings.runs, 3))
    fixed_limit = [(0.0, float(LIMIT))]
    changing = [(0.0, float(LIMIT)), (HALVED, LIMIT / 2), (RISEN, float(LIMIT))]
    rows: list[Row] = []
    notes: list[str] = []
    with work("flow") as w:
        for latency in LATENCIES:
            commands: dict[str, Callable[[], Sample]] = {
                label: partial(one_run, w, f"{label}-{latency}ms", CALLS, fixed_limit, latency,
                               label == "adaptive")
                for label in ("adaptive", "fixed")}
            samples = alternate(commands, runs, warmup=False)
            for label in ("adaptive", "fixed"):
                row, note = judged(samples[label], label, f"{CALLS} calls of {latency} ms, limit {LIMIT}/s",
                                   CALLS)
                rows.append(row)
                notes.append(note)
        commands = {label: partial(one_run, w, f"{label}-schedule", SCHEDULE_CALLS, changing,
                                   SCHEDULE_LATENCY, label == "adaptive")
                    for label in ("adaptive", "fixed")}
        samples = alternate(commands, runs, warmup=False)
        for label in ("adaptive", "fixed"):
            row, note = judged(samples[label], label, f"{SCHEDULE_CALLS} calls of {SCHEDULE_LATENCY} ms, "
                               f"limit {SCHEDULE}", SCHEDULE_CALLS, schedule=True)
            rows.append(row)
            notes.append(note)
    return rows, notes


def judged(found: list[Sample], label: str, what: str, calls: int, schedule: bool = False
           ) -> tuple[Row, str]:
    def of(name: str) -> float:
        return median([s.extra[name] for s in found])

    gated = label == "adaptive"
    busy, share = of("busy_share"), of("share")
    met = (busy <= BUSY_TARGET and share >= RATE_TARGET and min(s.extra["done"] for s in found) == calls)
    target = f"≤ {BUSY_TARGET:.0%} busy, ≥ {RATE_TARGET:.0%} of the limit"
    measured = f"{busy:.1%} busy, {share:.0%} of the limit"
    if schedule:
        met = of("settled") <= SETTLE_TARGET and min(s.extra["done"] for s in found) == calls
        target = f"settled ≤ {SETTLE_TARGET:g} s after the halving"
        if of("span") > RISEN:
            measured += (f"; settled {of('settled'):.1f} s after the halving, then {of('halved_share'):.0%} "
                         f"of {LIMIT // 2}/s; back at {RATE_TARGET:.0%} of {LIMIT}/s {of('climbed'):.1f} s "
                         f"after it rose, {of('risen_share'):.0%} of it from the rise on")
        else:
            # Calls that ran out of tries end the run early: there is no halving to follow.
            met = False
            measured += f"; its calls ended {of('span'):.1f} s after the first, before the limit rose"
    data: dict[str, Any] = {name: [s.extra[name] for s in found] for name in found[0].extra}
    row = Row(f"flow control, {label} width: {what}", measured, "the store's limit", share,
              target if gated else "report", met if gated else None, data)
    note = (f"{label}, {what}: {of('done'):.0f} of {calls} calls carried out, {of('busy'):.0f} busy answers, "
            f"width at most {of('highest'):.0f}, {of('final'):.0f} at the end")
    return row, note


if __name__ == "__main__":
    sys.exit(main_for("flow", __doc__ or "", case))
