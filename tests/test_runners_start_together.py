"""Runners started together on one task take part in one run: the lease of each is taken in the
transaction that creates or joins the task, so none finds the task without a live runner while
another has joined it and begins a run of it again (which would leave the first one's calls in
doubt).  On either journal, with runner processes started at once."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from sharedkit import finish, journal_of, query, start_runner, write_pool

JOURNALS = [pytest.param("sqlite", id="sqlite", marks=pytest.mark.process),
            pytest.param("postgresql", id="postgresql", marks=[pytest.mark.postgres, pytest.mark.process])]
CALLS = 40
RUNNERS = 3


def task_runs(where: str) -> tuple[int, ...]:
    """The run the task is in (``again``: the count of runners that had joined it when that run
    began, so not one more a run), the runners that joined it, and the runners it still has."""
    sql = "SELECT again, runs, (SELECT count(*) FROM runners WHERE task = 't') FROM tasks WHERE id = 't'"
    if where.startswith("postgresql"):
        return tuple(query(where, sql)[0])
    with sqlite3.connect(where) as conn:
        return tuple(conn.execute(sql).fetchone())


def start_together(tmp_path: Path, store: Store, where: str, phase: str, *extra: str
                   ) -> list[subprocess.Popen[str]]:
    lines = ["mode: parallel", "max_concurrency: 6", "pool:",
             "  - unit: MELBIS_AGENT_TEST",
             "    command: CmdSleep",
             "    for_each: {file: ../rows.csv}",
             "    key: nap-${row.ms}",
             # A call takes a while (its row's ms, each its own), so that the runners' runs overlap.
             "    params: {ms: '${row.ms}'}"]
    # A copy of the pool for each: one run at a time holds a pool file on a host.
    pools = [write_pool(tmp_path / f"{phase}-host{i}", lines) for i in range(RUNNERS)]
    return [start_runner(pool, store, where, "t", tmp_path / f"{phase}-out{i}", "--width", "2",
                         "--in-doubt", "stop", *extra) for i, pool in enumerate(pools)]


def carried_out(store: Store) -> list[int]:
    return sorted(int(op["params"]["ms"]) for op in store.ops() if op["command"] == "CmdSleep")


@pytest.mark.parametrize("journal", JOURNALS)
def test_runners_started_together_on_a_new_task_and_on_its_run_again_send_every_call_once_in_one_run(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    (tmp_path / "rows.csv").write_text("ms\n" + "".join(f"{20 + i}\n" for i in range(CALLS)))
    results = [finish(r) for r in start_together(tmp_path, store, where, "new", "--sample", "5")]
    assert [code for code, _, _ in results] == [0] * RUNNERS, [err for *_, err in results]
    assert carried_out(store) == list(range(20, 25))
    # A runner that joins once the others have ended begins a run of its own: that is all.
    first, joined, left = task_runs(where)
    assert 1 <= first <= joined == RUNNERS
    assert left == 0
    # The full run: a run again of the task, begun by whichever joined first, the others in it.
    results = [finish(r) for r in start_together(tmp_path, store, where, "full")]
    assert [code for code, _, _ in results] == [0] * RUNNERS, [err for *_, err in results]
    assert carried_out(store) == list(range(20, 20 + CALLS))
    # A runner whose process starts late on a busy machine may find the others gone and begin a
    # run of its own (numbered after the runners that joined before it), sending nothing done.
    again, joined, left = task_runs(where)
    assert first < again <= joined == 2 * RUNNERS
    assert left == 0
    answers = [answer for _, answer, _ in results if answer is not None]
    assert all(a["result"] is True for a in answers)
    assert all(a["status"] == "completed" and a["failed"] == 0 for a in answers)
    assert all(s["status"] != "in_doubt" for a in answers for s in a["steps"])
