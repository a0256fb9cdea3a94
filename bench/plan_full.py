"""What the first run of a task does with a pool before its first call, no more: compile it,
then plan the task into the journal, each row of its data files read once by the check's own pass
(every row checked, every key made) and written as a work row with its call.
``python bench/plan_full.py POOL JOURNAL`` (a SQLite file, or a postgresql:// URL).  With
``--check-only POOL``, the check's pass alone (every row read and its key checked, nothing
planned): the part of the time that is the check's."""

from __future__ import annotations

import sys
from pathlib import Path

from pooler.pool.compiler import Inputs, compile_pool
from pooler.pool.loader import load_pool


def main(pool_file: str, spec: str) -> None:
    from pooler.journal.opening import open_journal  # noqa: PLC0415
    from pooler.run.config import RunConfig  # noqa: PLC0415
    from pooler.run.join import join_task  # noqa: PLC0415

    plan = compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs(), data_files=False)
    journal = open_journal(spec)
    try:
        join_task(journal, plan.pool, RunConfig(out=Path(pool_file).parent / "out", task_id="bench"))
    finally:
        journal.close()


def check_only(pool_file: str) -> None:
    compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs())


if __name__ == "__main__":
    if sys.argv[1] == "--check-only":
        check_only(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2])
