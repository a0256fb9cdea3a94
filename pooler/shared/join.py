"""A runner joins its task: the first plans it, the others find the plan; a run that asks for more
rows than a sampled plan holds (``--sample`` then the full run) widens it first.  A runner that
joins a task no live runner holds starts a new run of it, in which its failed calls are sent again.

The runner that plans the task reads each data file once: the compile step's pass checks every
row and hands it to ``PlanPass``, which writes its call into the transaction that creates the task;
a problem the check finds rolls that back, so nothing is planned and nothing sent.  A runner that
finds the task planned reads no data file.  A plan is widened by the rows it lacks, read the same
way by the runner that asks for them, after the rows planned: the calls already done are never
planned again, so every row reaches the store once, as a sample continued on SQLite does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pooler.errors import JournalError
from pooler.journal.postgres.journal import PgJournal, Planned, narrower
from pooler.journal.records import pool_identity
from pooler.pool.compiler import plan_for_joining_runner
from pooler.pool.model import Options, Pool
from pooler.run.executor import RunConfig
from pooler.shared.answer import steps_doc
from pooler.shared.plan import Planner, fingerprint
from pooler.shared.planpass import PlanPass, Write


def join_task(journal: PgJournal, pool: Pool, config: RunConfig) -> Pool:
    """Plan the task (first runner) or join it; the pool with the task's own options."""
    task = config.task_id
    assert task is not None
    found = journal.shared(task)
    if found is None:
        # The runner that plans the task reads the data files, by the compile step's rules (the
        # empty-source rule, every row's key, the delimiter and encoding, variables in the name),
        # in the transaction that creates the task: a problem refuses the run, and the task it
        # began is rolled back, before anything is sent.
        with journal.creating(task, pool_identity(pool.file), task_doc(pool, config)) as write:
            if write is not None:
                _plan_pass(pool, config, write, None)
                return pool
        found = journal.shared(task)
        assert found is not None
    if found["fingerprint"] != fingerprint(pool):
        raise JournalError(f"the task {task} runs another pool ({found['pool_file']}): its steps differ "
                           f"from those of {pool.file} - give this pool a task id of its own.")
    joined = replace(pool, options=Options(**found["options"]))
    if narrower(found.get("sample"), config.sample):
        # Read before the task is joined: a data file that cannot be read refuses this run alone.
        with journal.widening(task, config.sample) as widening:
            if widening is not None:
                planned, write = widening
                _plan_pass(joined, config, write, planned)
    journal.join(task, config.in_doubt)
    return joined


def task_doc(pool: Pool, config: RunConfig) -> dict[str, Any]:
    """What a shared task keeps of its pool and of the command that planned it."""
    return {"fingerprint": fingerprint(pool), "pool_file": pool_identity(pool.file),
            "options": _options_doc(pool.options), "in_doubt": config.in_doubt,
            "sample": config.sample, "steps": steps_doc(pool)}


def _plan_pass(pool: Pool, config: RunConfig, write: Write, planned: dict[int, Planned] | None) -> None:
    """The compile step's pass over each data file, each row's call written as it is checked."""
    assert config.task_id is not None
    planner = Planner(pool, config.task_id, config.variables, config.sample, redactor=config.redactor)
    sink = PlanPass(planner, write, planned)
    plan = plan_for_joining_runner(pool, config.variables, config.sample, rows=sink)
    sink.finish(plan.data)


def _options_doc(options: Options) -> dict[str, Any]:
    return {"mode": options.mode, "max_concurrency": options.max_concurrency,
            "serialize_on": options.serialize_on, "stop_on_error": options.stop_on_error,
            "include_results": options.include_results}
