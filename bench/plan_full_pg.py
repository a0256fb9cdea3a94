"""What the first runner of a task on a PostgreSQL journal does before its first call, no more:
compile the pool with every check (each row read, each key checked) and plan the task, one work
row per call with its row, into the journal.  ``python bench/plan_full_pg.py POOL URL``.  With
``--check-only POOL``, the check's pass alone (every row read and its key checked, nothing
planned): the part of the time that is the check's.

The script calls only what every tree since the shared runner has (``join_task``), so
``plan_cost_pg.py`` runs it against an earlier tree's package too (``BENCH_PLAN_BEFORE``)."""

from __future__ import annotations

import sys
from pathlib import Path

from pooler.pool.compiler import Inputs, compile_pool
from pooler.pool.loader import load_pool


def main(pool_file: str, url: str) -> None:
    from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415
    from pooler.run.executor import RunConfig  # noqa: PLC0415
    from pooler.shared.join import join_task  # noqa: PLC0415

    plan = compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs(), data_files=False)
    with PgJournal(url) as journal:
        join_task(journal, plan.pool, RunConfig(out=Path(pool_file).parent / "out", task_id="bench"))


def check_only(pool_file: str) -> None:
    compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs())


if __name__ == "__main__":
    if sys.argv[1] == "--check-only":
        check_only(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2])
