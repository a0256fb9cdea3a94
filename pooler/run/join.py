"""A runner joins its task: the first plans it, the others find the plan; a run that asks for more
rows than a sampled plan holds (``--sample`` then the full run) widens it first.  A runner that
joins a task no live runner holds starts a new run of it, in which its failed calls are sent again.

The runner that plans the task reads each data file once: the compile step's pass checks every
row and hands it to ``PlanPass``, which writes its call into the transaction that creates the task;
a problem the check finds rolls that back, so nothing is planned and nothing sent.  The plan holds
every row: a sampled plan's rows after the sample wait ``beyond`` it, and a run that asks for them
releases them, reading no data file.  A runner that finds the task planned reads no data file,
but tells a file of its own that changed since the task was planned, as a run on SQLite does
(``--replan`` plans those rows again: ``replan.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, NamedTuple

from pooler.client.http import ToolRunClient
from pooler.errors import JournalError
from pooler.journal.documents import OptionsDoc, TaskDoc
from pooler.journal.records import pool_identity
from pooler.journal.work import Planned, Seat, TaskJournal, Write, narrower
from pooler.pool.compiler import Plan, plan_for_joining_runner
from pooler.pool.datafiles import DataFile, locate
from pooler.pool.model import Options, Pool
from pooler.run.compare import Classified, compare_steps
from pooler.run.config import RunConfig, runner_width
from pooler.run.planfiles import (
    POOL_FILE,
    PlannedFile,
    changes,
    digest,
    exact_rows,
    refuse_changed,
    shown,
)
from pooler.run.planpass import PlanPass
from pooler.run.replanning import rekey_steps, replan_task
from pooler.run.savedplan import applied_already
from pooler.run.taskanswer import steps_doc
from pooler.run.workplan import Planner, fingerprint


class Joined(NamedTuple):
    """A runner's part in its task, as it joined."""

    pool: Pool
    #: This runner planned the task (its first run).
    planned: bool
    #: This runner began the run the task is in (planned it, or ran it again with no live runner).
    began: bool


