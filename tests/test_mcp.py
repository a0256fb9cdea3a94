"""``pooler mcp`` driven by the MCP SDK's own client, against the real reference store: served in the
test's process over the SDK's memory streams, and over stdio by a process of its own where the
process is what a test is about (a plain round trip, a second process).

Every call goes through ``mcpkit.CheckedSession``: each structured answer is validated against its
tool's output schema.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from helpers import ROOT, Store, start_store
from mcpkit import SERVER, answer_of, check_answer, connect, connect_in_process, text_of

if TYPE_CHECKING:
    from mcp.client import ClientSession

__all__ = ["answer_of", "connect", "connect_in_process", "text_of"]

CURRENCY_POOL: dict[str, Any] = {"pool": [
    {"name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
     "params": {"skey": "EUR", "name": "Euro", "multiplex": 44.2}},
    {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdPos",
     "params": {"type": "POS", "data": [{"id": "@cur.id"}]}},
]}


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out"


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def ops_of(store: Store, unit: str | None = None) -> list[dict[str, Any]]:
    return [op for op in store.ops() if unit is None or op["unit"] == unit]


def described(schema: Any, where: str = "") -> list[str]:
    """Every property of a JSON Schema (recursively) that has no description."""
    missing: list[str] = []
    if isinstance(schema, dict):
        for name, prop in schema.get("properties", {}).items():
            if not prop.get("description"):
                missing.append(f"{where}.{name}")
            missing += described(prop, f"{where}.{name}")
        if "items" in schema:
            missing += described(schema["items"], f"{where}[]")
    return missing


# The tools and their schemas

def test_lists_four_tools_with_described_input_schemas(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            from mcp.shared.exceptions import MCPError  # noqa: PLC0415

            with pytest.raises(MCPError, match=r"^Unknown tool \[tool_nope\] - this server has: pool_run, "
                                               r"tool_list, tool_pool, tool_run\.$"):
                await session.call_tool("tool_nope", {})
        assert sorted(tools) == ["pool_run", "tool_list", "tool_pool", "tool_run"]
        # A commit (plan_id) names no file: the file is required by the call, not the schema.
        assert "required" not in tools["pool_run"].input_schema
        assert sorted(tools["pool_run"].input_schema["properties"]) == [
            "dry_run", "file", "plan", "plan_id", "sample", "task", "vars"]
        for tool in tools.values():
            assert tool.description
            assert tool.input_schema["type"] == "object"
            assert described(tool.input_schema, tool.name) == []
        run_schema = tools["tool_run"].input_schema
        assert run_schema["required"] == ["unit", "command"]
        assert sorted(run_schema["properties"]) == sorted(
            ["unit", "command", "params", "params_source", "files", "files_source", "debug", "into"])
        assert run_schema["properties"]["files"]["items"]["required"] == ["file", "entity", "elem_id"]
        pool_schema = tools["tool_pool"].input_schema
        assert pool_schema["properties"]["pool"]["maxItems"] == 200
        assert set(pool_schema["properties"]) >= {"pool", "pool_source", "mode", "max_concurrency",
                                                  "serialize_on", "stop_on_error", "include_results", "task"}
        assert pool_schema["properties"]["pool"]["items"]["required"] == ["unit", "command"]
        assert "key" in pool_schema["properties"]["pool"]["items"]["properties"]
        assert tools["tool_list"].annotations is not None
        assert tools["tool_list"].annotations.read_only_hint is True
    run(scenario)


def every_type(schema: Any, where: str = "") -> dict[str, Any]:
    """The declared type of every property of a JSON Schema, recursively."""
    found: dict[str, Any] = {}
    if isinstance(schema, dict):
        for name, prop in schema.get("properties", {}).items():
            found[f"{where}.{name}"] = prop.get("type")
            found.update(every_type(prop, f"{where}.{name}"))
        if "items" in schema:
            found.update(every_type(schema["items"], f"{where}[]"))
    return found


def test_every_input_has_one_type_and_every_tool_an_output_schema(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            tools = (await session.list_tools()).tools
        for tool in tools:
            types_of = every_type(tool.input_schema, tool.name)
            assert types_of
            # A client that fills arguments from text converts a value only for a single type.
            assert {where: t for where, t in types_of.items() if not isinstance(t, str)} == {}
            assert tool.output_schema is not None
            assert tool.output_schema["type"] == "object"
            assert "result" in tool.output_schema["required"]
        pool = next(t for t in tools if t.name == "tool_pool")
        assert pool.input_schema["properties"]["mode"]["enum"] == ["sequential", "parallel"]
        assert pool.output_schema is not None
        assert pool.output_schema["required"] == ["result", "task"]
    run(scenario)


def test_an_answer_outside_its_schema_is_caught_by_the_check(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            answer = answer_of(await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}))
            schema = session.schemas["tool_run"]
        check_answer(schema, "tool_run", answer)
        with pytest.raises(AssertionError, match=r"^tool_run answered outside its output schema: "
                                                 r"\(top\): 'detail' is a required property"):
            check_answer(schema, "tool_run", {k: v for k, v in answer.items() if k != "detail"})
    run(scenario)


def test_tool_list_gives_the_stores_declarations(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            every = answer_of(await session.call_tool("tool_list", {}))
            one = answer_of(await session.call_tool("tool_list", {"unit": "MELBIS_AGENT_CURRENCY"}))
            wrong = await session.call_tool("tool_list", {"units": "X"})
        assert every["result"] is True
        units = {t["unit"] for t in every["tools"]}
        assert {"MELBIS_AGENT_CURRENCY", "MELBIS_AGENT_STORE", "MELBIS_AGENT_TEST"} <= units
        assert [t["unit"] for t in one["tools"]] == ["MELBIS_AGENT_CURRENCY"]
        add = next(c for c in one["tools"][0]["commands"] if c["name"] == "CmdAdd")
        assert {p["name"] for p in add["params"]} >= {"skey", "name", "multiplex"}
        assert text_of(wrong) == "tool_list takes no argument [units] - did you mean unit? - it takes: unit."
    run(scenario)


# tool_run

@pytest.mark.process
def test_tool_run_writes_tables_and_jobs_in_the_seeds_shape(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect(store, out) as session:
            added = await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
                "params": {"skey": "USD", "name": "Dollar", "pos": None}})
            listed = await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdList", "into": "cur", "debug": True})
            again = await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdList", "into": "cur"})
        first = answer_of(added)
        assert added.is_error is False
        assert list(first) == ["result", "message", "detail", "tables", "files", "time"]
        assert first["result"] is True
        assert isinstance(first["detail"]["id"], int)
        assert first["tables"] == {}
        assert first["files"] == []
        assert set(first["time"]) == {"server", "module", "trip"}

        table = answer_of(listed)
        cur = table["tables"]["currency"]
        path = out / "tables" / "MELBIS_AGENT_CURRENCY.CmdList.currency.jsonl"
        assert cur["file"] == str(path)
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert cur["rows"] == len(rows) >= 1
        assert {"id": str(first["detail"]["id"]), "skey": "USD", "name": "Dollar"}.items() <= rows[-1].items()
        assert [json.loads(h) for h in cur["head"]] == rows[:3]
        assert cur["job"] == str(out / "cur.currency.jsonl")
        assert cur["job_rows"] == len(rows)
        assert {"sql", "sql_ms"} <= set(table["time"])
        assert answer_of(again)["tables"]["currency"]["job_rows"] == 2 * len(rows)
    run(scenario)


def test_tool_run_attaches_files_from_a_files_source(store: Store, out: Path) -> None:
    photos = out / "photos"
    photos.mkdir(parents=True)
    (photos / "front.jpg").write_bytes(b"\xff\xd8front" * 100)
    (photos / "back.jpg").write_bytes(b"\xff\xd8back" * 50)

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            goods = answer_of(await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd",
                "params": {"sku": "A-100", "name": "Kettle", "price": 12.5}}))
            gid = goods["detail"]["id"]
            (out / "photos.json").write_text(json.dumps([
                {"file": "photos/front.jpg", "entity": "store", "elem_id": gid, "real_name": "Front view"},
                {"file": str(photos / "back.jpg"), "entity": "store", "elem_id": gid, "kind_key": "kBase"},
            ]), encoding="utf-8")
            took = await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_IMPORT_FILES", "command": "CmdAdd",
                "params": {"profile": "catalog"}, "files_source": "photos.json"})
            inline = await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_IMPORT_FILES", "command": "CmdAdd",
                "files": [{"file": "photos/back.jpg", "entity": "store", "elem_id": gid}]})
        answer = answer_of(took)
        assert took.is_error is False, answer
        assert answer["result"] is True
        assert answer["detail"]["taken"] == 2
        assert [f["elem_id"] for f in answer["files"]] == [gid, gid]
        assert [f["size"] for f in answer["files"]] == [700, 300]
        assert answer["files"][0]["real_name"] == "Front view"
        assert all("file" not in f or not str(f["file"]).startswith(str(out)) for f in answer["files"])
        second = answer_of(inline)
        assert second["result"] is True
        assert second["detail"]["taken"] == 1
    run(scenario)


def test_files_named_in_calls_are_read_from_the_store_folder(store: Store, out: Path) -> None:
    (out / "data").mkdir(parents=True)
    goods = [{"ref": "r1", "sku": "S-1", "name": "Cup", "price": 3.5},
             {"ref": "r2", "sku": "S-2", "name": "Plate", "price": 4}]
    lines = "".join(json.dumps(g) + "\n" for g in goods)
    (out / "data" / "goods.jsonl").write_text(lines, encoding="utf-8")
    (out / "data" / "echo.json").write_text('{"word": "from a file", "n": 2}', encoding="utf-8")

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            imported = answer_of(await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_IMPORT_GOODS", "command": "CmdAdd",
                "params": {"goods": {"file": "data/goods.jsonl"}}}))
            pooled = answer_of(await session.call_tool("tool_pool", {"pool": [
                {"name": "echo", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
                 "params_source": "data/echo.json"},
                {"unit": "MELBIS_AGENT_IMPORT_GOODS", "command": "CmdAdd",
                 "params": {"goods": {"file": "data/goods.jsonl"}}},
            ]}))
            escape = text_of(await session.call_tool("tool_pool", {"pool": [
                {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params_source": "../echo.json"}]}))
        assert imported["result"] is True
        assert imported["tables"]["goods"]["rows"] == 2
        assert [json.loads(h)["ref"] for h in imported["tables"]["goods"]["head"]] == ["r1", "r2"]
        assert pooled["result"] is True, pooled
        assert pooled["steps"][0]["detail"] == {"word": "from a file", "n": 2}
        assert pooled["steps"][1]["tables"]["goods"]["rows"] == 2
        assert pooled["steps"][1]["tables"]["goods"]["file"] == str(
            out / "tables" / "step2.MELBIS_AGENT_IMPORT_GOODS.CmdAdd.goods.jsonl")
        assert escape == (f"params_source of step 1 ../echo.json leads out of the store folder {out} - "
                          "give a path inside that folder, or an absolute path.")
    run(scenario)


def test_tool_run_refusals_before_the_store(store: Store, out: Path) -> None:
    out.mkdir()
    (out / "p.json").write_text('{"name": "x"}', encoding="utf-8")
    (out.parent / "outside.json").write_text('{"name": "x"}', encoding="utf-8")

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            async def refusal(arguments: dict[str, Any]) -> str:
                return text_of(await session.call_tool("tool_run", arguments))

            cur = {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd"}
            assert await refusal({**cur, "params": {"name": "x"}, "params_source": "p.json"}) == (
                "params or params_source, not both - write the fields in params or in the file"
                " params_source names, and drop the other.")
            assert await refusal({**cur, "params": ["x"]}) == (
                'params is an object of fields - write it as {"field": value, ...}, not as a list.')
            assert await refusal({**cur, "params_source": "missing.json"}) == (
                f"No such file: {out / 'missing.json'}")
            assert await refusal({**cur, "params_source": "../outside.json"}) == (
                f"params_source ../outside.json leads out of the store folder {out} - give a path inside "
                "that folder, or an absolute path.")
            assert await refusal({**cur, "into": "a/b"}) == (
                "into is the bare name of a job - 'a/b' holds a path; write one word with no path and no "
                "dots, like photos.")
            assert await refusal({"command": "CmdList"}) == (
                "unit is required - name the tool's address from tool_list, "
                "for example MELBIS_AGENT_CURRENCY.")
            assert await refusal({"unit": "MELBIS_AGENT_CURRENCY"}) == (
                "command is required - name one of the tool's commands from tool_list, for example CmdList.")
            assert await refusal({**cur, "parms": {}}) == (
                "tool_run takes no argument [parms] - did you mean params? - it takes: unit, command, "
                "params, params_source, files, files_source, debug, into.")
            assert await refusal({**cur, "debug": "yes"}) == (
                "debug of tool_run is true or false, not a string - see the input schema of tool_run in the "
                "tool list.")
            assert await refusal({**cur, "files": [{"file": "../outside.json", "entity": "store",
                                                    "elem_id": 1}]}) == (
                f"the file of attachment 1 ../outside.json leads out of the store folder {out} - give a path "
                "inside that folder, or an absolute path.")
            assert await refusal({"unit": "MELBIS_AGENT_IMPORT_GOODS", "command": "CmdAdd",
                                  "params": {"goods": {"file": "../rows.jsonl"}}}) == (
                f"the file of params field goods ../rows.jsonl leads out of the store folder {out} - give a "
                "path inside that folder, or an absolute path.")
            # An absolute path is the caller's own choice.
            ok = answer_of(await session.call_tool("tool_run", {
                **cur, "params_source": str(out.parent / "outside.json")}))
            assert ok["result"] is True
        # Only the last call reached the store.
        assert [op["command"] for op in ops_of(store)] == ["CmdAdd"]
    run(scenario)


def test_tool_run_store_refusals_and_crashes(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            def test(command: str, unit: str = "MELBIS_AGENT_TEST") -> dict[str, Any]:
                return {"unit": unit, "command": command}

            nope = await session.call_tool("tool_run", test("CmdNope", "MELBIS_AGENT_CURRENCY"))
            failed = await session.call_tool("tool_run", test("CmdFail"))
            crash = await session.call_tool("tool_run", test("CmdCrash"))
            silent = await session.call_tool("tool_run", test("CmdNoResult"))
        refusal = answer_of(nope)
        assert nope.is_error is True
        assert refusal["result"] is False
        assert refusal["message"].startswith("Unknown command [CmdNope]. The tool has: CmdList, CmdAdd")
        assert refusal["detail"] == {}
        assert refusal["tables"] == {}
        assert refusal["files"] == []
        assert "trip" in refusal["time"]
        assert failed.is_error is True
        assert answer_of(failed)["result"] is False
        assert text_of(crash).startswith("MELBIS_AGENT_TEST\\CmdCrash failed: ")
        assert text_of(silent).startswith("MELBIS_AGENT_TEST\\CmdNoResult answered without result")
    run(scenario)


# tool_pool

def test_tool_pool_runs_the_seeds_currency_pool(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", CURRENCY_POOL)
        answer = answer_of(result)
        assert result.is_error is False
        assert answer["result"] is True
        assert answer["status"] == "completed"
        assert (answer["total"], answer["succeeded"], answer["failed"]) == (2, 2, 0)
        cur, pos = answer["steps"]
        for num, step in enumerate(answer["steps"], start=1):
            assert step["num"] == num
            assert step["status"] == "completed"
            assert step["result"] is True
            assert {"message", "detail", "tables", "files", "time"} <= set(step)
            assert {"server", "module", "trip"} <= set(step["time"])
        assert (cur["name"], cur["unit"], cur["command"]) == ("cur", "MELBIS_AGENT_CURRENCY", "CmdAdd")
        assert isinstance(cur["detail"]["id"], int)
        assert (pos["name"], pos["command"]) == ("", "CmdPos")
        assert "trip" in answer["time"]
        # The reference reached the store as the number the first step returned.
        ops = ops_of(store, "MELBIS_AGENT_CURRENCY")
        assert [op["command"] for op in ops] == ["CmdAdd", "CmdPos"]
        sent = ops[1]["params"]
        sent = json.loads(sent) if isinstance(sent, str) else sent
        assert sent["data"] == [{"id": cur["detail"]["id"]}]
    run(scenario)


#: Three steps, the second refused by the store.
ONE_FAILS = [
    {"name": "one", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}},
    {"name": "bad", "unit": "MELBIS_AGENT_TEST", "command": "CmdFail"},
    {"name": "three", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 3}},
]


def test_a_pool_within_its_error_budget_goes_on_past_a_failure_and_says_so(store: Store, out: Path) -> None:
    pool = {"tolerate": {"failed": "1"}, "pool": ONE_FAILS}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", pool)
        answer = answer_of(result)
        assert [s["status"] for s in answer["steps"]] == ["completed", "failed", "completed"]
        assert answer["tolerated"] == {"failed": 1, "in_doubt": 0, "within": True, "budgets": [
            {"kind": "failed", "step": None, "tolerate": 1, "calls": 1, "allowed": 1, "planned": 3,
             "within": True}]}
        assert [op["command"] for op in ops_of(store, "MELBIS_AGENT_TEST")] == [
            "CmdEcho", "CmdFail", "CmdEcho"]
    run(scenario)


def test_a_pool_takes_an_adaptive_width_and_a_breaker_and_tells_its_flow(store: Store, out: Path) -> None:
    echo = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}
    pool = {"mode": "parallel", "max_concurrency": 8, "adaptive": True, "breaker": {"after": 3, "wait": 1},
            "pool": [echo] * 6}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", pool)
        answer = answer_of(result)
        assert answer["result"] is True
        # An adaptive width starts at 2 and grows as answers come back clean.
        assert 2 <= answer["flow"]["highest_width"] <= 8
        assert answer["flow"]["busy"] == answer["flow"]["breaker_trips"] == 0
    run(scenario)


def test_a_pool_takes_its_patience_with_a_busy_store_and_refusals_that_mean_busy(tmp_path: Path, out: Path
                                                                                   ) -> None:
    limited = start_store(tmp_path / "s", "--rate-limit", "4")
    echo = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
            "retry": {"attempts": 2, "busy_for": 60, "refusals": ["is currently being processed"]}}
    pool = {"mode": "parallel", "max_concurrency": 8, "retry": {"busy_for": 30},
            "pool": [{**echo, "key": f"e{n}", "params": {"n": n}} for n in range(10)]}

    async def scenario() -> None:
        async with connect_in_process(limited, out) as session:
            planned = await session.call_tool("tool_pool", {**pool, "plan": True})
            result = await session.call_tool("tool_pool", pool)
        assert answer_of(planned)["result"] is True
        answer = answer_of(result)
        # A burst of 4, then 4 a second: the rest answered busy, sent again, none failed.
        assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (10, 0, 0)
        assert answer["flow"]["busy"] == answer["flow"]["busy_resent"] > 0
    try:
        run(scenario)
    finally:
        limited.stop()


def test_a_stopped_pool_is_marked_as_an_error(store: Store, out: Path) -> None:
    pool = {"pool": ONE_FAILS}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", pool)
            first_ops = [op["command"] for op in ops_of(store, "MELBIS_AGENT_TEST")]
            on = await session.call_tool("tool_pool", {**pool, "stop_on_error": False})
        assert len(ops_of(store, "MELBIS_AGENT_TEST")) == len(first_ops) + 3
        answer = answer_of(result)
        assert result.is_error is True
        assert answer["result"] is False
        assert answer["status"] == "partial"
        assert [s["name"] for s in answer["steps"]] == ["one", "bad"]
        assert answer["steps"][-1]["status"] == "failed"
        assert answer["steps"][-1]["result"] is False
        assert answer["not_run"] == 1
        assert first_ops == ["CmdEcho", "CmdFail"]
        # Without stop_on_error the pool goes on past the failure, and is still marked as an error.
        going_on = answer_of(on)
        assert on.is_error is True
        assert [s["status"] for s in going_on["steps"]] == ["completed", "failed", "completed"]
        assert (going_on["status"], going_on["succeeded"], going_on["failed"]) == ("partial", 2, 1)
    run(scenario)


def test_more_than_200_steps_are_refused_before_anything_runs(store: Store, out: Path) -> None:
    steps = [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": n}} for n in range(201)]
    out.mkdir()
    (out / "steps.json").write_text(json.dumps(steps), encoding="utf-8")

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            inline = text_of(await session.call_tool("tool_pool", {"pool": steps}))
            source = text_of(await session.call_tool("tool_pool", {"pool_source": "steps.json"}))
            exact = answer_of(await session.call_tool("tool_pool", {"pool": steps[:200]}))
        expected = ("A tool_pool call takes at most 200 steps; this one has 201 - split the work into calls "
                    "of up to 200 steps (with keys, calling one again skips what landed).")
        assert inline == expected
        assert source == expected
        assert exact["result"] is True
        assert exact["total"] == 200
        assert len(ops_of(store, "MELBIS_AGENT_TEST")) == 200
    run(scenario)


def test_a_nested_pool_is_refused(store: Store, out: Path) -> None:
    echo = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            by_unit = text_of(await session.call_tool("tool_pool", {"pool": [
                echo, {"unit": "tool_pool", "command": "run", "params": {"pool": [echo]}}]}))
            by_command = text_of(await session.call_tool("tool_pool", {"pool": [
                {"unit": "MELBIS_AGENT_TEST", "command": "TOOL_POOL"}]}))
            by_field = text_of(await session.call_tool("tool_pool", {"pool": [echo, echo, {"pool": [echo]}]}))
        assert by_unit == ("Step 2 is itself a tool_pool - a pool does not run pools: put its steps into "
                           "this pool, or make a separate tool_pool call.")
        assert by_command.startswith("Step 1 is itself a tool_pool - ")
        assert by_field.startswith("Step 3 is itself a tool_pool - ")
        assert ops_of(store, "MELBIS_AGENT_TEST") == []
    run(scenario)


def test_pool_refusals_keep_the_seeds_texts(store: Store, out: Path) -> None:
    step = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            async def refusal(arguments: dict[str, Any]) -> str:
                return text_of(await session.call_tool("tool_pool", arguments))

            assert await refusal({}) == ("pool is required - give the steps as a list under pool, or name "
                                         "a JSON file of them with pool_source.")
            assert await refusal({"pool": []}) == (
                "pool is required - the list of steps is empty; give at least one step.")
            assert await refusal({"pool": None, "pool_source": None}) == await refusal({})
            assert await refusal({"pool": [step], "pool_source": "x.json"}) == (
                "pool or pool_source, not both - keep the steps under pool, or the file of them under "
                "pool_source.")
            assert await refusal({"pool": [{"unit": "U"}]}) == (
                "Step 1 needs unit and command - command is missing; tool_list lists the store's tools and "
                "their commands.")
            assert await refusal({"pool": [{**step, "files": []}]}) == (
                "Step 1 carries files - a step is pure JSON; send attachments with a tool_run call (files or "
                "files_source).")
            assert await refusal({"pool": [{**step, "name": "a.b"}]}) == (
                "The name of step 1 carries a dot - @a.b.field would read it as a path; name it a_b.")
            assert await refusal({"pool": [{**step, "name": "x"}, {**step, "name": "X"}]}) == (
                "Two steps are named [X] - steps 1 and 2; give each step its own name (case is not told "
                "apart).")
            assert await refusal({"pool_source": "../steps.json"}) == (
                f"pool_source ../steps.json leads out of the store folder {out} - give a path inside that "
                "folder, or an absolute path.")
            assert await refusal({"pool_source": "none.json"}) == f"No such file: {out / 'none.json'}"
            assert await refusal({"pool": [step], "task": "a:b"}) == (
                "task is a bare id of letters, digits, '_', '-' and '.', at most 100 characters, not 'a:b' - "
                "leave it out to use this session's task " + (await session_task(session)) + ".")
            assert await refusal({"pool": [step], "max_concurrency": "4"}) == (
                "max_concurrency of tool_pool is a whole number, not a string - see the input schema of "
                "tool_pool in the tool list.")
            assert await refusal({"pool": [step], "serialize_on": "contract"}) == (
                "serialize_on goes with mode: parallel - with mode: sequential it would silently do nothing; "
                "set mode: parallel, or remove serialize_on.")
            assert await refusal({"pool": [{**step, "key": "a"}, {**step, "key": "a"}]}) == (
                "Two steps carry the key [a] - steps 1 and 2; keys must be unique in a pool: a keyed call "
                "runs at most once per task.")
            assert await refusal({"pool": [{**step, "for_each": {"file": "a.csv"}, "key": "${row.a}"}]}) == (
                "Step 1 runs over rows (for_each) - a tool_pool call runs one call per step, at most 200; "
                "list the calls as steps, or run the pool file with `pooler run`.")
            # The seed's refusal and a meaning problem of another step come in one answer.
            dotted, unknown = {**step, "name": "a.b"}, {**step, "params": {"x": "${nope}"}}
            assert await refusal({"pool": [dotted, unknown]}) == (
                "The name of step 1 carries a dot - @a.b.field would read it as a path; name it a_b.\n"
                "${nope} in params.x of step 2 names no variable - declare it under vars.")
            assert await refusal({"pool": [step], "pools": []}) == (
                "tool_pool takes no argument [pools] - did you mean pool? - it takes: pool, pool_source, "
                "mode, max_concurrency, serialize_on, stop_on_error, tolerate, rate, adaptive, breaker, "
                "retry, include_results, task, plan, plan_id.")
        assert ops_of(store) == []
    run(scenario)


async def session_task(session: ClientSession) -> str:
    """The task of the server's session, as an answer names it."""
    answer = answer_of(await session.call_tool("tool_pool", {"pool": [
        {"unit": "MELBIS_AGENT_TEST", "command": "CmdOps"}]}))
    task: str = answer["task"]
    return task


