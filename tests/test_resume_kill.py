"""``pooler run`` killed with SIGKILL mid-pool, then run again with the same ``--task``: the
seed's "Verified behaviour" (execute_tool_batch.md) against the real store.

Each scenario runs a pool of 8 keyed CmdSleep calls of 100-170 ms, waits (by polling the journal
or the store's ops, in a bounded loop) until the run reaches its kill point, kills it, and runs the
task again until it completes.  The scenarios of one test run side by side, each with its own pool
file, journal and task, so one store serves them all: a call is known in the store's ops by its
``ms``, which no other call of the test has (a store without keys records no key).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, environment

CALLS = 8
#: Kill points: (what to wait for, how far).  "sent": a call is in flight after N completed;
#: "ops": the store has carried out N of the calls; "done": N calls are recorded completed.
SEQUENTIAL_POINTS = [("sent", 0), ("ops", 2), ("done", 3), ("sent", 4), ("ops", 6), ("done", 7), ("ops", 8)]
PARALLEL_POINTS = [("sent", 0), ("ops", 1), ("ops", 3), ("done", 4), ("ops", 5), ("ops", 7)]
#: The store answers each call a second after carrying it out: a point the store's ops name (its
#: last call among them) is met while the run still waits for that answer, however late a busy
#: machine lets the test look, and the run cannot have ended on its own before it is killed.
LATE = ("--reply-delay-ms", "1000")


@dataclass
class Scenario:
    """One pool file, journal and task, killed at one point and then run to the end."""

    store: Store
    folder: Path
    task: str
    point: tuple[str, int]
    mode: str = "sequential"
    keyed: bool = True
    index: int = 0

    def ms(self, n: int) -> int:
        """The sleep of call ``n``: it tells the call apart in the store's ops."""
        return 100 + 10 * self.index + n

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True)
        self.pool = self.folder / "pool.yaml"
        self.journal = self.folder / "journal.sqlite"
        token = self.folder / "token"
        token.write_text(self.store.token)
        self.token = token
        lines = [f"mode: {self.mode}", "max_concurrency: 4", "pool:"]
        for n in range(1, CALLS + 1):
            key = f", key: op-{n}" if self.keyed else ""
            params = f"{{ms: {self.ms(n)}}}"
            lines.append(f"  - {{unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {params}{key}}}")
        self.pool.write_text("\n".join(lines) + "\n")

    def start(self, *extra: str) -> subprocess.Popen[str]:
        env = environment()
        cmd = [sys.executable, "-m", "pooler", "run", str(self.pool), "--store", self.store.url,
               "--token-file", str(self.token), "--journal", str(self.journal), "--task", self.task,
               "--json", "--out", str(self.folder / "out"), *extra]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=ROOT, env=env)

    def ops(self) -> list[int]:
        """The calls of this scenario the store carried out, oldest first, as their ``ms``."""
        mine = {self.ms(n) for n in range(1, CALLS + 1)}
        return [op["params"]["ms"] for op in self.store.ops()
                if op["command"] == "CmdSleep" and op["params"]["ms"] in mine]

    def journal_counts(self) -> tuple[int, int]:
        """Calls of the task's plan recorded completed, and calls sent without an answer yet (the
        task's work rows)."""
        if not self.journal.exists():
            return 0, 0
        try:
            with sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True, timeout=1) as db:
                done = db.execute("SELECT COUNT(*) FROM work WHERE task = ? AND state = 'done' "
                                  "AND status = 'completed'", (self.task,)).fetchone()[0]
                sent = db.execute("SELECT COUNT(*) FROM work WHERE task = ? AND state = 'sent'",
                                  (self.task,)).fetchone()[0]
        except sqlite3.OperationalError:
            return 0, 0
        return int(done), int(sent)

    def reached(self) -> bool:
        kind, n = self.point
        if kind == "ops":
            return len(self.ops()) >= n
        done, sent = self.journal_counts()
        if kind == "done":
            return done >= n
        return done >= n and sent > 0

    def kill_at_point(self) -> None:
        proc = self.start()
        try:
            reached = wait_until(self.reached, proc)
        finally:
            proc.kill()
            _, err = proc.communicate()
        assert reached, f"{self.task} never reached {self.point}: {err}"
        assert proc.returncode == -9

    def run_to_end(self, *extra: str) -> dict[str, Any]:
        proc = self.start(*extra)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answer: dict[str, Any] = json.loads(out)
        return answer


