"""``pool_run {"plan": true}`` and its commit: the plan ``pooler plan`` writes, of a pool file with
``compare:``, its calls counted new, changed and unchanged; committed once as ``pooler apply``
applies a plan (refused when stale, a row moved since the plan being a conflict, not sent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Store
from mcpkit import answer_of, connect_in_process, http_server, text_of
from sharedkit import journal_of
from taskskit import call_tool
from test_compare import JOURNALS, feed_pool, imports, sku, stock
from test_mcp_tasks import confirm, done, poll, result_of


def feed(out: Path, rows: int) -> Path:
    """A feed of ``rows`` goods in the store folder, one call a row."""
    pool = feed_pool(out / "pools", rows=rows)
    pool.write_text(pool.read_text().replace("chunk: 100, field: goods", "chunk: 1, field: goods"))
    return pool


def sent_skus(store: Store) -> list[str]:
    return sorted(row["sku"] for chunk in imports(store) for row in chunk)


def server_args(journal: str, request: Any, tmp_path: Path) -> tuple[str, ...]:
    return ("--journal", journal_of(journal, request, tmp_path)) if journal == "postgresql" else ()


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_plan_of_a_compare_pool_counts_its_classes_and_its_commit_sends_only_new_and_changed_once(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # The store holds the first 10 goods of the feed, 0 and 1 at another price: 2 new, 2 changed.
    stock(store, held=10, repriced=2)
    pool = feed(out, rows=12)

    async def scenario() -> tuple[dict[str, Any], list[str], dict[str, Any], dict[str, Any], list[str]]:
        async with connect_in_process(store, out, *server_args(journal, request, tmp_path)) as session:
            planned = answer_of(await session.call_tool("pool_run", {"file": str(pool), "plan": True}))
            before = sent_skus(store)
            first = answer_of(await session.call_tool("pool_run", {"plan_id": planned["plan_id"]}))
            sent = sent_skus(store)
            second = answer_of(await session.call_tool("pool_run", {"plan_id": planned["plan_id"]}))
            return planned, before, first, second, sent

    planned, before, first, second, sent = anyio.run(scenario)
    assert planned["status"] == "planned"
    assert planned["compare"] == {"new": 2, "changed": 2, "unchanged": 8}
    assert planned["steps"][0]["compare"] == {"new": 2, "changed": 2, "unchanged": 8}
    assert planned["calls"] == planned["steps"][0]["calls"] == 4
    assert planned["message"] == (
        f"Nothing was sent: 4 calls (2 new, 2 changed, 8 unchanged) planned. Commit with pool_run "
        f"{{\"plan_id\": \"{planned['plan_id']}\"}} before {planned['expires']}: it makes these calls once, "
        "however often the commit is sent.")
    assert before == []
    # The plan file is the one pooler plan writes: pooler show reads it, with the same counts.
    head = json.loads(Path(planned["plan_file"]).read_text().splitlines()[0])
    assert head["plan_id"] == planned["plan_id"]
    assert head["calls"] == 4
    assert head["steps"][0]["compare"] == {"new": 2, "changed": 2, "unchanged": 8}
    # Only the new and changed rows are sent, each once; a second commit sends nothing and tells the same.
    assert first["result"] is True
    assert first["succeeded"] == 4
    assert sent == sent_skus(store) == [sku(0), sku(1), sku(10), sku(11)]
    assert second == first


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_row_moved_in_the_store_since_the_plan_is_a_conflict_the_commit_lists_and_does_not_send(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stock(store, held=10, repriced=2)
    pool = feed(out, rows=12)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect_in_process(store, out, *server_args(journal, request, tmp_path)) as session:
            planned = answer_of(await session.call_tool("pool_run", {"file": str(pool), "plan": True}))
            # Another writer reprices row 1 and adds row 10 after the plan.
            moved = store.call("MELBIS_AGENT_IMPORT_GOODS", "CmdAdd", {"goods": [
                {"sku": sku(1), "name": "Goods 1", "price": 12},
                {"sku": sku(10), "name": "Goods 10", "price": 13.5}]}).json()
            assert moved["data"]["result"] is True
            committed = answer_of(await session.call_tool("pool_run", {"plan_id": planned["plan_id"]}))
            return planned, committed

    planned, committed = anyio.run(scenario)
    assert planned["compare"] == {"new": 2, "changed": 2, "unchanged": 8}
    assert [c["rows"] for c in committed["conflicts"]] == [[1, 1], [10, 10]]
    assert committed["conflicts"][0]["moved"] == [
        "row 1 (sku SKU-00001): price 99.0 in the plan, 12.0 in the store now"]
    assert committed["not_run"] == 2
    # The moved rows' calls are not sent; the others are, from the plan.
    assert [row["sku"] for chunk in imports(store)[1:] for row in chunk] == [sku(0), sku(11)]


@pytest.mark.process
def test_a_commit_refuses_a_plan_whose_feed_changed_and_pooler_apply_refuses_the_servers_plan(
        store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stock(store, held=10, repriced=2)
    pool = feed(out, rows=12)

    async def scenario() -> tuple[dict[str, Any], str, str]:
        async with connect_in_process(store, out) as session:
            planned = answer_of(await session.call_tool("pool_run", {"file": str(pool), "plan": True}))
            feed_file = out / "pools" / "feed.csv"
            feed_file.write_text(feed_file.read_text() + "SKU-99999,Goods late,1.50\n")
            refused = text_of(await session.call_tool("pool_run", {"plan_id": planned["plan_id"]}))
            crowded = text_of(await session.call_tool("pool_run", {"plan_id": planned["plan_id"],
                                                                   "file": str(pool)}))
            return planned, refused, crowded

    planned, refused, crowded = anyio.run(scenario)
    assert refused.startswith(f"plan {planned['plan_id']} no longer matches its pool: feed.csv changed since "
                              "the plan (sha256 ")
    assert refused.endswith(" now) - nothing was sent; plan the pool again.")
    assert crowded == "plan_id is given alone - the plan holds its pool, options and task; drop file."
    assert imports(store) == []
    applied = subprocess.run([sys.executable, "-m", "pooler", "apply", planned["plan_file"],
                              "--store", store.url], capture_output=True, text=True, check=False)
    assert applied.returncode == 2
    assert (f"{planned['plan_file']} is the plan {planned['plan_id']} of a pooler mcp server: commit it with "
            f"pool_run {{\"plan_id\": \"{planned['plan_id']}\"}} - nothing was sent.") in applied.stderr


@pytest.mark.process
def test_the_commit_of_a_long_file_plan_asks_to_confirm_naming_its_classes(store: Store,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "out"
    # 100 rows against a store holding 40 of them, 12 repriced: 60 new, 12 changed, 28 unchanged.
    stock(store, held=40, repriced=12)
    pool = feed(out, rows=100)
    with http_server(store, out) as server:
        planning = {"file": str(pool), "plan": True}
        planned = result_of(call_tool(server.url, server.token, "pool_run", planning))
        plan_id = planned["structuredContent"]["plan_id"]
        asked = result_of(call_tool(server.url, server.token, "pool_run", {"plan_id": plan_id}))
        unsent = imports(store)
        confirm(server, asked["taskId"], "confirm-1", {"action": "accept", "content": {"confirm": True}})
        final = poll(server, asked["taskId"], done)[-1]
        again = result_of(call_tool(server.url, server.token, "pool_run", {"plan_id": plan_id}, tasks=False))
    assert asked["status"] == "input_required"
    assert asked["statusMessage"] == (
        f"72 calls (60 new, 12 changed, 28 unchanged): 72 MELBIS_AGENT_IMPORT_GOODS.CmdAdd - the plan "
        f"{plan_id}, to be sent to the store. confirm true sends them; false (or decline) ends the task with "
        "nothing sent, the plan still planned.")
    assert unsent == []
    assert final["status"] == "completed"
    assert final["counts"]["completed"] == 72
    assert again["structuredContent"]["succeeded"] == 72
    assert sent_skus(store) == sorted([sku(n) for n in range(12)] + [sku(n) for n in range(40, 100)])


def test_a_plan_is_refused_for_a_task_that_ran_the_file_and_for_a_secret_given_in_vars(
        store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stock(store, held=10, repriced=2)
    pool = feed(out, rows=12)
    secret = out / "pools" / "secret.yaml"
    secret.write_text("vars:\n  code: {secret: true}\npool:\n  - unit: MELBIS_AGENT_TEST\n"
                      "    command: CmdEcho\n    params: {code: '${code}'}\n", encoding="utf-8")

    async def scenario() -> tuple[dict[str, Any], str, str, dict[str, Any]]:
        async with connect_in_process(store, out) as session:
            ran = answer_of(await session.call_tool("pool_run", {"file": str(pool), "task": "feed-1"}))
            again = text_of(await session.call_tool("pool_run", {"file": str(pool), "task": "feed-1",
                                                                  "plan": True}))
            hidden = text_of(await session.call_tool("pool_run", {"file": str(secret), "plan": True,
                                                                  "vars": {"code": "pssst-4711"}}))
            fresh = answer_of(await session.call_tool("pool_run", {"file": str(pool), "task": "feed-2",
                                                                   "plan": True}))
            return ran, again, hidden, fresh

    ran, again, hidden, fresh = anyio.run(scenario)
    assert ran["result"] is True
    assert again.startswith(f"task feed-1 ran {pool} already (as feed-1-")
    assert again.endswith(") - a plan applies to a task of its own: plan again with a task argument no run "
                          "used; nothing was planned.")
    assert hidden == ("vars holds a secret - a plan is kept in the journal, where no secret goes: give the "
                      "secret in the server's environment (a variable with env).")
    assert "pssst-4711" not in (out / ".pooler" / "journal.sqlite").read_bytes().decode("latin-1")
    # What the run sent is in the store now: a plan of another task finds nothing to send.
    assert fresh["compare"] == {"new": 0, "changed": 0, "unchanged": 12}
    assert fresh["calls"] == 0


def test_either_tool_commits_either_tools_plan_through_the_one_commit_path(store: Store,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "out"
    stock(store, held=10, repriced=2)
    pool = feed(out, rows=12)
    steps = {"pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}]}

    async def scenario() -> list[dict[str, Any]]:
        async with connect_in_process(store, out) as session:
            filed = answer_of(await session.call_tool("pool_run", {"file": str(pool), "plan": True}))
            listed = answer_of(await session.call_tool("tool_pool", {"plan": True, **steps}))
            return [answer_of(await session.call_tool(tool, {"plan_id": plan["plan_id"]}))
                    for tool, plan in (("tool_pool", filed), ("pool_run", filed), ("pool_run", listed),
                                       ("tool_pool", listed))]

    file_first, file_again, list_first, list_again = anyio.run(scenario)
    assert file_first["succeeded"] == 4
    assert file_again == file_first
    assert list_first["succeeded"] == 1
    assert list_again == list_first
    assert sent_skus(store) == [sku(0), sku(1), sku(10), sku(11)]
    assert len([op for op in store.ops() if op["command"] == "CmdEcho"]) == 1
