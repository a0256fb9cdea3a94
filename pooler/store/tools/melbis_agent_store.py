"""Goods (MELBIS_AGENT_STORE): the store's goods table."""

# The function names are the store's command names, so they keep its CamelCase.
# ruff: noqa: N802

from __future__ import annotations

from typing import Any

from pooler.store.ctx import Ctx, Fields

SELECT = "SELECT id, sku, name, price, curr_id FROM goods"


def CmdAdd(ctx: Ctx, params: Fields) -> dict[str, Any]:
    with ctx.sql.transaction():
        there = ctx.sql.one("SELECT id FROM goods WHERE sku = ?", (params["sku"],))
        if there is not None:
            return {"result": False, "message": f"The goods [{params['sku']}] are in the store already: id "
                                                f"{there['id']}."}
        curr_id = params.get("curr_id")
        if curr_id is not None and ctx.sql.one("SELECT id FROM currency WHERE id = ?", (curr_id,)) is None:
            return {"result": False,
                    "message": f"No currency with id {curr_id} - see MELBIS_AGENT_CURRENCY CmdList."}
        cur = ctx.sql.execute("INSERT INTO goods (sku, name, price, curr_id) VALUES (?, ?, ?, ?)",
                              (params["sku"], params["name"], params["price"], curr_id))
    row = ctx.sql.one(f"{SELECT} WHERE id = ?", (cur.lastrowid,))
    return {"result": True, "message": "The goods are added", "detail": {"id": cur.lastrowid, "row": row}}


def CmdGet(ctx: Ctx, params: Fields) -> dict[str, Any]:
    row = ctx.sql.one(f"{SELECT} WHERE sku = ?", (params["sku"],))
    message = "The goods are found" if row is not None else f"No goods with sku [{params['sku']}]"
    return {"result": True, "message": message, "detail": {"found": row is not None, "row": row}}


def CmdList(ctx: Ctx, params: Fields) -> dict[str, Any]:
    rows = ctx.sql.all(f"{SELECT} ORDER BY id")
    return {"result": True, "message": "The tables asked for", "tables": {"goods": rows}}
