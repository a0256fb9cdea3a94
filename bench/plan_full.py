"""What ``pooler run`` does with a pool before its first call, no more: compile it with every check
(each row of its data files read, each key checked) and record the task's plan in a fresh journal.
``python bench/plan_full.py POOL JOURNAL``."""

from __future__ import annotations

import sys
from pathlib import Path

from pooler.journal.sqlite.journal import Journal
from pooler.pool.compiler import Inputs, compile_pool
from pooler.pool.loader import load_pool
from pooler.redact import Redactor
from pooler.run.taskplan import record_plan


def main(pool_file: str, journal_file: str) -> None:
    plan = compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs())
    assert plan.variables is not None
    with Journal(journal_file) as journal:
        task = journal.new_task(pool_file, "bench")
        record_plan(journal, task, plan, plan.variables.values, Redactor())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
