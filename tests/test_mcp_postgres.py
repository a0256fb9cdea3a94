"""``pooler mcp --journal postgresql://...``: tool_pool runs each pool as a shared task."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Store
from sharedkit import query
from test_mcp import answer_of, connect_in_process, ops_of, run

from pooler.journal.postgres.schema import upgrade

pytestmark = pytest.mark.postgres


def test_tool_pool_on_postgres_runs_a_pool_once_and_keeps_it_in_the_journal(store: Store, pg_url: str,
                                                                           tmp_path: Path) -> None:
    upgrade(pg_url)
    out = tmp_path / "out"
    pool = {"pool": [
        {"name": "a", "key": "echo-a", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}},
        {"name": "b", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"from": "@a.n"}},
    ]}

    async def scenario() -> None:
        async with connect_in_process(store, out, "--journal", pg_url, "--task", "agent") as session:
            first = answer_of(await session.call_tool("tool_pool", pool))
            second = answer_of(await session.call_tool("tool_pool", pool))
        assert [s["status"] for s in first["steps"]] == ["completed", "completed"]
        assert first["steps"][1]["detail"] == {"from": 1}
        # The same pool joins its task: its keyed call is skipped, with the first's outcome; the
        # unkeyed one is sent again, as on SQLite.
        assert [s["status"] for s in second["steps"]] == ["skipped", "completed"]
        assert {**second["steps"][0], "status": "completed"} == first["steps"][0]
        # The agent sees the session's task; the journal keeps the pool as a task of that session.
        assert first["task"] == second["task"] == "agent"
        assert len(ops_of(store, "MELBIS_AGENT_TEST")) == 3
        ((task, status),) = query(pg_url, "SELECT id, status FROM tasks")
        assert task.startswith("agent-")
        assert status == "completed"
        assert not (out / ".pooler" / "journal.sqlite").exists()
    run(scenario)


def test_a_plan_commits_once_on_postgres_too(store: Store, pg_url: str, tmp_path: Path) -> None:
    upgrade(pg_url)
    out = tmp_path / "out"
    pool = {"pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}]}

    async def scenario() -> None:
        async with connect_in_process(store, out, "--journal", pg_url, "--task", "planner") as session:
            planned = answer_of(await session.call_tool("tool_pool", {"plan": True, **pool}))
            first = answer_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            second = answer_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            found = answer_of(await session.call_tool("tool_pool", {"task": first["task"]}))
        assert first["result"] is True
        assert second == first
        assert found["steps"] == first["steps"]
        assert len(ops_of(store, "MELBIS_AGENT_TEST")) == 1
    run(scenario)


@pytest.mark.parametrize("journal", [pytest.param("sqlite", id="sqlite"),
                                     pytest.param("postgresql", id="postgresql")])
def test_a_key_one_pool_landed_is_skipped_by_another_pool_of_the_session_on_either_journal(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    extra: tuple[str, ...] = ()
    if journal == "postgresql":
        url: str = request.getfixturevalue("pg_url")
        upgrade(url)
        extra = ("--journal", url)
    out = tmp_path / "out"
    first = {"pool": [{"name": "a", "key": "k1", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
                       "params": {"n": 1}}]}
    second = {"pool": [
        {"name": "a", "key": "k1", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}},
        {"name": "b", "key": "k2", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
         "params": {"from": "@a.n"}},
    ]}

    async def scenario() -> None:
        async with connect_in_process(store, out, *extra) as session:
            one = answer_of(await session.call_tool("tool_pool", first))
            two = answer_of(await session.call_tool("tool_pool", second))
        assert [s["status"] for s in one["steps"]] == ["completed"]
        # The agent's second pool holds the first's keyed call again: it is not sent twice.
        assert [s["status"] for s in two["steps"]] == ["skipped", "completed"]
        assert two["steps"][0]["detail"] == one["steps"][0]["detail"]
        assert two["steps"][1]["detail"] == {"from": 1}
        assert [op["params"] for op in ops_of(store, "MELBIS_AGENT_TEST")] == [{"n": 1}, {"from": 1}]
    run(scenario)


@pytest.mark.process
def test_a_second_server_on_the_postgres_journal_answers_for_a_task_the_first_runs(
        store: Store, pg_url: str, tmp_path: Path) -> None:
    from mcpkit import http_server  # noqa: PLC0415
    from taskskit import call_tool, rpc  # noqa: PLC0415
    from test_mcp_tasks import done, poll  # noqa: PLC0415

    upgrade(pg_url)
    first_out, second_out = tmp_path / "a" / "out", tmp_path / "b" / "out"
    (first_out / "pools").mkdir(parents=True)
    second_out.mkdir(parents=True)
    (first_out / "pools" / "goods.csv").write_text("sku\n" + "".join(f"S-{n}\n" for n in range(300)),
                                                   encoding="utf-8")
    (first_out / "pools" / "rows.yaml").write_text(
        "pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, for_each: {file: goods.csv}, "
        "key: 'e-${row.sku}', params: {sku: '${row.sku}'}}\n", encoding="utf-8")
    with http_server(store, first_out, "--journal", pg_url) as first, \
            http_server(store, second_out, "--journal", pg_url) as second:
        created = call_tool(first.url, first.token, "pool_run", {"file": "pools/rows.yaml"})["result"]
        task_id = created["taskId"]
        seen = rpc(second.url, second.token, "tasks/get", {"taskId": task_id})["result"]
        assert seen["taskId"] == task_id
        assert seen["counts"]["planned"] == 300
        # The first server ends the pool; the second tells its end from the journal.
        told = poll(second, task_id, done)[-1]
    assert told["status"] == "completed"
    assert told["counts"]["completed"] == 300
    assert told["result"]["structuredContent"]["result"] is True
    assert len(ops_of(store, "MELBIS_AGENT_TEST")) == 300
