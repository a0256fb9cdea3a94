"""``pooler plan POOL -o FILE`` and ``pooler apply FILE``: a reviewed plan, applied once.

``plan`` checks the pool against the store's own declarations, decides everything ``run`` decides
before its first call and writes it to FILE (``pooler.run.savedplan``), sending nothing.  ``apply``
refuses (exit 2, nothing sent) a plan that is stale - a digest that differs, another store - and
otherwise runs it as the task the plan named, which the journal creates once: a second apply, by
any process, is refused, and what follows is the task's (``--resume``, ``pooler redrive``,
``pooler show``).  The calls whose rows moved in the store since the plan are left unsent, as
conflicts (``pooler.run.conflicts``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

from pooler.cli.commands import help_of
from pooler.cli.commands.common import (
    Context,
    add_json,
    add_run_output,
    add_store_options,
    add_variable_options,
    make_client,
    positive_int,
    target,
)
from pooler.cli.commands.monitoring import add_monitoring_options
from pooler.cli.commands.plan_common import digests_now, plan_args, plan_inputs, quiet
from pooler.cli.commands.plan_show import print_plan
from pooler.cli.commands.run import IN_DOUBT, OVERRIDES, add_batch_options, prepare, run_prepared
from pooler.cli.commands.run_files import add_run_files
from pooler.cli.commands.run_runner import add_shared_options
from pooler.client.http import ToolRunClient
from pooler.errors import InputError, StoreError, UsageError
from pooler.exits import ExitStatus
from pooler.journal.api import journal_spec
from pooler.journal.documents import Conflict
from pooler.journal.opening import open_journal
from pooler.plural import plural
from pooler.pool.compiler import Plan
from pooler.run.compare import Classified, compare_steps
from pooler.run.conflicts import moved_list
from pooler.run.executor import new_task_id
from pooler.run.plancompares import apply_compares, save_plan
from pooler.run.plandigests import POOL, plan_digests, stale
from pooler.run.savedplan import (
    applied_already,
    calls_digest,
    make_head,
    read_head,
)
from pooler.run.storeid import store_identity

T = TypeVar("T")
#: How many conflicts an apply lists before it runs.
LISTED = 20


def register(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        help=help_of("plan"),
        description="Check a pool file against the store's own declarations and write everything a run "
                    "decides before its first call to FILE: the compiled pool, every call with its key and "
                    "its params where they are known, the digests (sha256) of the pool file, every data "
                    "file, the variables that are no secret and the store's declarations, and the store it "
                    "was planned against. Nothing is sent, and no secret is written: the plan names the "
                    "variables to give again. Review it with 'pooler show FILE', apply it once with "
                    "'pooler apply FILE'. Exit 0 when planned, 2 when refused.",
    )
    plan.add_argument("pool", metavar="POOL", help="the pool file")
    plan.add_argument("-o", "--output", metavar="FILE", required=True, help="the plan file to write")
    add_store_options(plan)
    add_json(plan, "the plan's head (what 'pooler show FILE --json' prints)")
    add_variable_options(plan)
    plan.add_argument("--sample", type=positive_int, metavar="N",
                      help="plan steps over rows on their first N rows only (default: every row)")
    add_batch_options(plan)
    add_run_output(plan)
    plan.set_defaults(handler=handle_plan, dry_run=True)

    apply = sub.add_parser(
        "apply",
        help=help_of("apply"),
        description="Run a plan written by 'pooler plan': exactly its calls, as the task it names, once. "
                    "Refused (exit 2, nothing sent) when anything it was made from changed since - the "
                    "pool file, a data file, a variable, the store's declarations - naming what changed; "
                    "when the store is not the one it was planned against; and when it was applied "
                    "before (then the task is what goes on: 'pooler redrive TASK', 'pooler show TASK'). "
                    "A step with compare: reads the store again: a planned call whose rows moved in the "
                    "store since the plan is a conflict - not sent, ended not run, listed - and the other "
                    "calls are sent (exit 1). "
                    "The variables that are no secret are the plan's; its secrets are given again as "
                    "'pooler run' takes them. Exit statuses as 'pooler run'.",
    )
    apply.add_argument("plan", metavar="FILE", help="the plan file 'pooler plan -o FILE' wrote")
    add_store_options(apply)
    apply.add_argument("--out", metavar="DIR", default="out",
                       help="where table and job files go (default ./out)")
    add_json(apply, "the answer (contract section 3)")
    add_variable_options(apply)
    apply.add_argument("--journal", metavar="PATH|URL",
                       help="the journal: a SQLite file (default $XDG_STATE_HOME/pooler/journal.sqlite), "
                            "or postgresql://... (env POOLER_JOURNAL); a plan applies once in a journal")
    apply.add_argument("--in-doubt", choices=IN_DOUBT, default=None,
                       help="what to do with a call in doubt (default retry: send it again with the same "
                            "Idempotency-Key)")
    apply.add_argument("--refresh", action="store_true",
                       help="plan the steps with compare: from the store as it is now: rows that moved since "
                            "the plan are sent as they are now instead of left as conflicts")
    add_shared_options(apply)
    add_run_files(apply)
    add_monitoring_options(apply)
    add_run_output(apply)
    apply.set_defaults(handler=handle_apply, dry_run=False, resume=False, replan=False,
                       **dict.fromkeys((*OVERRIDES, "rate"), None))


def _store_tools(args: argparse.Namespace, ctx: Context) -> tuple[str, list[dict[str, Any]]]:
    """The store the flags name, as a plan records it, and its declarations (a read)."""
    with make_client(args, ctx) as client:
        reply = client.tool_list()
        tools = reply.data.get("tools")
        if not reply.result or not isinstance(tools, list):
            raise StoreError(f"the store refused tool_list: {reply.message} - the pool cannot be checked "
                             "against its declarations, so nothing was planned.", store=client.store,
                             sent=True)
        return store_identity(client.store), tools


def read_compares(compiled: Plan, args: argparse.Namespace, ctx: Context, *, scope: str,
                  then: Callable[[ToolRunClient, dict[int, Classified]], T]
                  ) -> tuple[dict[int, Classified], T | None]:
    """Each step's compare read now, its rows classified (matched in the journal ``--journal``
    names, or ``POOLER_JOURNAL``, else the state folder's: ``plan`` takes no ``--journal``), and
    what ``then`` reads of the store with them; empty and None for a pool without one."""
    if not any(step.compare is not None for step in compiled.pool.steps):
        return {}, None
    assert compiled.variables is not None
    with make_client(args, ctx, masking=False) as client, \
            closing(open_journal(journal_spec(getattr(args, "journal", None), ctx.environ))) as journal:
        found = compare_steps(journal.compare_rows(), client, compiled.pool, compiled.variables.values,
                              scope=scope)
        return found, then(client, found)


def _conflict_text(conflict: Conflict) -> str:
    rows = conflict["rows"]
    where = "" if not rows else f" row {rows[0]}" if rows[0] == rows[-1] else f" rows {rows[0]}-{rows[-1]}"
    key = "" if conflict["key"] is None else f", key {conflict['key']}"
    return f"step {conflict['step']} call {conflict['call']}{where}{key}: {moved_list(conflict)}"


def _given_options(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in (*OVERRIDES, "rate") if getattr(args, name) is not None}


def handle_plan(args: argparse.Namespace, ctx: Context) -> int:
    output = Path(args.output)
    if not output.absolute().parent.is_dir():
        raise UsageError(f"-o {output}: the folder {output.absolute().parent} does not exist - create it, or "
                         "name a file in a folder that exists")
    store, tools = _store_tools(args, ctx)
    compiled = prepare(args, ctx, tools=tools)
    variables = compiled.variables
    assert variables is not None
    digests = plan_digests(compiled.pool, variables.values, variables.secret_names, tools=tools)
    head = make_head(compiled, task=new_task_id(), pool=args.pool, store=store, options=_given_options(args),
                     digests=digests, redactor=ctx.redactor)
    head = save_plan(output, head, compiled, ctx.redactor,
                     lambda then: read_compares(compiled, args, ctx, scope=head["task"], then=then))
    if args.json:
        ctx.emit_json({**head, "file": str(output), "stale": []})
    else:
        print_plan(ctx, str(output), head, [], out=ctx.stdout)
    return ExitStatus.OK


def handle_apply(args: argparse.Namespace, ctx: Context) -> int:
    path = Path(args.plan)
    head = read_head(path)
    if calls_digest(path) != head.get("calls_sha256"):
        raise InputError(f"{path} was edited since 'pooler plan' wrote it: its calls are not those its head "
                         "counts - nothing was sent; plan again.")
    if "plan_id" in head:
        # The server keeps its plans committed once: its commit is their one way to run.
        plan_id = head["plan_id"]
        if not any(d.get("what") == POOL for d in head["digests"]):
            raise InputError(f"{path} is the plan {plan_id} of a pooler mcp server, of a pool that is no "
                             f"file: commit it with tool_pool {{\"plan_id\": \"{plan_id}\"}} - nothing was "
                             "sent.")
        raise InputError(f"{path} is the plan {plan_id} of a pooler mcp server: commit it with pool_run "
                         f"{{\"plan_id\": \"{plan_id}\"}} - nothing was sent.")
    plan_args(head, args)
    # The run below tells the token's warnings: these looks at the store keep quiet.
    muted = quiet(ctx)
    found = store_identity(target(args, muted).url)
    if head.get("store") not in (None, found):
        raise InputError(f"{path} was planned against the store {head['store']}, not {found} - nothing was "
                         "sent; apply it with --store naming that store, or plan again against this one.")
    spec = journal_spec(args.journal, ctx.environ)
    with closing(open_journal(spec)) as journal:
        if journal.task(head["task"]) is not None:
            raise applied_already(journal, head["task"], str(path))
    _, tools = _store_tools(args, muted)
    now, pool = digests_now(head, args, ctx, tools=tools)
    told = stale(head["digests"], now)
    if told:
        raise InputError(f"{path} is stale: {'; '.join(told)} - nothing was sent; plan again and review the "
                         "new plan.")
    assert pool is not None
    compiled = prepare(args, ctx, inputs=plan_inputs(head, args, ctx))
    # The rows of a step with compare: read again, by the same compare: a planned call whose rows
    # moved in the store since the plan (their class, or the columns of a changed row) is a
    # conflict, not sent; the others are sent as planned, from the plan's own classes, so the task
    # makes exactly the plan's calls.  --refresh plans the task as the store is now instead.
    planned, found_conflicts = apply_compares(
        path, head, compiled, ctx.redactor,
        lambda then: read_compares(compiled, args, muted, scope=head["task"], then=then),
        refresh=args.refresh)
    calls = "calls" if head.get("calls") is None else plural(head["calls"], "call")
    if not args.quiet:
        ctx.note(f"pooler: {path} is as planned {head['planned']}: applying its {calls} as task "
                 f"{head['task']}")
    if found_conflicts:
        listed = "".join(f"\n  {_conflict_text(c)}" for c in found_conflicts[:LISTED])
        if len(found_conflicts) > LISTED:
            listed += f"\n  and {len(found_conflicts) - LISTED:,} more (the answer's conflicts has them all)"
        its = "its" if len(found_conflicts) == 1 else "their"
        ctx.note(f"pooler: {plural(len(found_conflicts), 'planned call')} not sent: {its} rows moved in the "
                 "store since the plan (a conflict: plan again, or apply with --refresh to send them as the "
                 f"store is now):{listed}")
    return run_prepared(args, ctx, compiled, applies=str(path), compared=planned,
                        conflicts=found_conflicts)
