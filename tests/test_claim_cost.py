"""What a claim and a runner's tidy read of a task does not grow with the task's calls: the steps
are found by a seek each, and a step is weighed on its first ready call, so a night's import of a
million rows costs each of them what a small one does.  The work is counted by the database itself
(SQLite's virtual machine steps, PostgreSQL's buffers), not timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sharedkit import journal_of
from test_work_backends import Backend, call, plan

#: The queries a runner's tidy (``blocked``) and a parallel claim (``claimable_heads``) run.
QUERIES = {"blocked": {}, "claimable_heads": {"take": 16, "window": 32}}


#: Each journal and query measured.  PostgreSQL weighs how a claim looks at the steps a step
#: refers to by its statistics, and may read a small table whole for it; its steps and the first
#: ready call of each are sought all the same, as its tidy's case pins.
CASES = [pytest.param("sqlite", "blocked", id="sqlite-tidy"),
         pytest.param("sqlite", "claimable_heads", id="sqlite-parallel-claim"),
         pytest.param("postgres", "blocked", id="postgres-tidy", marks=pytest.mark.postgres)]


def work_done(backend: Backend, name: str, params: dict[str, Any]) -> int:
    """How much the database did to answer the query: SQLite's virtual machine steps (in hundreds),
    or the buffers PostgreSQL touched."""
    db: Any = backend.journal.db  # type: ignore[attr-defined]
    if backend.kind == "sqlite":
        from pooler.journal.sqlite.file import SQL  # noqa: PLC0415

        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        db._db.set_progress_handler(count, 100)
        try:
            db._db.execute(SQL[name], params).fetchall()
        finally:
            db._db.set_progress_handler(None, 100)
        return steps[0]
    from pooler.journal.postgres.schema import SQL as PG_SQL  # noqa: PLC0415

    with db.conn.transaction():
        (plan_doc,), = db.conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {PG_SQL[name]}", params)
    top = (plan_doc if isinstance(plan_doc, list) else json.loads(plan_doc))[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


def task_of(backend: Backend, task: str, calls: int) -> None:
    """A task of a step of ``calls`` calls, the first half of them done, and a step that refers
    to it: what a long import looks like halfway through."""
    plan(backend, [call(1, i, task=task) for i in range(calls)] + [call(2, 0, (1,), task=task)], task=task)
    backend.sql("UPDATE work SET state = 'done', status = 'completed' WHERE task = ? AND num = 1 AND idx < ?",
                task, calls // 2)


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_tidy_and_a_parallel_claim_read_no_more_of_twelve_thousand_calls_than_of_six_hundred(
        kind: str, name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    backend = Backend(kind, journal_of(kind, request, tmp_path))
    request.addfinalizer(backend.journal.close)
    task_of(backend, "small", 600)
    task_of(backend, "big", 12_000)
    if backend.kind == "postgres":
        # As autovacuum would after the plan's rows: the planner weighs the table it has.
        backend.sql("ANALYZE work")
    small = work_done(backend, name, {**QUERIES[name], "task": "small"})
    large = work_done(backend, name, {**QUERIES[name], "task": "big"})
    # Twenty times the calls; reading them all would cost some twenty times the work.
    assert large <= 2 * small + 20, (small, large)