def wait_until(reached: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 60) -> bool:
    """Poll until ``reached()``; False when the run ended first or the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reached():
            return True
        if proc.poll() is not None:
            return reached()
        time.sleep(0.002)
    return False


def run_all(scenarios: list[Scenario]) -> list[dict[str, Any]]:
    def one(s: Scenario) -> dict[str, Any]:
        s.kill_at_point()
        return s.run_to_end()

    with ThreadPoolExecutor(len(scenarios)) as pool:
        return list(pool.map(one, scenarios))


def scenarios(store: Store, tmp_path: Path, points: list[tuple[str, int]], mode: str,
              name: str) -> list[Scenario]:
    return [Scenario(store, tmp_path / f"{name}{i}", f"{name}{i}", point, mode, index=i)
            for i, point in enumerate(points)]


def repeats(ops: list[int]) -> dict[int, int]:
    return {ms: count - 1 for ms, count in Counter(ops).items() if count > 1}


def check(scenario: Scenario, answer: dict[str, Any], *, honoured: bool, most: int) -> None:
    assert (answer["status"], answer["total"], answer["task"]) == ("completed", CALLS, scenario.task)
    assert answer["succeeded"] + answer["skipped"] == CALLS
    ops = scenario.ops()
    assert set(ops) == {scenario.ms(n) for n in range(1, CALLS + 1)}
    again = repeats(ops)
    if honoured:
        assert len(ops) == CALLS, (scenario.point, again)
        return
    assert sum(again.values()) <= most, (scenario.point, again)
    retried = {scenario.ms(int(i["key"][3:])) for i in answer["in_doubt"] if i["action"] == "retried"}
    assert set(again) <= retried, (scenario.point, again, answer["in_doubt"])


@pytest.mark.process
@pytest.mark.parametrize("honoured", [True, False], ids=["store-keys", "no-store-keys"])
def test_sequential_runs_killed_at_seven_points_resume_without_repeats(
        store_factory: Any, tmp_path: Path, honoured: bool) -> None:
    store = store_factory(*LATE, *([] if honoured else ["--no-idempotency"]))
    made = scenarios(store, tmp_path, SEQUENTIAL_POINTS, "sequential", "seq")
    for scenario, answer in zip(made, run_all(made), strict=True):
        check(scenario, answer, honoured=honoured, most=1)


@pytest.mark.process
@pytest.mark.parametrize("honoured", [True, False], ids=["store-keys", "no-store-keys"])
def test_parallel_runs_killed_at_six_points_repeat_at_most_the_calls_in_flight(
        store_factory: Any, tmp_path: Path, honoured: bool) -> None:
    store = store_factory(*LATE, *([] if honoured else ["--no-idempotency"]))
    made = scenarios(store, tmp_path, PARALLEL_POINTS, "parallel", "par")
    for scenario, answer in zip(made, run_all(made), strict=True):
        check(scenario, answer, honoured=honoured, most=4)


@pytest.mark.process
def test_one_task_killed_again_and_again_completes_with_each_call_done_once(store_factory: Any,
                                                                          tmp_path: Path) -> None:
    store = store_factory()
    scenario = Scenario(store, tmp_path / "chain", "chain", ("sent", 0))
    for point in SEQUENTIAL_POINTS[:-1]:
        scenario.point = point
        scenario.kill_at_point()
    answer = scenario.run_to_end()
    assert answer["status"] == "completed"
    assert answer["skipped"] >= 6
    assert sorted(scenario.ops()) == [scenario.ms(n) for n in range(1, CALLS + 1)]


@pytest.mark.process
def test_without_keys_a_rerun_repeats_everything_already_done(store_factory: Any, tmp_path: Path) -> None:
    store = store_factory()
    scenario = Scenario(store, tmp_path / "nokeys", "nokeys", ("ops", 3), keyed=False)
    scenario.kill_at_point()
    answer = scenario.run_to_end()
    assert (answer["status"], answer["skipped"], answer["succeeded"]) == ("completed", 0, CALLS)
    # The seed's measure: without keys, eight calls cost the ones done before the kill once more.
    ops = scenario.ops()
    assert ops[-CALLS:] == [scenario.ms(n) for n in range(1, CALLS + 1)]
    assert len(ops) >= CALLS + 3


@pytest.mark.process
def test_in_doubt_stop_names_the_call_and_skip_counts_it_done(store_factory: Any, tmp_path: Path) -> None:
    store = store_factory("--no-idempotency")
    scenario = Scenario(store, tmp_path / "stop", "stop", ("sent", 3))
    scenario.kill_at_point()
    _, sent = scenario.journal_counts()
    assert sent == 1
    proc = scenario.start("--in-doubt", "stop")
    out, _ = proc.communicate(timeout=120)
    stopped = json.loads(out)
    assert proc.returncode == 1
    assert stopped["steps"][-1]["status"] == "in_doubt"
    item = stopped["in_doubt"][0]
    assert item["action"] == "stopped"
    assert stopped["steps"][-1]["message"].startswith(
        f"Step {item['num']} was sent as {item['step_id']} and its answer never came back")
    answer = scenario.run_to_end("--in-doubt", "skip")
    assert answer["status"] == "completed"
    assert [i["action"] for i in answer["in_doubt"]] == ["skipped"]
    assert not repeats(scenario.ops())
