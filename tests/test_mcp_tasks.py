"""The Tasks extension of MCP 2026-07-28 over HTTP, driven by raw JSON-RPC (the SDK client has no
verbs for it): a long pool_run is answered with a task whose id is the journal's task, and any
pooler mcp process of that journal answers tasks/get for it - a second server, or one restarted
after SIGKILL."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from mcpkit import HttpServer, http_server, start_http
from taskskit import call_tool, rpc

pytestmark = pytest.mark.process

ROWS = 1000
#: The rows of the slow pool: 20 ms a call, one at a time, so a task of them runs for some 5 s,
#: long enough to be killed or cancelled on its way at any load.
SLOW_ROWS = 250
#: The rows of the pool a test cancels: some 200 s of calls, so it is still on its way whenever the
#: cancel comes, however long a second server takes to start on a busy machine; cancelled, it ends at once.
LONG_ROWS = 10_000
#: Two steps over the same 1,000 rows, each a call a row under a key.
TWO_STEPS = """\
mode: parallel
max_concurrency: 4
pool:
  - name: add
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    key: "add-${row.sku}"
    params: {sku: "${row.sku}"}
  - name: check
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    key: "check-${row.sku}"
    params: {sku: "${row.sku}", again: true}
"""
#: One step over the rows, slow enough to be stopped on its way.
SLOW = """\
pool:
  - name: slow
    unit: MELBIS_AGENT_TEST
    command: CmdSleep
    for_each: {file: slow.csv}
    key: "slow-${row.sku}"
    params: {ms: 20}
"""


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    (path / "pools").mkdir(parents=True)
    (path / "pools" / "goods.csv").write_text("sku\n" + "".join(f"S-{n}\n" for n in range(ROWS)),
                                              encoding="utf-8")
    (path / "pools" / "slow.csv").write_text("sku\n" + "".join(f"S-{n}\n" for n in range(SLOW_ROWS)),
                                             encoding="utf-8")
    (path / "pools" / "two.yaml").write_text(TWO_STEPS, encoding="utf-8")
    (path / "pools" / "slow.yaml").write_text(SLOW, encoding="utf-8")
    (path / "pools" / "long.csv").write_text("sku\n" + "".join(f"S-{n}\n" for n in range(LONG_ROWS)),
                                             encoding="utf-8")
    (path / "pools" / "long.yaml").write_text(SLOW.replace("slow.csv", "long.csv"), encoding="utf-8")
    return path


def result_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response, response
    found: dict[str, Any] = response["result"]
    return found


def poll(server: HttpServer, task_id: str, until: Any, *, budget: float = 300.0) -> list[dict[str, Any]]:
    """tasks/get, at the interval the task asks for (at most a fifth of a second here), until
    ``until(task)``; every answer."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + budget
    while True:
        task = result_of(rpc(server.url, server.token, "tasks/get", {"taskId": task_id}))
        seen.append(task)
        if until(task):
            return seen
        assert not done(task), f"task {task_id} ended first: {task}"
        assert time.monotonic() < deadline, f"task {task_id} never got there: {task}"
        time.sleep(min(task["pollIntervalMs"], 200) / 1000)


def settle(server: HttpServer, task_id: str, key: str, decision: str) -> None:
    """tasks/update: the client's word on the task's calls in doubt."""
    answer = {key: {"action": "accept", "content": {"decision": decision}}}
    params = {"taskId": task_id, "inputResponses": answer}
    update = result_of(rpc(server.url, server.token, "tasks/update", params))
    assert update["resultType"] == "complete"


def done(task: dict[str, Any]) -> bool:
    return task["status"] != "working"


def keys_at_store(store: Store, command: str = "CmdEcho") -> Counter[str]:
    return Counter(op["idempotency_key"] for op in store.ops()
                   if op["unit"] == "MELBIS_AGENT_TEST" and op["command"] == command)


