"""What ``pooler run`` does with a pool before its first call, no more: compile it with every check
(each row of its data files read, each key checked, each row staged for the plan as it is read)
and create the task with its plan in a fresh journal.  ``python bench/plan_full.py POOL JOURNAL``.
With ``--two-passes``, what a run did before the check staged its rows: the check reads the file,
then the plan reads it again (the figure the staged pass is compared with)."""

from __future__ import annotations

import sys
from pathlib import Path

from pooler.journal.sqlite.journal import Journal
from pooler.pool.compiler import Inputs, compile_pool
from pooler.pool.loader import load_pool
from pooler.redact import Redactor
from pooler.run.planstage import PlanStage
from pooler.run.taskplan import record_plan, write_plan


def main(pool_file: str, journal_file: str) -> None:
    redactor = Redactor()
    with PlanStage(redactor, Path(journal_file).absolute().parent) as stage:
        plan = compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs(), rows=stage)
        assert plan.variables is not None
        values = plan.variables.values
        with Journal(journal_file) as journal, stage.attached(journal):
            journal.new_task(pool_file, "bench",
                             also=lambda db, task: write_plan(db, task, plan, values, redactor, stage=stage))


def two_passes(pool_file: str, journal_file: str) -> None:
    plan = compile_pool(load_pool(Path(pool_file), partial=True), inputs=Inputs())
    assert plan.variables is not None
    with Journal(journal_file) as journal:
        task = journal.new_task(pool_file, "bench")
        record_plan(journal, task, plan, plan.variables.values, Redactor())


if __name__ == "__main__":
    if sys.argv[1] == "--two-passes":
        two_passes(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2])
