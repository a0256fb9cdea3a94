"""The store's envelope around an answer, encoded once into the bytes that go on the wire."""

from __future__ import annotations

import json
from typing import Any

from pooler.store.ctx import RawTable

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
KEYS = ("result", "message", "detail", "tables", "files")


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def complete(answer: dict[str, Any]) -> dict[str, Any]:
    """The five keys in their order with what is missing filled in; the module's own keys after them."""
    data = {"result": answer["result"], "message": answer.get("message", ""),
            "detail": answer.get("detail", {}), "tables": answer.get("tables", {}),
            "files": answer.get("files", [])}
    data.update((k, v) for k, v in answer.items() if k not in KEYS)
    return data


def refusal(message: str) -> dict[str, Any]:
    return {"result": False, "message": message, "detail": {}, "tables": {}, "files": []}


def _data(data: dict[str, Any]) -> bytes:
    tables = data.get("tables")
    if not isinstance(tables, dict) or not any(isinstance(t, RawTable) for t in tables.values()):
        return dumps(data)
    items = []
    for key, value in data.items():
        if key == "tables":
            encoded = b"{" + b",".join(
                dumps(name) + b":" + (t.json if isinstance(t, RawTable) else dumps(t))
                for name, t in tables.items()
            ) + b"}"
        else:
            encoded = dumps(value)
        items.append(dumps(key) + b":" + encoded)
    return b"{" + b",".join(items) + b"}"


def envelope(data: dict[str, Any], ms: int, unit_ms: int | None = None,
             sql: tuple[int, int] | None = None) -> bytes:
    """``{"ok": true, "ms", ["sql", "sql_ms",] ["unit_ms",] "data"}``; unit_ms only when a module ran."""
    head: dict[str, Any] = {"ok": True, "ms": ms}
    if sql is not None:
        head["sql"], head["sql_ms"] = sql
    if unit_ms is not None:
        head["unit_ms"] = unit_ms
    return dumps(head)[:-1] + b',"data":' + _data(data) + b"}"


def denied(why: str) -> bytes:
    return dumps({"ok": False, "error": f"ACCESS_DENIED: {why}"})
