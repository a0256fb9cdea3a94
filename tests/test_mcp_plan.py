"""Plan, commit once, find out: tool_pool's ``plan``, ``plan_id`` and ``task`` alone, driven by the
official SDK client against the real reference store: served in the test's process, and by server
processes of their own where two servers share one journal."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Store, pooler
from mcpkit import answer_of, connect, connect_in_process, text_of

from pooler.run.savedplan import read_calls, read_head

ECHO = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}
POOL = [
    {"name": "cur", "key": "eur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
     "params": {"skey": "EUR", "name": "Euro"}},
    {**ECHO, "params": {"id": "@cur.id"}},
]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def ops_of(store: Store) -> list[dict[str, Any]]:
    return [op for op in store.ops() if op["unit"] != "MELBIS_AGENT_TEST" or op["command"] != "CmdOps"]


def test_a_plan_is_checked_against_the_store_and_sends_nothing(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out, "--task", "agent") as session:
            result = await session.call_tool("tool_pool", {"plan": True, "pool": POOL})
            planned = answer_of(result)
            assert result.is_error is False
            bad = await session.call_tool("tool_pool", {"plan": True, "pool": [
                {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd", "params": {"skey": "X", "nmae": "x"}},
                {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdNope"}]})
            problems = answer_of(bad)
            assert bad.is_error is True
        assert planned["result"] is True
        assert planned["status"] == "planned"
        assert planned["task"] == "agent"
        assert re.fullmatch(r"plan-[0-9a-f]{16}", planned["plan_id"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", planned["expires"])
        assert planned["calls"] == 2
        assert planned["mode"] == "sequential"
        assert planned["steps"] == [
            {"num": 1, "name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd", "key": "eur",
             "waits_for": [], "after": None, "calls": 1},
            {"num": 2, "name": "", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "key": None,
             "waits_for": ["cur"], "after": "cur", "calls": 1}]
        assert planned["problems"] == []
        assert planned["message"] == (
            f"Nothing was sent. Commit with tool_pool {{\"plan_id\": \"{planned['plan_id']}\"}} before "
            f"{planned['expires']}: it makes these calls once, however often the commit is sent.")
        assert problems["result"] is False
        assert problems["plan_id"] is None
        assert problems["message"] == ("The pool has 3 problems: nothing was sent and nothing was planned - "
                                       "fix them and plan again.")
        # The store's declarations, as `pooler check --against` reads them: every problem at once.
        assert problems["problems"] == [
            ("The command [CmdAdd] has no field [nmae] - did you mean name? Its fields: skey, name, "
             "multiplex, division, pos."),
            "The command [CmdAdd] needs the field [name] (str): it is required - add it to params.",
            ("Unknown command [CmdNope] of MELBIS_AGENT_CURRENCY - did you mean CmdUpdate? The tool has: "
             "CmdList, CmdAdd, CmdUpdate, CmdRemove, CmdPos.")]
        assert ops_of(store) == []
    anyio.run(scenario)


def test_a_commit_runs_the_plan_once_and_a_second_commit_returns_its_answer(store: Store,
                                                                           out: Path) -> None:
    unkeyed = [{**ECHO, "params": {"n": n}} for n in range(3)]

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            planned = answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": unkeyed}))
            assert ops_of(store) == []
            first = answer_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            sent = len(ops_of(store))
            second = answer_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            found = answer_of(await session.call_tool("tool_pool", {"task": first["task"]}))
        assert sent == 3
        assert len(ops_of(store)) == 3  # the second commit sent nothing, though no step has a key
        assert first["result"] is True
        assert [s["detail"] for s in first["steps"]] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert second == first
        assert first["task"] == planned["task"]
        assert found == first
    anyio.run(scenario)


@pytest.mark.process
def test_a_plan_is_committed_once_whichever_server_process_commits_it(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect(store, out) as first_server:
            planned = answer_of(await first_server.call_tool("tool_pool", {"plan": True, "pool": POOL}))
            async with connect(store, out) as second_server:
                ran = answer_of(await second_server.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            again = answer_of(await first_server.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
        assert ran["result"] is True
        assert again == ran
        assert [op["command"] for op in ops_of(store)] == ["CmdAdd", "CmdEcho"]
    anyio.run(scenario)


def test_an_expired_or_unknown_plan_is_refused_and_sends_nothing(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out, "--plan-ttl", "600") as session:
            planned = answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": POOL}))
            with sqlite3.connect(out / ".pooler" / "journal.sqlite") as db:
                db.execute("UPDATE plans SET expires = 0 WHERE id = ?", (planned["plan_id"],))
            expired = text_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            unknown = text_of(await session.call_tool("tool_pool", {"plan_id": "plan-0000000000000000"}))
            crowded = text_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"],
                                                                    "pool": POOL}))
        assert expired == (f"plan {planned['plan_id']} expired at 1970-01-01T00:00:00Z (a plan lasts 600 s, "
                           "pooler mcp --plan-ttl) - nothing was sent; plan the pool again with plan: true.")
        assert unknown == ("no plan plan-0000000000000000 - a plan_id comes from tool_pool or pool_run "
                           "with plan: true, "
                           "on a server of this store folder; plan the pool again.")
        assert crowded == ("plan_id is given alone - the plan holds its pool, options and task; drop pool.")
        assert ops_of(store) == []
    anyio.run(scenario)


def test_a_commit_refuses_when_a_file_the_plan_reads_changed_since(store: Store, out: Path) -> None:
    (out / "fields.json").write_text('{"n": 1}', encoding="utf-8")
    pool = [{**ECHO, "params_source": "fields.json"}]

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            planned = answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": pool}))
            (out / "fields.json").write_text('{"n": 2}', encoding="utf-8")
            changed = text_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
            assert ops_of(store) == []
            (out / "fields.json").write_text('{"n": 1}', encoding="utf-8")
            ran = answer_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
        assert re.fullmatch(
            re.escape(f"plan {planned['plan_id']} no longer matches its pool: the steps (with their "
                      "pool_source and params_source files) changed since the plan (sha256 ")
            + r"[0-9a-f]{12}… when planned, [0-9a-f]{12}… now\) - nothing was sent; plan the pool again\.",
            changed)
        assert ran["steps"][0]["detail"] == {"n": 1}
    anyio.run(scenario)


def test_every_answer_names_its_task_and_the_task_alone_tells_what_it_did(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            named = answer_of(await session.call_tool("tool_pool", {"task": "night-1", "pool": POOL}))
            session_pool = answer_of(await session.call_tool("tool_pool", {"pool": [ECHO]}))
            found = await session.call_tool("tool_pool", {"task": "night-1"})
            unknown = text_of(await session.call_tool("tool_pool", {"task": "nobody"}))
        assert named["task"] == "night-1"
        assert session_pool["task"].startswith("mcp-")
        assert found.is_error is False
        assert answer_of(found) == named
        assert unknown.startswith("no task nobody in the journal ")
        assert unknown.endswith(" - a task is named in every tool_pool answer (task); give one of those, or "
                                "start the pool with tool_pool.")
    anyio.run(scenario)


# Two server processes on one journal: one runs the task, the other tells it from the journal.
@pytest.mark.process
def test_a_task_still_running_tells_its_calls_so_far(store: Store, out: Path) -> None:
    pool = [{**ECHO, "key": "e", "params": {"n": 1}},
            {"key": "s", "unit": "MELBIS_AGENT_TEST", "command": "CmdSleep", "params": {"ms": 1500}}]

    async def scenario() -> None:
        first_done = anyio.Event()
        seen: dict[str, Any] = {}

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if progress >= 1:
                first_done.set()

        async with connect(store, out) as runner, connect(store, out) as asker:
            async with anyio.create_task_group() as group:
                async def call() -> None:
                    arguments = {"task": "slow", "pool": pool}
                    seen["end"] = answer_of(await runner.call_tool("tool_pool", arguments,
                                                                   progress_callback=on_progress))

                group.start_soon(call)
                await first_done.wait()
                seen["during"] = await asker.call_tool("tool_pool", {"task": "slow"})
            seen["after"] = answer_of(await asker.call_tool("tool_pool", {"task": "slow"}))
        during = answer_of(seen["during"])
        assert seen["during"].is_error is True
        assert during["status"] == "running"
        assert during["result"] is False
        assert during["task"] == "slow"
        assert during["steps"][0]["status"] == "completed"
        # The sleep, when it has left already, is in doubt: nobody knows yet whether it landed.
        assert [s["status"] for s in during["steps"][1:]] in ([], ["in_doubt"])
        for step in during["steps"][1:]:
            assert step["message"] == ("sent, and no answer recorded yet: the run is still going - ask again "
                                       "for its answer")
        assert seen["after"] == seen["end"]
        assert [s["status"] for s in seen["end"]["steps"]] == ["completed", "completed"]
    anyio.run(scenario)


def test_a_pool_holding_the_servers_token_gets_no_plan(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            kept = answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": [ECHO]}))
            refused = text_of(await session.call_tool("tool_pool", {"plan": True, "pool": [
                {**ECHO, "params": {"said": store.token}}]}))
        assert kept["result"] is True
        assert refused == ("The pool holds a secret of this server (its store token) - a plan is kept in "
                           "the journal, where no secret goes: take the secret out of the pool.")
        journal = (out / ".pooler" / "journal.sqlite").read_bytes()
        assert store.token.encode() not in journal
        assert store.token not in refused
    anyio.run(scenario)


def test_the_servers_plan_is_the_plan_pooler_plan_writes_with_the_same_digests(store: Store,
                                                                               out: Path) -> None:
    (out / "rows.jsonl").write_text('{"n": 1}\n', encoding="utf-8")
    pool = [{**ECHO, "params": {"rows": {"file": "rows.jsonl"}}}]

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            planned = answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": pool}))
            shown = pooler("show", planned["plan_file"], "--json")
            # The server's plan is committed by the server, whose journal keeps it once.
            elsewhere = pooler("apply", planned["plan_file"], "--store", store.url,
                               env={"POOLER_TOKEN": store.token})
            (out / "rows.jsonl").write_text('{"n": 2}\n', encoding="utf-8")
            stale = pooler("show", planned["plan_file"])
            changed = text_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
        assert ops_of(store) == []
        path = Path(planned["plan_file"])
        assert path == out / ".pooler" / "plans" / f"{planned['plan_id']}.jsonl"
        head = read_head(path)
        # One document, one rule of digests: what the server keeps is what `pooler plan` writes.
        assert head["digests"] == planned["digests"]
        assert [d["what"] for d in head["digests"]] == ["steps", "options", "file", "declarations"]
        assert head["plan_id"] == planned["plan_id"]
        assert head["task"] == planned["task"]
        assert head["store"] == store.url
        assert [(s["num"], s["calls"]) for s in head["steps"]] == [(1, 1)]
        assert [c["params"] for c in read_calls(path)] == [{"rows": {"file": "rows.jsonl"}}]
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["stale"] == []
        assert elsewhere.returncode == 2
        assert elsewhere.stderr == (
            f"pooler: {path} is the plan {planned['plan_id']} of a pooler mcp server, of a pool that is no "
            f"file: commit it with tool_pool {{\"plan_id\": \"{planned['plan_id']}\"}} - nothing was sent.\n")
        assert stale.returncode == 0
        assert re.search(r"pooler: WARNING: the plan is stale, and 'pooler apply' refuses it: rows\.jsonl "
                         r"changed since the plan \(sha256 [0-9a-f]{12}… when planned, [0-9a-f]{12}… now\)",
                         stale.stderr)
        assert re.fullmatch(
            re.escape(f"plan {planned['plan_id']} no longer matches its pool: rows.jsonl changed since the "
                      "plan (sha256 ") + r"[0-9a-f]{12}… when planned, [0-9a-f]{12}… now\) - nothing was "
            r"sent; plan the pool again\.", changed)
    anyio.run(scenario)
