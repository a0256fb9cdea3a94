"""``pooler mcp``: its flags, the store client and the journal it serves with, and its exit status.

The server itself (pooler/mcp/server.py) is a library; this command wires it as every other
command is wired, so the MCP server never imports the command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import anyio

from pooler.cli.commands.common import Context, add_store_options, make_client
from pooler.client.http import ToolRunClient
from pooler.errors import PoolerError
from pooler.exits import ExitStatus
from pooler.mcp.arguments import check_task
from pooler.mcp.server import PoolerTools, serve, session_task
from pooler.run.journal_api import JOURNAL_ENV, is_postgres


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pooler mcp",
        description="Serve tool_list, tool_run and tool_pool to an MCP client (an agent) over stdio.",
    )
    add_store_options(parser)
    parser.add_argument("--out", metavar="DIR", default="out",
                        help="the store folder: tables, jobs and the journal go here, and relative paths "
                             "in calls are taken from here (default ./out)")
    parser.add_argument("--task", metavar="ID",
                        help="the task keyed steps are remembered under (default: a new one per process)")
    parser.add_argument("--journal", metavar="URL",
                        help="a PostgreSQL journal, postgresql://... (env POOLER_JOURNAL); default: "
                             "<out>/.pooler/journal.sqlite")
    return parser


def main(argv: list[str]) -> int:
    """Run the server until the client closes stdin; 2 when the store or a flag is wrong."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pooler mcp: %(message)s")
    # stdout is the protocol's wire: every word for people goes to stderr, which MCP clients log.
    ctx = Context(stdout=sys.stderr, stderr=sys.stderr, environ=os.environ)
    try:
        client: ToolRunClient = make_client(args, ctx)
        task = session_task()
        if args.task is not None:
            task = check_task(args.task, task)
    except PoolerError as exc:
        sys.stderr.write(f"pooler mcp: {exc.render()}\n")
        return ExitStatus.REFUSED
    spec = args.journal or os.environ.get(JOURNAL_ENV)
    if spec is not None and not is_postgres(spec):
        sys.stderr.write("pooler mcp: --journal takes a PostgreSQL URL (postgresql://...); the SQLite "
                         "journal lives in <out>/.pooler/journal.sqlite\n")
        return ExitStatus.REFUSED
    tools = PoolerTools(client, Path(args.out).expanduser().resolve(), task, ctx.redactor, journal=spec)
    try:
        anyio.run(serve, tools)
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    finally:
        tools.close()
    return ExitStatus.OK
