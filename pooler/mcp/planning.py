"""Plan, then commit: ``tool_pool {"plan": true, ...}`` and ``tool_pool {"plan_id": ...}``.

A plan is the whole pool checked as ``pooler check --against`` checks it (against the store's own
declarations), with the calls it will make, their keys and their order; nothing is sent.  A commit
runs exactly that plan, once: the claim is kept in the journal (``pooler.mcp.plans``), so a commit
sent again - an agent's retry after a lost answer, on any connection, to any server process of the
same store folder - sends nothing and returns the plan's answer, waiting for it while the first
commit still runs.

The plan is the plan ``pooler plan`` makes: the same document, written to the store folder
(``.pooler/plans/PLAN_ID.jsonl``, which ``pooler show`` reads), and the same digests.  Between plan
and commit the pool's words cannot change (the plan keeps them), but a file it reads and the store's
declarations can: a commit digests them again, as ``pooler apply`` does, and when one differs it
refuses, naming what changed, and sends nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pooler import strictjson
from pooler.errors import InputError, PoolerError, StoreError
from pooler.journal.documents import Answer
from pooler.mcp import fileplans
from pooler.mcp.arguments import check_task, optional
from pooler.mcp.outcome import Outcome, answered, problem_text, with_notes
from pooler.mcp.plans import PlanRow, plan_file, store_tools, when
from pooler.pool.compiler import Plan
from pooler.pool.plan_document import build_plan
from pooler.run.plandigests import Digest, plan_digests, stale
from pooler.run.savedplan import classes_text, compare_totals, make_head, read_head, write_plan
from pooler.run.storeid import store_identity
from pooler.statuses import PlanState

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns
    from pooler.run.events import Reporter

#: How often a second commit looks whether the first one has finished.
WAIT_STEP = 0.2


def _plan_steps(compiled: Any, head: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The calls in order, as an agent reads them: the key as it will be sent, and each step's
    calls as the plan file counts them (with ``compare:``, how many are new, changed, unchanged)."""
    counted = {entry["num"]: entry for entry in head["steps"]}
    steps = []
    for entry in build_plan(compiled)["steps"]:
        key = entry.get("key")
        found = counted.get(entry["num"], {})
        step = {"num": entry["num"], "name": entry["name"], "unit": entry["unit"],
                "command": entry["command"], "key": key.get("value") if key else None,
                "waits_for": entry["waits_for"], "after": entry["after"], "calls": found.get("calls")}
        if "compare" in found:
            step["compare"] = found["compare"]
        steps.append(step)
    return steps


def plan_classes(runs: PoolRuns, plan_id: str) -> str:
    """The plan's calls by compare class, as its file counts them (``12 new, 40 changed, 8
    unchanged``); empty when no step has ``compare:`` (or the file is gone)."""
    path = plan_file(runs, plan_id)
    if not path.is_file():
        return ""
    return classes_text(compare_totals(read_head(path)["steps"]))


def make_plan(runs: PoolRuns, arguments: Mapping[str, Any], session_task: str) -> Outcome:
    """The plan of the pool with a plan_id, or every problem the check found; nothing is sent."""
    named = optional(arguments, "task", str, "tool_pool")
    task = check_task(named, session_task) if named is not None else session_task
    kept = {k: v for k, v in arguments.items() if k != "plan" and v is not None}
    tools = store_tools(runs)
    try:
        compiled, task = runs.load(kept, session_task, tools=tools)
    except StoreError:
        raise
    except PoolerError as exc:
        problems = [problem_text(p) for p in exc.problems()]
        return answered({"result": False, "task": task, "status": "refused", "plan_id": None,
                         "expires": None, "calls": 0, "steps": [], "problems": problems,
                         "message": f"The pool has {len(problems)} "
                                    f"{'problem' if len(problems) == 1 else 'problems'}: nothing was sent "
                                    "and nothing was planned - fix them and plan again."}, is_error=True)
    if runs.redactor and runs.redactor.value(kept) != kept:
        raise InputError("The pool holds a secret of this server (its store token) - a plan is kept in the "
                         "journal, where no secret goes: take the secret out of the pool.")
    digests = plan_digests(compiled.pool, {}, tools=tools)
    row = runs.plans().add(task, strictjson.dumps(digests, ensure_ascii=False), kept, runs.plan_ttl)
    path = plan_file(runs, row.id)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    head = make_head(compiled, task=task, pool=compiled.pool.file, store=store_identity(runs.client.store),
                     options={}, digests=digests, redactor=runs.redactor)
    head = write_plan(path, {**head, "plan_id": row.id, "expires": when(row.expires)}, compiled,
                      runs.redactor)
    steps = _plan_steps(compiled, head)
    opts = compiled.pool.options
    return answered(with_notes({
        "result": True, "task": task, "status": PlanState.PLANNED, "plan_id": row.id,
        "expires": when(row.expires),
        "calls": len(steps), "mode": opts.mode,
        "max_concurrency": opts.max_concurrency if opts.mode == "parallel" else 1,
        "serialize_on": opts.serialize_on, "stop_on_error": opts.stop_on_error, "steps": steps,
        "plan_file": str(path), "digests": digests,
        # With compare: the calls by class, for one confirmation ("12 new, 40 changed, ...").
        **({"compare": totals} if (totals := compare_totals(head["steps"])) else {}),
        "problems": [],
        "message": f"Nothing was sent. Commit with tool_pool {{\"plan_id\": \"{row.id}\"}} before "
                   f"{when(row.expires)}: it makes these calls once, however often the commit is sent.",
    }, compiled), is_error=False)


