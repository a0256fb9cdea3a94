"""A task's plan in its journal: recorded once by the task's first run, read by every later one.

The first run of a task writes, in one transaction, the sha256 of the pool file and of each data
file (with its row count), and every row each step over a data file will send, with the row's key
as the plan resolved it.  Rows are streamed from the file into ``executemany``: a file of any
length is planned in bounded memory.  A later run takes its rows from here, page by page, and
first compares the digests: a file that changed since the task was planned is told, and the run
refused unless ``--replan`` (see ``replan.py``) plans anew.

A step over the table of an earlier step (``for_each.step``) is not in the plan: its rows exist
only once that step has run, and are read from its table as before.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pooler.errors import JournalError, PoolerError
from pooler.journal.sqlite.file import SQL
from pooler.journal.sqlite.journal import Journal
from pooler.pool.compiler import Plan
from pooler.pool.datafiles import DataFile
from pooler.pool.model import Pool
from pooler.pool.variables import render_key
from pooler.redact import Redactor
from pooler.run.planstage import PlanStage

#: Rows read from the journal at a time by a later run: memory stays bounded for any plan.
PAGE = 2000
#: ``plan_files.num`` of the pool file itself.
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


#: Whether a row the plan is about to record was done under an earlier plan: (step, key) -> bool.
DoneRule = Callable[[int, str | None], bool]


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


def record_plan(journal: Journal, task: str, plan: Plan, values: Mapping[str, Any], redactor: Redactor,
                *, first_run: int = 1, done: DoneRule | None = None) -> None:
    """Write the task's plan (replacing one it had), in one transaction."""
    with journal.transaction() as db:
        write_plan(db, task, plan, values, redactor, first_run=first_run, done=done)


def write_plan(db: sqlite3.Connection, task: str, plan: Plan, values: Mapping[str, Any], redactor: Redactor,
               *, first_run: int = 1, done: DoneRule | None = None, stage: PlanStage | None = None) -> None:
    """Write the task's plan in the caller's transaction (the one that creates the task).  A step
    the check's pass staged (``stage``, attached to ``db``) is copied from there, not read again."""
    pool = plan.pool
    pool_path = Path(pool.file)
    db.execute(SQL["plan_forget_rows"], (task,))
    db.execute(SQL["plan_forget_files"], (task,))
    files: list[tuple[Any, ...]] = [(task, POOL_FILE, shown(pool, pool_path),
                                     str(pool_path.absolute()),
                                     digest(pool_path) if pool_path.is_file() else "", None, None,
                                     first_run)]
    for step in pool.steps:
        data = plan.data.get(step.num)
        if data is None or step.for_each is None:
            continue
        staged = stage.copy(db, task, step.num) if stage is not None and done is None else None
        if staged is not None:
            files.append((task, step.num, shown(pool, data.path), str(data.path.absolute()),
                          digest(data.path), staged, step.for_each.chunk, first_run))
            continue
        counter = [0]
        rows = _rows(task, step.num, step.key, data, _Fill(values, redactor, done, counter))
        db.execute("SAVEPOINT step_rows")
        try:
            db.executemany(SQL["plan_insert_rows"], rows)
        except (PoolerError, _HoldsSecret):
            # A row that cannot be read: the step stays out of the plan, and its run reads the
            # file as it goes, failing at that row as a run always has.  So does a step whose rows
            # hold a secret's value: the journal never holds a secret, and a masked row would send
            # *** to the store.
            db.execute("ROLLBACK TO step_rows")
            db.execute("RELEASE step_rows")
            continue
        db.execute("RELEASE step_rows")
        files.append((task, step.num, shown(pool, data.path), str(data.path.absolute()),
                      digest(data.path), counter[0], step.for_each.chunk, first_run))
    db.executemany(SQL["plan_insert_files"], files)


class _HoldsSecret(Exception):
    """A row of a data file holds the value of a secret (the token, a secret variable)."""


@dataclass
class _Fill:
    """How a planned row is filled: the variables, the masking of keys, the done rule, the count."""

    values: Mapping[str, Any]
    redactor: Redactor
    done: DoneRule | None
    counter: list[int]


def _rows(task: str, num: int, template: Any, data: DataFile, fill: _Fill) -> Iterator[tuple[Any, ...]]:
    scope: ChainMap[str, Any] = ChainMap({}, dict(fill.values))
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    text = fill.redactor.text
    done, counter = fill.done, fill.counter
    for index, row in enumerate(data.iter_rows()):
        key: str | None = None
        if isinstance(template, str):
            scope.maps[0]["row"] = row
            try:
                key = text(render_key(template, scope))
            except PoolerError:
                key = None  # the call tells what is wrong with its key when it is sent
        encoded = dumps(row)
        if text(encoded) != encoded:
            raise _HoldsSecret
        yield (task, num, index, key, encoded, int(done(num, key)) if done is not None else 0)
        counter[0] = index + 1


def planned_files(journal: Journal, task: str) -> dict[int, PlannedFile]:
    """The files of the task's plan by step number (0: the pool file); empty for a task planned
    before tasks recorded their plans."""
    rows = journal.query(SQL["plan_files_of_task"], (task,))
    return {int(r[0]): PlannedFile(*r) for r in rows}


def plan_rows(journal: Journal, task: str, num: int) -> Iterator[tuple[int, dict[str, Any], bool]]:
    """The step's planned rows in order, ``(row, data, done)``, a page at a time (the journal's
    lock is not held between pages: calls are recorded meanwhile)."""
    after = -1
    while True:
        page = journal.query(SQL["plan_rows_page"], (task, num, after, PAGE))
        for row, data, done in page:
            yield int(row), json.loads(data), bool(done)
        if len(page) < PAGE:
            return
        after = int(page[-1][0])


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


def gone(files: Mapping[int, PlannedFile]) -> list[str]:
    """The data files of the plan that are no longer there (their rows come from the plan)."""
    return [f.name for n, f in files.items() if n != POOL_FILE and not Path(f.path).is_file()]
