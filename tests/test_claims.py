"""Two ``pooler run`` processes on one task and one journal at once (two machines sharing a journal,
two MCP servers): each key leaves at most once, whoever claims it first, also when one of them is
killed half-way.  The store ignores Idempotency-Key (``--no-idempotency``), so a key sent twice
runs twice and shows in its ops.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, environment, pooler

ROWS = 80
#: The first step keeps both runs waiting until each has read the journal: their rows then start
#: side by side, and every key is claimed by both at about the same moment.
POOL = """\
mode: parallel
max_concurrency: 4
pool:
  - {name: wait, unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {ms: 2500}}
  - name: each
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: rows.csv}
    key: k-${row.n}
    params: {n: "${row.n}", after: "@wait.slept"}
"""


def start(store: Store, tmp_path: Path, name: str, *extra: str) -> subprocess.Popen[str]:
    """One run of task T with a state folder and --out of its own (its locks meet no other's)."""
    env = environment()
    env.update(POOLER_TOKEN=store.token, XDG_STATE_HOME=str(tmp_path / f"state-{name}"))
    cmd = [sys.executable, "-m", "pooler", "run", str(tmp_path / "pool.yaml"), "--store", store.url,
           "--journal", str(tmp_path / "journal.sqlite"), "--task", "T", "--json",
           "--out", str(tmp_path / f"out-{name}"), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=env)


def ran(store: Store) -> Counter[str]:
    return Counter(str(op["params"]["n"]) for op in store.ops() if op["command"] == "CmdEcho")


def carried_out(store: Store) -> int:
    return len(store.ops())


def reached(store: Store, count: int, procs: list[subprocess.Popen[str]]) -> bool:
    """Wait until the store has carried out ``count`` calls; False when both runs ended before."""
    deadline = time.monotonic() + 60
    while carried_out(store) < count:
        assert time.monotonic() < deadline, "the runs never reached the kill point"
        if all(p.poll() is not None for p in procs):
            return False
        time.sleep(0.02)
    return True


@pytest.mark.process
@pytest.mark.parametrize("how", ["together", "kill-10", "kill-40", "late"])
def test_two_processes_on_one_task_send_each_key_at_most_once(
        store_factory: Any, tmp_path: Path, how: str) -> None:
    """``together``: both start at once and claim every key at about the same moment; ``kill-N``: the
    first is killed once the store has carried out N calls; ``late``: the second starts while the
    first has calls in flight, which it must not take for calls left in doubt."""
    store: Store = store_factory("--no-idempotency", "--latency-ms", "100")
    (tmp_path / "rows.csv").write_text("n\n" + "".join(f"{n}\n" for n in range(ROWS)), encoding="utf-8")
    (tmp_path / "pool.yaml").write_text(POOL, encoding="utf-8")
    # Against a store that ignores keys a call a dead run left in doubt is not sent again
    # (--in-doubt stop, as docs/semantics.md advises); a live run's calls in flight are never resent.
    policy = ["--in-doubt", "stop"] if how.startswith("kill") else []
    procs = [start(store, tmp_path, "a", *policy)]
    killed = False
    try:
        if how == "late":
            assert reached(store, 1 + 12, procs), "the first run ended before the second started"
        procs.append(start(store, tmp_path, "b", *policy))
        if how.startswith("kill") and reached(store, int(how[5:]), procs) and procs[0].poll() is None:
            procs[0].send_signal(signal.SIGKILL)
            killed = True
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    survivors = procs[1:] if killed else procs
    for proc, (out, err) in zip(procs, outputs, strict=True):
        if proc in survivors:
            # Neither is refused for the task the other made a moment before.
            assert proc.returncode in (0, 1), err
            assert answer_of(subprocess.CompletedProcess([], 0, out, err))["task"] == "T"
    counts = ran(store)
    assert max(counts.values()) == 1, (counts, [o[1] for o in outputs])
    # Run again: what is done is skipped, what a killed run left in doubt is counted done, the rest is
    # sent now; still no key twice.
    last = pooler("run", str(tmp_path / "pool.yaml"), "--store", store.url, "--journal",
                  str(tmp_path / "journal.sqlite"), "--task", "T", "--json", "--in-doubt", "skip",
                  "--out", str(tmp_path / "out-c"),
                  env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(tmp_path / "state-c")})
    assert last.returncode == 0, last.stderr
    rows = answer_of(last)["steps"][1]["rows"]
    assert rows["total"] == ROWS
    assert rows["completed"] + rows["skipped"] == ROWS
    counts = ran(store)
    assert max(counts.values()) == 1, counts
    if not killed:
        # No run was killed: every key went out exactly once between the three runs (a run that met a
        # key the other had in flight said so, in doubt, and stopped there).
        assert sorted(counts, key=int) == [str(n) for n in range(ROWS)]
