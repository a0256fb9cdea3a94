"""The runner that plans a shared task reads each data file once: the check's own pass writes the
task's work rows (keys, chunks and the sample as the planner makes them) into the transaction that
creates the task, which a refused check rolls back; a runner that finds the task planned, or that
waits while another plans it, reads no data file.

The files' opens are counted by a Python audit hook (the interpreter's own ``open`` events), the
journal is a real PostgreSQL.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sharedkit import query, wait_for

from pooler.errors import CheckFailed
from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.schema import upgrade
from pooler.pool.compiler import Inputs, plan_for_joining_runner, plan_for_run
from pooler.pool.loader import load_pool
from pooler.pool.model import Pool
from pooler.pool.rows import iter_rows
from pooler.redact import Redactor
from pooler.run.config import RunConfig
from pooler.run.join import join_task, task_doc
from pooler.run.planfiles import digest
from pooler.run.planpass import PlanPass
from pooler.run.workplan import Planner

pytestmark = pytest.mark.postgres

#: The files whose opens are being counted, and the count of each (only while a test counts).
_WATCHED: dict[str, int] = {}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _WATCHED and isinstance(args[0], str | bytes | os.PathLike):
        name = os.path.realpath(os.fsdecode(args[0]))
        if name in _WATCHED:
            _WATCHED[name] += 1


sys.addaudithook(_audit)


@contextmanager
def opens(*files: Path) -> Iterator[dict[str, int]]:
    """How many times each file is opened within the block, by file name."""
    _WATCHED.clear()
    _WATCHED.update({os.path.realpath(f): 0 for f in files})
    counted: dict[str, int] = {}
    try:
        yield counted
    finally:
        counted.update({Path(name).name: n for name, n in _WATCHED.items()})
        _WATCHED.clear()


POOL = """\
pool:
  - name: each
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: "e-${row.ref}"
    params: {ref: "${row.ref}"}
    for_each: {file: goods.csv}
  - name: chunks
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: "c-${row.n}"
    params: {tag: chunk}
    for_each: {file: rows.jsonl, chunk: 3, field: part}
  - name: source
    unit: MELBIS_AGENT_TEST
    command: CmdTable
    params: {rows: 2, width: 2}
  - name: over
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: "o-${row.n}"
    params: {over: "${row.n}"}
    for_each: {step: source, table: rows}
