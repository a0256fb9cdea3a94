"""A task is running, to every reader of its journal, until its runner has recorded its answer: a
runner's lease ended while the task is still running tells another MCP server's tasks/get and
``pooler runs`` that the run died."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from sharedkit import journal_of, run_here

import pooler.run.executor as executor
from pooler.journal.opening import open_journal
from pooler.run.taskanswer import WorkTasks, task_answer
from pooler.statuses import TaskStatus


@pytest.mark.parametrize("kind", [pytest.param("sqlite", id="sqlite"),
                                  pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)])
def test_a_task_whose_answer_is_being_made_is_running_to_another_reader(
        kind: str, store: Store, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n" + "".join(f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, key: k{n}, "
                                        f"params: {{n: {n}}}}}\n" for n in range(3)), encoding="utf-8")
    journal = journal_of(kind, request, tmp_path)
    told: list[tuple[str, int]] = []

    def answer_told_meanwhile(at: Any, task: str, *args: Any, **kwargs: Any) -> Any:
        # What another process of the journal reads while the runner makes the task's answer.
        other = open_journal(journal)
        try:
            row = WorkTasks(other).task(task)
            assert row is not None
            told.append((row.status, other.live_runners(task)))
        finally:
            other.close()
        return task_answer(at, task, *args, **kwargs)

    monkeypatch.setattr(executor, "task_answer", answer_told_meanwhile)
    code, answer, err = run_here(pool, store, journal, "night", tmp_path / "out")
    assert code == 0, err
    assert answer["status"] == "completed"
    assert told == [(TaskStatus.RUNNING, 1)]
    # Once it has ended, its runner is gone and the task is told as it ended.
    after = open_journal(journal)
    try:
        row = WorkTasks(after).task("night")
        assert row is not None
        assert (row.status, after.live_runners("night")) == (TaskStatus.COMPLETED, 0)
    finally:
        after.close()