def test_an_at_word_naming_no_earlier_step_goes_as_data(store: Store, out: Path) -> None:
    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", {"pool": [
                {"name": "a", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
                 "params": {"mail": "@shop.example", "later": "@b.id", "self": "@a.id", "id": 7}},
                {"name": "b", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
                 "params": {"from_a": "@a.id", "deep": ["@a.mail"], "lit": "$${x}", "at": "@@home"}},
            ]})
        answer = answer_of(result)
        assert result.is_error is False, answer
        first, second = answer["steps"]
        assert first["detail"] == {"mail": "@shop.example", "later": "@b.id", "self": "@a.id", "id": 7}
        assert second["detail"] == {"from_a": 7, "deep": ["@shop.example"], "lit": "${x}", "at": "@home"}
    run(scenario)


def test_a_reference_that_nearly_names_a_step_goes_as_data_and_the_answer_asks_did_you_mean(
        store: Store, out: Path) -> None:
    pool = [{"name": "aa", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"id": 7}},
            {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
             "params": {"of": "@ab.id", "mail": "@shop.example", "lit": "@@ab.id"}}]
    note = {"step": 2, "at": "params.of", "reference": "@ab.id", "nearly_names": {"num": 1, "name": "aa"},
            "message": "@ab.id in params.of of step 2 names no step, so it goes as text - did you mean "
                       "@aa.id (step 1)? Write @@ab.id to send the text without this note."}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", {"pool": pool})
            planned = answer_of(await session.call_tool("tool_pool", {"pool": pool, "plan": True}))
        answer = answer_of(result)
        assert result.is_error is False, answer
        # The seed's rule holds: the text goes to the store as it is.
        assert answer["steps"][1]["detail"] == {"of": "@ab.id", "mail": "@shop.example", "lit": "@ab.id"}
        assert answer["notes"] == [note]
        assert planned["notes"] == [note]
    run(scenario)


