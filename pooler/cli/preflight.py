"""Checks made before a run's first call, so a run never stops half-way on what it could have seen;
the folders inside ``--out`` its files need, made then.

A run that imported 250 goods and only then found it could not write their tables has counted a
call failed that the store carried out; the folder is checked first instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pooler.errors import UsageError
from pooler.run.outdir import folder as out_folder


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


def make_folders_in_out(out: Path, files: Iterable[str | None]) -> None:
    """The folders of the files a run writes beside its tables (``--report``, ``--junit``,
    ``--metrics-file``) that lie inside ``--out`` and do not exist yet, made as pooler makes
    ``--out`` itself (owner-only, no symbolic link followed below it).

    A missing folder anywhere else stays the operator's to make: each file's own check refuses it,
    so nothing is written outside the folders the operator named.  Call after ``check_out``.
    """
    base = Path(os.path.normpath(out.absolute()))
    for name in files:
        if not name:
            continue
        parent = Path(os.path.normpath(Path(name).absolute())).parent
        if parent.is_dir() or not parent.is_relative_to(base):
            continue
        with out_folder(base, parent.relative_to(base).parts, create=True):
            pass
