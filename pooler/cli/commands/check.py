"""``pooler check POOL...``: every problem of every file, without sending anything."""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path
from typing import Any

from pooler.cli.check_report import check_json, junit_xml
from pooler.cli.commands import help_of
from pooler.cli.commands.common import (
    Context,
    add_json,
    add_store_options,
    add_traceback,
    add_variable_options,
    make_client,
    mask_variables,
    variable_inputs,
)
from pooler.cli.commands.dry_run import compare_text, planned_rate
from pooler.errors import PoolerError, Problem, StoreError, UnvouchedError
from pooler.exits import ExitStatus
from pooler.pool.budget import planned_line
from pooler.pool.compiler import Inputs, Plan
from pooler.pool.compiler import check_file as check_pool_file
from pooler.pool.declared import is_declarations, load_declarations
from pooler.pool.model import Pool
from pooler.pool.plan_document import build_plan
from pooler.redact import Redactor


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "check",
        help=help_of("check"),
        description="Load and check every pool file named: the schema, the seed's refusals, references, "
                    "variables, keys and options. Every problem of every file is shown with "
                    "file:line:column and the line with a caret. With --against, the steps are also "
                    "checked against a store's tool_list (units, commands, grants, fields, types): "
                    "--against takes a store's URL or name, a folder of exported *.json declarations, or "
                    "a saved tool_list ('pooler tools --json > shop-tools.json'), read offline; "
                    "nothing is written to the store. Every data file's header is read and every "
                    "${row.field} checked against it; with --data every row is read too. With --var, "
                    "--vars-file or --env the variables are resolved as run resolves them. "
                    "Exit 0 when every file is valid, 2 when not (also when the --against store cannot be "
                    "reached: then no file is vouched for).",
    )
    parser.add_argument("pools", metavar="POOL", nargs="+", help="the pool files to check")
    add_store_options(parser, store_flag="--against")
    add_variable_options(parser)
    parser.add_argument("--env", action="store_true",
                        help="read variables declared with env: from the environment, as run does "
                             "(given with --var or --vars-file, the environment is read too)")
    parser.add_argument("--data", action="store_true",
                        help="read every row of every data file: row counts, values JSON cannot carry, "
                             "two rows with one key (in bounded memory)")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML (for CI)")
    add_json(parser, "the results")
    add_traceback(parser)
    parser.set_defaults(handler=handle)


def check_file(path: str, tools: list[dict[str, Any]] | None, inputs: Inputs | None = None, *,
               data: bool = False, redactor: Redactor | None = None) -> list[Problem]:
    """Every problem of one file, from the compile step that run uses: loading, meaning, options,
    variables (with ``inputs``), data files (every row with ``data``), the store's tools when given.
    Secret variables join ``redactor``, as a run's do, so no problem shows one."""
    return checked(path, tools, inputs, data=data, redactor=redactor)[0]


def checked(path: str, tools: list[dict[str, Any]] | None, inputs: Inputs | None = None, *,
            data: bool = False, redactor: Redactor | None = None
            ) -> tuple[list[Problem], Pool | None, list[str], Plan | None]:
    """``check_file``'s problems, the pool as loaded (None when it could not be read), what a
    valid pool's error budgets allow, in calls, and its plan (None when it is not valid)."""

    def masked(pool: Pool) -> None:
        if inputs is not None and redactor is not None:
            mask_variables(pool, inputs, redactor)

    found = check_pool_file(path, inputs, tools=tools, read_data=data, loaded=masked)
    if found.plan is None:
        return found.problems, found.pool, [], None
    pool = found.pool or found.plan.pool
    doc = build_plan(found.plan) if pool.budgets().all or pool.paces() else {"tolerate": [], "rate": []}
    told = [planned_line(row) for row in doc["tolerate"]] + [planned_rate(row) for row in doc["rate"]]
    return [], pool, [f"{path}: {line}" for line in told], found.plan


def env_notice(path: str, pool: Pool) -> str | None:
    """What run will need from the environment that a check without ``--env`` did not read."""
    needed = [(name, var.env) for name, var in pool.variables.items() if var.env and not var.has_default]
    if not needed:
        return None
    names = [f"{env} (variable {name})" for name, env in needed]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    them, are = ("it", "it is") if len(names) == 1 else ("them", "they are")
    return (f"pooler: notice: {path}: run reads {listed} from the environment, which this check did not "
            f"read - run refuses the pool if {are} unset; check with --env where run has {them}.")