def join_task(journal: TaskJournal, pool: Pool, config: RunConfig, *, key_scope: str | None = None,
              store: str | None = None, seat: Seat | None = None,
              client: ToolRunClient | None = None) -> Joined:
    """Plan the task (first runner) or join it: the pool with the task's own options, whether
    this runner planned it, and whether it began a run of it (planned it, or ran it again).  A
    new task of a ``key_scope`` skips the calls whose key a task of that scope has landed.
    ``store``: the store this runner sends to (a task belongs to one).  ``seat``: this runner's
    lease, taken in the transaction that creates or joins the task (its width held to the task's
    cap first), so that runners starting together take part in one run."""
    task = config.task_id
    assert task is not None
    found = journal.shared(task)
    if found is not None and config.applies is not None:
        raise applied_already(journal, task, config.applies)
    if found is None:
        # The runner that plans the task reads the data files, by the compile step's rules (the
        # empty-source rule, every row's key, the delimiter and encoding, variables in the name),
        # in the transaction that creates the task: a problem refuses the run, and the task it
        # began is rolled back, before anything is sent.
        doc = task_doc(pool, config)
        if key_scope is not None:
            doc["key_scope"] = key_scope
        if store is not None:
            doc["store"] = store
        if seat is not None:
            seat.width = runner_width(pool, seat.width)
        # Read before the task is made, so a read that fails leaves no task and sends nothing.
        if config.compared is not None:
            compared = dict(config.compared)
        else:
            compared = compare_steps(journal.compare_rows(), client, pool, config.variables, scope=task) \
                if client is not None else {}
        if compared:
            doc["compare"] = {str(num): found.doc() for num, found in compared.items()}
        if config.conflicts:
            # The task's answer lists them, whoever tells it (show, runs, the report).
            doc["conflicts"] = list(config.conflicts)
        with journal.creating(task, pool_identity(pool.file), doc, seat) as write:
            if write is not None:
                plan, counted = _plan_pass(pool, config, write, None, compared=compared)
                # Kept with the task as the block ends, in its transaction.
                doc["files"] = _files_doc(plan, config.sample, counted)
                return Joined(pool, True, True)
        if config.applies is not None:
            # Another process applying the same plan created its task first.
            raise applied_already(journal, task, config.applies)
        found = journal.shared(task)
        assert found is not None
    if store is not None and found.get("store") not in (None, store):
        # Its keys say what that store has done: against another they would skip calls it never had.
        raise JournalError(f"the task {task} ran against the store {found['store']}, not {store} - "
                           "a task belongs to one store: give this run a task id of its own.")
    files = {int(f["num"]): PlannedFile(**f) for f in found.get("files") or []}
    if files and config.redrive is None:
        # The files as this runner has them (a runner on another host may have none: the plan
        # holds the rows), told by the rule a task on SQLite follows.
        told = changes(pool, _data_files(pool, config.variables), files, task, by_path=False)
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
        if found["pool_file"] == pool_identity(pool.file):
            # The same file, its steps edited since: the plan is of the steps as they were.
            raise JournalError(f"the steps of {pool.file} changed since task {task} was planned - a task "
                               "runs the steps it was planned with: start a new task for these.")
        raise JournalError(f"the task {task} runs another pool ({found['pool_file']}): its steps differ "
                           f"from those of {pool.file} - give this pool a task id of its own.")
    joined = replace(pool, options=Options(**found["options"]))
    planner = Planner(joined, task, config.variables, config.sample, redactor=config.redactor)
    rekey_steps(journal, task, joined, planner)
    if narrower(found.get("sample"), config.sample):
        _widen(journal, task, joined, config, planned_all=bool(found.get("planned_all")))
    stop = pool.options.stop_on_error
    # A new run of the task stops at a failure or goes on as its command says (as with
    # --in-doubt), for every runner that joins it.
    again = {"options": {**found["options"], "stop_on_error": stop}}
    if seat is not None:
        seat.width = runner_width(joined, seat.width)
    began = journal.join(task, config.in_doubt, planner.over_tables(), seat=seat,
                         again=again if stop != joined.options.stop_on_error else None,
                         redrive=config.redrive)
    if began:
        joined = replace(joined, options=replace(joined.options, stop_on_error=stop))
    return Joined(joined, False, began)


def task_doc(pool: Pool, config: RunConfig) -> TaskDoc:
    """What a shared task keeps of its pool and of the command that planned it."""
    doc: TaskDoc = {"fingerprint": fingerprint(pool), "pool_file": pool_identity(pool.file),
                    "options": _options_doc(pool.options), "in_doubt": config.in_doubt,
                    "sample": config.sample, "steps": steps_doc(pool), "planned_all": True,
                    "tolerate": None if pool.tolerate is None else pool.tolerate.doc()}
    if pool.document is not None:
        # What ``pooler redrive`` runs, with no pool file; masked as all the journal keeps (a
        # secret written as a variable's default is given again to a redrive, from where it lives).
        doc["document"] = config.redactor.value(pool.document)
        doc["base"] = str(pool.data_folder())
    return doc


def _plan_pass(pool: Pool, config: RunConfig, write: Write, planned: dict[int, Planned] | None,
               *, beyond: bool = True, compared: Mapping[int, Classified] | None = None
               ) -> tuple[Plan, Mapping[int, int | None]]:
    """The compile step's pass over each data file, each row's call written as it is checked
    (with ``compared``, only the rows a step's compare sends): the plan, and the rows of each file
    the pass read through beyond a sample."""
    assert config.task_id is not None
    planner = Planner(pool, config.task_id, config.variables, config.sample, redactor=config.redactor,
                      beyond=beyond, compared=compared)
    sink = PlanPass(planner, write, planned)
    plan = plan_for_joining_runner(pool, config.variables, config.sample, rows=sink,
                                   checks=not config.checked)
    sink.finish(plan.data)
    return plan, sink.rows


