"""The claim hands out the calls of steps that do not wait for each other side by side: in a
parallel pool a step that refers to nothing is sent at once, not after every row of the steps
before it (the dry run's promise: "a step waits only for the steps it refers to").  On both journals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sharedkit import journal_of, run_here, write_pool

ROWS = 40
WIDTH = 4
JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_step_that_refers_to_nothing_is_sent_beside_the_rows_of_the_step_before_it(
        journal: str, store_factory: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    slow = store_factory("--latency-ms", "20")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(ROWS)))
    pool = write_pool(tmp_path, [
        f"mode: parallel\nmax_concurrency: {WIDTH}\npool:",
        "  - {name: many, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: '${row.n}'},",
        "     for_each: {file: rows.jsonl}}",
        "  - {name: lone, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {lone: true}}",
    ])
    code, answer, err = run_here(pool, slow, journal_of(journal, request, tmp_path), "t1", tmp_path / "out")
    assert code == 0, err
    assert answer["succeeded"] == ROWS + 1
    order = [op["params"].get("n", "lone") for op in slow.ops()]
    # The store's order of work: the lone call reached it among the first calls, long before the
    # last rows of the step before it (file order alone sent it after all but the last few).
    assert order.index("lone") < ROWS // 2, order
