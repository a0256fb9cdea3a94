"""Test Bench (MELBIS_AGENT_TEST): commands that answer in every way a command can."""

# The function names are the store's command names, so they keep its CamelCase.
# ruff: noqa: N802

from __future__ import annotations

import json
import time
from typing import Any

from pooler.store.ctx import Ctx, Fields, RawTable, not_recorded

MAX_SLEEP_MS = 600_000
MAX_TABLE_BYTES = 256 << 20


def CmdEcho(ctx: Ctx, params: Fields) -> dict[str, Any]:
    return {"result": True, "message": "The fields as received", "detail": params}


def CmdFail(ctx: Ctx, params: Fields) -> dict[str, Any]:
    return {"result": False, "message": "CmdFail refuses, as it always does."}


def CmdCrash(ctx: Ctx, params: Fields) -> dict[str, Any]:
    raise RuntimeError("CmdCrash broke off, as it always does")


def CmdNoResult(ctx: Ctx, params: Fields) -> dict[str, Any]:
    return {"message": "CmdNoResult says nothing of its result, as it always does."}


def CmdSleep(ctx: Ctx, params: Fields) -> dict[str, Any]:
    ms: int = params["ms"]
    if not 0 <= ms <= MAX_SLEEP_MS:
        return {"result": False, "message": f"ms is from 0 to {MAX_SLEEP_MS}."}
    time.sleep(ms / 1000)
    return {"result": True, "message": f"Slept {ms} ms", "detail": {"slept": ms}}


def CmdTable(ctx: Ctx, params: Fields) -> dict[str, Any]:
    rows: int = params["rows"]
    width: int = params["width"]
    if rows < 0 or width < 0 or rows * (width + 24) > MAX_TABLE_BYTES:
        return {"result": False, "message": f"rows and width are not below zero, and the table stays under "
                                            f"{MAX_TABLE_BYTES >> 20} MB."}
    # The rows are written as JSON text at once: 200,000 dicts would cost more than the answer itself.
    text = ("abcdefghijklmnopqrstuvwxyz" * (width // 26 + 1))[:width].encode()
    body = b"[" + b",".join(b'{"n":%d,"text":"%s"}' % (n, text) for n in range(1, rows + 1)) + b"]"
    return {"result": True, "message": f"{rows} rows", "tables": {"rows": RawTable(rows, body)}}


@not_recorded
def CmdOps(ctx: Ctx, params: Fields) -> dict[str, Any]:
    rows = ctx.sql.all("SELECT unit, command, params, idempotency_key, time, traceparent FROM ops "
                       "ORDER BY id")
    for row in rows:
        row["params"] = json.loads(row["params"])
    return {"result": True, "message": f"{len(rows)} commands carried out", "tables": {"ops": rows}}