def test_keys_make_a_second_identical_call_skip_what_landed(store: Store, out: Path) -> None:
    pool = {"pool": [
        {"name": "a", "key": "echo-a", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}},
        {"name": "b", "key": "echo-b", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
         "params": {"from": "@a.n"}},
        {"name": "free", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 3}},
    ]}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            first = answer_of(await session.call_tool("tool_pool", pool))
            second = answer_of(await session.call_tool("tool_pool", pool))
        assert [s["status"] for s in first["steps"]] == ["completed", "completed", "completed"]
        assert [s["status"] for s in second["steps"]] == ["skipped", "skipped", "completed"]
        assert second["result"] is True
        assert second["skipped"] == 2
        assert first["task"] == second["task"]
        assert first["task"].startswith("mcp-")
        ops = ops_of(store, "MELBIS_AGENT_TEST")
        keys = [op["idempotency_key"] for op in ops]
        assert keys.count(f"{first['task']}:echo-a") == 1
        assert keys.count(f"{first['task']}:echo-b") == 1
        assert len(ops) == 4  # the two keyed calls once, the unkeyed one twice
    run(scenario)


def test_each_pool_replaces_the_step_tables_of_the_pool_before(store: Store, out: Path) -> None:
    echo = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}
    table = {"unit": "MELBIS_AGENT_TEST", "command": "CmdTable", "params": {"rows": 1}}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            longer = answer_of(await session.call_tool("tool_pool", {"pool": [echo] * 4 + [table]}))
            shorter = answer_of(await session.call_tool("tool_pool", {"pool": [echo, table]}))
        # One session, one task for keys; still every call is a pool of its own.
        assert longer["task"] == shorter["task"]
        assert shorter["result"] is True
        assert sorted(p.name for p in (out / "tables").iterdir()) == [
            "step2.MELBIS_AGENT_TEST.CmdTable.rows.jsonl"]
    run(scenario)


