"""The store keeps the W3C ``traceparent`` each call arrived with in its ``ops`` row, so its records
join the caller's traces; a database written before the column existed keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import requests
from helpers import STORE_TOKEN, Store

TEST = "MELBIS_AGENT_TEST"
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _echo(store: Store, headers: dict[str, str]) -> None:
    got = requests.post(f"{store.url}/tool_run", timeout=10,
                        json={"unit": TEST, "command": "CmdEcho", "params": {"n": 1}},
                        headers={"Authorization": f"Bearer {STORE_TOKEN}", **headers})
    assert got.json()["data"]["result"] is True


def test_an_ops_row_holds_the_traceparent_its_call_arrived_with(store: Store) -> None:
    _echo(store, {"traceparent": PARENT})
    _echo(store, {})
    assert [op["traceparent"] for op in store.ops()] == [PARENT, None]


def test_a_traceparent_that_is_not_the_w3c_form_is_not_recorded(store: Store) -> None:
    for bad in ("hello", PARENT.upper(), "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", PARENT + "-x"):
        _echo(store, {"traceparent": bad})
    assert [op["traceparent"] for op in store.ops()] == [None] * 5


def test_a_database_of_an_older_store_gains_the_column_and_keeps_its_rows(
        tmp_path: Path, store_factory: Any) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE ops (id INTEGER PRIMARY KEY AUTOINCREMENT, unit TEXT NOT NULL, "
                     "command TEXT NOT NULL, params TEXT NOT NULL, idempotency_key TEXT, time TEXT NOT NULL)")
        conn.execute("INSERT INTO ops (unit, command, params, idempotency_key, time) VALUES "
                     "('MELBIS_AGENT_TEST', 'CmdEcho', '{\"old\": 1}', 'k', '2026-01-01T00:00:00.000+00:00')")
    conn.close()
    store = store_factory(db=db)
    _echo(store, {"traceparent": PARENT})
    ops = store.ops()
    assert ops[0] == {"unit": TEST, "command": "CmdEcho", "params": {"old": 1}, "idempotency_key": "k",
                      "time": "2026-01-01T00:00:00.000+00:00", "traceparent": None}
    assert ops[1]["traceparent"] == PARENT
