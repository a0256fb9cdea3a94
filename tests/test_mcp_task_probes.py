"""A task taken up with calls an earlier run left in doubt asks the client what to do with them
(``input_required``), and when their step has a probe the question carries what the probe says of
each now - over HTTP, driven by raw JSON-RPC at 2026-07-28, on either journal."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from mcpkit import HttpServer, http_server, start_http
from taskskit import call_tool, rpc
from test_mcp_tasks import done, poll, result_of, settle

from pooler.store.faults import FaultPlan

pytestmark = pytest.mark.process

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
#: Goods added a row at a time, under a key, with the read that tells whether an add landed.
PROBED = """\
pool:
  - name: add
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {{file: goods.csv}}
    key: "goods-${{row.sku}}"
    params: {{sku: "${{row.sku}}", name: "${{row.name}}", price: "${{row.price}}"}}
    probe: {probe}
"""
PROBE = "{command: CmdGet, params: {sku: '${row.sku}'}, landed: found, detail: row}"


class SlowFirst(FaultPlan):
    """The store carries out the first CmdAdd of G0 at once and holds its answer back (``slow``):
    a server killed meanwhile leaves the call sent, landed, and in doubt."""

    def __init__(self) -> None:
        super().__init__([], slow_ms=120_000)
        self.left = True

    def pick(self, request: dict[str, Any]) -> str | None:
        params = request.get("params") or {}
        if self.left and request.get("command") == "CmdAdd" and params.get("sku") == "G0":
            self.left = False
            return "slow"
        return None


def adds(store: Store) -> Counter[str]:
    return Counter(str(op["params"]["sku"]) for op in store.ops() if op["command"] == "CmdAdd")


def left_in_doubt(store: Store, tmp_path: Path, extra: tuple[str, ...], probe: str = PROBE
                  ) -> tuple[Path, str, dict[str, Any]]:
    """A pool_run task whose server was killed while the store held back the answer of its first
    add (carried out): its store folder, its task id and the arguments of its call."""
    out = tmp_path / "out"
    (out / "pools").mkdir(parents=True)
    rows = "".join(f"G{n},Goods {n},{n}.5\n" for n in range(3))
    (out / "pools" / "goods.csv").write_text(f"sku,name,price\n{rows}", encoding="utf-8")
    (out / "pools" / "probed.yaml").write_text(PROBED.format(probe=probe), encoding="utf-8")
    assert store.served is not None
    store.served.server.faults = SlowFirst()
    arguments = {"file": "pools/probed.yaml", "task": "probed"}
    first = start_http(store, out, *extra)
    try:
        task_id = result_of(call_tool(first.url, first.token, "pool_run", arguments))["taskId"]
        # G0 is carried out at the store, its answer held back: killed now, the call stays in doubt.
        deadline = time.monotonic() + 120
        while not adds(store):
            assert time.monotonic() < deadline, "the store never got the first add"
            time.sleep(0.05)
    finally:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.communicate(timeout=60)
    return out, task_id, arguments


def asked_of(server: HttpServer, arguments: dict[str, Any]) -> tuple[str, str]:
    """pool_run called again: the task waits for the client's word; its one question's key and text."""
    asked = result_of(call_tool(server.url, server.token, "pool_run", arguments))
    assert asked["status"] == "input_required", asked
    [(key, question)] = asked["inputRequests"].items()
    polled = result_of(rpc(server.url, server.token, "tasks/get", {"taskId": asked["taskId"]}))
    assert polled["inputRequests"] == asked["inputRequests"]
    return key, str(question["params"]["message"])


@pytest.mark.parametrize("journal", JOURNALS)
def test_the_question_on_a_call_in_doubt_carries_what_its_probe_says_of_it(
        journal: str, store: Store, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    extra: tuple[str, ...] = ()
    if journal == "postgres":
        from pooler.journal.postgres.schema import upgrade  # noqa: PLC0415

        url: str = request.getfixturevalue("pg_url")
        upgrade(url)
        extra = ("--journal", url)
    out, task_id, arguments = left_in_doubt(store, tmp_path, extra)
    with http_server(store, out, *extra) as again:
        key, message = asked_of(again, arguments)
        assert message == (
            f"1 calls of task {task_id} were sent by an earlier run whose answers were never recorded: they "
            "may or may not have been carried out (step 1 row 0 (key goods-G0)). Their steps' probes, read "
            "now: step 1 row 0 (key goods-G0): its probe CmdGet found it landed (The goods are found). "
            "retry: send them again under their keys (a store carries out a key once); skip: leave them in "
            "doubt and send the rest.")
        # Asking sent the probe, a read, and nothing else.
        assert adds(store) == Counter({"G0": 1})
        gets = [op for op in store.ops() if op["command"] == "CmdGet"]
        assert [op["params"] for op in gets] == [{"sku": "G0"}]
        settle(again, task_id, key, "retry")
        final = poll(again, task_id, done)[-1]
    assert final["status"] == "completed"
    assert final["counts"]["completed"] == 3
    assert final["result"]["structuredContent"]["result"] is True
    # Sent again under its key, the add the store had carried out is not carried out twice.
    assert adds(store) == Counter({"G0": 1, "G1": 1, "G2": 1})


def test_a_probe_that_finds_nothing_while_the_call_may_still_be_running_settles_nothing(
        store: Store, tmp_path: Path) -> None:
    # A probe that reads another sku finds nothing: that proves nothing of a call whose request
    # left seconds ago (the store may still be carrying it out), and the question says so.  The
    # task is taken up by tasks/update, from the pool its journal keeps.
    other = "{command: CmdGet, params: {sku: '${row.sku}-other'}, landed: found}"
    out, task_id, _ = left_in_doubt(store, tmp_path, (), other)
    with http_server(store, out) as again:
        taking = {"taskId": task_id, "inputResponses": {}}
        update = result_of(rpc(again.url, again.token, "tasks/update", taking))
        assert update["resultType"] == "complete"
        polled = result_of(rpc(again.url, again.token, "tasks/get", {"taskId": task_id}))
        assert polled["status"] == "input_required", polled
        [(key, question)] = polled["inputRequests"].items()
        message = question["params"]["message"]
        said = re.search(r"Their steps' probes, read now: (.*)\. retry: ", message)
        assert said is not None, message
        assert re.fullmatch(
            r"step 1 row 0 \(key goods-G0\): its probe settled nothing \(the probe CmdGet found it not "
            r"landed, but the call's request left \d+ s ago and may still be running at the store; a probe "
            r"10 minutes after it left settles it\)", said[1]), said[1]
        settle(again, task_id, key, "skip")
        final = poll(again, task_id, done)[-1]
    # Skipped as the client said: the rest sent, the call in doubt not sent again.
    assert final["counts"] == {"planned": 3, "completed": 2, "failed": 0, "in_doubt": 0, "skipped": 1,
                               "not_run": 0}
    assert adds(store) == Counter({"G0": 1, "G1": 1, "G2": 1})
