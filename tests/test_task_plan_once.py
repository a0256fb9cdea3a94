"""A full run reads each data file once: the rows the check reads become the task's plan (its work
rows) in the transaction that creates the task, and that plan is the one a sampled run records
(keys, rows, secrets kept out).

Against the real reference store.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from helpers import Store, pooler
from test_task_plan import CHUNKED, PER_ROW, SECRET_ROW, echoed, refs, setup, write_goods

from pooler.journal.sqlite.tasks import SqliteTaskJournal

SECRET_KEY = """\
vars:
  word: {env: POOL_WORD, secret: true}
pool:
  - name: echo
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    key: echo-${word}-${row.ref}
    params: {ref: "${row.ref}"}
"""
WORD = "a-secret-word-of-length"


def run(store: Store, tmp_path: Path, pool: Path, journal: Path, *extra: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(journal), *extra,
                  env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(tmp_path / "state"), **(env or {})})


def plan_of(journal: Path, task: str) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """The task's plan: its calls (step, first and last row, rows, key, data), and the files it
    saw (as the task keeps them, the path aside)."""
    db = sqlite3.connect(journal)
    try:
        calls = db.execute("SELECT num, row_first, row_last, size, key_text, data FROM work WHERE task = ? "
                           "ORDER BY num, idx", (task,)).fetchall()
    finally:
        db.close()
    with SqliteTaskJournal(journal) as tasks:
        files = (tasks.shared(task) or {}).get("files") or []
    return calls, [{k: v for k, v in f.items() if k != "path"} for f in files]


def test_a_full_run_records_the_plan_a_sampled_run_records(store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, CHUNKED, refs(12))
    (tmp_path / "full").mkdir()
    full = run(store, tmp_path, pool, tmp_path / "full" / "journal.sqlite", "--task", "T")
    assert full.returncode == 0, full.stderr
    sampled = run(store, tmp_path, pool, tmp_path / "sampled.sqlite", "--sample", "5", "--task", "T")
    assert sampled.returncode == 0, sampled.stderr
    calls, files = plan_of(tmp_path / "full" / "journal.sqlite", "T")
    # A call a chunk of 5 rows, its rows with it.
    assert [c[:4] for c in calls] == [(1, 0, 4, 5), (1, 5, 9, 5), (1, 10, 11, 2)]
    assert json.loads(str(calls[1][5]))[2] == {"ref": "R07", "sku": "SKU-R07", "name": "item R07",
                                                "price": "1.00"}
    assert [(f["num"], f["name"], f["rows"], f["chunk"]) for f in files] == [
        (0, "pool.yaml", None, None), (1, "goods.csv", 12, 5)]
    assert (calls, files) == plan_of(tmp_path / "sampled.sqlite", "T")
    # Nothing is staged beside the journal: its folder holds the journal alone.
    assert [p.name for p in (tmp_path / "full").iterdir() if not p.name.startswith("journal.sqlite")] == []


def test_a_full_run_whose_rows_hold_the_token_is_refused_and_sends_nothing(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(3))
    write_goods(tmp_path / "goods.csv", refs(3), {"R01": store.token})
    journal = tmp_path / "journal.sqlite"
    refused = run(store, tmp_path, pool, journal, "--task", "T")
    assert refused.returncode == 2
    assert SECRET_ROW.format(row=2, step=1) in refused.stderr
    assert store.token not in refused.stderr
    assert store.token.encode() not in journal.read_bytes()
    with SqliteTaskJournal(journal) as tasks:
        assert tasks.task("T") is None
    assert echoed(store) == []


def test_a_full_run_whose_rows_hold_a_secret_variable_is_refused_and_keeps_none_of_it(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, SECRET_KEY, refs(3))
    write_goods(tmp_path / "goods.csv", refs(3), {"R02": WORD})
    journal = tmp_path / "journal.sqlite"
    refused = run(store, tmp_path, pool, journal, "--task", "T", env={"POOL_WORD": WORD})
    assert refused.returncode == 2
    assert SECRET_ROW.format(row=3, step=1) in refused.stderr
    assert WORD.encode() not in journal.read_bytes()
    assert plan_of(journal, "T") == ([], [])
    assert echoed(store) == []


def test_a_secret_variable_in_the_key_is_masked_in_the_plan_of_a_full_run(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, SECRET_KEY, refs(3))
    journal = tmp_path / "journal.sqlite"
    done = run(store, tmp_path, pool, journal, "--task", "T", env={"POOL_WORD": WORD})
    assert done.returncode == 0, done.stderr
    assert WORD.encode() not in journal.read_bytes()
    keys = [(c[1], c[4]) for c in plan_of(journal, "T")[0]]
    assert keys == [(i, f"echo-***-R{i:02d}") for i in range(3)]
    # The store got the real key.
    sent = [op["idempotency_key"] for op in store.ops() if op["command"] == "CmdEcho"]
    assert sent == [f"T:echo-{WORD}-R{i:02d}" for i in range(3)]


def test_a_full_run_refused_by_its_check_leaves_no_task_and_nothing_beside_the_journal(
        store: Store, tmp_path: Path) -> None:
    # More rows than the plan writes at a time, so some were written before the refusal.
    goods = [f"R{n:04d}" for n in range(2500)] + ["R0000"]
    pool = setup(tmp_path, PER_ROW, goods)
    folder = tmp_path / "journals"
    folder.mkdir()
    refused = run(store, tmp_path, pool, folder / "journal.sqlite", "--task", "T")
    assert refused.returncode == 2
    assert (f"rows 1 and 2501 of {tmp_path / 'goods.csv'} give one key [echo-R0000] - keys must be unique: "
            "the second call would be skipped as done. Put the field that tells the rows apart in the key."
            ) in refused.stderr
    assert store.ops() == []
    assert [p.name for p in folder.iterdir() if not p.name.startswith("journal.sqlite")] == []
    with SqliteTaskJournal(folder / "journal.sqlite") as tasks:
        assert tasks.task("T") is None
    assert plan_of(folder / "journal.sqlite", "T") == ([], [])
