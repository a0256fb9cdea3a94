"""What the journal tells after a run it could not follow to the end: a journal that fills its disk,
and a run killed after it settled a call an earlier run left in doubt.  Through ``pooler run``
against the real reference store.
"""

from __future__ import annotations

import json
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, environment, pooler


def env_for(store: Store, tmp_path: Path) -> dict[str, str]:
    env = environment()
    env.update(POOLER_TOKEN=store.token, XDG_STATE_HOME=str(tmp_path / "state"))
    return env


@pytest.mark.process
# The plan of the task's 200 calls is written before the first call leaves (its write-ahead log
# reaches some 370 KiB, the pool kept whole with it), and each call's claim and outcome add to the
# log: these limits stop the run after its first call, and at points after.
@pytest.mark.parametrize("kib", [400, 440, 480, 640, 1000])
def test_a_full_disk_stops_the_run_saying_how_many_calls_left(
        store: Store, tmp_path: Path, kib: int) -> None:
    """The files pooler writes may not grow past ``kib`` KiB (as on a full disk): the journal fails
    somewhere in the run, before a call leaves or after its answer came; the count said is the
    store's."""
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n" + "".join(
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, key: k{n}, params: {{n: {n}}}}}\n"
        for n in range(200)), encoding="utf-8")
    journal = tmp_path / "journal.sqlite"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, kib * 1024))

    proc = subprocess.run(
        [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url, "--journal",
         str(journal), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, env=env_for(store, tmp_path), preexec_fn=limit,
        timeout=120, check=False)
    sent = len(store.ops())
    assert 0 < sent < 200, proc.stderr
    assert proc.returncode == 1, proc.stderr
    found = re.search(r"^pooler: the run stopped after (\d+) calls? had been sent; ", proc.stderr, re.M)
    assert found is not None, proc.stderr
    assert int(found.group(1)) == sent


POOL = """\
vars:
  ms: {default: 1}
pool:
  - {name: first, unit: MELBIS_AGENT_TEST, command: CmdEcho, key: first, params: {n: 1}}
  - {name: slow, unit: MELBIS_AGENT_TEST, command: CmdSleep, key: slow, params: {ms: "${ms}"}}
"""


def run(store: Store, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(tmp_path / "pool.yaml"), "--store", store.url, "--json", "--task", "T",
                  "--journal", str(tmp_path / "journal.sqlite"), "--out", str(tmp_path / "out"), *extra,
                  env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(tmp_path / "state")})


def completed_in_run(journal: Path, key: str, run_no: int) -> bool:
    """The task's history holds the call of ``key`` completed in run ``run_no``."""
    db = sqlite3.connect(journal)
    try:
        return db.execute("SELECT 1 FROM calls WHERE key = ? AND run = ? AND status = 'completed'",
                          (key, run_no)).fetchone() is not None
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


def in_flight(journal: Path, key: str) -> bool:
    """The call of ``key`` is sent and its answer not recorded (its work row)."""
    db = sqlite3.connect(journal)
    try:
        found = db.execute("SELECT 1 FROM work WHERE key_text = ? AND state = 'sent'", (key,)).fetchone()
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()
    return found is not None


@pytest.mark.process
def test_a_call_settled_by_a_killed_run_stays_in_the_answer(store_factory: Any, tmp_path: Path) -> None:
    db, root = tmp_path / "store.db", tmp_path / "store-root"
    (tmp_path / "pool.yaml").write_text(POOL, encoding="utf-8")
    # Run 1: the store carries `first` out and the answer is lost: in doubt.
    faulty: Store = store_factory("--fault", "reset:1", db=db, root=root)
    first = run(faulty, tmp_path)
    assert [s["status"] for s in answer_of(first)["steps"]] == ["in_doubt"]
    faulty.stop()
    # Run 2 sends `first` again (same Idempotency-Key) and settles it, then is killed in `slow`.
    sound: Store = store_factory("--port", faulty.port, db=db, root=root)
    env = environment()
    env.update(POOLER_TOKEN=sound.token, XDG_STATE_HOME=str(tmp_path / "state"))
    second = subprocess.Popen(
        [sys.executable, "-m", "pooler", "run", str(tmp_path / "pool.yaml"), "--store", sound.url,
         "--json", "--task", "T", "--journal", str(tmp_path / "journal.sqlite"), "--out",
         str(tmp_path / "out"), "--var", "ms=3000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        # Killed once `first` is settled and `slow` has left: a store holding its key answers
        # run 3's `slow` when the 3 s sleep ends.
        journal = tmp_path / "journal.sqlite"
        while not (completed_in_run(journal, "first", 2) and in_flight(journal, "slow")):
            assert second.poll() is None, second.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        second.send_signal(signal.SIGKILL)
        second.wait()
    # Run 3 finishes the task: `first` is done, and the answer still says it was found in doubt
    # and sent again, by the call that was left in doubt; `slow`, which run 2 left in flight, is
    # sent again now.
    third = run(sound, tmp_path)
    assert third.returncode == 0, third.stderr
    answer = answer_of(third)
    assert [s["status"] for s in answer["steps"]] == ["skipped", "completed"]
    expected = [{"num": 1, "name": "first", "key": "first", "step_id": "T-1-1", "action": "retried"},
                {"num": 2, "name": "slow", "key": "slow", "step_id": "T-2-2", "action": "retried"}]
    assert answer["in_doubt"] == expected
    shown = pooler("show", "T", "--journal", str(tmp_path / "journal.sqlite"), "--json")
    assert json.loads(shown.stdout)["in_doubt"] == expected
    # The store carried `first` out once: the repeat was answered from its key.
    assert [op["command"] for op in sound.ops()].count("CmdEcho") == 1