def test_a_pool_run_over_rows_is_a_task_polled_to_its_end_with_growing_counts(store: Store,
                                                                              out: Path) -> None:
    with http_server(store, out) as server:
        created = result_of(call_tool(server.url, server.token, "pool_run", {"file": "pools/two.yaml"}))
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert created["ttlMs"] is None
        task_id = created["taskId"]
        seen = poll(server, task_id, done)
        # The same task, from the journal, through a second server of the same store folder.
        with http_server(store, out) as second:
            other = result_of(rpc(second.url, second.token, "tasks/get", {"taskId": task_id}))
    final = seen[-1]
    assert final["status"] == "completed"
    assert final["counts"] == {"planned": 2 * ROWS, "completed": 2 * ROWS, "failed": 0, "in_doubt": 0,
                               "skipped": 0, "not_run": 0}
    assert final["statusMessage"] == "2,000 calls planned: 2,000 completed"
    completed = [t["counts"]["completed"] for t in seen]
    assert completed == sorted(completed)
    answer = final["result"]["structuredContent"]
    assert final["result"]["isError"] is False
    assert answer["result"] is True
    assert [(s["status"], s["rows"]["completed"]) for s in answer["steps"]] == [("completed", ROWS)] * 2
    assert other["status"] == "completed"
    assert other["counts"] == final["counts"]
    assert other["result"] == final["result"]
    keys = keys_at_store(store)
    assert len(keys) == 2 * ROWS
    assert set(keys.values()) == {1}


