"""Helpers of the store's tests: calls that assert the envelope, uploads, waiting on a condition."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from helpers import Store

TEST = "MELBIS_AGENT_TEST"
FILES = "MELBIS_AGENT_IMPORT_FILES"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def envelope(
    store: Store, unit: str, command: str, params: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """The JSON envelope of an HTTP 200 answer."""
    resp = store.call(unit, command, params, **extra)
    assert resp.status_code == 200, resp.text
    assert resp.headers["Content-Type"].startswith("application/json")
    doc: dict[str, Any] = resp.json()
    assert doc["ok"] is True
    return doc


def data(
    store: Store, unit: str, command: str, params: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """``data`` of a successful call."""
    got: dict[str, Any] = envelope(store, unit, command, params, **extra)["data"]
    assert got["result"] is True, got
    return got


def refusal(store: Store, unit: str, command: str, params: dict[str, Any] | None = None, **extra: Any) -> str:
    """The message of a refusal (``ok: true``, ``result: false``), checking its empty keys."""
    got = envelope(store, unit, command, params, **extra)["data"]
    assert got["result"] is False, got
    message: str = got["message"]
    return message


def crash(store: Store, unit: str, command: str, params: dict[str, Any] | None = None, **extra: Any) -> str:
    """The text of an HTTP 500 answer."""
    resp = store.call(unit, command, params, **extra)
    assert resp.status_code == 500, resp.text
    assert resp.headers["Content-Type"].startswith("text/plain")
    return resp.text


def upload(
    store: Store,
    request: dict[str, Any],
    files: dict[str, tuple[str, bytes]],
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> requests.Response:
    """A multipart tool_run: the part ``request`` first, then the file parts."""
    return requests.post(
        f"{store.url}/tool_run",
        data={"request": json.dumps(request)},
        files=files,
        timeout=30,
        headers={"Authorization": f"Bearer {token or store.token}", **(headers or {})},
    )


def add_goods(store: Store, name: str = "Goods") -> int:
    got = data(store, "MELBIS_AGENT_STORE", "CmdAdd", {"sku": unique("sku"), "name": name})
    gid: int = got["detail"]["id"]
    return gid


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Polls ``condition`` until it holds; the thing waited for gives no other signal."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {condition}")
        time.sleep(0.005)


def request_of(
    entries: list[Any], profile: str | None = None, unit: str = FILES, command: str = "CmdAdd"
) -> dict[str, Any]:
    """The JSON of a multipart call with these attachment entries."""
    params = {"profile": profile} if profile else {}
    return {"unit": unit, "command": command, "params": params, "files": entries}


def files_on_disk(store: Store) -> set[Path]:
    """Every attachment file under the store's root."""
    return (
        {p for p in (store.root / "files").rglob("*") if p.is_file()}
        if (store.root / "files").exists()
        else set()
    )


def data_of(resp: Any) -> dict[str, Any]:
    """``data`` of an HTTP 200 envelope, whatever its result."""
    assert resp.status_code == 200, resp.text
    doc: dict[str, Any] = resp.json()
    assert doc["ok"] is True
    result: dict[str, Any] = doc["data"]
    return result
