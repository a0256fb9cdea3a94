"""``pooler mcp``: its flags, the store client and the journal it serves with, and its exit status.

The server itself (pooler/mcp/server.py) is a library; this command wires it as every other
command is wired, so the MCP server never imports the command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio

from pooler.cli.commands.common import Context, add_store_options, make_client, mask_journal
from pooler.cli.commands.monitoring import add_monitoring_options, start_tracing
from pooler.cli.commands.store_rate import add_store_rate, store_rate
from pooler.client.answer_budget import share_malloc_arenas
from pooler.client.http import ToolRunClient
from pooler.errors import PoolerError, UsageError
from pooler.exits import ExitStatus
from pooler.journal.dburl import JOURNAL_ENV, is_postgres
from pooler.mcp.arguments import check_task
from pooler.mcp.http import Listen, bind, endpoint, parse_listen
from pooler.mcp.monitor import ToolWatch
from pooler.mcp.plans import DEFAULT_TTL
from pooler.mcp.server import PoolerTools, serve, serve_over_http, session_task


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pooler mcp",
        description="Serve tool_list, tool_run and tool_pool to an MCP client (an agent) over stdio, or "
                    "with --http over MCP's streamable HTTP transport: then the endpoint's URL "
                    "(http://HOST:PORT/mcp) is the first line of stdout, and every request needs "
                    "Authorization: Bearer <token> - the token of --http-token-file, or a random one "
                    "printed as 'token: <token>' on the second line. Without --http-token-file it "
                    "listens on loopback only.",
    )
    add_store_options(parser)
    add_store_rate(parser)
    parser.add_argument("--out", metavar="DIR", default="out",
                        help="the store folder: tables, jobs and the journal go here, and relative paths "
                             "in calls are taken from here (default ./out)")
    parser.add_argument("--task", metavar="ID",
                        help="the task keyed steps are remembered under (default: a new one per process)")
    parser.add_argument("--http", metavar="HOST:PORT",
                        help="serve MCP's streamable HTTP transport on HOST:PORT (port 0 picks a free one) "
                             "instead of stdio")
    parser.add_argument("--http-token-file", metavar="PATH",
                        help="with --http: the file holding the token every request must give as "
                             "Authorization: Bearer <token> (default: a random token, printed)")
    parser.add_argument("--allow-origin", metavar="ORIGIN", action="append", default=[],
                        help="with --http: a web origin (https://tools.example.com) whose pages may call the "
                             "server, and whose host it answers to behind a proxy; repeat for more. Other "
                             "Origin and Host headers get 403 (DNS rebinding protection)")
    parser.add_argument("--plan-ttl", metavar="SECONDS", type=float, default=DEFAULT_TTL,
                        help="how long a plan of tool_pool {\"plan\": true} can be committed "
                             f"(default {DEFAULT_TTL:g})")
    parser.add_argument("--journal", metavar="URL",
                        help="a PostgreSQL journal, postgresql://... (env POOLER_JOURNAL); default: "
                             "<out>/.pooler/journal.sqlite")
    parser.add_argument("--conformance-tools", action="store_true",
                        help="also serve the tools the official MCP conformance suite calls "
                             "(test_tool_with_progress), to run the suite against this server; no agent "
                             "needs them")
    add_monitoring_options(parser, what="server")
    return parser


@dataclass
class Serving:
    """What ``pooler mcp``'s arguments make: its tools, where it listens (None: stdio), and whether
    the conformance suite's tools are served beside them."""

    tools: PoolerTools
    listen: Listen | None
    suite: bool