"""


@pytest.fixture
def url(pg_url: str) -> str:
    upgrade(pg_url)
    return pg_url


def setup(folder: Path, rows: int = 10) -> tuple[Pool, list[Path]]:
    goods = folder / "goods.csv"
    goods.write_text("ref,name\n" + "".join(f"R{i:02d},item {i}\n" for i in range(rows)), encoding="utf-8")
    lines = folder / "rows.jsonl"
    lines.write_text("".join(f'{{"n": {i}}}\n' for i in range(rows)), encoding="utf-8")
    (folder / "pool.yaml").write_text(POOL, encoding="utf-8")
    # As ``pooler run --journal postgresql://...`` compiles it: no data file read.
    return plan_for_run(load_pool(folder / "pool.yaml", partial=True), Inputs(), data_files=False).pool, \
        [goods, lines]


def config(folder: Path, task: str = "t", sample: int | None = None) -> RunConfig:
    return RunConfig(out=folder / "out", task_id=task, redactor=Redactor(), sample=sample)


def plan_of(url: str, task: str) -> list[tuple[Any, ...]]:
    return query(url, "SELECT num, idx, kind, row_first, row_last, size, data, deps, key_text, key_planned "
                      "FROM work WHERE task = %s ORDER BY num, idx", (task,))


def planned_from_files(pool: Pool, folder: Path, task: str, sample: int | None = None,
                       after: dict[int, tuple[int, int]] | None = None) -> list[tuple[Any, ...]]:
    """The work rows the planner makes of each file read by itself (the plan before the one pass),
    in the columns ``plan_of`` reads; ``after``: rows held and the next idx, by step (widening)."""
    planner = Planner(pool, task, {}, sample, redactor=Redactor())
    rows: list[tuple[Any, ...]] = []
    for step in pool.steps:
        fe = step.for_each
        if fe is not None and fe.file:
            held, idx = (after or {}).get(step.num, (0, 0))
            data = list(iter_rows(folder / fe.file))[held:]
            rows.extend(planner.rows_of(step, data, first=held, idx=idx))
        elif after is None:
            rows.append(planner.single(step) if fe is None else planner.placeholder(step))
    # As the database gives them back: the JSON parsed, the deps a list.
    import json  # noqa: PLC0415

    return sorted((num, idx, kind, first, last, size, None if data is None else json.loads(data),
                   [int(d) for d in deps.strip("{}").split(",") if d], key, planned)
                  for _, num, idx, kind, first, last, size, data, deps, _, key, planned, _state in rows)


def test_the_planning_runner_reads_each_data_file_as_often_as_the_check_alone(
        url: str, tmp_path: Path) -> None:
    pool, files = setup(tmp_path)
    with opens(*files) as checked:
        plan_for_joining_runner(pool, {}, None)
        # The digest the task keeps of each file, read as bytes: a file changed since is told.
        for file in files:
            digest(file)
    with PgJournal(url) as journal, opens(*files) as planning:
        join_task(journal, pool, config(tmp_path))
    assert planning == checked
    assert checked["goods.csv"] >= 1
    # The plan is the one the planner makes of each file read by itself: one call a row, chunks of
    # three keyed by their first row, the step before a table and the placeholder over it.
    plan = plan_of(url, "t")
    assert plan == planned_from_files(pool, tmp_path, "t")
    assert len(plan) == 10 + 4 + 1 + 1
    assert (plan[0][1], plan[0][6], plan[0][8]) == (0, {"ref": "R00", "name": "item 0"}, "e-R00")
    chunk = [row for row in plan if row[0] == 2][1]
    assert chunk[3:6] == (3, 5, 3)
    assert chunk[6] == [{"n": 3}, {"n": 4}, {"n": 5}]
    assert chunk[8] == "c-3#3-5"


def test_a_runner_joining_a_planned_task_reads_no_rows_only_each_files_digest(
        url: str, tmp_path: Path) -> None:
    pool, files = setup(tmp_path)
    with PgJournal(url) as journal:
        join_task(journal, pool, config(tmp_path))
    with opens(*files) as hashed:
        for file in files:
            digest(file)
    with PgJournal(url) as journal, opens(*files) as joining:
        join_task(journal, pool, config(tmp_path))
    # Opened once each, for its digest: a file changed since the task was planned is told.
    assert joining == hashed == {"goods.csv": 1, "rows.jsonl": 1}
    # Nor does it need them: a host with the pool file alone joins.
    for file in files:
        file.unlink()
    with PgJournal(url) as journal:
        join_task(journal, pool, config(tmp_path))


def test_a_sampled_plan_holds_every_row_and_its_full_run_releases_them_checking_the_files_once(
        url: str, tmp_path: Path) -> None:
    pool, files = setup(tmp_path)
    with PgJournal(url) as journal:
        join_task(journal, pool, config(tmp_path, sample=5))
    sampled = plan_of(url, "t")
    assert sampled == planned_from_files(pool, tmp_path, "t", sample=5)
    # The sample ended inside a chunk (rows 3-4): the chunks after it start at row 5, each keyed
    # by its own first row, beyond the sample.
    beyond = "SELECT num, idx FROM work WHERE task = 't' AND state = 'beyond' ORDER BY num, idx"
    assert query(url, beyond) == [(1, i) for i in range(5, 10)] + [(2, 2), (2, 3)]
    assert [row[8] for row in sampled if row[0] == 2] == ["c-0#0-2", "c-3#3-4", "c-5#5-7", "c-8#8-9"]
    with opens(*files) as checked:
        plan_for_joining_runner(pool, {}, None)
        for file in files:
            digest(file)
    with PgJournal(url) as journal, opens(*files) as widening:
        join_task(journal, pool, config(tmp_path))
    # The full run checks the rows the sample left unchecked (and tells a changed file by its
    # digest); it plans nothing more, it releases what is planned.
    assert widening == checked
    assert plan_of(url, "t") == sampled
    assert query(url, beyond) == []
    assert (query(url, "SELECT shared->'sample' FROM tasks WHERE id = 't'")) == [(None,)]


def test_a_check_refused_at_the_last_row_leaves_no_task_and_no_rows(url: str, tmp_path: Path) -> None:
    pool, files = setup(tmp_path)
    with files[0].open("a", encoding="utf-8") as more:
        more.write("R03,again\n")
    with PgJournal(url) as journal:
        with pytest.raises(CheckFailed, match=r"rows 4 and 11 of .*goods.csv give one key \[e-R03\]"):
            join_task(journal, pool, config(tmp_path))
        assert query(url, "SELECT count(*) FROM tasks") == [(0,)]
        assert query(url, "SELECT count(*) FROM work") == [(0,)]
        # The journal's connection is whole: the mended file plans the task.
        files[0].write_text("ref,name\nR00,item 0\n", encoding="utf-8")
        join_task(journal, pool, config(tmp_path))
    assert query(url, "SELECT count(*) FROM work WHERE num = 1") == [(1,)]


def test_a_runner_that_starts_the_task_while_another_plans_it_waits_and_reads_no_file(
        url: str, tmp_path: Path) -> None:
    pool, files = setup(tmp_path)
    doc = task_doc(pool, config(tmp_path))
    done: list[BaseException | None] = []
    # The plan's rows, made before the second runner starts (its opens alone are counted).
    planner = Planner(pool, "t", {}, None, redactor=Redactor())
    work: list[tuple[Any, ...]] = []
    for step in pool.steps:
        fe = step.for_each
        if fe is None:
            work.append(planner.single(step))
        elif fe.file:
            work.extend(planner.rows_of(step, iter_rows(tmp_path / fe.file)))
        else:
            work.append(planner.placeholder(step))
    with PgJournal(url) as first, first.creating("t", str(tmp_path / "pool.yaml"), doc) as write:
        assert write is not None
        counted: dict[str, int] = {}

        def second() -> None:
            try:
                with PgJournal(url) as journal, opens(*files) as seen:
                    join_task(journal, pool, config(tmp_path))
                counted.update(seen)
                done.append(None)
            except BaseException as exc:  # noqa: BLE001 - told by the test below
                done.append(exc)

        thread = threading.Thread(target=second)
        thread.start()
        # The second runner waits on the task's row this transaction holds.
        wait_for(lambda: query(url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                    "AND query LIKE 'INSERT INTO tasks%%'")[0][0] == 1)
        for row in work:
            write(row)
    thread.join(timeout=60)
    assert done == [None]
    assert counted == {"goods.csv": 0, "rows.jsonl": 0}
    assert len(plan_of(url, "t")) == 16


def test_a_step_over_a_file_the_check_did_not_hand_over_is_planned_from_its_file(tmp_path: Path) -> None:
    pool, _ = setup(tmp_path)
    data = plan_for_joining_runner(pool, {}, None).data
    written: list[tuple[Any, ...]] = []
    # The second file's rows come from the pass, the first one's from its file.
    sink = PlanPass(Planner(pool, "t", {}, None, redactor=Redactor()), written.append)
    chunked = pool.steps[1]
    for index, row in enumerate(iter_rows(tmp_path / "rows.jsonl")):
        sink.row(chunked, index, row, f"c-{row['n']}" if index % 3 == 0 else None)
    sink.done(chunked, 10)
    sink.finish(data)
    expected = Planner(pool, "t", {}, None, redactor=Redactor())
    assert sorted(written, key=lambda r: (r[1], r[2])) == [
        *expected.rows_of(pool.steps[0], iter_rows(tmp_path / "goods.csv")),
        *expected.rows_of(chunked, iter_rows(tmp_path / "rows.jsonl")),
        expected.single(pool.steps[2]), expected.placeholder(pool.steps[3])]