def test_a_client_without_the_extension_gets_the_answer_as_before(store: Store, out: Path) -> None:
    (out / "pools" / "goods.csv").write_text("sku\nS-1\nS-2\n", encoding="utf-8")
    with http_server(store, out) as server:
        plain = result_of(call_tool(server.url, server.token, "pool_run", {"file": "pools/two.yaml"},
                                    tasks=False))
        short = result_of(call_tool(server.url, server.token, "tool_pool",
                                    {"pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}]}))
    assert "taskId" not in plain
    assert plain["structuredContent"]["result"] is True
    assert plain["structuredContent"]["total"] == 4
    # A pool of one call is short: no task, even for a client that takes tasks.
    assert "taskId" not in short
    assert short["structuredContent"]["result"] is True


def killed_mid_task(store: Store, out: Path) -> str:
    """A slow pool_run task, its server killed with SIGKILL once 20 of its calls completed: its id."""
    first = start_http(store, out)
    try:
        created = result_of(call_tool(first.url, first.token, "pool_run", {"file": "pools/slow.yaml"}))
        task_id = str(created["taskId"])
        poll(first, task_id, lambda t: t["counts"]["completed"] >= 20)
    finally:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.communicate(timeout=60)
    return task_id


def test_a_server_killed_and_started_again_answers_for_the_task_and_takes_it_up(store: Store, out: Path
                                                                               ) -> None:
    task_id = killed_mid_task(store, out)
    with http_server(store, out) as again:
        died = result_of(rpc(again.url, again.token, "tasks/get", {"taskId": task_id}))
        assert died["status"] == "completed"
        session = task_id.rsplit("-", 1)[0]
        assert died["statusMessage"].endswith(
            " - the run died before it finished (its server was killed, or its machine went down): "
            "tasks/update of it takes the task up in this server, as does the tool called again with the "
            f"same arguments and task {session}; it sends only what did not land.")
        assert died["result"]["isError"] is True
        taken = result_of(call_tool(again.url, again.token, "pool_run", {"file": "pools/slow.yaml",
                                                                         "task": session}))
        assert taken["taskId"] == task_id
        if taken["status"] == "input_required":
            # The kill left a call in flight: sent again under its key, the store carries it out once.
            [key] = taken["inputRequests"]
            settle(again, task_id, key, "retry")
        final = poll(again, task_id, done)[-1]
    assert final["status"] == "completed"
    assert final["counts"]["completed"] + final["counts"]["skipped"] == SLOW_ROWS
    assert final["result"]["structuredContent"]["result"] is True
    keys = keys_at_store(store, "CmdSleep")
    assert len(keys) == SLOW_ROWS
    assert set(keys.values()) == {1}


@pytest.mark.parametrize("where", ["the server that runs it", "another server of the journal"])
def test_tasks_cancel_halts_the_task_and_leaves_the_unsent_calls_not_run(store: Store, out: Path,
                                                                         where: str) -> None:
    with http_server(store, out) as server:
        created = result_of(call_tool(server.url, server.token, "pool_run", {"file": "pools/long.yaml"}))
        task_id = created["taskId"]
        poll(server, task_id, lambda t: t["counts"]["completed"] >= 5)
        if where == "the server that runs it":
            cancelled = result_of(rpc(server.url, server.token, "tasks/cancel", {"taskId": task_id}))
        else:
            with http_server(store, out) as second:
                cancelled = result_of(rpc(second.url, second.token, "tasks/cancel", {"taskId": task_id}))
        # The runner's calls in flight have ended: what the store got is all it gets.
        poll(server, task_id, done)
        sent = len(keys_at_store(store, "CmdSleep"))
        later = result_of(rpc(server.url, server.token, "tasks/get", {"taskId": task_id}))
    assert cancelled["status"] == "cancelled"
    assert later["status"] == "cancelled"
    counts = later["counts"]
    assert counts["not_run"] > 0
    assert counts["in_doubt"] == 0
    assert counts["completed"] + counts["not_run"] == LONG_ROWS
    assert "result" not in later
    # Nothing was sent after the cancel: every call the store got is recorded completed.
    assert sent == counts["completed"]


#: A plan of more calls than the long-call threshold (50): 58 of one command, 2 of another.
LONG_PLAN = [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "key": f"k{n}", "params": {"n": n}}
             for n in range(58)] + [{"unit": "MELBIS_AGENT_TEST", "command": "CmdSleep", "key": f"s{n}",
                                     "params": {"ms": 1}} for n in range(2)]


def confirm(server: HttpServer, task_id: str, key: str, answer: dict[str, Any]) -> None:
    update = result_of(rpc(server.url, server.token, "tasks/update",
                           {"taskId": task_id, "inputResponses": {key: answer}}))
    assert update["resultType"] == "complete"


def test_the_commit_of_a_long_plan_is_a_task_and_a_second_commit_gets_the_answer(store: Store,
                                                                                 out: Path) -> None:
    with http_server(store, out) as server:
        plan = {"plan": True, "pool": LONG_PLAN}
        planned = result_of(call_tool(server.url, server.token, "tool_pool", plan))
        plan_id = planned["structuredContent"]["plan_id"]
        created = result_of(call_tool(server.url, server.token, "tool_pool", {"plan_id": plan_id}))
        assert created["resultType"] == "task"
        assert created["status"] == "input_required"
        # Nothing is sent until the client confirms the counts.
        assert keys_at_store(store) == Counter()
        confirm(server, created["taskId"], "confirm-1", {"action": "accept", "content": {"confirm": True}})
        final = poll(server, created["taskId"], done)[-1]
        again = result_of(call_tool(server.url, server.token, "tool_pool", {"plan_id": plan_id}))
    assert final["status"] == "completed"
    assert final["counts"]["completed"] == 60
    assert again["structuredContent"]["result"] is True
    assert again["structuredContent"]["succeeded"] == 60
    assert len(keys_at_store(store)) == 58
    assert len(keys_at_store(store, "CmdSleep")) == 2


@pytest.mark.parametrize("how", ["a decline", "tasks/cancel"])
def test_the_commit_of_a_long_plan_asks_to_confirm_its_counts_and_a_decline_sends_nothing(
        store: Store, out: Path, how: str) -> None:
    with http_server(store, out) as server:
        plan = {"plan": True, "pool": LONG_PLAN}
        planned = result_of(call_tool(server.url, server.token, "tool_pool", plan))
        plan_id = planned["structuredContent"]["plan_id"]
        asked = result_of(call_tool(server.url, server.token, "tool_pool", {"plan_id": plan_id}))
        task_id = asked["taskId"]
        polled = result_of(rpc(server.url, server.token, "tasks/get", {"taskId": task_id}))
        if how == "a decline":
            confirm(server, task_id, "confirm-1", {"action": "decline"})
        else:
            cancelled = result_of(rpc(server.url, server.token, "tasks/cancel", {"taskId": task_id}))
            assert cancelled["status"] == "cancelled"
        ended = result_of(rpc(server.url, server.token, "tasks/get", {"taskId": task_id}))
        # The plan stays planned: a client without the extension commits it, as before.
        later = result_of(call_tool(server.url, server.token, "tool_pool", {"plan_id": plan_id}, tasks=False))
    assert asked["status"] == polled["status"] == "input_required"
    assert asked["inputRequests"] == polled["inputRequests"]
    assert asked["counts"] == {"planned": 60, "completed": 0, "failed": 0, "in_doubt": 0, "skipped": 0,
                               "not_run": 60}
    [(key, request)] = asked["inputRequests"].items()
    assert key == "confirm-1"
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert request["params"]["message"] == asked["statusMessage"] == (
        f"60 calls: 58 MELBIS_AGENT_TEST.CmdEcho, 2 MELBIS_AGENT_TEST.CmdSleep - the plan {plan_id}, to be "
        "sent to the store. confirm true sends them; false (or decline) ends the task with nothing sent, "
        "the plan still planned.")
    assert ended["status"] == "cancelled"
    assert ended["statusMessage"] == (f"declined: nothing was sent of the 60 calls of the plan {plan_id}, "
                                      "which stays planned.")
    assert ended["counts"]["not_run"] == 60
    assert "result" not in ended
    assert "taskId" not in later
    assert later["structuredContent"]["succeeded"] == 60
    assert len(keys_at_store(store)) == 58


DOUBT = """\
pool:
  - name: long
    unit: MELBIS_AGENT_TEST
    command: CmdSleep
    for_each: {file: three.csv}
    key: "long-${row.sku}"
    params: {ms: 1500}
"""


def test_input_required_settles_a_call_in_doubt_with_skip(store: Store, out: Path) -> None:
    (out / "pools" / "three.csv").write_text("sku\nA\nB\nC\n", encoding="utf-8")
    (out / "pools" / "doubt.yaml").write_text(DOUBT, encoding="utf-8")
    arguments = {"file": "pools/doubt.yaml", "task": "doubt"}
    first = start_http(store, out)
    try:
        task_id = result_of(call_tool(first.url, first.token, "pool_run", arguments))["taskId"]
        # The first call is sent and its answer not recorded yet: killed now, it stays in doubt.
        poll(first, task_id, lambda t: t["counts"]["in_doubt"] == 1)
    finally:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.communicate(timeout=60)
    with http_server(store, out) as again:
        asked = result_of(call_tool(again.url, again.token, "pool_run", arguments))
        polled = result_of(rpc(again.url, again.token, "tasks/get", {"taskId": task_id}))
        assert asked["status"] == polled["status"] == "input_required"
        assert asked["inputRequests"] == polled["inputRequests"]
        [(key, request)] = asked["inputRequests"].items()
        assert key == "in-doubt-1"
        assert request["method"] == "elicitation/create"
        assert request["params"]["requestedSchema"]["properties"]["decision"]["enum"] == ["retry", "skip"]
        assert request["params"]["message"] == (
            f"1 calls of task {task_id} were sent by an earlier run whose answers were never recorded: they "
            "may or may not have been carried out (step 1 row 0 (key long-A)). retry: send them again under "
            "their keys (a store carries out a key once); skip: leave them in doubt and send the rest.")
        settle(again, task_id, key, "skip")
        final = poll(again, task_id, done)[-1]
    assert final["status"] == "completed"
    # As `pooler run --in-doubt skip` does: the call is skipped, and the answer names it in doubt.
    assert final["counts"] == {"planned": 3, "completed": 2, "failed": 0, "in_doubt": 0, "skipped": 1,
                               "not_run": 0}
    answer = final["result"]["structuredContent"]
    assert [(c["key"], c["action"]) for c in answer["in_doubt"]] == [("long-A", "skipped")]
    # The call in doubt was not sent again: the store has it once at most (it may have ended there).
    keys = keys_at_store(store, "CmdSleep")
    # Sent as Idempotency-Key <task>:<key>, the task being the one named.
    assert keys["doubt:long-B"] == keys["doubt:long-C"] == 1
    assert keys["doubt:long-A"] <= 1


FAILING = """\
stop_on_error: false
mode: parallel
max_concurrency: 8
pool:
  - name: bad
    unit: MELBIS_AGENT_TEST
    command: CmdFail
    for_each: {file: goods.csv}
    params: {}
"""


def test_failed_calls_beyond_the_answer_are_a_resource_link_the_server_reads(store: Store, out: Path) -> None:
    (out / "pools" / "goods.csv").write_text("sku\n" + "".join(f"S-{n}\n" for n in range(150)),
                                             encoding="utf-8")
    (out / "pools" / "failing.yaml").write_text(FAILING, encoding="utf-8")
    with http_server(store, out) as server:
        created = result_of(call_tool(server.url, server.token, "pool_run", {"file": "pools/failing.yaml"}))
        task_id = created["taskId"]
        final = poll(server, task_id, done)[-1]
        [text, link] = final["result"]["content"]
        uri = link["uri"]
        read = result_of(rpc(server.url, server.token, "resources/read", {"uri": uri}, name=uri))
    assert final["counts"]["failed"] == 150
    assert text["type"] == "text"
    step = final["result"]["structuredContent"]["steps"][0]
    assert (len(step["failures"]), step["failures_omitted"]) == (100, 50)
    assert link == {"type": "resource_link", "uri": f"pooler://tasks/{task_id}/failed-or-in-doubt.jsonl",
                    "name": "failed-or-in-doubt", "mimeType": "application/x-ndjson",
                    "description": f"Every failed and in-doubt call of task {task_id} (50 left out of the "
                                   "answer), one JSON object a line, from the journal."}
    [contents] = read["contents"]
    lines = [json.loads(line) for line in contents["text"].splitlines()]
    assert len(lines) == 150
    assert {line["status"] for line in lines} == {"failed"}
    assert sorted(line["row"] for line in lines) == list(range(150))


def test_tasks_update_takes_up_a_task_whose_runner_died_and_it_completes_with_each_call_once(
        store: Store, out: Path) -> None:
    task_id = killed_mid_task(store, out)
    with http_server(store, out) as again:
        died = result_of(rpc(again.url, again.token, "tasks/get", {"taskId": task_id}))
        assert died["status"] == "completed"
        assert " - the run died before it finished " in died["statusMessage"]
        assert "tasks/update" in died["statusMessage"]
        # No answer to give: the task's journal holds its pool, and this server runs it again.
        update = result_of(rpc(again.url, again.token, "tasks/update",
                               {"taskId": task_id, "inputResponses": {}}))
        assert update["resultType"] == "complete"
        taken = result_of(rpc(again.url, again.token, "tasks/get", {"taskId": task_id}))
        if taken["status"] == "input_required":
            # The kill left a call in flight: sent again under its key, the store carries it out once.
            [key] = taken["inputRequests"]
            settle(again, task_id, key, "retry")
        else:
            assert taken["status"] == "working"
        final = poll(again, task_id, done)[-1]
    assert final["status"] == "completed"
    assert final["counts"]["completed"] == SLOW_ROWS
    assert final["result"]["structuredContent"]["result"] is True
    keys = keys_at_store(store, "CmdSleep")
    assert len(keys) == SLOW_ROWS
    assert set(keys.values()) == {1}
