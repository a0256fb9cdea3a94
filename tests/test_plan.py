"""The dry-run plan reads data files from the folder the executor reads them from."""

from __future__ import annotations

from pathlib import Path

from helpers import pooler

from pooler.pool.datafiles import data_path
from pooler.pool.loader import load_pool_value


def test_a_pool_given_as_a_value_reads_data_files_from_its_base(tmp_path: Path) -> None:
    steps = [{"name": "imp", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
              "for_each": {"file": "rows.jsonl"}, "params": {"n": "@row.n"}}]
    pool = load_pool_value({"pool": steps}, file="<pool>", base=tmp_path)
    assert data_path(pool, "rows.jsonl") == tmp_path.absolute() / "rows.jsonl"
    assert data_path(pool, str(tmp_path / "x.csv")) == tmp_path / "x.csv"


def test_the_plain_plan_says_1_call_not_1_calls() -> None:
    proc = pooler("run", "pools/demo.yaml", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "  1. cur MELBIS_AGENT_CURRENCY.CmdAdd: 1 call;" in proc.stdout
    assert "1 calls" not in proc.stdout
