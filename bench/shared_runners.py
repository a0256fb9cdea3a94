"""The journal on PostgreSQL (a real server started in a temporary folder, as the tests do).

- ``pg-journal``: the same keyed 2,000-call sequential pool with the PostgreSQL journal and with
  the SQLite one (fresh journal and task each run). Target: PostgreSQL costs at most 1 ms a call
  more than SQLite.
- ``runners``: one task of 1,200 calls to a store that takes 20 ms a call, ``max_concurrency: 16``,
  run by 1, 2 and 4 runners with ``--width 4`` each. Each task starts with a 3-second step every
  call refers to, so every runner has joined before the calls begin; the time is the database's
  clock from that step's end to the last call recorded (process start-up stays out). Targets:
  2 runners ≥ 1.8× one runner, 4 runners ≥ 3.4×.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    BenchError,
    Sample,
    Work,
    alternate,
    fmt_run,
    pooler_cmd,
    run_pool,
    run_process,
    secs,
    series,
    store,
    work,
)
from generate import echo_step, write_json_pool
from summary import Row, Settings, main_for

sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PgServer, start_server

CALLS = 2000
EXTRA_MS = 1.0
RUNNER_CALLS = 1200
LATENCY_MS = 20
GOALS = {2: 1.8, 4: 3.4}


def _server() -> PgServer:
    try:
        return start_server()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        raise BenchError(f"no PostgreSQL to measure with: {exc}") from exc


def _database(server: PgServer, w: Work) -> str:
    url = server.new_database(f"bench_{w.fresh('db').name.replace('-', '_')}")
    done = subprocess.run([*pooler_cmd(), "journal", "upgrade", "--journal", url], env=w.env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"pooler journal upgrade failed: {done.stderr}")
    return url


def _pg_run(w: Work, st: Any, pool: Path, server: PgServer) -> Sample:
    url = _database(server, w)
    folder = w.fresh("pg")
    cmd = [*pooler_cmd(), "run", str(pool), "--store", st.url, "--token-file", str(w.token_file),
           "--out", str(folder / "out"), "--journal", url, "--task", "bench", "--json"]
    sample, out, _ = run_process(cmd, w, label="pg", store=st)
    answer = json.loads(out.read_text(encoding="utf-8"))
    if answer.get("succeeded") != CALLS:
        raise BenchError(f"the PostgreSQL run did not complete its calls: {answer.get('status')}")
    return sample


def journal_case(settings: Settings) -> tuple[list[Row], list[str]]:
    server = _server()
    try:
        with work("pg-journal") as w, store(w) as st:
            pool = write_json_pool(w.tmp / "keyed.json", CALLS, keyed=True)
            samples = alternate({
                "pg": lambda: _pg_run(w, st, pool, server),
                "sqlite": lambda: run_pool(w, st, pool, CALLS, label="sqlite"),
            }, settings.runs)
    finally:
        server.stop()
    pg, lite = secs(samples["pg"]), secs(samples["sqlite"])
    extra = (pg - lite) / CALLS * 1000
    row = Row("journal: PostgreSQL vs SQLite, keyed sequential (2,000 calls)", f"pg {fmt_run(samples['pg'])}",
              f"sqlite {fmt_run(samples['sqlite'])}", pg / lite, f"≤ +{EXTRA_MS:g} ms/call",
              extra <= EXTRA_MS, {"pg": series(samples["pg"]), "sqlite": series(samples["sqlite"]),
                                  "extra_ms_per_call": extra})
    return [row], [f"pg-journal: PostgreSQL costs {extra:+.2f} ms a call beside SQLite"]


def _runners_pool(path: Path) -> Path:
    steps: list[dict[str, Any]] = [{"name": "start", "unit": "MELBIS_AGENT_TEST", "command": "CmdSleep",
                                    "params": {"ms": 3000}}]
    for i in range(1, RUNNER_CALLS + 1):
        step = echo_step(i, refer=False, keyed=True)
        step["params"]["after"] = "@start.slept"
        steps.append(step)
    path.write_text(json.dumps({"mode": "parallel", "max_concurrency": 16, "pool": steps}))
    return path


def _task_seconds(url: str) -> float:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT extract(epoch FROM max(done_at) - (SELECT done_at FROM work WHERE "
                           "num = 1)), count(*) FILTER (WHERE status = 'completed') FROM work").fetchone()
    assert row is not None
    if int(row[1]) != RUNNER_CALLS + 1:
        raise BenchError(f"the task completed {row[1]} of {RUNNER_CALLS + 1} calls")
    return float(row[0])


def _runners(w: Work, st: Any, pool: Path, server: PgServer, count: int) -> Sample:
    url = _database(server, w)
    procs = []
    for i in range(count):
        folder = w.fresh(f"r{count}-{i}")
        cmd = [*pooler_cmd(), "run", str(pool), "--store", st.url, "--token-file", str(w.token_file),
               "--out", str(folder / "out"), "--journal", url, "--task", "bench", "--width", "4", "--json"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=w.env,
                                      cwd=w.tmp))
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise BenchError(f"a runner exited with {proc.returncode}: {err.decode()[-2000:]}")
    seconds = _task_seconds(url)
    return Sample(seconds, 0, 0.0)


def runners_case(settings: Settings) -> tuple[list[Row], list[str]]:
    server = _server()
    try:
        with work("runners") as w, store(w, "--latency-ms", str(LATENCY_MS)) as st:
            pool = _runners_pool(w.tmp / "pool.json")
            samples = alternate({str(n): (lambda n=n: _runners(w, st, pool, server, n)) for n in (1, 2, 4)},
                                settings.runs)
    finally:
        server.stop()
    one = secs(samples["1"])
    rows, notes = [], []
    for n, goal in GOALS.items():
        t = secs(samples[str(n)])
        rows.append(Row(f"runners: {n} × --width 4 vs 1 (1,200 calls of 20 ms, cap 16)",
                        f"{n} runners {fmt_run(samples[str(n)])}", f"1 runner {fmt_run(samples['1'])}",
                        one / t, f"≥ {goal}×", one / t >= goal,
                        {"runners": series(samples[str(n)]), "one": series(samples["1"])}))
        notes.append(f"runners: {n} runners are {one / t:.2f}× one runner")
    ideal = RUNNER_CALLS * LATENCY_MS / 4 / 1000
    notes.append(f"runners: one runner of width 4 at best takes {ideal:.1f} s (calls × 20 ms / 4)")
    return rows, notes


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    rows, notes = journal_case(settings)
    more, said = runners_case(settings)
    return rows + more, notes + said


if __name__ == "__main__":
    sys.exit(main_for("shared_runners", __doc__ or "", case))
