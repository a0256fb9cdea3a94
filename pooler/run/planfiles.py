"""The files a task was planned from, as its plan keeps them: the pool file and each data file, with
their sha256 and row counts.  A later run compares them with its own files: a file that changed
since the task was planned is told (naming the file and what changed), and the run refused unless
``--replan`` plans anew (``replanning.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pooler.errors import JournalError
from pooler.pool.datafiles import DataFile
from pooler.pool.model import Pool

#: The number a plan's files give the pool file (a data file takes its step's number).
POOL_FILE = 0


@dataclass(frozen=True)
class PlannedFile:
    """A file as the task's plan saw it."""

    num: int
    #: As the operator wrote it, relative to the pool's folder when it is inside it.
    name: str
    path: str
    sha256: str
    rows: int | None
    chunk: int | None
    #: The run of the task that made this plan (1, or the run that replanned it).
    first_run: int


def digest(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def shown(pool: Pool, path: Path) -> str:
    """A file's name as a message tells it: relative to the pool's folder when inside it."""
    base = pool.data_folder()
    try:
        return str(path.absolute().relative_to(base))
    except ValueError:
        return str(path)


def exact_rows(data: DataFile) -> int:
    """The rows a data file holds now, read through."""
    return sum(1 for _ in data.iter_rows())


def changes(pool: Pool, data_files: Mapping[int, DataFile], files: Mapping[int, PlannedFile], task: str,
            *, by_path: bool = True) -> list[str]:
    """What changed since the task was planned, a sentence a file; empty when nothing did.
    ``data_files``: each step's data file as the run found it now.  Without ``by_path`` a file
    is known by its name alone (runners of a shared task on other hosts keep their files in
    other folders).

    A data file that is gone is no change: the plan holds its rows.
    """
    told: list[str] = []
    for num, was in files.items():
        if num == POOL_FILE:
            path = Path(pool.file)
            if was.sha256 and path.is_file() and digest(path) != was.sha256:
                told.append(f"the pool file {was.name} changed since task {task} was planned")
            continue
        data = data_files.get(num)
        if data is None or not data.path.is_file():
            continue
        if by_path and str(data.path.absolute()) != was.path:
            told.append(f"step {num} reads {shown(pool, data.path)} now, {was.name} when task {task} "
                        "was planned")
            continue
        if digest(data.path) == was.sha256:
            continue
        now = exact_rows(data)
        then = was.rows or 0
        rows = (f"{then:,} rows then and now, their content differs" if now == then
                else f"{then:,} {'row' if then == 1 else 'rows'} then, {now:,} now")
        told.append(f"{was.name} changed since task {task} was planned ({rows})")
    return told


def refuse_changed(told: list[str], task: str) -> JournalError:
    """The refusal of a run of a task whose files changed since it was planned."""
    return JournalError(f"{'; '.join(told)} - run it with --replan to plan what task {task} has not "
                        "done yet from the files as they are now, restore the files, or start a new task.")


