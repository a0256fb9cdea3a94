"""File Import (MELBIS_AGENT_IMPORT_FILES): keeps the attachments the profile accepts."""

# The function names are the store's command names, so they keep its CamelCase.
# ruff: noqa: N802

from __future__ import annotations

from typing import Any

from pooler.store.ctx import Ctx, Fields

IMAGES = (".jpg", ".jpeg", ".png", ".gif", ".webp")
PROFILES = ("catalog", "images")


def CmdAdd(ctx: Ctx, params: Fields) -> dict[str, Any]:
    profile = params.get("profile", "catalog")
    if profile not in PROFILES:
        return {"result": False,
                "message": f"Unknown profile [{profile}] - the profiles: {', '.join(PROFILES)}."}
    rows: list[dict[str, Any]] = params["files"]
    taken = [r for r in rows if profile == "catalog" or r["file_name"].lower().endswith(IMAGES)]
    return {"result": True, "message": f"{len(taken)} of {len(rows)} files taken ({profile})",
            "detail": {"taken": len(taken)}, "files": taken}
