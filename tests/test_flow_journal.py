"""What each runner's flow control did in a run (``record_flow``), kept by either journal for the
task's report: under the run the journal has the task in, in the order recorded, read back by the
task journal and by the history the report reads, and gone with the task."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sharedkit import journal_of, query

from pooler.journal.prune import prune
from pooler.journal.records import FlowDoc
from pooler.journal.sqlite.tasks import SqliteTaskJournal
from pooler.journal.work import TaskJournal

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


def flow(runner: str, width: int, *, run: int = 99) -> FlowDoc:
    """A runner's document; ``run`` is what the runner thought, which the journal does not keep."""
    return {"run": run, "runner": runner, "seconds": [[1_800_000_000, 5, 1, 0, 0, 250, width]],
            "events": [{"at": 1_800_000_000.5, "what": "cut",
                        "line": f"width {width + 1} -> {width}: a busy answer"}],
            "throttled_ms": 250, "highest": width + 1, "final": width, "busy": 1, "trips": 0}


@pytest.fixture(params=JOURNALS)
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, TaskJournal]]:
    kind = request.param
    where = journal_of(kind, request, tmp_path)
    if kind == "sqlite":
        opened: TaskJournal = SqliteTaskJournal(where)
    else:
        from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415

        opened = PgJournal(where)
    with opened.creating("t", "/pool.yaml", {"steps": []}) as write:
        assert write is not None
    yield kind, where, opened
    opened.close()


def runs_and_runners(flows: list[FlowDoc]) -> list[tuple[int, str, int]]:
    return [(f["run"], f["runner"], f["final"]) for f in flows]


def test_two_runners_docs_are_read_back_in_the_order_recorded_under_the_tasks_run(
        journal: tuple[str, str, TaskJournal]) -> None:
    _, _, tasks = journal
    run = tasks.run_of("t")
    tasks.record_flow("t", flow("r-b", 3))
    tasks.record_flow("t", flow("r-a", 2))
    assert runs_and_runners(tasks.flows("t")) == [(run, "r-b", 3), (run, "r-a", 2)]
    read = tasks.history().flows("t")
    assert read == tasks.flows("t")
    assert read[0] == {**flow("r-b", 3), "run": run}


def test_a_task_started_again_keeps_the_docs_of_its_earlier_run(
        journal: tuple[str, str, TaskJournal]) -> None:
    _, _, tasks = journal
    first = tasks.run_of("t")
    tasks.record_flow("t", flow("r-1", 4, run=first))
    # No runner holds the task: joining it starts its next run.
    assert tasks.join("t", "retry") is True
    second = tasks.run_of("t")
    assert second > first
    tasks.record_flow("t", flow("r-2", 1, run=first))
    tasks.record_flow("t", flow("r-3", 5, run=first))
    assert runs_and_runners(tasks.history().flows("t")) == [(first, "r-1", 4), (second, "r-2", 1),
                                                            (second, "r-3", 5)]


def test_a_task_the_journal_does_not_hold_records_no_flow(journal: tuple[str, str, TaskJournal]) -> None:
    _, _, tasks = journal
    tasks.record_flow("elsewhere", flow("r-1", 2))
    assert tasks.flows("elsewhere") == []
    assert tasks.flows("t") == []


def test_a_pruned_or_deleted_task_drops_its_flows(journal: tuple[str, str, TaskJournal]) -> None:
    kind, where, tasks = journal
    tasks.record_flow("t", flow("r-1", 2))
    tasks.finish_task("t", {"result": True}, "completed")
    tasks.close()
    if kind == "sqlite":
        # A cut-off after the task ended: the task is older than it.
        assert prune(Path(where), 0, now=time.time() + 3600).tasks == 1
        with SqliteTaskJournal(where) as opened:
            left: list[Any] = opened.query("SELECT count(*) FROM flows")
    else:
        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute("DELETE FROM tasks WHERE id = 't'")
        left = query(where, "SELECT count(*) FROM flows")
    assert left == [(0,)]
