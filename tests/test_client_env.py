"""The client reads proxy settings from the environment once, when it is made."""

from __future__ import annotations

import socket

import pytest
from helpers import Store

from pooler.client.http import ToolRunClient
from pooler.errors import StoreError

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
              "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


def dead_proxy() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_proxy_in_the_environment_is_used(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    with ToolRunClient(store.url, store.token) as client, pytest.raises(StoreError) as caught:
        client.tool_run("MELBIS_AGENT_TEST", "CmdEcho", {"n": 1})
    assert caught.value.message == (
        f"cannot reach the store at {store.url.rstrip('/')}/: the proxy refused the connection"
    )
    assert caught.value.sent is False
    monkeypatch.delenv("HTTP_PROXY")  # the test's own look at the store goes direct
    assert store.ops() == []


def test_no_proxy_naming_the_store_bypasses_the_proxy(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with ToolRunClient(store.url, store.token) as client:
        reply = client.tool_run("MELBIS_AGENT_TEST", "CmdEcho", {"n": 1})
    assert reply.result is True
    assert reply.data["detail"] == {"n": 1}


def test_the_environment_is_read_once_when_the_client_is_made(store: Store,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with ToolRunClient(store.url, store.token) as client:
        monkeypatch.setenv("HTTP_PROXY", dead_proxy())
        replies = [client.tool_run("MELBIS_AGENT_TEST", "CmdEcho", {"n": n}) for n in range(3)]
    assert [r.data["detail"]["n"] for r in replies] == [0, 1, 2]
    monkeypatch.delenv("HTTP_PROXY")
    assert len(store.ops()) == 3
