"""A task run again sends again a step it cannot tell apart from a new call (completed without a
key, failed, not run): a step over that step's table gets its calls from the table the step gives
this time, never from the one it gave before.  On either journal.

The pool adds goods (keyed), lists the store's goods (no key: sent again by every run), and
echoes each listed sku (``report``).  A sample of 3 rows, then the full run of the task: the
catalogue lists 6 goods the second time, and the report is made of those 6.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from sharedkit import journal_of, run_here, write_pool

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]
SKUS = [f"S-{n}" for n in range(6)]


def import_pool(folder: Path, report: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "goods.jsonl").write_text("".join(json.dumps({"sku": s}) + "\n" for s in SKUS))
    return write_pool(folder, [
        "pool:",
        "  - {name: add, unit: MELBIS_AGENT_STORE, command: CmdAdd, key: 'g-${row.sku}',",
        "     params: {sku: '${row.sku}', name: 'Goods ${row.sku}'}, for_each: {file: goods.jsonl}}",
        "  - {name: catalogue, unit: MELBIS_AGENT_STORE, command: CmdList}",
        *report,
    ])


def reported(store: Store) -> Counter[str]:
    """How many times the store echoed each sku."""
    return Counter(op["params"]["sku"] for op in store.ops() if op["command"] == "CmdEcho")


def step(answer: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in answer["steps"] if s.get("name") == name)


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_keyed_step_over_a_table_sent_again_sends_only_the_rows_it_has_not_done(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = import_pool(tmp_path, [
        "  - {name: report, unit: MELBIS_AGENT_TEST, command: CmdEcho, key: 'r-${row.sku}',",
        "     params: {sku: '${row.sku}'}, for_each: {step: catalogue, table: goods}}"])
    code, first, err = run_here(pool, store, where, "t", tmp_path / "out", "--sample", "3")
    assert code == 0, err
    assert step(first, "report")["rows"]["total"] == 3
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    # The catalogue, unkeyed, was listed again (6 goods): the report is made of that table.
    rows = step(answer, "report")["rows"]
    assert (rows["total"], rows["completed"], rows["skipped"]) == (6, 3, 3)
    assert (answer["total"], answer["succeeded"], answer["skipped"]) == (13, 7, 6)
    # The rows it did keep their keys: each sku echoed once, across both runs.
    assert reported(store) == Counter(SKUS)


@pytest.mark.parametrize("journal", JOURNALS)
def test_an_unkeyed_step_over_a_table_sent_again_sends_every_row_of_the_new_table(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = import_pool(tmp_path, [
        "  - {name: report, unit: MELBIS_AGENT_TEST, command: CmdEcho,",
        "     params: {report: goods}, for_each: {step: catalogue, table: goods, chunk: 4, field: goods}}"])
    code, _, err = run_here(pool, store, where, "t", tmp_path / "out", "--sample", "3")
    assert code == 0, err
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    report = step(answer, "report")
    # 6 rows in chunks of 4: two calls, neither the chunk of 3 the sample's table made.
    assert (report["rows"]["total"], report["rows"]["completed"], report["calls"]) == (6, 6, 2)
    echoed = [op["params"]["goods"] for op in store.ops() if op["command"] == "CmdEcho"]
    assert [[g["sku"] for g in chunk] for chunk in echoed] == [SKUS[:3], SKUS[:4], SKUS[4:]]


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_step_over_the_table_of_a_step_made_again_is_made_again_from_its_new_rows_alone(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    # Each listed sku gives a table of one row (``lines``), and ``check`` echoes every such row.
    pool = import_pool(tmp_path, [
        "  - {name: lines, unit: MELBIS_AGENT_TEST, command: CmdTable, params: {rows: 1, width: 3},",
        "     for_each: {step: catalogue, table: goods}}",
        "  - {name: check, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {sku: line},",
        "     for_each: {step: lines, table: rows}}"])
    code, first, err = run_here(pool, store, where, "t", tmp_path / "out", "--sample", "3")
    assert code == 0, err
    assert (step(first, "lines")["calls"], step(first, "check")["calls"]) == (3, 3)
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    # The rows the first run's ``lines`` gave are not read again beside those of this run.
    assert (step(answer, "lines")["calls"], step(answer, "check")["calls"]) == (6, 6)
    assert (answer["total"], answer["succeeded"], answer["skipped"]) == (19, 16, 3)
