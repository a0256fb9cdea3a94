"""``pool_run``: a pool file the server can read, run as ``pooler run`` runs it - steps over rows,
chunks, keys, budgets, rates and flow control - through the same engine (``run_plan``).

tool_pool stays the seed's tool (at most 200 steps, one call each); a job of 100,000 rows is a pool
file.  The file is named as ``pool_source`` is (a path in the store folder, or absolute), its
variables come from ``vars`` as ``--var`` gives them (and from the server's environment for the
variables that declare ``env``), and it runs as a pool task of the session's task (or of ``task``),
as a tool_pool call does: the same file called again joins its task and skips what landed, and
``tool_pool {"task": ...}`` tells its answer so far.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pooler.errors import JournalError, PoolerError
from pooler.mcp import fileplans
from pooler.mcp.arguments import check_names, optional
from pooler.mcp.outcome import Outcome, answered
from pooler.mcp.planning import commit
from pooler.mcp.poolfile import TOOL, load
from pooler.mcp.session import pool_task_id
from pooler.pool.compiler import Inputs, Plan, plan_for_run
from pooler.pool.plan_document import build_plan
from pooler.run.compare import compare_steps, with_compares
from pooler.run.config import RunConfig
from pooler.run.redrive import stored_pool

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns
    from pooler.run.events import Reporter


def stored(runs: PoolRuns, task_id: str) -> tuple[Plan, str]:
    """The plan of a pool task as its journal keeps it (the pool's document and the folder of its
    data files, as ``pooler redrive`` reads them), and the session task it runs under."""
    found = runs.journal().shared(task_id)
    if found is None:
        raise JournalError(f"no task {task_id} in the journal {runs.journal().where()}.")
    pool = stored_pool(found, task_id)
    # The variables are those of the server's environment and the pool's defaults, as for a
    # redrive: the rows and their keys are the journal's already.
    plan = plan_for_run(pool, Inputs(overrides={}, environ=runs.environ), sample=found.get("sample"),
                        data_files=False)
    assert plan.variables is not None
    for secret in plan.variables.secrets:
        runs.redactor.add(secret)
    session = task_id.rsplit("-", 1)[0]
    if pool_task_id(session, plan.pool) != task_id:
        raise JournalError(f"the task {task_id} is not a task pool_run ran - run it again with "
                           f"'pooler redrive {task_id}'.")
    return plan, session


def plan_of(runs: PoolRuns, task_id: str, arguments: Mapping[str, Any]) -> Plan | None:
    """The plan of a pool_run task, from a call's ``arguments``, else as its journal keeps it; None
    when it cannot be had (the run that follows tells why)."""
    try:
        if arguments:
            return load(runs, arguments, task_id.rsplit("-", 1)[0])[0]
        return stored(runs, task_id)[0]
    except PoolerError:
        return None


def take_up(runs: PoolRuns, task_id: str, *, reporter: Reporter | None = None,
            stop: threading.Event | None = None, in_doubt: str | None = None) -> Outcome:
    """A pool task whose runner died, run again from its journal: what landed is skipped."""
    plan, session = stored(runs, task_id)
    return _run(runs, plan, session, reporter=reporter, stop=stop, in_doubt=in_doubt)


def call(runs: PoolRuns, arguments: Mapping[str, Any], *, session_task: str,
         reporter: Reporter | None = None, stop: threading.Event | None = None,
         in_doubt: str | None = None) -> Outcome:
    """pool_run: the run's answer, or with dry_run its plan; with plan a saved plan, and with
    plan_id its commit (``pooler.mcp.fileplans``); ``in_doubt``: retry or skip the calls an earlier
    run left in doubt, as the client said (else as ``pooler run`` does: probe, retry)."""
    check_names(TOOL, arguments)
    if optional(arguments, "plan_id", str, TOOL) is not None:
        # The one commit path of every plan of the server, whichever tool made it.
        return commit(runs, arguments, reporter=reporter, stop=stop)
    if optional(arguments, "plan", bool, TOOL):
        return fileplans.make(runs, arguments, session_task)
    plan, task, dry_run = load(runs, arguments, session_task)
    if dry_run:
        document = build_plan(plan)
        if any(step.compare is not None for step in plan.pool.steps):
            # The store's rows are read to count what would be sent, as pooler run --dry-run does.
            assert plan.variables is not None
            with_compares(document, plan, compare_steps(runs.journal().compare_rows(), runs.client, plan.pool,
                                                        plan.variables.values, scope=f"dry-run {task}"))
        return answered({"result": True, "task": task, **document,
                         "message": "Nothing was sent: this is the plan. Call pool_run again without "
                                    "dry_run to run it."}, is_error=False)
    return _run(runs, plan, task, reporter=reporter, stop=stop, in_doubt=in_doubt)


def _run(runs: PoolRuns, plan: Plan, task: str, *, reporter: Reporter | None, stop: threading.Event | None,
         in_doubt: str | None) -> Outcome:
    assert plan.variables is not None
    config = RunConfig(out=runs.out, task_id=task, redactor=runs.redactor,
                       variables=plan.variables.values, sample=plan.sample,
                       in_doubt="skip" if in_doubt == "skip" else "retry", probe=in_doubt is None)
    answer = runs.execute(plan, task, reporter=reporter, stop=stop, config=config)
    return answered(answer, is_error=answer.get("result") is not True)
