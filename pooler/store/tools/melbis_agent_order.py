"""Sales Documents (MELBIS_AGENT_ORDER): slow work under a per-contract lock."""

# The function names are the store's command names, so they keep its CamelCase.
# ruff: noqa: N802

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from pooler.store.ctx import Ctx, Fields

_guard = threading.Lock()
_busy: set[str] = set()


def CmdAdd(ctx: Ctx, params: Fields) -> dict[str, Any]:
    contract: str = params["contract"]
    with _guard:
        if contract in _busy:
            return {"result": False, "message": f"Sales document {contract} is currently being processed"}
        _busy.add(contract)
    try:
        time.sleep(ctx.order_ms / 1000)
        cur = ctx.sql.execute("INSERT INTO orders (contract, qty, created) VALUES (?, ?, ?)",
                              (contract, params["qty"], datetime.now().strftime("%Y-%m-%d %H:%M:%S")))
    finally:
        with _guard:
            _busy.discard(contract)
    return {"result": True, "message": f"Sales document {contract} is created",
            "detail": {"id": cur.lastrowid}}
