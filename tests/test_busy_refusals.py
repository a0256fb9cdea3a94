"""Refusals that mean busy (``retry.refusals``): a refusal its step names (a text its message
contains, or a /regular expression/) is sent again with the backoff, under the key's next round,
within the step's attempts, and its last refusal is its failure; any other refusal fails at once.
Against the reference store's MELBIS_AGENT_ORDER, whose contract another client (the test, over
HTTP) holds locked, and against a stand-in store that counts what it was sent."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, serve, start_store
from sharedkit import run_here, wait_for
from test_answer_kinds import Scripted, run, write_pool

from pooler.store.tools import melbis_agent_order

BUSY_TEXTS = ["is currently being processed", "/tables are (busy|locked)/"]


def order_pool(folder: Path, refusals: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pool = folder / "order.json"
    pool.write_text(json.dumps({"pool": [{
        "name": "order", "unit": "MELBIS_AGENT_ORDER", "command": "CmdAdd", "key": "order-C-1",
        "retry": {"attempts": 8, "backoff_ms": 200, "refusals": refusals},
        "params": {"contract": "C-1", "qty": 2}}]}), encoding="utf-8")
    return pool


def hold_contract(store: Store, contract: str) -> threading.Thread:
    """Another client of the shop books an order on ``contract``: the store locks the contract
    while it books (``--order-ms``).  Back once the booking holds the lock."""
    holder = threading.Thread(target=store.call, daemon=True,
                              args=("MELBIS_AGENT_ORDER", "CmdAdd", {"contract": contract}))
    holder.start()
    # Read from the store on its thread: the contract's lock is taken.
    wait_for(lambda: contract in melbis_agent_order._busy)
    return holder


def orders(store: Store) -> list[dict[str, Any]]:
    return [op for op in store.ops() if op["unit"] == "MELBIS_AGENT_ORDER"]


def test_an_order_refused_while_another_client_holds_its_contract_completes_once_the_lock_is_released(
        tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path / "s", "--order-ms", "3000")
    request.addfinalizer(store.stop)
    holder = hold_contract(store, "C-1")
    pool = order_pool(tmp_path / "pools", BUSY_TEXTS)
    code, answer, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    holder.join()
    assert code == 0, err
    assert answer["steps"][0]["status"] == "completed"
    # The store ran the command for every try (the refused ones too): the other client's order
    # once, and pooler's under one key round a try - each refusal proved the call not carried
    # out, and the store keeps a refusal under the key it answered.
    keys = [op["idempotency_key"] for op in orders(store)]
    assert keys.count(None) == 1
    sent = [k for k in keys if k is not None]
    assert 2 <= len(sent) <= 8, sent
    assert sent == ["t:order-C-1"] + [f"t:order-C-1/{n}" for n in range(2, len(sent) + 1)]
    # Only the last of them booked: the refused ones changed nothing.
    assert keys[-1] == sent[-1]


def test_a_refusal_the_step_does_not_name_fails_at_once(tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path / "s", "--order-ms", "3000")
    request.addfinalizer(store.stop)
    holder = hold_contract(store, "C-1")
    code, answer, err = run_here(order_pool(tmp_path / "pools", ["/tables are busy/"]), store,
                                 str(tmp_path / "j.db"), "t", tmp_path / "out")
    holder.join()
    assert code == 1, err
    entry = answer["steps"][0]
    assert entry["status"] == "failed"
    assert entry["message"] == "Sales document C-1 is currently being processed"
    # One try, refused; then the other client's order.
    assert [op["idempotency_key"] for op in orders(store)] == ["t:order-C-1", None]


REFUSED = (200, {}, (b'{"ok": true, "data": {"result": false, '
                     b'"message": "The [goods, orders] tables are busy"}}'))
OTHER = (200, {}, b'{"ok": true, "data": {"result": false, "message": "No such goods"}}')


@pytest.fixture
def scripted() -> Any:
    handler = type("Handler", (Scripted,), {"answers": [], "keys": [], "arrived": threading.Event()})
    with serve(handler) as url:
        yield url, handler


def busy_goods(attempts: int) -> dict[str, Any]:
    return {"name": "goods", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "key": "goods-G1",
            "params": {"m": "G1"}, "retry": {"attempts": attempts, "backoff_ms": 10, "refusals": BUSY_TEXTS}}


def test_a_refusal_named_as_busy_is_sent_again_under_the_next_key_round_within_its_attempts(
        scripted: tuple[str, type[Scripted]], tmp_path: Path) -> None:
    url, handler = scripted
    handler.answers.extend([REFUSED] * 2)
    done = run(url, tmp_path, write_pool(tmp_path, [busy_goods(3)]))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"][0]["status"] == "completed"
    assert handler.keys == ["T1:goods-G1", "T1:goods-G1/2", "T1:goods-G1/3"]


def test_the_last_refusal_named_as_busy_is_the_calls_failure_and_a_rerun_sends_the_next_round(
        scripted: tuple[str, type[Scripted]], tmp_path: Path) -> None:
    url, handler = scripted
    handler.answers.extend([REFUSED] * 3)
    pool = write_pool(tmp_path, [busy_goods(3)])
    first = run(url, tmp_path, pool)
    assert first.returncode == 1, first.stderr
    entry = json.loads(first.stdout)["steps"][0]
    assert (entry["status"], entry["message"]) == ("failed", "The [goods, orders] tables are busy")
    assert handler.keys == ["T1:goods-G1", "T1:goods-G1/2", "T1:goods-G1/3"]
    again = run(url, tmp_path, pool)
    assert again.returncode == 0, again.stderr
    assert handler.keys[3:] == ["T1:goods-G1/4"]


def test_a_refusal_not_named_as_busy_fails_at_once_whatever_the_attempts(
        scripted: tuple[str, type[Scripted]], tmp_path: Path) -> None:
    url, handler = scripted
    handler.answers.append(OTHER)
    done = run(url, tmp_path, write_pool(tmp_path, [busy_goods(5)]))
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["steps"][0]["message"] == "No such goods"
    assert handler.keys == ["T1:goods-G1"]