def prepare(argv: list[str], *, stderr: TextIO, environ: Mapping[str, str]) -> Serving:
    """``pooler mcp ARGV`` made into its tools, every refusal raised as a PoolerError; words for
    people go to ``stderr``. ``main`` serves them; the tests serve them in their own process over
    the SDK's memory streams, so what they try is what the command builds. The caller closes
    ``tools``."""
    args = build_parser().parse_args(argv)
    # stdout is the protocol's wire: every word for people goes to stderr, which MCP clients log.
    ctx = Context(stdout=stderr, stderr=stderr, environ=environ)
    mask_journal(args.journal, ctx)
    if args.http_token_file is not None and args.http is None:
        raise UsageError("--http-token-file goes with --http HOST:PORT - over stdio the client "
                         "starts the server itself, and no token is asked for.")
    if args.allow_origin and args.http is None:
        raise UsageError("--allow-origin goes with --http HOST:PORT - over stdio no web page can reach "
                         "the server.")
    if not args.plan_ttl > 0:
        raise UsageError(f"--plan-ttl takes a number of seconds above 0, not {args.plan_ttl:g}")
    listen, warning = (parse_listen(args.http, args.http_token_file, args.allow_origin) if args.http
                       else (None, None))
    client: ToolRunClient = make_client(args, ctx)
    try:
        return Serving(_tools(args, ctx, client, listen, warning), listen, args.conformance_tools)
    except PoolerError:
        # A refusal after the client was made: its connections and its deadline's thread end here.
        client.close()
        raise


def _tools(args: argparse.Namespace, ctx: Context, client: ToolRunClient, listen: Listen | None,
           warning: str | None) -> PoolerTools:
    environ, stderr = ctx.environ, ctx.stderr
    limit = store_rate(args, ctx, args.journal or environ.get(JOURNAL_ENV) or "")
    task = session_task()
    if args.task is not None:
        task = check_task(args.task, task)
    spec = args.journal or environ.get(JOURNAL_ENV)
    if spec is not None and not is_postgres(spec):
        raise UsageError("--journal takes a PostgreSQL URL (postgresql://...); the SQLite journal lives in "
                         "<out>/.pooler/journal.sqlite")
    # The last that may refuse: nothing after it has to be stopped on the way out.
    tracing = start_tracing(args, ctx)
    if warning:
        stderr.write(warning.replace("pooler:", "pooler mcp:", 1) + "\n")
    if listen is not None:
        ctx.redactor.add(listen.token)
    if tracing is not None:
        client.call_headers = tracing.headers
    watch = None
    if tracing is not None or args.metrics_file:
        watch = ToolWatch(ctx.redactor, client.label, metrics_file=args.metrics_file, tracing=tracing,
                          warn=ctx.note)
    return PoolerTools(client, Path(args.out).expanduser().resolve(), task, ctx.redactor, journal=spec,
                       pinned=args.task is not None, plan_ttl=args.plan_ttl, watch=watch, store_rate=limit,
                       environ=environ)


def main(argv: list[str]) -> int:
    """Run the server until the client closes stdin; 2 when the store or a flag is wrong."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pooler mcp: %(message)s")
    # tool_pool runs calls side by side, as ``pooler run`` does (see there).
    share_malloc_arenas()
    try:
        serving = prepare(argv, stderr=sys.stderr, environ=os.environ)
    except PoolerError as exc:
        sys.stderr.write(f"pooler mcp: {exc.render()}\n")
        return ExitStatus.REFUSED
    try:
        if serving.listen is None:
            anyio.run(serve, serving.tools, serving.suite)
        else:
            return http_main(serving.tools, serving.listen, serving.suite)
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    finally:
        serving.tools.close()
    return ExitStatus.OK


def http_main(tools: PoolerTools, listen: Listen, suite: bool = False) -> int:
    """Listen, print the URL (and a token made here), serve until SIGINT or SIGTERM."""
    try:
        sock = bind(listen)
    except OSError as exc:
        sys.stderr.write(f"pooler mcp: cannot listen on {listen.url_host}:{listen.port}: {exc.strerror} - "
                         "pick another port, or 0 for a free one\n")
        return ExitStatus.REFUSED
    sys.stdout.write(endpoint(listen, sock) + "\n")
    if listen.made:
        # As the reference store does: a token nobody could guess, shown once to who started it.
        sys.stdout.write(f"token: {listen.token}\n")
    sys.stdout.flush()
    anyio.run(serve_over_http, tools, listen, sock, suite)
    return ExitStatus.OK
