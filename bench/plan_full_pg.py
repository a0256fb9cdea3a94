"""What the first runner of a task on a PostgreSQL journal does before its first call, no more:
compile the pool with every check (each row read, each key checked) and plan the task, one work
row per call with its row, into the journal.  ``python bench/plan_full_pg.py POOL URL``."""

from __future__ import annotations

import sys
from pathlib import Path

from pooler.journal.postgres.journal import PgJournal
from pooler.pool.compiler import Inputs, compile_pool
from pooler.pool.loader import load_pool
from pooler.run.executor import RunConfig
from pooler.shared.join import join_task


def main(pool_file: str, url: str) -> None:
    plan = compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs(), data_files=False)
    with PgJournal(url) as journal:
        join_task(journal, plan.pool, RunConfig(out=Path(pool_file).parent / "out", task_id="bench"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
