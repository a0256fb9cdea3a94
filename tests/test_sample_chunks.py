"""Steps over rows through ``pooler run``: ``--sample N``, ``chunk``/``field``, and a jsonl field
written ``{"file": "rows.jsonl"}`` that pooler reads on this machine.  The store's ops show what
each call carried, so the rows are checked as they arrived, not as pooler says it sent them.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, answer_of, pooler

IMPORT = "MELBIS_AGENT_IMPORT_GOODS"


def write_csv(path: Path, count: int) -> list[dict[str, str]]:
    """``count`` goods as a CSV file; the rows as pooler reads them (CSV values are text)."""
    rows = [{"ref": f"r{n:04d}", "sku": f"S{n:04d}", "name": f"Goods {n}", "price": f"{n % 50}.{n % 100:02d}"}
            for n in range(1, count + 1)]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["ref", "sku", "name", "price"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def run(store: Store, tmp_path: Path, pool: Path, *extra: str,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token}, cwd=cwd)


def commands(store: Store) -> list[str]:
    return [f"{op['unit']}.{op['command']}" for op in store.ops()]


SAMPLED = """\
pool:
  - name: add
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {file: goods.csv}
    key: good-${row.sku}
    params: {sku: "${row.sku}", name: "${row.name}", price: "${row.price}"}
  - name: imp
    unit: MELBIS_AGENT_IMPORT_GOODS
    command: CmdAdd
    for_each: {file: goods.csv, chunk: 2, field: goods}
  - {name: last, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {sku: "@add.row.sku"}}
"""


def test_sample_runs_only_the_first_rows_of_every_step_over_rows(store: Store, tmp_path: Path) -> None:
    rows = write_csv(tmp_path / "goods.csv", 10)
    pool = tmp_path / "sampled.yaml"
    pool.write_text(SAMPLED, encoding="utf-8")
    proc = run(store, tmp_path, pool, "--sample", "3")
    assert proc.returncode == 0, proc.stderr
    answer = answer_of(proc)
    # 3 rows one by one, the same 3 rows in chunks of 2, and the step that is not over rows.
    assert (answer["total"], answer["succeeded"]) == (6, 6)
    assert [(s["name"], s["message"]) for s in answer["steps"]] == [
        ("add", "3 rows: 3 completed"), ("imp", "3 rows in 2 calls: 3 completed"),
        ("last", "The fields as received")]
    assert [s.get("calls") for s in answer["steps"]] == [3, 2, None]
    ops = store.ops()
    assert commands(store) == ["MELBIS_AGENT_STORE.CmdAdd"] * 3 + [f"{IMPORT}.CmdAdd"] * 2 + [
        "MELBIS_AGENT_TEST.CmdEcho"]
    assert [op["params"]["sku"] for op in ops[:3]] == ["S0001", "S0002", "S0003"]
    assert [op["params"]["goods"] for op in ops[3:5]] == [rows[:2], rows[2:3]]
    assert ops[5]["params"] == {"sku": "S0003"}


@pytest.mark.parametrize("count", [1234, 1000])
def test_chunks_of_500_carry_every_row_once_in_order(store: Store, tmp_path: Path, count: int) -> None:
    rows = write_csv(tmp_path / "goods.csv", count)
    pool = tmp_path / "chunked.yaml"
    pool.write_text("""\
pool:
  - name: imp
    unit: MELBIS_AGENT_IMPORT_GOODS
    command: CmdAdd
    key: import-${row.ref}
    for_each: {file: goods.csv, chunk: 500, field: goods}
""", encoding="utf-8")
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 0, proc.stderr
    answer = answer_of(proc)
    calls = math.ceil(count / 500)
    assert (answer["total"], answer["succeeded"]) == (calls, calls)
    spans = [[n, min(n + 499, count - 1)] for n in range(0, count, 500)]
    (summary,) = answer["steps"]
    assert (summary["calls"], summary["rows"]["total"], summary["rows"]["completed"]) == (calls, count, count)
    ops = store.ops()
    assert [op["idempotency_key"] for op in ops] == [
        f"{answer['task']}:import-{rows[a]['ref']}#{a}-{b}" for a, b in spans]
    assert [len(op["params"]["goods"]) for op in ops] == [b - a + 1 for a, b in spans]
    assert [row for op in ops for row in op["params"]["goods"]] == rows
    # The store's answer for each chunk lands in one table file, a row per goods.
    table = tmp_path / "out" / "tables" / f"step1.{IMPORT}.CmdAdd.goods.jsonl"
    refs = [json.loads(line)["ref"] for line in table.read_text(encoding="utf-8").splitlines()]
    assert refs == [row["ref"] for row in rows]


JSONL_ROWS: list[dict[str, Any]] = [
    {"ref": 1, "sku": "J-1", "name": "Tea", "price": 1.5},
    {"ref": 2, "sku": "J-2", "name": "Cup", "price": 3},
    {"ref": 3, "sku": "J-3", "name": "Pot \u00e0 th\u00e9", "price": "12.90"},
]


def test_a_jsonl_field_names_a_file_read_here_relative_to_the_pool(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "pools"
    (folder / "data").mkdir(parents=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in JSONL_ROWS[:2])
    # A blank line is no row; the last row ends without a newline.
    text += "\n" + json.dumps(JSONL_ROWS[2], ensure_ascii=False)
    (folder / "data" / "rows.jsonl").write_text(text, encoding="utf-8")
    pool = folder / "jsonl.yaml"
    pool.write_text("""\
pool:
  - {name: imp, unit: MELBIS_AGENT_IMPORT_GOODS, command: CmdAdd, params: {goods: {file: data/rows.jsonl}}}
""", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run(store, tmp_path, pool, cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    (entry,) = answer_of(proc)["steps"]
    assert entry["message"] == "3 goods imported: 3 added, 0 updated"
    # The store received the rows themselves, their types kept; the file's name never left.
    (op,) = store.ops()
    assert op["params"] == {"goods": JSONL_ROWS}
    # A pool checked against the store takes {"file": ...} for the jsonl field it declares.
    checked = pooler("check", str(pool), "--against", store.url, env={"POOLER_TOKEN": store.token})
    assert (checked.returncode, checked.stdout) == (0, f"1 file valid against {store.url}\n")


def test_a_missing_jsonl_file_refuses_the_pool_before_anything_is_sent(store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "missing.yaml"
    pool.write_text("""\
pool:
  - {name: first, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}}
  - {name: imp, unit: MELBIS_AGENT_IMPORT_GOODS, command: CmdAdd, params: {goods: {file: data/nope.jsonl}}}
""", encoding="utf-8")
    proc = run(store, tmp_path, pool)
    assert (f"No such file: {tmp_path / 'data' / 'nope.jsonl'} - params.goods.file of step 2 is read "
            "relative to the pool file's folder.") in proc.stderr
    assert (proc.returncode, store.ops()) == (2, [])
