"""A 1,000-row CSV import killed half-way with SIGKILL and resumed with ``--task ID --resume``.

Each row is one keyed ``MELBIS_AGENT_STORE.CmdAdd`` (``key: good-${row.sku}``).  The store refuses a
second add of a sku, so a repeat cannot hide: it is a refusal in the answer and a second CmdAdd of
that sku in the store's ops.

The kill point is made exact, not left to timing: once the store holds 400 goods, the run is
paused (SIGSTOP) again and again until the journal shows a call sent without its answer recorded
*and* the store's ops show that call carried out; then it is killed.  So every resume below meets
the hardest case: a call in doubt that did land.  A store that honours Idempotency-Key answers its
retry without adding again; a store that ignores keys adds nothing twice either (the sku is unique)
but refuses the retry, and that one repeat is the in-doubt call the answer lists.
"""

from __future__ import annotations

import csv
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, environment

COUNT = 1000
HALF = 400
TASK = "import-1"
POOL = """\
pool:
  - name: add
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {file: goods.csv}
    key: "good-${row.sku}"
    params: {sku: "${row.sku}", name: "${row.name}", price: "${row.price}"}
"""
SKUS = [f"SKU-{n:04d}" for n in range(1, COUNT + 1)]


@dataclass
class Import:
    """The pool, its CSV, journal and task, run against one store."""

    store: Store
    folder: Path

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True)
        with (self.folder / "goods.csv").open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["sku", "name", "price"])
            writer.writerows([sku, f"Goods {n}", f"{n % 90}.{n % 100:02d}"] for n, sku in enumerate(SKUS, 1))
        self.pool = self.folder / "import.yaml"
        self.pool.write_text(POOL, encoding="utf-8")
        self.journal = self.folder / "journal.sqlite"

    def start(self, *extra: str) -> subprocess.Popen[str]:
        env = environment()
        env["POOLER_TOKEN"] = self.store.token
        cmd = [sys.executable, "-m", "pooler", "run", str(self.pool), "--store", self.store.url,
               "--journal", str(self.journal), "--out", str(self.folder / "out"), "--task", TASK,
               "--json", *extra]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                env=env)

    def adds(self) -> list[dict[str, Any]]:
        """The CmdAdd operations the store carried out, oldest first."""
        return [op for op in self.store.ops() if op["command"] == "CmdAdd"]

    def journal_rows(self, status: str) -> list[tuple[str, int]]:
        """(key, row) of the task's calls (its plan's work rows) sent without an answer recorded
        (``sent``), or recorded done with ``status``, in row order."""
        if not self.journal.exists():
            return []
        where = "state = 'sent'" if status == "sent" else "state = 'done' AND status = ?"
        try:
            with sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True, timeout=1) as db:
                rows = db.execute(f"SELECT key_text, row_first FROM work WHERE task = ? AND {where} "
                                  "ORDER BY num, idx", (TASK, *([] if status == "sent" else [status]))
                                  ).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(str(key), int(row)) for key, row in rows]

    def kill_with_a_landed_call_in_doubt(self) -> tuple[str, int]:
        """Run until the store holds ``HALF`` goods, then kill the run at a moment when one call has
        been carried out by the store and its answer is not in the journal; its (key, row)."""
        proc = self.start()
        try:
            assert until(lambda: len(self.adds()) >= HALF, proc), "the import never got half-way"
            doubtful = None
            deadline = time.monotonic() + 60
            while doubtful is None and time.monotonic() < deadline and proc.poll() is None:
                proc.send_signal(signal.SIGSTOP)
                sent = self.journal_rows("sent")
                if sent and sent[0][0].removeprefix("good-") in {op["params"]["sku"] for op in self.adds()}:
                    doubtful = sent[0]
                    proc.kill()
                else:
                    proc.send_signal(signal.SIGCONT)
        finally:
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate(timeout=30)
        assert doubtful is not None, f"no landed call in doubt before the import ended: {err}"
        assert proc.returncode == -signal.SIGKILL
        return doubtful

    def resume(self, *extra: str) -> tuple[int, dict[str, Any], str]:
        proc = self.start("--resume", *extra)
        out, err = proc.communicate(timeout=120)
        answer: dict[str, Any] = json.loads(out)
        return proc.returncode, answer, err

    def goods(self) -> dict[str, int]:
        """The id of every sku the store holds (asked last: CmdList is an operation too)."""
        answer = self.store.call("MELBIS_AGENT_STORE", "CmdList").json()
        rows = answer["data"]["tables"]["goods"]
        ids = {row["sku"]: row["id"] for row in rows}
        assert len(ids) == len(rows), "a sku is in the store twice"
        return ids


