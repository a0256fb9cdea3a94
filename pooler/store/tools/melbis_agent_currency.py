"""Currencies (MELBIS_AGENT_CURRENCY): the store's currency table."""

# The function names are the store's command names, so they keep its CamelCase.
# ruff: noqa: N802

from __future__ import annotations

from typing import Any

from pooler.store.ctx import Ctx, Fields

COLUMNS = ("skey", "name", "multiplex", "division", "pos")


def _as_text(row: dict[str, Any]) -> dict[str, str]:
    # A MySQL-backed store gives every value as a string, DECIMAL(12,4) for the rate.
    return {"id": str(row["id"]), "skey": row["skey"], "name": row["name"],
            "multiplex": f"{row['multiplex']:.4f}", "division": str(row["division"]), "pos": str(row["pos"])}


def _ids(value: Any) -> list[int]:
    return value if isinstance(value, list) else [value]


def CmdList(ctx: Ctx, params: Fields) -> dict[str, Any]:
    rows = ctx.sql.all("SELECT * FROM currency ORDER BY pos, id")
    return {"result": True, "message": "The tables asked for",
            "tables": {"currency": [_as_text(r) for r in rows]}}


def CmdAdd(ctx: Ctx, params: Fields) -> dict[str, Any]:
    if params["multiplex"] <= 0:
        return {"result": False, "message": "multiplex is the rate, and it must be above zero."}
    with ctx.sql.transaction():
        pos = params.get("pos")
        if pos is None:
            pos = ctx.sql.execute("SELECT COALESCE(MAX(pos), 0) + 1 FROM currency").fetchone()[0]
        cur = ctx.sql.execute("INSERT INTO currency (skey, name, multiplex, division, pos) "
                              "VALUES (?, ?, ?, ?, ?)",
                              (params.get("skey", ""), params["name"], params["multiplex"],
                               int(params["division"]), pos))
    return {"result": True, "message": "The row of currency is added", "detail": {"id": cur.lastrowid}}


def CmdUpdate(ctx: Ctx, params: Fields) -> dict[str, Any]:
    ids = _ids(params["id"])
    if params.get("multiplex", 1) <= 0:
        return {"result": False, "message": "multiplex is the rate, and it must be above zero."}
    changes = {c: params[c] for c in COLUMNS if c in params}
    marks = ", ".join("?" for _ in ids)
    with ctx.sql.transaction():
        found = ctx.sql.execute(f"SELECT COUNT(*) FROM currency WHERE id IN ({marks})", ids).fetchone()[0]
        if changes and ids:
            sets = ", ".join(f"{c} = ?" for c in changes)
            values = [int(v) if isinstance(v, bool) else v for v in changes.values()]
            ctx.sql.execute(f"UPDATE currency SET {sets} WHERE id IN ({marks})", [*values, *ids])
    what = "updated" if changes else "found (no field to change was named)"
    return {"result": True, "message": f"{found} of {len(ids)} currencies {what}", "detail": {"found": found}}


def CmdRemove(ctx: Ctx, params: Fields) -> dict[str, Any]:
    ids = _ids(params["id"])
    marks = ", ".join("?" for _ in ids)
    removed = ctx.sql.execute(f"DELETE FROM currency WHERE id IN ({marks})", ids).rowcount if ids else 0
    return {"result": True, "message": f"{removed} of {len(ids)} currencies removed",
            "detail": {"removed": removed}}


def _entry(item: Any) -> tuple[int, int | None] | None:
    if not isinstance(item, dict):
        return None
    pid, pos = item.get("id"), item.get("pos")
    if pid is None:
        return None
    try:
        return int(pid), None if pos is None else int(pos)
    except (TypeError, ValueError):
        return None


def CmdPos(ctx: Ctx, params: Fields) -> dict[str, Any]:
    kind = params["type"].upper()
    data = params.get("data")
    with ctx.sql.transaction():
        before = {r["id"]: r["pos"] for r in ctx.sql.all("SELECT id, pos FROM currency")}
        if kind == "POS":
            items = data if isinstance(data, list) else [data]
            wanted = [_entry(i) for i in items]
            if not items or None in wanted:
                return {"result": False, "message": 'POS takes data [{"id": <id>, "pos": <place>}, ...].'}
            after = dict(before)
            for place, (pid, pos) in enumerate(x for x in wanted if x is not None):
                if pid in after:
                    after[pid] = pos if pos is not None else place + 1
        elif kind == "MOVE":
            entry = _entry(data)
            if entry is None or entry[1] is None:
                return {"result": False, "message": 'MOVE takes data {"id": <id>, "pos": <place>}.'}
            order = [i for i in sorted(before, key=lambda i: (before[i], i)) if i != entry[0]]
            if entry[0] in before:
                order.insert(max(entry[1] - 1, 0), entry[0])
            after = {pid: n for n, pid in enumerate(order, 1)}
        elif kind == "SORT":
            by = data.get("by", "name") if isinstance(data, dict) else "name"
            if by not in ("name", "skey", "id"):
                return {"result": False, "message": 'SORT takes data {"by": "name"}, "skey" or "id".'}
            rows = ctx.sql.all(f"SELECT id FROM currency ORDER BY {by}, id")
            after = {r["id"]: n for n, r in enumerate(rows, 1)}
        else:
            return {"result": False, "message": f"type [{params['type']}] is not one of POS, MOVE, SORT."}
        moved = [pid for pid in after if after[pid] != before[pid]]
        ctx.sql.executemany("UPDATE currency SET pos = ? WHERE id = ?", [(after[p], p) for p in moved])
    return {"result": True, "message": f"{len(moved)} currencies changed their place",
            "detail": {"moved": len(moved)}}