def _widen(journal: TaskJournal, task: str, pool: Pool, config: RunConfig, *, planned_all: bool) -> None:
    """A sampled plan widened to this run's sample, before the task is joined."""
    if planned_all:
        # Every row is planned: the calls beyond the sample are released.  Rows a sample left
        # unchecked are checked first where this runner has the files, as a run on SQLite checks
        # them (without the files, as there, the plan's rows are taken as they are).
        here = _data_files(pool, config.variables)
        if here and all(d.path.is_file() for d in here.values()):
            plan_for_joining_runner(pool, config.variables, config.sample)
        planner = Planner(pool, task, config.variables, config.sample, redactor=config.redactor)
        journal.release(task, config.sample, planner.split)
        return
    # A plan of a sample alone (made before every row was planned): the rows it lacks are read
    # by one pass, under the task's row lock; a data file that cannot be read refuses this run.
    with journal.widening(task, config.sample) as widening:
        if widening is not None:
            planned, write = widening
            _plan_pass(pool, config, write, planned, beyond=False)


def _replan(journal: TaskJournal, task: str, pool: Pool, config: RunConfig, files: dict[int, PlannedFile]
            ) -> None:
    """``--replan``: the steps whose data file changed planned again from the files as they are
    now, read with every check (a problem refuses the run before anything changes)."""
    plan = plan_for_joining_runner(pool, config.variables, None)
    now = {int(f["num"]): f for f in _files_doc(plan, None, {})}
    changed = {num for num, was in files.items()
               if num != POOL_FILE and num in now and now[num]["sha256"] != was.sha256}
    compared = sorted(num for num in changed if pool.steps[num - 1].compare is not None)
    if compared:
        # A replan keeps the calls planned from the rows as they were, and a compare classified
        # those against the store as it was then: both would have to be read again.
        raise JournalError(f"--replan cannot plan step {compared[0]} of task {task} again: its rows are "
                           "compared with the store's (compare:), as they were when the task was planned - "
                           "start a new task, which reads the store again and sends only what changed.")
    planner = Planner(pool, task, config.variables, config.sample, redactor=config.redactor)
    replan_task(journal, task, plan, planner, changed=changed, files=list(now.values()))


def files_gone(journal: TaskJournal, task: str, pool: Pool, values: Mapping[str, Any]) -> list[str]:
    """The data files of the task's plan that are not where this runner would read them (the
    plan holds their rows)."""
    here = _data_files(pool, values)
    found = journal.shared(task)
    files = [] if found is None else found.get("files") or []
    return [str(f["name"]) for f in files if f["num"] != POOL_FILE
            and (f["num"] not in here or not here[f["num"]].path.is_file())]


def _data_files(pool: Pool, values: Mapping[str, Any]) -> dict[int, DataFile]:
    """Where each step's data file is for this runner (found, not read; it may not be there)."""
    found: dict[int, DataFile] = {}
    for step in pool.steps:
        data, _ = locate(pool, step, values, fields=False)
        if data is not None:
            found[step.num] = data
    return found


def _files_doc(plan: Plan, sample: int | None, counted: Mapping[int, int | None]) -> list[dict[str, Any]]:
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
        # A sampled plan's check read only its sample: the file's rows are those the plan read
        # beyond it, else counted for the record.
        rows = data.rows if sample is None else counted.get(step.num) or exact_rows(data)
        files.append(asdict(PlannedFile(step.num, shown(pool, data.path), str(data.path.absolute()),
                                        digest(data.path), rows, step.for_each.chunk, 1)))
    return files


def _options_doc(options: Options) -> OptionsDoc:
    return {"mode": options.mode, "max_concurrency": options.max_concurrency,
            "serialize_on": options.serialize_on, "stop_on_error": options.stop_on_error,
            "include_results": options.include_results}
