"""Goods Import (MELBIS_AGENT_IMPORT_GOODS): many goods in one call, added or updated by sku."""

# The function names are the store's command names, so they keep its CamelCase.
# ruff: noqa: N802

from __future__ import annotations

from typing import Any

from pooler.contract.fieldtypes import CastError, cast
from pooler.store.ctx import Ctx, Fields


def _checked(num: int, row: dict[str, Any]) -> tuple[str, str, float] | str:
    sku, name = row.get("sku"), row.get("name")
    if not isinstance(sku, (str, int)) or isinstance(sku, bool) or str(sku) == "":
        return f"Row {num} of goods has no sku."
    if not isinstance(name, str) or not name:
        return f"Row {num} of goods has no name."
    try:
        price = cast("float", row.get("price") if row.get("price") is not None else 0)
    except CastError as exc:
        return f"Row {num} of goods: price {exc}."
    return str(sku), name, price


def CmdAdd(ctx: Ctx, params: Fields) -> dict[str, Any]:
    rows: list[dict[str, Any]] = params["goods"]
    checked = []
    for num, row in enumerate(rows, 1):
        item = _checked(num, row)
        if isinstance(item, str):
            return {"result": False, "message": f"{item} Nothing was imported."}
        checked.append(item)
    answer, added = [], 0
    with ctx.sql.transaction():
        for row, (sku, name, price) in zip(rows, checked, strict=True):
            there = ctx.sql.one("SELECT id FROM goods WHERE sku = ?", (sku,))
            if there is None:
                gid = ctx.sql.execute("INSERT INTO goods (sku, name, price) VALUES (?, ?, ?)",
                                      (sku, name, price)).lastrowid
                added += 1
            else:
                gid = there["id"]
                ctx.sql.execute("UPDATE goods SET name = ?, price = ? WHERE id = ?", (name, price, gid))
            answer.append({"ref": row.get("ref"), "id": gid})
    message = f"{len(rows)} goods imported: {added} added, {len(rows) - added} updated"
    return {"result": True, "message": message, "tables": {"goods": answer}}
