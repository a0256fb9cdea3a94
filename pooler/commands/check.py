"""``pooler check POOL...``: every problem of every file, without sending anything."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pooler.checks import check_against, check_options, check_pool
from pooler.commands import help_of
from pooler.commands.common import Context, add_json, add_store_options, add_traceback, make_client
from pooler.declared import is_declarations, load_declarations
from pooler.errors import PoolerError, Problem, StoreError
from pooler.loader import load_pool
from pooler.report import check_json, junit_xml


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
                    "nothing is written to the store. Exit 0 when every file is valid, 2 when not.",
    )
    parser.add_argument("pools", metavar="POOL", nargs="+", help="the pool files to check")
    add_store_options(parser, store_flag="--against")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML (for CI)")
    add_json(parser, "the results")
    add_traceback(parser)
    parser.set_defaults(handler=handle)


def check_file(path: str, tools: list[dict[str, Any]] | None) -> list[Problem]:
    """Every problem of one file: loading, meaning, options, and the store's tools when given."""
    try:
        pool = load_pool(Path(path))
    except PoolerError as exc:
        return list(exc.problems())
    problems = [*check_pool(pool), *check_options(pool)]
    if tools is not None:
        problems.extend(check_against(pool, tools))
    # check_pool covers the options too; a problem is told once.
    return list(dict.fromkeys(problems))


def fetch_tools(args: argparse.Namespace, ctx: Context) -> list[dict[str, Any]]:
    """The store's tool declarations; a refusal is an error, since the check would prove nothing.

    A folder of declarations or a saved tool_list is read instead, offline (CI without the store).
    """
    if is_declarations(args.store):
        return load_declarations(args.store)
    client = make_client(args, ctx)
    reply = client.tool_list()
    if not reply.data.get("result") or not isinstance(reply.data.get("tools"), list):
        raise StoreError(f"the store at {args.store} refused tool_list: {reply.data.get('message', '')}",
                         store=str(args.store), sent=True)
    tools: list[dict[str, Any]] = reply.data["tools"]
    return tools


def same_file(first: str, second: str) -> bool:
    """Whether two paths as given name one file (by their absolute paths: nothing is read)."""
    return Path(first).absolute() == Path(second).absolute()


def handle(args: argparse.Namespace, ctx: Context) -> int:
    tools = fetch_tools(args, ctx) if args.store else None
    results = [(path, check_file(path, tools)) for path in args.pools]
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
    files = f"{len(results)} file" + ("s" if len(results) != 1 else "")
    if bad:
        human.write(f"{count} problem{'s' if count != 1 else ''} in {len(bad)} of {files}\n")
        return 2
    against = f" against {args.store}" if tools is not None else ""
    human.write(f"{files} valid{against}\n")
    return 0