def test_tool_run_and_tool_pool_count_one_jobs_rows_together(store: Store, out: Path) -> None:
    def rows(n: int) -> dict[str, Any]:
        return {"unit": "MELBIS_AGENT_TEST", "command": "CmdTable", "params": {"rows": n}, "into": "job"}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            first = answer_of(await session.call_tool("tool_run", rows(2)))
            pooled = answer_of(await session.call_tool("tool_pool", {"pool": [rows(3)]}))
            last = answer_of(await session.call_tool("tool_run", rows(1)))
        assert first["tables"]["rows"]["job_rows"] == 2
        assert pooled["steps"][0]["tables"]["rows"]["job_rows"] == 5
        assert last["tables"]["rows"]["job_rows"] == 6
        assert len((out / "job.rows.jsonl").read_text(encoding="utf-8").splitlines()) == 6
    run(scenario)


@pytest.mark.process
def test_a_named_task_keeps_keys_across_server_processes(store: Store, out: Path) -> None:
    pool = {"task": "import-2026", "pool": [
        {"key": "k1", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}]}

    async def scenario() -> None:
        async with connect(store, out) as session:
            first = answer_of(await session.call_tool("tool_pool", pool))
        async with connect(store, out) as session:
            second = answer_of(await session.call_tool("tool_pool", pool))
            fresh = answer_of(await session.call_tool("tool_pool", {"pool": pool["pool"]}))
        assert first["task"] == second["task"] == "import-2026"
        assert first["steps"][0]["status"] == "completed"
        assert second["steps"][0]["status"] == "skipped"
        # Without the task argument the new process has its own task, so the key runs again there.
        assert fresh["task"] != "import-2026"
        assert fresh["steps"][0]["status"] == "completed"
        assert (out / ".pooler" / "journal.sqlite").is_file()
        keys = [op["idempotency_key"] for op in ops_of(store, "MELBIS_AGENT_TEST")]
        assert keys == ["import-2026:k1", f"{fresh['task']}:k1"]
    run(scenario)


