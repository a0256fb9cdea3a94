"""Tokens and grants: --token, --read-token, the random token of a store started with none, 401."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import ROOT, Store, start_store
from storekit import TEST

CUR = "MELBIS_AGENT_CURRENCY"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = start_store(
        tmp_path_factory.mktemp("guarded"), "--token", "full-1", "--token", "full-2", "--read-token", "reader"
    )
    yield s
    s.stop()


def _run(
    store: Store,
    headers: dict[str, str],
    unit: str = CUR,
    command: str = "CmdList",
    params: dict[str, Any] | None = None,
) -> requests.Response:
    return requests.post(
        f"{store.url}/tool_run",
        json={"unit": unit, "command": command, "params": params or {}},
        headers=headers,
        timeout=10,
    )


def test_full_tokens_are_granted_everything(guarded: Store) -> None:
    for token in ("full-1", "full-2"):
        resp = _run(guarded, {"Authorization": f"Bearer {token}"}, CUR, "CmdAdd", {"name": "Full"})
        assert resp.json()["data"]["result"] is True


def test_demo_is_no_token_when_tokens_are_given(guarded: Store) -> None:
    resp = _run(guarded, {"Authorization": "Bearer demo"})
    assert resp.status_code == 401
    assert resp.json() == {"ok": False, "error": "ACCESS_DENIED: the token is not known to this store"}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic ZGVtbzo="}, {"Authorization": "Bearer "}])
def test_no_token_is_401(guarded: Store, headers: dict[str, str]) -> None:
    resp = _run(guarded, headers)
    assert resp.status_code == 401
    assert resp.headers["Content-Type"].startswith("application/json")
    assert resp.json() == {
        "ok": False,
        "error": "ACCESS_DENIED: no token - send the header Authorization: Bearer <token>",
    }


def test_tool_list_needs_a_token_too(guarded: Store) -> None:
    resp = requests.post(f"{guarded.url}/tool_list", json={}, timeout=10)
    assert resp.status_code == 401
    assert resp.json()["error"].startswith("ACCESS_DENIED: ")


def test_a_read_token_gets_only_the_reading_commands(guarded: Store) -> None:
    reader = {"Authorization": "Bearer reader"}
    assert _run(guarded, reader, CUR, "CmdList").json()["data"]["result"] is True
    assert _run(guarded, reader, TEST, "CmdEcho", {"a": 1}).json()["data"]["detail"] == {"a": 1}
    assert (
        _run(guarded, reader, "MELBIS_AGENT_STORE", "cmdget", {"sku": "x"}).json()["data"]["result"] is True
    )
    before = len(guarded.ops())
    resp = _run(guarded, reader, CUR, "CmdAdd", {"name": "Nope"})
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["ok"] is True
    assert doc["data"]["result"] is False
    assert (
        doc["data"]["message"] == "ACCESS_DENIED: the command MELBIS_AGENT_CURRENCY\\CmdAdd is not granted "
        "to this token."
    )
    assert (
        _run(guarded, reader, TEST, "CmdFail").json()["data"]["message"]
        == "ACCESS_DENIED: the command MELBIS_AGENT_TEST\\CmdFail is not granted to this token."
    )
    assert len(guarded.ops()) == before


def test_tool_list_shows_the_grants_of_the_callers_token(guarded: Store) -> None:
    def granted(token: str) -> dict[str, bool]:
        doc = requests.post(
            f"{guarded.url}/tool_list",
            json={"unit": CUR},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        ).json()
        return {c["name"]: c["granted"] for c in doc["data"]["tools"][0]["commands"]}

    assert granted("reader") == {
        "CmdList": True,
        "CmdAdd": False,
        "CmdUpdate": False,
        "CmdRemove": False,
        "CmdPos": False,
    }
    assert all(granted("full-1").values())


@pytest.mark.process
def test_with_no_token_option_the_store_makes_a_random_token_and_prints_it(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pooler", "store", "serve", "--port", "0",
                             "--db", str(tmp_path / "s.db"), "--root", str(tmp_path / "root")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        out = proc.stdout
        lines: list[str] = []
        # Read aside: a store that prints no second line must fail the test, not hang it.
        reader = threading.Thread(target=lambda: lines.extend(out.readline().strip() for _ in range(2)),
                                  daemon=True)
        reader.start()
        reader.join(60)
        assert len(lines) == 2, lines
        url, line = lines
        assert re.fullmatch(r"token: [0-9a-f]{32}", line)
        store = Store(url=url, proc=proc, db=tmp_path / "s.db", root=tmp_path / "root", token=line[7:])
        assert _run(store, {"Authorization": "Bearer demo"}).status_code == 401
        resp = _run(store, {"Authorization": f"Bearer {store.token}"}, CUR, "CmdAdd", {"name": "Demo"})
        assert resp.json()["data"]["result"] is True
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.process
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_the_store_will_not_listen_beyond_loopback_without_a_token(tmp_path: Path, host: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pooler", "store", "serve", "--host", host, "--port", "0",
                           "--db", str(tmp_path / "s.db"), "--root", str(tmp_path / "root")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (f"pooler store: --host {host} is reachable from other machines, and no --token "
                           "was given - give --token with a long random token, so that only its holders may "
                           "call the store.\n")


def test_only_a_read_token_leaves_no_full_token(store_factory: Any) -> None:
    store = store_factory("--read-token", "r")
    assert _run(store, {"Authorization": "Bearer demo"}).status_code == 401
    doc = _run(store, {"Authorization": "Bearer r"}, CUR, "CmdRemove", {"id": 1}).json()
    assert (
        doc["data"]["message"]
        == "ACCESS_DENIED: the command MELBIS_AGENT_CURRENCY\\CmdRemove is not granted "
        "to this token."
    )


def test_a_read_token_cannot_read_the_ops_of_every_caller(guarded: Store) -> None:
    _run(guarded, {"Authorization": "Bearer full-2"}, TEST, "CmdEcho", {"card": "4111-private"})
    doc = _run(guarded, {"Authorization": "Bearer reader"}, TEST, "CmdOps").json()
    assert doc["data"] == {"result": False, "detail": {}, "tables": {}, "files": [],
                           "message": "ACCESS_DENIED: the command MELBIS_AGENT_TEST\\CmdOps is not granted "
                                      "to this token."}
    assert "4111-private" in str(guarded.ops())