def fetch_tools(args: argparse.Namespace, ctx: Context) -> list[dict[str, Any]]:
    """The store's tool declarations; a refusal is an error, since the check would prove nothing.

    A folder of declarations or a saved tool_list is read instead, offline (CI without the store).
    """
    if is_declarations(args.store):
        return load_declarations(args.store)
    client = make_client(args, ctx)
    try:
        reply = client.tool_list()
    except StoreError as exc:
        raise UnvouchedError(
            f"{exc.message} - the pools were not checked against it, so none is vouched for; to check "
            "without the store, save its tool_list once ('pooler tools --json > shop-tools.json') and "
            "give --against shop-tools.json") from exc
    if not reply.data.get("result") or not isinstance(reply.data.get("tools"), list):
        raise UnvouchedError(f"the store at {args.store} refused tool_list: {reply.data.get('message', '')} "
                             "- the pools were not checked against it, so none is vouched for")
    tools: list[dict[str, Any]] = reply.data["tools"]
    return tools


def compare_counts(path: str, plan: Plan, args: argparse.Namespace, ctx: Context) -> list[str]:
    """Against a store, each step's compare read and its rows counted new, changed and unchanged,
    as the run would count them now (matched in a journal of the check's own, dropped after)."""
    if not any(step.compare is not None for step in plan.pool.steps):
        return []
    # Imported here: a check that reads no store's rows loads neither the client nor a journal.
    import tempfile  # noqa: PLC0415

    from pooler.journal.opening import open_journal  # noqa: PLC0415
    from pooler.run.compare import compare_steps  # noqa: PLC0415

    values = plan.variables.values if plan.variables is not None else {}
    with tempfile.TemporaryDirectory(prefix="pooler-check-") as folder, \
            make_client(args, ctx, masking=False) as client, \
            closing(open_journal(str(Path(folder) / "compare.sqlite"))) as journal:
        try:
            compared = compare_steps(journal.compare_rows(), client, plan.pool, values, scope="check")
        except PoolerError as exc:
            return [f"{path}: compare not counted: {exc.message}"]
    return [f"{path}: step {num} {plan.pool.steps[num - 1].label}: {compare_text(found.doc())}"
            for num, found in compared.items()]


def same_file(first: str, second: str) -> bool:
    """Whether two paths as given name one file (by their absolute paths: nothing is read)."""
    return Path(first).absolute() == Path(second).absolute()


def handle(args: argparse.Namespace, ctx: Context) -> int:
    tools = fetch_tools(args, ctx) if args.store else None
    inputs = variable_inputs(args, ctx) if args.var or args.vars_file or args.env else None
    results, notices = [], []
    for path in args.pools:
        problems, pool, budgets, plan = checked(path, tools, inputs, data=args.data, redactor=ctx.redactor)
        results.append((path, problems))
        notices.extend(budgets)
        if plan is not None and tools is not None and not is_declarations(args.store):
            notices.extend(compare_counts(path, plan, args, ctx))
        notice = env_notice(path, pool) if pool is not None and inputs is None else None
        if notice:
            notices.append(notice)
    bad = [(path, problems) for path, problems in results if problems]
    count = sum(len(problems) for _, problems in bad)
    if args.junit:
        Path(args.junit).write_text(junit_xml(results), encoding="utf-8")
    if args.json:
        ctx.emit_json(check_json(results))
    human = ctx.human(args)
    for path, problems in bad:
        for problem in problems:
            human.write(ctx.redactor.text(problem.render()) + "\n")
            if problem.file is not None and not same_file(problem.file, path):
                # A problem in a file the pool reads (pool_source, params_source): say which pool.
                human.write(ctx.redactor.text(f"    (read by {path})") + "\n")
    for notice in notices:
        human.write(ctx.redactor.text(notice) + "\n")
    files = f"{len(results)} file" + ("s" if len(results) != 1 else "")
    if bad:
        human.write(f"{count} problem{'s' if count != 1 else ''} in {len(bad)} of {files}\n")
        return ExitStatus.REFUSED
    against = f" against {args.store}" if tools is not None else ""
    human.write(f"{files} valid{against}\n")
    return ExitStatus.OK
