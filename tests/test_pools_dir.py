"""Every pool file in pools/ runs with exit 0 against a fresh reference store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ROOT, Store, answer_of, pooler

POOLS = sorted(p for p in (ROOT / "pools").iterdir() if p.suffix in (".yaml", ".yml", ".json"))
#: vars.yaml reads its secret from the environment, as its comment says.
ENV = {"SHOP_SIGNATURE": "pools-dir-signature-0451"}


def test_the_pools_the_readme_names_are_there() -> None:
    names = {p.name for p in POOLS}
    assert {"demo.yaml", "currency.json", "import.yaml", "import-chunked.yaml", "report.yaml",
            "orders.yaml", "vars.yaml"} <= names


@pytest.mark.parametrize("pool", [p for p in POOLS if p.suffix != ".json"], ids=lambda p: p.name)
def test_every_yaml_pool_names_the_schema_for_editors(pool: Path) -> None:
    assert pool.read_text().splitlines()[0] == "# yaml-language-server: $schema=../schemas/pool.schema.json"


def test_the_currency_pool_is_the_seed_example_unchanged() -> None:
    assert json.loads((ROOT / "pools" / "currency.json").read_text()) == {"pool": [
        {"name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
         "params": {"skey": "EUR", "name": "Euro", "multiplex": 44.2}},
        {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdPos",
         "params": {"type": "POS", "data": [{"id": "@cur.id"}]}},
    ]}


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: p.name)
def test_every_pool_runs_against_a_fresh_store(pool: Path, store: Store, tmp_path: Path) -> None:
    proc = pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"),
                  env={"POOLER_TOKEN": store.token, **ENV}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = answer_of(proc)
    assert answer["result"] is True
    assert answer["status"] == "completed"
    assert answer["failed"] == answer["not_run"] == 0
    assert answer["succeeded"] == answer["total"] == len(store.ops())


def test_import_adds_every_row_once_and_reports_the_ids(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    common = ["--store", store.url, "--json", "--out", str(out), "--journal", str(tmp_path / "j.sqlite")]
    env = {"POOLER_TOKEN": store.token}
    answer = answer_of(pooler("run", str(ROOT / "pools" / "import.yaml"), *common, "--task", "import-1",
                              env=env, timeout=300))
    assert answer["total"] == 1200 + 1 + 3
    ops = store.ops()
    added = {op["params"]["sku"] for op in ops if op["command"] == "CmdAdd"}
    assert len(added) == 1200
    # The report received every id the store gave, 500 to a call.
    reports = [op["params"]["goods"] for op in ops if op["command"] == "CmdEcho"]
    assert [len(r) for r in reports] == [500, 500, 200]
    listed = (out / "tables" / "step2.MELBIS_AGENT_STORE.CmdList.goods.jsonl").read_text().splitlines()
    assert sorted(row["id"] for r in reports for row in r) == sorted(json.loads(x)["id"] for x in listed)
    # A rerun of the task skips every row already added: the store adds nothing twice.
    again = answer_of(pooler("run", str(ROOT / "pools" / "import.yaml"), *common, "--task", "import-1",
                             env=env, timeout=300))
    assert again["skipped"] == 1200
    adds = [op for op in store.ops() if op["command"] == "CmdAdd"]
    assert len(adds) == 1200


def test_chunked_import_sends_three_calls_and_fills_the_job(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    answer = answer_of(pooler("run", str(ROOT / "pools" / "import-chunked.yaml"), "--store", store.url,
                              "--json", "--out", str(out), "--journal", str(tmp_path / "j.sqlite"),
                              env={"POOLER_TOKEN": store.token}))
    (summary,) = answer["steps"]
    assert (summary["calls"], summary["rows"]["total"]) == (3, 1200)
    assert summary["message"] == "1,200 rows in 3 calls: 1,200 completed"
    assert [len(op["params"]["goods"]) for op in store.ops()] == [500, 500, 200]
    job = (out / "imported.goods.jsonl").read_text().splitlines()
    assert len(job) == 1200
    assert json.loads(job[0])["ref"] == "r0001"


def test_orders_on_one_contract_never_overlap(store: Store, tmp_path: Path) -> None:
    answer = answer_of(pooler("run", str(ROOT / "pools" / "orders.yaml"), "--store", store.url, "--json",
                              "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite"),
                              env={"POOLER_TOKEN": store.token}))
    assert answer["succeeded"] == 8
    # The store refuses a second order on a contract while one is booked: none was refused.
    (orders,) = answer["steps"]
    assert (orders["status"], orders["message"], orders["failures"]) == (
        "completed", "8 rows: 8 completed", [])
    keys = sorted(op["idempotency_key"] for op in store.ops())
    assert keys[0] == f"{answer['task']}:PO-4600008975-1"
