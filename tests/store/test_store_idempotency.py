"""Idempotency-Key: a repeat is answered from the store, the command does not run again."""

from __future__ import annotations

import threading
from typing import Any

import requests
from helpers import STORE_TOKEN, Store
from storekit import TEST, unique


def _keyed(
    store: Store, key: str, unit: str, command: str, params: dict[str, Any] | None = None,
    token: str = STORE_TOKEN,
) -> requests.Response:
    return requests.post(
        f"{store.url}/tool_run",
        json={"unit": unit, "command": command, "params": params or {}},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
        timeout=30,
    )


def _ops_of(store: Store, key: str) -> list[dict[str, Any]]:
    return [o for o in store.ops() if o["idempotency_key"] == key]


def test_a_repeat_gets_the_same_body_and_runs_nothing(shared: Store) -> None:
    key = unique("task") + ":cur"
    first = _keyed(shared, key, "MELBIS_AGENT_CURRENCY", "CmdAdd", {"name": "Once"})
    second = _keyed(shared, key, "MELBIS_AGENT_CURRENCY", "CmdAdd", {"name": "Once"})
    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert len(_ops_of(shared, key)) == 1
    assert _ops_of(shared, key)[0]["params"] == {"name": "Once", "multiplex": 1.0, "division": False}
    rows = shared.call("MELBIS_AGENT_CURRENCY", "CmdList").json()["data"]["tables"]["currency"]
    assert sum(r["name"] == "Once" for r in rows) == 1


def test_a_crash_is_kept_too(shared: Store) -> None:
    key = unique("crash")
    first = _keyed(shared, key, TEST, "CmdCrash")
    second = _keyed(shared, key, TEST, "CmdCrash")
    assert first.status_code == second.status_code == 500
    assert second.text == first.text
    assert second.headers["Content-Type"] == first.headers["Content-Type"]
    assert len(_ops_of(shared, key)) == 1


def test_a_refusal_of_the_engine_is_not_kept(shared: Store) -> None:
    key = unique("refused")
    refused = _keyed(shared, key, TEST, "CmdEcho2").json()["data"]
    assert refused["result"] is False
    done = _keyed(shared, key, TEST, "CmdEcho", {"a": 1}).json()["data"]
    assert done["detail"] == {"a": 1}
    assert len(_ops_of(shared, key)) == 1


def test_another_token_has_keys_of_its_own(store_factory: Any) -> None:
    store = store_factory("--token", "a", "--token", "b")
    key = unique("k")
    one = _keyed(store, key, TEST, "CmdEcho", {"who": "a"}, token="a").json()
    two = _keyed(store, key, TEST, "CmdEcho", {"who": "b"}, token="b").json()
    assert (one["data"]["detail"], two["data"]["detail"]) == ({"who": "a"}, {"who": "b"})


def test_two_repeats_at_once_run_the_command_once(shared: Store) -> None:
    key = unique("together")
    barrier = threading.Barrier(3)
    bodies: list[bytes] = []

    def call() -> None:
        barrier.wait()
        bodies.append(_keyed(shared, key, TEST, "CmdSleep", {"ms": 300}).content)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(bodies) == 3
    assert bodies[0] == bodies[1] == bodies[2]
    assert len(_ops_of(shared, key)) == 1


def test_no_idempotency_runs_every_repeat(store_factory: Any) -> None:
    store = store_factory("--no-idempotency")
    key = unique("off")
    _keyed(store, key, TEST, "CmdEcho")
    _keyed(store, key, TEST, "CmdEcho")
    assert len(store.ops()) == 2
