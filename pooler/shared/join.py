"""A runner joins its task: the first plans it, the others find the plan; a run that asks for more
rows than a sampled plan holds (``--sample`` then the full run) widens it first.  A runner that
joins a task no live runner holds starts a new run of it, in which its failed calls are sent again.

A plan is widened by the rows it lacks, read from the data files by the runner that asks for
them, after the rows planned: the calls already done are never planned again, so every row
reaches the store once, as a sample continued on SQLite does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from pooler.errors import JournalError
from pooler.journal.postgres.journal import PgJournal, narrower
from pooler.journal.records import pool_identity
from pooler.pool.compiler import Plan, plan_for_joining_runner
from pooler.pool.datafiles import DataFile, locate
from pooler.pool.model import Options, Pool
from pooler.run.executor import RunConfig
from pooler.run.taskplan import (
    POOL_FILE,
    PlannedFile,
    changes,
    digest,
    exact_rows,
    refuse_changed,
    shown,
)
from pooler.shared.answer import steps_doc
from pooler.shared.plan import Planner, fingerprint
from pooler.shared.replan import replan_shared


def join_task(journal: PgJournal, pool: Pool, config: RunConfig) -> Pool:
    """Plan the task (first runner) or join it; the pool with the task's own options."""
    task = config.task_id
    assert task is not None
    found = journal.shared(task)
    if found is None:
        doc = {"fingerprint": fingerprint(pool), "pool_file": pool_identity(pool.file),
               "options": _options_doc(pool.options), "in_doubt": config.in_doubt,
               "sample": config.sample, "steps": steps_doc(pool), "planned_all": True}
        # The runner that plans the task reads the data files, by the compile step's rules (the
        # empty-source rule, every row's key, the delimiter and encoding, variables in the name):
        # a problem refuses the run before the task exists and before anything is sent.
        plan = plan_for_joining_runner(pool, config.variables, config.sample)
        doc["files"] = _files_doc(plan, config.sample)
        planner = Planner(pool, task, config.variables, config.sample, plan.data,
                          redactor=config.redactor)
        if journal.create_shared(task, pool_identity(pool.file), doc, planner.rows()):
            return pool
        found = journal.shared(task)
        assert found is not None
    files = {int(f["num"]): PlannedFile(**f) for f in found.get("files") or []}
    if files:
        # The files as this runner has them (a runner on another host may have none: the plan
        # holds the rows), told by the rule a task on SQLite follows.
        here = _data_files(pool, config.variables)
        told = changes(pool, here, files, task, by_path=False)
        if told and not config.replan:
            raise refuse_changed(told, task)
        if told and found["fingerprint"] != fingerprint(pool):
            raise JournalError(f"--replan plans the rows of task {task} again and keeps its steps, and the "
                               f"steps of {pool.file} differ from those it was planned with - start a new "
                               "task for them.")
        if told:
            _replan(journal, task, replace(pool, options=Options(**found["options"])), config, files)
            found = journal.shared(task) or found
    if found["fingerprint"] != fingerprint(pool):
        raise JournalError(f"the task {task} runs another pool ({found['pool_file']}): its steps differ "
                           f"from those of {pool.file} - give this pool a task id of its own.")
    joined = replace(pool, options=Options(**found["options"]))
    if narrower(found.get("sample"), config.sample):
        if found.get("planned_all"):
            # Every row is planned: the calls beyond the sample are released.  Rows a sample left
            # unchecked are checked first where this runner has the files, as a run on SQLite
            # checks them (without the files, as there, the plan's rows are taken as they are).
            here = _data_files(joined, config.variables)
            if here and all(d.path.is_file() for d in here.values()):
                plan_for_joining_runner(joined, config.variables, config.sample)
            planner = Planner(joined, task, config.variables, config.sample, redactor=config.redactor)
            journal.release(task, config.sample, planner.split)
        else:
            # A plan of a sample alone (made before every row was planned) reads the rows it
            # lacks, before the task is joined: a data file that cannot be read refuses this run.
            plan = plan_for_joining_runner(joined, config.variables, config.sample)
            planner = Planner(joined, task, config.variables, config.sample, plan.data,
                              redactor=config.redactor)
            journal.widen(task, config.sample, planner.rows_beyond)
    journal.join(task, config.in_doubt)
    return joined


def _replan(journal: PgJournal, task: str, pool: Pool, config: RunConfig, files: dict[int, PlannedFile]
            ) -> None:
    """``--replan``: the steps whose data file changed planned again from the files as they are
    now, read with every check (a problem refuses the run before anything changes)."""
    plan = plan_for_joining_runner(pool, config.variables, None)
    now = {int(f["num"]): f for f in _files_doc(plan, None)}
    changed = {num for num, was in files.items()
               if num != POOL_FILE and num in now and now[num]["sha256"] != was.sha256}
    planner = Planner(pool, task, config.variables, config.sample, plan.data, redactor=config.redactor)
    replan_shared(journal, task, plan, planner, changed=changed, files=list(now.values()))


def files_gone(journal: PgJournal, task: str, pool: Pool, values: Mapping[str, Any]) -> list[str]:
    """The data files of the task's plan that are not where this runner would read them (the
    plan holds their rows)."""
    here = _data_files(pool, values)
    found = journal.shared(task) or {}
    return [str(f["name"]) for f in found.get("files") or [] if f["num"] != POOL_FILE
            and (f["num"] not in here or not here[f["num"]].path.is_file())]


def _data_files(pool: Pool, values: Mapping[str, Any]) -> dict[int, DataFile]:
    """Where each step's data file is for this runner (found, not read; it may not be there)."""
    found: dict[int, DataFile] = {}
    for step in pool.steps:
        data, _ = locate(pool, step, values, fields=False)
        if data is not None:
            found[step.num] = data
    return found


def _files_doc(plan: Plan, sample: int | None) -> list[dict[str, Any]]:
    """The pool file and each data file as the plan saw them (their digests and rows), kept with
    the task: a runner that finds one changed since is told and refused."""
    pool = plan.pool
    path = Path(pool.file)
    files = [asdict(PlannedFile(POOL_FILE, shown(pool, path), str(path.absolute()),
                                digest(path) if path.is_file() else "", None, None, 1))]
    for step in pool.steps:
        data = plan.data.get(step.num)
        if data is None or step.for_each is None:
            continue
        # A sampled plan read only its sample: the file's rows are counted for the record.
        rows = exact_rows(data) if sample is not None else data.rows
        files.append(asdict(PlannedFile(step.num, shown(pool, data.path), str(data.path.absolute()),
                                        digest(data.path), rows, step.for_each.chunk, 1)))
    return files


def _options_doc(options: Options) -> dict[str, Any]:
    return {"mode": options.mode, "max_concurrency": options.max_concurrency,
            "serialize_on": options.serialize_on, "stop_on_error": options.stop_on_error,
            "include_results": options.include_results}
