"""The steps of the last pool loaded from a file, as the editor asks about them: which step a line
is in, the steps before it, a step's data file and the first values of its columns."""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Any

from pooler.errors import PoolerError
from pooler.pool.datafiles import DataFile, data_path, locate
from pooler.pool.model import Pool, Step
from pooler.pool.variables import OPEN


def step_at(pool: Pool | None, line: int, path: tuple[str | int, ...] = ()) -> Step | None:
    """The step the 0-based ``line`` is in: by the path the cursor's indentation gives, else by
    where the steps start in the pool's own file."""
    if pool is None:
        return None
    if len(path) > 1 and path[0] == "pool" and isinstance(path[1], int) and path[1] < len(pool.steps):
        return pool.steps[path[1]]
    found = None
    for step in pool.steps:
        if step.source is None or step.source.file != pool.file:
            continue
        pos = step.source.pos(step.path)
        if pos is not None and pos.line - 1 <= line:
            found = step
    return found


def earlier(pool: Pool | None, step: Step | None) -> list[Step]:
    """The named steps a step may refer to: those before it (every one when the step is not known)."""
    if pool is None:
        return []
    last = step.num if step is not None else len(pool.steps) + 1
    return [s for s in pool.steps if s.name and s.num < last]


def data_file(pool: Pool | None, step: Step | None) -> DataFile | None:
    """The step's data file with its header, when its name is written out and it can be read."""
    if pool is None or step is None or step.for_each is None:
        return None
    name = step.for_each.file
    if not isinstance(name, str) or OPEN in name:
        return None
    found, _ = locate(pool, step, None)
    return found


def data_path_of(pool: Pool, name: str) -> Path:
    return data_path(pool, name)


def first_values(data: DataFile, column: str, count: int = 3) -> list[Any]:
    """The first ``count`` values of a column (fewer when the file has fewer rows)."""
    try:
        return [row.get(column) for row in islice(data.iter_rows(), count)]
    except (PoolerError, OSError, ValueError):
        return []