def _expired(row: PlanRow, runs: PoolRuns) -> InputError:
    return InputError(f"plan {row.id} expired at {when(row.expires)} (a plan lasts {runs.plan_ttl:g} s, "
                      "pooler mcp --plan-ttl) - nothing was sent; plan the pool again with plan: true.")


def commit(runs: PoolRuns, arguments: Mapping[str, Any], *, reporter: Reporter | None = None,
           stop: threading.Event | None = None) -> Outcome:
    """Run the plan once; every later commit of it gets the same answer, sending nothing."""
    plan_id = str(optional(arguments, "plan_id", str, "tool_pool"))
    others = sorted(k for k, v in arguments.items() if v is not None and k != "plan_id")
    if others:
        raise InputError(f"plan_id is given alone - the plan holds its pool, options and task; drop "
                         f"{', '.join(others)}.")
    store = runs.plans()
    row = store.get(plan_id)
    if row is None:
        raise InputError(f"no plan {plan_id} - a plan_id comes from tool_pool or pool_run with plan: "
                         "true, on a server of this store folder; plan the pool again.")
    if row.state == PlanState.PLANNED:
        if row.expires <= time.time():
            raise _expired(row, runs)
        run = fileplans.prepare(runs, row) if fileplans.is_file_plan(row) else _prepare(runs, row)
        if store.claim(plan_id):
            try:
                answer = run(reporter, stop)
            except BaseException:
                # A later commit then tells what the journal holds of the task, instead of waiting.
                store.fail(plan_id)
                raise
            store.finish(plan_id, answer)
            return answered(answer, is_error=answer.get("result") is not True)
        row = store.get(plan_id) or row
        if row.state == PlanState.PLANNED:
            raise _expired(row, runs)
    answer, bad = _answer_of(runs, row, stop)
    return answered(answer, is_error=bad)


def _prepare(runs: PoolRuns, row: PlanRow) -> fileplans.Run:
    """The commit of a tool_pool plan made ready: refused (nothing sent) when what it reads changed."""
    compiled, task = runs.load(row.arguments, row.task)
    told = _stale(row, plan_digests(compiled.pool, {}, tools=store_tools(runs)))
    if told:
        raise InputError(f"plan {row.id} no longer matches its pool: {'; '.join(told)} - nothing was "
                         "sent; plan the pool again.")
    return lambda reporter, stop: runs.execute(compiled, task, reporter=reporter, stop=stop)


def planned(runs: PoolRuns, row: PlanRow) -> tuple[Plan, str]:
    """The pool a plan runs, as it is now, and its task; either tool's plan."""
    return fileplans.planned(runs, row) if fileplans.is_file_plan(row) else runs.load(row.arguments, row.task)


def _stale(row: PlanRow, now: list[Digest]) -> list[str]:
    """What changed since the plan, by the rule ``pooler apply`` follows."""
    try:
        then = json.loads(row.digest)
    except ValueError:
        # A plan kept by an earlier pooler holds one digest of another making.
        then = None
    if not isinstance(then, list):
        return ["it was planned by an earlier pooler"]
    return stale(then, now)


def _answer_of(runs: PoolRuns, row: PlanRow, stop: threading.Event | None) -> tuple[Answer, bool]:
    """A committed plan's answer: recorded, or waited for while its committer still runs it, or (its
    committer died) what the journal holds of its task."""
    while True:
        if row.answer is not None:
            return row.answer, row.answer.get("result") is not True
        gone = row.state == PlanState.FAILED or not (row.task in runs.running or row.committer_alive())
        if gone or (stop is not None and stop.is_set()):
            answer = runs.task_answer(row.task)
            return answer, answer.get("result") is not True
        time.sleep(WAIT_STEP)
        row = runs.plans().get(row.id) or row
