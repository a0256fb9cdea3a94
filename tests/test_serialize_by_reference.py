"""A ``serialize_on`` value that a reference gives is known only once a call's params are
resolved: the runner that resolves them gates the call with it, and no other call of that value,
on any runner of the task, is in flight meanwhile.  On either journal, with two runner processes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from sharedkit import finish, journal_of, query, start_runner, write_pool

JOURNALS = [pytest.param("sqlite", id="sqlite", marks=pytest.mark.process),
            pytest.param("postgresql", id="postgresql", marks=[pytest.mark.postgres, pytest.mark.process])]


def senders(where: str) -> int:
    """How many runners sent the orders (the steps after the first two)."""
    sql = "SELECT count(DISTINCT runner) FROM work WHERE task = 't' AND num > 2"
    if where.startswith("postgresql"):
        return int(query(where, sql)[0][0])
    with sqlite3.connect(where) as conn:
        return int(conn.execute(sql).fetchone()[0])


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_serialize_on_value_a_reference_gives_is_held_across_runners(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    # Two steps give the same contract; 12 orders take it from one or the other, 4 more name it.
    lines = ["mode: parallel", "max_concurrency: 8", "serialize_on: contract", "stop_on_error: false",
             "pool:",
             "  - {name: a, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {contract: '4004100'}}",
             "  - {name: b, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {contract: '4004100'}}"]
    for i in range(16):
        contract = "'4004100'" if i % 4 == 3 else ("'@a.contract'" if i % 2 else "'@b.contract'")
        lines.append(f"  - {{unit: MELBIS_AGENT_ORDER, command: CmdAdd, key: order-{i}, "
                     f"params: {{contract: {contract}, qty: {i + 1}}}}}")
    # Two copies of the pool: one run at a time holds a pool file on a host.
    pools = [write_pool(tmp_path / f"host{i}", lines) for i in range(2)]
    runners = [start_runner(pool, store, where, "t", tmp_path / f"out{i}", "--width", "4")
               for i, pool in enumerate(pools)]
    results = [finish(r) for r in runners]
    assert [code for code, _, _ in results] == [0, 0], [err for *_, err in results]
    answer = results[0][1]
    assert answer is not None
    # The store refuses a second order on a busy contract: none was refused, so none overlapped.
    assert [e["status"] for e in answer["steps"]] == ["completed"] * 18
    assert len([op for op in store.ops() if op["command"] == "CmdAdd"]) == 16
    # Both runners sent orders: the value was held between them, not by one runner taking all.
    assert senders(where) == 2
