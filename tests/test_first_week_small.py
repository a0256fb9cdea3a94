"""Small things an operator meets in the first week: exit statuses, one masking number, counts."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from helpers import ROOT, Store, answer_of, pooler


def run(store: Store, tmp_path: Path, pool: Path, *extra: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token, **(env or {})})


def test_check_against_a_store_out_of_reach_vouches_for_nothing_and_exits_2(tmp_path: Path) -> None:
    down = "http://127.0.0.1:9"
    proc = pooler("check", str(ROOT / "pools" / "demo.yaml"), "--against", down,
                  env={"POOLER_TOKEN": "t0k3n-never-shown-000"})
    assert proc.returncode == 2
    assert proc.stderr == (
        f"pooler: cannot reach the store at {down}/: connection refused - the pools were not checked "
        "against it, so none is vouched for; to check without the store, save its tool_list once "
        "('pooler tools --json > shop-tools.json') and give --against shop-tools.json\n")
    document = answer_of(pooler("check", str(ROOT / "pools" / "demo.yaml"), "--against", down, "--json",
                                env={"POOLER_TOKEN": "t0k3n-never-shown-000"}))
    assert (document["exit"], document["status"]) == (2, "refused")


def echo_pool(tmp_path: Path, secret: str) -> Path:
    pool = {"vars": {"pin": {"default": secret, "secret": True}},
            "pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"said": "${pin}"}}]}
    path = tmp_path / "echo.json"
    path.write_text(json.dumps(pool), encoding="utf-8")
    return path


def test_the_short_secret_warning_names_the_length_the_masking_rule_uses(store: Store,
                                                                         tmp_path: Path) -> None:
    # 10 characters: masked only as a whole word (the rule's number is 12), so it is warned about.
    proc = run(store, tmp_path, echo_pool(tmp_path, "pin-012345"))
    assert proc.returncode == 0, proc.stderr
    assert ("pooler: WARNING: the secret variable [pin] is 10 characters long - it is masked as *** only "
            "where it stands as a whole word, and so is the same word anywhere in the store's data; a "
            "secret of 12 characters or more is masked wherever it appears.") in proc.stderr
    quiet = run(store, tmp_path, echo_pool(tmp_path, "pin-0123456789"))
    assert quiet.returncode == 0, quiet.stderr
    assert "WARNING" not in quiet.stderr


def test_a_count_of_one_is_said_in_the_singular(store: Store, tmp_path: Path) -> None:
    call = pooler("call", "MELBIS_AGENT_TEST", "CmdTable", "--params", '{"rows": 1}', "--store", store.url,
                  "--out", str(tmp_path / "out"), env={"POOLER_TOKEN": store.token})
    assert call.returncode == 0, call.stderr
    table = f"{tmp_path / 'out'}/tables/MELBIS_AGENT_TEST.CmdTable.rows.jsonl"
    assert f"table rows: 1 row -> {table}\n" in call.stdout
    (tmp_path / "one.csv").write_text("sku\nA-1\n", encoding="utf-8")
    many = "\n".join(["sku", *(f"B-{n}" for n in range(1200))]) + "\n"
    (tmp_path / "many.csv").write_text(many, encoding="utf-8")
    pool = {"pool": [
        {"name": "one", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "for_each": {"file": "one.csv"},
         "params": {"sku": "${row.sku}"}},
        {"name": "many", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "for_each": {"file": "many.csv"},
         "params": {"sku": "${row.sku}"}}]}
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(pool), encoding="utf-8")
    dry = run(store, tmp_path, path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"dry run of {path}: 1,201 calls, nothing is sent\n" in dry.stdout
    assert "  1. one MELBIS_AGENT_TEST.CmdEcho: 1 call; 1 row of one.csv\n" in dry.stdout
    assert ("  2. many MELBIS_AGENT_TEST.CmdEcho: 1,200 calls; 1,200 rows of many.csv; "
            "waits for one (order)\n") in dry.stdout


IMPORT = """\
pool:
  - name: add
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {file: goods.csv}
    key: goods-${row.sku}
    params: {sku: "${row.sku}", name: "${row.name}"}
  - name: catalogue
    unit: MELBIS_AGENT_STORE
    command: CmdList
  - name: report
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {step: catalogue, table: goods, chunk: 5, field: goods}
    params: {report: imported goods}
"""


def test_a_resumed_import_never_shows_a_total_it_takes_back(store: Store, tmp_path: Path) -> None:
    rows = "\n".join(["sku,name", *(f"S-{n:02},thing {n}" for n in range(12))]) + "\n"
    (tmp_path / "goods.csv").write_text(rows, encoding="utf-8")
    pool = tmp_path / "import.yaml"
    pool.write_text(IMPORT, encoding="utf-8")
    assert run(store, tmp_path, pool, "--sample", "3").returncode == 0
    proc = run(store, tmp_path, pool, "--resume")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.search(r"task \S+: 14 calls planned, or more: a step over a table counts its calls when it "
                     r"starts$", lines[0]), lines[0]
    totals = [m.group(1) for m in re.finditer(r" call \d+/(\d+\+?) step", proc.stdout)]
    # 12 rows and the catalogue are counted before the run; the report's 3 chunks when it starts.
    assert totals == ["14+"] * 13 + ["16"] * 3
