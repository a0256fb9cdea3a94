"""Plan, then commit, a pool file: ``pool_run {"plan": true, "file": ...}`` writes the plan
``pooler plan`` writes (``pooler.run.savedplan``, with its steps' compares read now:
``pooler.run.plancompares``) and keeps it as every plan of the server is kept
(``pooler.mcp.plans``: planned, committed at most once, until it expires); its commit
(``pooler.mcp.planning.commit``, the one commit path) applies it as ``pooler apply`` does.

A plan applies to a task of its own: planned against a pool task that exists (the session ran
the file already), it is refused, naming the ``task`` argument that gives it one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pooler import strictjson
from pooler.errors import InputError
from pooler.journal.documents import Answer
from pooler.mcp.outcome import Outcome, answered
from pooler.mcp.plans import PlanRow, plan_file, store_tools, when
from pooler.mcp.poolfile import TOOL, load
from pooler.mcp.session import pool_task_id
from pooler.plural import plural
from pooler.pool.compiler import Plan
from pooler.pool.plan_document import build_plan
from pooler.run.compare import Classified, compare_steps, with_compares
from pooler.run.config import RunConfig
from pooler.run.plancompares import Reader, apply_compares, save_plan
from pooler.run.plandigests import plan_digests, stale
from pooler.run.savedplan import calls_digest, classes_text, compare_totals, make_head, read_head
from pooler.run.storeid import store_identity
from pooler.statuses import PlanState

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns
    from pooler.run.events import Reporter

#: A commit made ready: the run of the plan, given what reports it and what stops it.
Run = Callable[["Reporter | None", "threading.Event | None"], Answer]


def _reader(runs: PoolRuns, plan: Plan, scope: str, seen: dict[int, Classified] | None = None) -> Reader:
    """The compares of the plan's steps read now through the server's client and journal."""
    def read(then: Callable[[Any, dict[int, Classified]], Any]) -> tuple[dict[int, Classified], Any]:
        if not any(step.compare is not None for step in plan.pool.steps):
            return {}, None
        assert plan.variables is not None
        found = compare_steps(runs.journal().compare_rows(), runs.client, plan.pool, plan.variables.values,
                              scope=scope)
        if seen is not None:
            seen.update(found)
        return found, then(runs.client, found)
    return read


def is_file_plan(row: PlanRow) -> bool:
    return TOOL in row.arguments


def planned(runs: PoolRuns, row: PlanRow) -> tuple[Plan, str]:
    """The pool of a file plan as it is now, and its session task."""
    plan, task, _ = load(runs, row.arguments[TOOL], row.task)
    return plan, task


def calls_of(runs: PoolRuns, plan_id: str) -> dict[str, int]:
    """The calls of a plan's file by unit.command, as its head counts them."""
    by_command: dict[str, int] = {}
    for step in read_head(plan_file(runs, plan_id))["steps"]:
        name = f"{step['unit']}.{step['command']}"
        by_command[name] = by_command.get(name, 0) + int(step.get("calls") or 0)
    return by_command


def make(runs: PoolRuns, arguments: Mapping[str, Any], session_task: str) -> Outcome:
    """The plan of the pool file with a plan_id, its calls counted by compare class; nothing is sent."""
    kept = {k: v for k, v in arguments.items() if k != "plan" and v is not None}
    if kept.get("dry_run"):
        raise InputError(f"{TOOL} takes plan or dry_run, not both - plan: true writes the plan to commit, "
                         "dry_run: true only shows it.")
    kept.pop("dry_run", None)
    tools = store_tools(runs)
    plan, task, _ = load(runs, kept, session_task, tools=tools)
    if runs.redactor and runs.redactor.value(kept) != kept:
        raise InputError("vars holds a secret - a plan is kept in the journal, where no secret goes: "
                         "give the secret in the server's environment (a variable with env).")
    pooled = pool_task_id(task, plan.pool)
    if runs.journal().shared(pooled) is not None:
        raise InputError(f"task {task} ran {plan.pool.file} already (as {pooled}) - a plan applies to a task "
                         "of its own: plan again with a task argument no run used; nothing was planned.")
    variables = plan.variables
    assert variables is not None
    digests = plan_digests(plan.pool, variables.values, variables.secret_names, tools=tools)
    row = runs.plans().add(task, strictjson.dumps(digests, ensure_ascii=False), {TOOL: kept}, runs.plan_ttl)
    path = plan_file(runs, row.id)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    head = make_head(plan, task=task, pool=plan.pool.file, store=store_identity(runs.client.store),
                     options={}, digests=digests, redactor=runs.redactor)
    compared: dict[int, Classified] = {}
    head = save_plan(path, {**head, "plan_id": row.id, "expires": when(row.expires)}, plan, runs.redactor,
                     _reader(runs, plan, f"plan {row.id}", compared))
    document = build_plan(plan)
    with_compares(document, plan, compared)
    totals = compare_totals(head["steps"])
    classes = f" ({classes_text(totals)})" if totals else ""
    calls = "its calls" if head["calls"] is None else plural(head["calls"], "call")
    return answered({
        **document, "result": True, "task": task, "status": PlanState.PLANNED, "plan_id": row.id,
        "expires": when(row.expires), "calls": head["calls"], "plan_file": str(path), "digests": digests,
        # The calls by class, for one confirmation ("12 new, 40 changed, 99,948 unchanged").
        **({"compare": totals} if totals else {}),
        "message": f"Nothing was sent: {calls}{classes} planned. Commit with {TOOL} "
                   f"{{\"plan_id\": \"{row.id}\"}} before {when(row.expires)}: it makes these calls once, "
                   "however often the commit is sent.",
    }, is_error=False)


def prepare(runs: PoolRuns, row: PlanRow) -> Run:
    """The commit of a file plan made ready, as ``pooler apply`` makes it: refused (nothing sent)
    when its file was edited, what it was made from changed or the store is another; its steps'
    compares read again, a planned call whose rows moved since being a conflict, not sent."""
    path = plan_file(runs, row.id)
    head = read_head(path)
    if calls_digest(path) != head.get("calls_sha256"):
        raise InputError(f"{path} was edited since it was planned: its calls are not those its head counts - "
                         "nothing was sent; plan again.")
    plan, task = planned(runs, row)
    variables = plan.variables
    assert variables is not None
    now = plan_digests(plan.pool, variables.values, variables.secret_names, tools=store_tools(runs))
    told = stale(head["digests"], now)
    found = store_identity(runs.client.store)
    if head.get("store") not in (None, found):
        told.append(f"it was planned against the store {head['store']}, not {found}")
    if told:
        raise InputError(f"plan {row.id} no longer matches its pool: {'; '.join(told)} - nothing was sent; "
                         "plan the pool again.")
    compared, conflicts = apply_compares(path, head, plan, runs.redactor,
                                         _reader(runs, plan, pool_task_id(task, plan.pool)))
    config = RunConfig(out=runs.out, task_id=task, redactor=runs.redactor, variables=variables.values,
                       sample=plan.sample, applies=str(path), compared=compared, conflicts=conflicts)
    return lambda reporter, stop: runs.execute(plan, task, reporter=reporter, stop=stop, config=config)
