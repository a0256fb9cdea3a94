"""A full run reads each data file once: the rows the check reads are staged beside the journal and
become the task's plan when the task is created, and the plan is the one a run planning from the
file itself records (keys, rows, secrets kept out).

Against the real reference store.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from helpers import Store, pooler
from test_task_plan import CHUNKED, PER_ROW, echoed, refs, setup, write_goods

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


def plan_of(journal: Path, task: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    db = sqlite3.connect(journal)
    try:
        rows = db.execute("SELECT num, row, key, data, done FROM plan_rows WHERE task = ? "
                          "ORDER BY num, row", (task,)).fetchall()
        files = db.execute("SELECT num, name, sha256, rows, chunk FROM plan_files WHERE task = ? "
                           "ORDER BY num", (task,)).fetchall()
    finally:
        db.close()
    return rows, files


def test_a_full_run_records_the_plan_a_sampled_run_reads_from_the_file(store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, CHUNKED, refs(12))
    (tmp_path / "full").mkdir()
    full = run(store, tmp_path, pool, tmp_path / "full" / "journal.sqlite", "--task", "T")
    assert full.returncode == 0, full.stderr
    sampled = run(store, tmp_path, pool, tmp_path / "sampled.sqlite", "--sample", "5", "--task", "T")
    assert sampled.returncode == 0, sampled.stderr
    rows, files = plan_of(tmp_path / "full" / "journal.sqlite", "T")
    # Every row of a chunk keyed by itself, as the plan of a sampled run keys it.
    assert [(n, r, k) for n, r, k, _, _ in rows] == [(1, i, f"imp-R{i:02d}") for i in range(12)]
    assert json.loads(str(rows[7][3])) == {"ref": "R07", "sku": "SKU-R07", "name": "item R07",
                                           "price": "1.00"}
    assert (rows, files) == plan_of(tmp_path / "sampled.sqlite", "T")
    # The stage is gone with the run: the journal's folder holds the journal alone.
    assert [p.name for p in (tmp_path / "full").iterdir() if not p.name.startswith("journal.sqlite")] == []


def test_a_full_run_whose_rows_hold_the_token_keeps_that_step_out_of_the_plan(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(3))
    write_goods(tmp_path / "goods.csv", refs(3), {"R01": store.token})
    journal = tmp_path / "journal.sqlite"
    done = run(store, tmp_path, pool, journal, "--task", "T")
    assert done.returncode == 0, done.stderr
    assert store.token.encode() not in journal.read_bytes()
    rows, files = plan_of(journal, "T")
    assert rows == []
    assert [f[0] for f in files] == [0]
    assert echoed(store) == [("R00", "item R00"), ("R01", store.token), ("R02", "item R02")]


def test_a_full_run_whose_rows_hold_a_secret_variable_stages_none_of_it(store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, SECRET_KEY, refs(3))
    write_goods(tmp_path / "goods.csv", refs(3), {"R02": WORD})
    journal = tmp_path / "journal.sqlite"
    done = run(store, tmp_path, pool, journal, "--task", "T", env={"POOL_WORD": WORD})
    assert done.returncode == 0, done.stderr
    assert WORD.encode() not in journal.read_bytes()
    assert plan_of(journal, "T")[0] == []
    assert [ref for ref, _ in echoed(store)] == ["R00", "R01", "R02"]


def test_a_secret_variable_in_the_key_is_masked_in_the_plan_of_a_full_run(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, SECRET_KEY, refs(3))
    journal = tmp_path / "journal.sqlite"
    done = run(store, tmp_path, pool, journal, "--task", "T", env={"POOL_WORD": WORD})
    assert done.returncode == 0, done.stderr
    assert WORD.encode() not in journal.read_bytes()
    keys = [(r, k) for _, r, k, _, _ in plan_of(journal, "T")[0]]
    assert keys == [(i, f"echo-***-R{i:02d}") for i in range(3)]


def test_a_full_run_refused_by_its_check_leaves_no_task_and_no_stage(store: Store, tmp_path: Path) -> None:
    # More rows than the stage writes a statement at a time, so its file was made before the refusal.
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
    assert list(folder.iterdir()) == []