def test_pool_source_is_read_from_the_store_folder_with_options(store: Store, out: Path) -> None:
    out.mkdir()
    (out / "jobs").mkdir()
    (out / "jobs" / "orders.json").write_text(json.dumps([
        {"key": f"o{n}", "unit": "MELBIS_AGENT_ORDER", "command": "CmdAdd",
         "params": {"contract": f"C-{n % 2}"}} for n in range(4)]), encoding="utf-8")

    async def scenario() -> None:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        arguments: dict[str, Any] = {"pool_source": "jobs/orders.json", "mode": "parallel",
                                     "max_concurrency": 4, "serialize_on": "contract"}
        async with connect_in_process(store, out) as session:
            result = await session.call_tool("tool_pool", arguments, progress_callback=on_progress)
        answer = answer_of(result)
        assert result.is_error is False, answer
        assert answer["succeeded"] == 4
        assert len(ops_of(store, "MELBIS_AGENT_ORDER")) == 4
        assert seen
        assert max(seen) == 4
    run(scenario)


def test_a_cancelled_pool_starts_no_further_step(store: Store, out: Path) -> None:
    sleep = {"unit": "MELBIS_AGENT_TEST", "command": "CmdSleep", "params": {"ms": 1000}}

    async def scenario() -> None:
        first_done = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if progress >= 1:
                first_done.set()

        async with connect_in_process(store, out) as session:
            async with anyio.create_task_group() as group:
                async def call() -> None:
                    await session.call_tool("tool_pool", {"pool": [sleep] * 6}, progress_callback=on_progress)

                group.start_soon(call)
                await first_done.wait()
                group.cancel_scope.cancel()
            # Pools run one at a time, so this answer comes once the cancelled pool has let go.
            after = await session.call_tool("tool_pool", {"pool": [{"unit": "MELBIS_AGENT_TEST",
                                                                    "command": "CmdOps"}]})
        assert answer_of(after)["result"] is True
        # The first step landed; the second finished if it had left before the cancel came (the
        # race is the client's, not pooler's); nothing after it started. Without the cancel: 6.
        assert len(ops_of(store, "MELBIS_AGENT_TEST")) in (1, 2)
    run(scenario)


