"""Checks made before a run's first call, so a run never stops half-way on what it could have seen.

A run that imported 250 goods and only then found it could not write their tables has counted a
call failed that the store carried out; the folder is checked first instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from pooler.errors import UsageError


def check_out(out: Path) -> None:
    """``--out`` is a folder that can be written, or can be made; else ``UsageError``, before any call.

    Nothing is created here: the folder is made by the first table that needs it.
    """
    for folder in (out, out / "tables"):
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out {out}: {folder} is a file, not a folder - tables and jobs could not be "
                             "written there; give --out a folder (it is made if missing)")
    existing = out
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise UsageError(f"--out {out}: {existing} is a file, not a folder - give --out a folder "
                         "(it is made if missing)")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "the folder" if existing == out else f"{existing}, where it would be made,"
        raise UsageError(f"--out {out}: {what} cannot be written by this user - give --out a folder "
                         "this user can write")
