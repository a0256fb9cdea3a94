"""``pool_run``: a pool file the server can read, run as ``pooler run`` runs it (steps over rows,
chunks, keys, variables, samples, dry runs), through the SDK's own client, the server in the test's
process."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Store
from mcpkit import answer_of, connect_in_process, text_of

#: Two steps over the same 300 rows: one a call a row under a key, one in chunks of 50.
ROWS_POOL = """\
vars:
  tag: {description: the run's tag}
mode: parallel
max_concurrency: 8
pool:
  - name: add
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    key: "add-${row.sku}"
    params: {sku: "${row.sku}", tag: "${tag}"}
  - name: bulk
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv, chunk: 50, field: rows}
    params: {tag: "${tag}"}
"""


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    (path / "pools").mkdir(parents=True)
    (path / "pools" / "goods.csv").write_text("sku\n" + "".join(f"S-{n}\n" for n in range(300)),
                                              encoding="utf-8")
    (path / "pools" / "rows.yaml").write_text(ROWS_POOL, encoding="utf-8")
    return path


def echoes(store: Store) -> list[dict[str, Any]]:
    return [op for op in store.ops() if op["unit"] == "MELBIS_AGENT_TEST" and op["command"] == "CmdEcho"]


def test_pool_run_runs_steps_over_rows_and_a_second_call_skips_what_landed(store: Store, out: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with connect_in_process(store, out) as session:
            first = answer_of(await session.call_tool("pool_run", {"file": "pools/rows.yaml",
                                                                   "vars": {"tag": "night"}}))
            looked = answer_of(await session.call_tool("tool_pool", {"task": first["task"]}))
            again = answer_of(await session.call_tool("pool_run", {"file": "pools/rows.yaml",
                                                                   "vars": {"tag": "night"}}))
            return first, looked, again

    first, looked, again = anyio.run(scenario)
    assert first["result"] is True
    assert first["status"] == "completed"
    assert first["total"] == 306
    assert first["succeeded"] == 306
    assert [(s["num"], s["status"], s["rows"]["completed"], s["calls"]) for s in first["steps"]] == [
        (1, "completed", 300, 300), (2, "completed", 300, 6)]
    assert looked["task"] == first["task"]
    assert looked["status"] == "completed"
    # The same file again joins its task: the keyed calls landed and are skipped.
    assert again["task"] == first["task"]
    assert again["steps"][0]["rows"]["skipped"] == 300
    sent = echoes(store)
    keys = Counter(op["idempotency_key"] for op in sent if op["idempotency_key"])
    assert len(keys) == 300
    assert set(keys.values()) == {1}


def test_a_sample_runs_the_first_rows_and_a_dry_run_sends_nothing(store: Store, out: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect_in_process(store, out) as session:
            plan = answer_of(await session.call_tool("pool_run", {"file": str(out / "pools" / "rows.yaml"),
                                                                  "vars": {"tag": "x"}, "dry_run": True}))
            sampled = answer_of(await session.call_tool("pool_run", {"file": "pools/rows.yaml",
                                                                     "vars": {"tag": "x"}, "sample": 20}))
            return plan, sampled

    plan, sampled = anyio.run(scenario)
    assert plan["dry_run"] is True
    assert plan["calls"] == 306
    assert [(s["num"], s["calls"], s["rows"]["count"]) for s in plan["steps"]] == [(1, 300, 300), (2, 6, 300)]
    assert plan["message"] == ("Nothing was sent: this is the plan. Call pool_run again without dry_run to "
                               "run it.")
    assert sampled["total"] == 21
    assert [s["rows"]["completed"] for s in sampled["steps"]] == [20, 20]
    assert len(echoes(store)) == 21


def test_pool_run_refuses_before_sending_with_the_reason(store: Store, out: Path) -> None:
    (out / "pools" / "bad.yaml").write_text("pool:\n  - unit: MELBIS_AGENT_TEST\n    comand: CmdEcho\n",
                                            encoding="utf-8")

    async def scenario() -> list[str]:
        async with connect_in_process(store, out) as session:
            return [text_of(await session.call_tool("pool_run", arguments)) for arguments in (
                {"file": "../elsewhere.yaml"},
                {"file": "pools/rows.yaml"},
                {"file": "pools/rows.yaml", "vars": {"tag": ["a"]}},
                {"file": "pools/rows.yaml", "vars": {"tag": "x"}, "sample": 0},
                {"file": "pools/bad.yaml"},
                {"file": "pools/none.yaml"},
                {"file": "pools/rows.yaml", "pool": []},
            )]

    texts = anyio.run(scenario)
    pools = out / "pools"
    assert texts[0] == (f"file ../elsewhere.yaml leads out of the store folder {out} - give a path inside "
                        "that folder, or an absolute path.")
    assert texts[1] == (f"{pools / 'rows.yaml'}:2:3: The variable [tag] has no value - give it with "
                        'vars {"tag": "VALUE"}, or give it a default under vars.\n'
                        "    2 |   tag: {description: the run's tag}\n"
                        "      |   ^")
    assert texts[2] == ("vars.tag of pool_run is a list - give a variable's value as text, a string.")
    assert texts[3] == "sample of pool_run is a number of rows, 1 or more, not 0."
    assert texts[4].splitlines()[0] == (f"{pools / 'bad.yaml'}:2:5: Step 1 needs unit and command - command "
                                        "is missing; tool_list lists the store's tools and their commands.")
    assert texts[4].splitlines()[3] == (f"{pools / 'bad.yaml'}:3:5: Unknown key [comand] in step 1 - did you "
                                        "mean command?")
    assert texts[5] == f"No such file: {pools / 'none.yaml'}"
    assert texts[6] == ("pool_run takes no argument [pool] - it takes: file, vars, sample, task, dry_run, "
                        "plan, plan_id.")
    assert echoes(store) == []


def test_a_variable_the_pool_does_not_declare_is_named_as_an_argument(store: Store, out: Path) -> None:
    async def scenario() -> str:
        async with connect_in_process(store, out) as session:
            return text_of(await session.call_tool("pool_run", {"file": "pools/rows.yaml",
                                                                "vars": {"tag": "x", "colour": "red"}}))

    text = anyio.run(scenario)
    assert text == (f"vars.colour: {out / 'pools' / 'rows.yaml'} declares no variable [colour] - it "
                    "declares: tag.")
    assert echoes(store) == []


def test_a_client_with_a_progress_token_is_told_the_rows_done(store: Store, out: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def scenario() -> dict[str, Any]:
        async with connect_in_process(store, out) as session:
            arguments = {"file": "pools/rows.yaml", "vars": {"tag": "p"}}
            return answer_of(await session.call_tool("pool_run", arguments, progress_callback=on_progress))

    answer = anyio.run(scenario)
    assert answer["result"] is True
    messages = [m for _, _, m in seen]
    assert "step 1 add MELBIS_AGENT_TEST.CmdEcho: 300 of 300 rows done" in messages
    assert "step 2 bulk MELBIS_AGENT_TEST.CmdEcho: 300 of 300 rows done" in messages
    # Told as the rows go, not once a call: a notification a row would be 600 of them.
    assert len(seen) < 100
    assert {total for _, total, _ in seen} == {306.0}
    done = sorted(p for p, _, _ in seen)
    assert done[-1] == 306


def test_a_pools_variable_is_read_from_the_environment_the_server_was_given(store: Store, out: Path) -> None:
    (out / "pools" / "env.yaml").write_text(
        "vars:\n  region: {env: POOLER_TEST_REGION}\npool:\n  - name: add\n    unit: MELBIS_AGENT_TEST\n"
        "    command: CmdEcho\n    params: {region: \"${region}\"}\n", encoding="utf-8")
    assert "POOLER_TEST_REGION" not in os.environ

    async def scenario() -> dict[str, Any]:
        async with connect_in_process(store, out, env={"POOLER_TEST_REGION": "north"}) as session:
            return answer_of(await session.call_tool("pool_run", {"file": "pools/env.yaml"}))

    assert anyio.run(scenario)["result"] is True
    assert [op["params"] for op in echoes(store)] == [{"region": "north"}]
