"""Load: 10,000 keyed steps side by side against a store that resets and crashes now and then,
then the same task run again against the store restarted without faults.

Every step ends in the answer's counts and in the journal with exactly one status; the store's
ops match the calls one for one (a reset call ran, a crashed one did not); and the rerun finishes
the rest without carrying out any key twice.  Run by ``make test-slow``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, answer_of, pooler

STEPS = 10_000
TEST = "MELBIS_AGENT_TEST"

pytestmark = pytest.mark.slow


def write_pool(folder: Path) -> Path:
    steps = [{"unit": TEST, "command": "CmdEcho", "key": f"k{n}", "params": {"n": n}} for n in range(STEPS)]
    path = folder / "load.json"
    path.write_text(json.dumps({"mode": "parallel", "max_concurrency": 16, "stop_on_error": False,
                                "include_results": False, "pool": steps}), encoding="utf-8")
    return path


def run(store: Store, tmp_path: Path, pool: Path, *extra: str) -> tuple[dict[str, Any], int, float]:
    started = time.monotonic()
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), "--task", "load", "--json", "--quiet",
                  *extra, env={"POOLER_TOKEN": store.token}, timeout=1800)
    took = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr
    return answer_of(proc), proc.returncode, took


def journal_of(tmp_path: Path, run_no: int) -> dict[int, str]:
    """Step number -> status of one run of the task, checking each call has exactly one record."""
    with sqlite3.connect(f"file:{tmp_path / 'journal.sqlite'}?mode=ro", uri=True) as db:
        rows = list(db.execute("SELECT num, status FROM calls WHERE task = 'load' AND run = ?", (run_no,)))
    nums = Counter(num for num, _ in rows)
    assert set(nums.values()) == {1}
    return dict(rows)


def ops_by_step(store: Store) -> Counter[int]:
    """How often the store carried out each step (its params hold the step's n)."""
    return Counter(op["params"]["n"] + 1 for op in store.ops() if op["command"] == "CmdEcho")


def test_ten_thousand_steps_under_faults_then_a_clean_rerun(store_factory: Any, tmp_path: Path) -> None:
    pool = write_pool(tmp_path)
    db, root = tmp_path / "store.db", tmp_path / "store-root"
    faulty = store_factory("--latency-ms", "1", "--fault", "reset:0.01", "--fault", "crash:0.01",
                           "--seed", "7", db=db, root=root)

    first, status, took_first = run(faulty, tmp_path, pool)
    assert status == 1
    statuses = {e["num"]: e["status"] for e in first["steps"]}
    assert len(first["steps"]) == STEPS
    counts = Counter(statuses.values())
    # A crash's text does not say whether the command ran: it is in doubt, as a reset is.
    assert set(counts) == {"completed", "in_doubt"}
    assert first["total"] == STEPS
    assert (first["succeeded"], first["failed"], first["skipped"], first["not_run"]) == (
        counts["completed"], counts["in_doubt"], 0, 0)
    crashed = {e["num"] for e in first["steps"]
               if e["status"] == "in_doubt" and e["message"].endswith("(injected fault: crash)")}
    # Faults at 1% each: a few dozen of each kind, and nothing else went wrong.
    assert 30 < len(crashed) < 200
    assert 30 < counts["in_doubt"] - len(crashed) < 200
    assert journal_of(tmp_path, 1) == statuses

    ran = ops_by_step(faulty)
    assert set(ran.values()) == {1}
    # A reset came after the command ran: in doubt, with an op. A crash came before it: no op.
    assert set(ran) == {n for n, s in statuses.items() if s in ("completed", "in_doubt")} - crashed
    faulty.stop()

    sound = store_factory("--port", faulty.port, db=db, root=root)
    again, status, took_again = run(sound, tmp_path, pool, "--resume")
    assert status == 0, again
    rerun = {e["num"]: e["status"] for e in again["steps"]}
    assert {n for n, s in rerun.items() if s == "skipped"} == {
        n for n, s in statuses.items() if s == "completed"}
    assert {n for n, s in rerun.items() if s == "completed"} == {
        n for n, s in statuses.items() if s != "completed"}
    assert (again["total"], again["succeeded"] + again["skipped"], again["failed"], again["not_run"]) == (
        STEPS, STEPS, 0, 0)
    # The history holds attempts: the second run's are the calls it sent; those the first run
    # did are told skipped by its answer, and keep their one record, the first run's.
    assert journal_of(tmp_path, 2) == {n: s for n, s in rerun.items() if s != "skipped"}
    # Every key carried out exactly once over both runs: the in-doubt ones were answered from their
    # Idempotency-Key, the crashed ones ran now for the first time.
    ran = ops_by_step(sound)
    assert len(ran) == STEPS
    assert set(ran.values()) == {1}
    print(f"\n10,000 steps: first run {took_first:.1f} s, rerun {took_again:.1f} s")
