"""``pooler store serve --fence-leases``: a request under an older lease than one already seen for
its Idempotency-Key is turned away (409, ``ok: false``: not carried out), and the command does not
run; what the client makes of that answer is the one table's ``denied``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests
from helpers import STORE_TOKEN, Store

from pooler.client.answer_kinds import DENIED, Fate
from pooler.client.reply import read_reply


def _sent(store: Store, key: str, lease: str | None, n: int) -> requests.Response:
    headers = {"Authorization": f"Bearer {STORE_TOKEN}", "Idempotency-Key": key}
    if lease is not None:
        headers["Pooler-Lease"] = lease
    body = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"key": key, "n": n}}
    return requests.post(f"{store.url}/tool_run", timeout=30, headers=headers, json=body)


def _runs(store: Store, key: str) -> list[Any]:
    """The calls of ``key`` the store carried out (a store that ignores keys records none)."""
    return [o["params"]["n"] for o in store.ops() if o["params"].get("key") == key]


def test_a_request_under_an_older_lease_than_one_seen_for_its_key_is_refused_and_not_run(
        store_factory: Any) -> None:
    # Without keys honoured, only the fence stands between a stale request and a second run.
    store = store_factory("--fence-leases", "--no-idempotency")
    assert _sent(store, "t:k/1", "host-1-aa:7", 1).status_code == 200
    assert _sent(store, "t:k/1", "host-2-bb:9", 2).status_code == 200
    stale = _sent(store, "t:k/1", "host-1-aa:7", 3)
    assert stale.status_code == 409
    assert stale.json() == {"ok": False, "error": (
        "STALE_LEASE: the call of Idempotency-Key t:k/1 was sent again under a newer lease (epoch 9) "
        "than this request's (host-1-aa, epoch 7); this request was not carried out.")}
    assert _runs(store, "t:k/1") == [1, 2]
    # The same epoch again (a retry of the newest lease's request) and other keys pass.
    assert _sent(store, "t:k/1", "host-2-bb:9", 4).status_code == 200
    assert _sent(store, "t:other/1", "host-1-aa:7", 5).status_code == 200
    assert _sent(store, "t:k/1", None, 6).status_code == 200
    assert _runs(store, "t:k/1") == [1, 2, 4, 6]
    reply = read_reply(stale.status_code, stale.headers, stale.content, 1, tables=True, store=store.url)
    assert (reply.kind, reply.kind.fate) == (DENIED, Fate.NOT_CARRIED_OUT)
    assert reply.message.endswith("this request was not carried out. (HTTP 409 Conflict)")


def test_without_the_flag_no_request_is_fenced(store_factory: Any) -> None:
    store = store_factory("--no-idempotency")
    assert _sent(store, "t:k/1", "host-2-bb:9", 1).status_code == 200
    assert _sent(store, "t:k/1", "host-1-aa:7", 2).status_code == 200
    assert _runs(store, "t:k/1") == [1, 2]


def test_a_lease_header_that_cannot_be_read_is_refused(store_factory: Any, tmp_path: Path) -> None:
    store = store_factory("--fence-leases")
    bad = _sent(store, "t:k/1", "host-1-aa:seven", 1)
    assert bad.status_code == 400
    assert bad.json() == {"ok": False, "error": (
        "Pooler-Lease is <runner>:<epoch>, the epoch a whole number - got 'host-1-aa:seven'")}
    assert _runs(store, "t:k/1") == []
