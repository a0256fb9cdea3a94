"""What a claim and a runner's tidy read of a task does not grow with the task's calls: the steps
are found by a seek each, and a step is weighed on its first ready call, so a night's import of a
million rows costs each of them what a small one does.  The work is counted by the database itself
(SQLite's virtual machine steps, PostgreSQL's buffers), not timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import start_store
from sharedkit import journal_of, start_runner, wait_for
from test_work_backends import Backend, call, plan

#: The queries a runner's tidy (``blocked``) and a parallel claim (``claimable_heads``) run.
QUERIES = {"blocked": {}, "claimable_heads": {"take": 16, "window": 32}}


#: Each journal and query measured.  PostgreSQL weighs how a claim looks at the steps a step
#: refers to by its statistics, and may read a small table whole for it; its steps and the first
#: ready call of each are sought all the same, as its tidy's case pins.
CASES = [pytest.param("sqlite", "blocked", id="sqlite-tidy"),
         pytest.param("sqlite", "claimable_heads", id="sqlite-parallel-claim"),
         pytest.param("postgres", "blocked", id="postgres-tidy", marks=pytest.mark.postgres)]


def work_done(backend: Backend, name: str, params: dict[str, Any], *, passed_over: bool = False) -> int:
    """How much the database did to answer the query: SQLite's virtual machine steps (in hundreds),
    or the buffers PostgreSQL touched (``passed_over``: the rows it read and threw away)."""
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
    if passed_over:
        return thrown_away(top)
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


def thrown_away(node: dict[str, Any]) -> int:
    """The rows a plan's nodes read and did not keep (a filter's), over all their loops."""
    own = int(node.get("Rows Removed by Filter", 0)) * int(node.get("Actual Loops", 1))
    return own + sum(thrown_away(child) for child in node.get("Plans", []))


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


#: A sequential claim (its call and what it weighs, one statement) and a claim of the first calls
#: in file order.
TASK = "20261206-120001-3fa2c1"
CLAIMS: dict[str, dict[str, Any]] = {"claim_next": {"runner": "r", "now": 0.0, "take": 1},
                                     "claimable": {"take": 16}}


@pytest.mark.parametrize("name", list(CLAIMS))
def test_a_claim_of_a_task_half_done_reads_no_more_of_twelve_thousand_calls_than_of_six_hundred(
        name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    backend = Backend("sqlite", journal_of("sqlite", request, tmp_path))
    request.addfinalizer(backend.journal.close)
    task_of(backend, "small", 600)
    task_of(backend, "big", 12_000)
    small = work_done(backend, name, {**CLAIMS[name], "task": "small"})
    large = work_done(backend, name, {**CLAIMS[name], "task": "big"})
    assert large <= 2 * small + 20, (small, large)


@pytest.mark.process
@pytest.mark.postgres
def test_a_claim_of_a_long_import_on_postgresql_passes_over_none_of_the_calls_done(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    # A real run, as the planner's statistics are left by it: told of the rows once they were
    # planned, every call ready. Weighed so, reading the calls in file order and passing over the
    # done ones looked as cheap as a seek, and each claim passed over every call done so far
    # (the ids of the task, as long as a task's own, weigh in the choice).
    url = journal_of("postgres", request, tmp_path)
    store = start_store(tmp_path / "s")
    request.addfinalizer(store.stop)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"sku": f"S{i:07d}", "n": i}) + "\n" for i in range(20_000)))
    pool = tmp_path / "import.json"
    pool.write_text(json.dumps({"include_results": False, "pool": [{
        "name": "add", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "key": "k-${row.sku}",
        "for_each": {"file": str(rows)}, "params": {"sku": "${row.sku}", "n": "${row.n}"}}]}))
    # Quiet: nothing reads what it says until it ends.
    runner = start_runner(pool, store, url, TASK, tmp_path / "out", "--quiet")
    request.addfinalizer(runner.kill)
    backend = Backend("postgres", url)
    request.addfinalizer(backend.journal.close)

    def done() -> int:
        return int(backend.sql("SELECT count(*) FROM work WHERE task = ? AND state = 'done'", TASK)[0][0])

    wait_for(lambda: done() >= 1_000, timeout=300, poll=0.2, running=[runner])
    for name, params in CLAIMS.items():
        passed = work_done(backend, name, {**params, "task": TASK}, passed_over=True)
        # The calls the runner has in flight, at most, may come first.
        assert passed <= 2, (name, passed)