def assert_retried(answer: dict[str, Any], key: str, row: int) -> None:
    """The answer's in_doubt lists the one call found in doubt, sent again."""
    (item,) = answer["in_doubt"]
    assert {k: v for k, v in item.items() if k != "step_id"} == {"num": 1, "name": "add", "row": row,
                                                                 "key": key, "action": "retried"}
    # The in-doubt list names the call the killed run left in doubt, as --in-doubt stop and skip do.
    assert item["step_id"] == f"{TASK}-1-{row}-1"


def until(reached: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 60) -> bool:
    """Poll (each poll is a call to the store) until ``reached()``; False once the run has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if reached():
            return True
    return False


@pytest.fixture
def keyed_store(store_factory: Any) -> Store:
    store: Store = store_factory("--latency-ms", "2")
    return store


@pytest.fixture
def keyless_store(store_factory: Any) -> Store:
    store: Store = store_factory("--latency-ms", "2", "--no-idempotency")
    return store


@pytest.mark.process
def test_a_killed_import_resumes_without_adding_any_row_twice(keyed_store: Store, tmp_path: Path) -> None:
    job = Import(keyed_store, tmp_path / "keyed")
    key, row = job.kill_with_a_landed_call_in_doubt()
    done = job.journal_rows("completed")
    # One call at a time, in row order: every row before the one in doubt is done, none after it.
    assert [r for _, r in done] == list(range(row))
    assert HALF - 1 <= row < COUNT
    assert job.journal_rows("sent") == [(key, row)]

    status, answer, err = job.resume()
    assert status == 0, err
    assert (answer["result"], answer["status"], answer["task"]) == (True, "completed", TASK)
    assert answer["total"] == COUNT
    assert answer["skipped"] + answer["succeeded"] == COUNT
    assert answer["skipped"] == len(done)
    assert (answer["failed"], answer["not_run"]) == (0, 0)
    # The call in doubt was sent again with its key, and the store answered it from the first time.
    assert_retried(answer, key, row)
    # The rows done before the kill are skipped; the one in doubt and every later one completed.
    (summary,) = answer["steps"]
    assert (summary["status"], summary["calls"], summary["failures"]) == ("completed", COUNT, [])
    assert summary["rows"] == {"total": COUNT, "completed": COUNT - row, "skipped": row, "failed": 0,
                               "in_doubt": 0, "not_run": 0}
    assert summary["message"] == f"1,000 rows: {COUNT - row} completed, {row} skipped"
    # The task's history has the record of every call the killed run completed: the rows this run
    # skipped are named by the call of the first run that did them.
    with sqlite3.connect(f"file:{job.journal}?mode=ro", uri=True) as db:
        skipped = db.execute("SELECT row, step_id FROM calls WHERE task = ? AND run = 1 "
                             "AND status = 'completed' ORDER BY id", (TASK,)).fetchall()
    assert skipped == [(r, f"{TASK}-1-{r}-1") for r in range(row)]

    adds = job.adds()
    assert Counter(op["params"]["sku"] for op in adds) == Counter(SKUS)
    assert all(op["idempotency_key"] == f"{TASK}:good-{op['params']['sku']}" for op in adds)
    assert sorted(job.goods()) == SKUS


@pytest.mark.process
def test_without_store_keys_the_one_repeat_is_the_call_in_doubt(keyless_store: Store, tmp_path: Path) -> None:
    job = Import(keyless_store, tmp_path / "keyless")
    key, row = job.kill_with_a_landed_call_in_doubt()
    sku = key.removeprefix("good-")
    done = job.journal_rows("completed")

    # The store ignores the key, so the retry is a second add, which the store refuses; the rest
    # of the rows go on past it.
    status, answer, err = job.resume("--no-stop-on-error")
    assert status == 1, err
    assert (answer["result"], answer["status"], answer["task"]) == (False, "partial", TASK)
    assert answer["total"] == COUNT
    assert answer["skipped"] == len(done)
    assert answer["skipped"] + answer["succeeded"] == COUNT - 1
    assert (answer["failed"], answer["not_run"]) == (1, 0)
    assert_retried(answer, key, row)
    adds = Counter(op["params"]["sku"] for op in job.adds())
    assert {s: n for s, n in adds.items() if n != 1} == {sku: 2}
    assert sorted(adds) == SKUS
    goods = job.goods()
    assert sorted(goods) == SKUS
    (summary,) = answer["steps"]
    assert (summary["status"], summary["result"]) == ("failed", False)
    assert summary["rows"] == {"total": COUNT, "completed": COUNT - row - 1, "skipped": row, "failed": 1,
                               "in_doubt": 0, "not_run": 0}
    assert summary["message"] == (f"1,000 rows: {COUNT - row - 1} completed, {row} skipped, "
                                  f"1 failed (first at row {row})")
    (refused,) = summary["failures"]
    assert (refused["row"], refused["key"], refused["status"]) == (row, key, "failed")
    assert refused["message"] == f"The goods [{sku}] are in the store already: id {goods[sku]}."