def test_the_token_never_reaches_the_agent(store_factory: Any, out: Path) -> None:
    store = store_factory("--token", "s3cret-token-4711")

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            echoed = await session.call_tool("tool_run", {
                "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"said": "s3cret-token-4711"}})
        answer = answer_of(echoed)
        assert answer["result"] is True
        assert answer["detail"] == {"said": "***"}
        assert "s3cret" not in json.dumps(answer)
    run(scenario)


@pytest.mark.process
def test_without_a_store_the_server_does_not_start(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, *SERVER, "--out", str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("pooler mcp: no store given: pass --store URL")


def test_tool_pool_compiles_through_the_same_step_as_run(store: Store, out: Path) -> None:
    """into accepts what run accepts, and @one.m.0 reads an object's key "0", as `pooler run` does."""
    echo = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}

    async def scenario() -> None:
        async with connect_in_process(store, out) as session:
            refused = await session.call_tool("tool_pool", {"pool": [{**echo, "into": "rates+eur"}]})
            assert refused.is_error is True
            assert "into is the bare name of a job - [rates+eur] holds '+'" in text_of(refused)
            assert ops_of(store) == []
            result = await session.call_tool("tool_pool", {"pool": [
                {**echo, "name": "one", "params": {"m": {"0": "a", "1": "b"}, "l": ["c"]}},
                {**echo, "params": {"x": "@one.m.0", "y": "@one.l.0"}},
            ]})
        answer = answer_of(result)
        assert result.is_error is False, answer
        assert answer["steps"][1]["detail"] == {"x": "a", "y": "c"}
    run(scenario)
