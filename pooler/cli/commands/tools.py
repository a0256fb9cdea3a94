"""``pooler tools [UNIT]``: the store's tool_list, as a table or as JSON."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import Context, add_json, add_store_options, add_traceback, make_client
from pooler.cli.render import console_for
from pooler.exits import ExitStatus

if TYPE_CHECKING:
    from rich.table import Table


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "tools",
        help=help_of("tools"),
        description="Ask the store for its AI tools (POST /tool_list) and show every command with its "
                    "fields as name:type, * for required, =default. Exit 0, or 1 when the store "
                    "cannot be asked.",
    )
    parser.add_argument("unit", nargs="?", help="only this tool, e.g. MELBIS_AGENT_CURRENCY")
    add_store_options(parser)
    add_json(parser, "the store's tool_list answer")
    add_traceback(parser)
    parser.set_defaults(handler=handle)


def field_text(param: dict[str, Any]) -> str:
    """``name:type*=default``: ``*`` when required, ``=default`` when the store keeps one."""
    text = f"{param.get('name', '?')}:{param.get('type', '?')}"
    if param.get("required"):
        text += "*"
    default = param.get("default")
    if default not in (None, ""):
        text += f"={default}"
    return text


def tools_table(tools: list[dict[str, Any]]) -> Table:
    from rich.table import Table  # noqa: PLC0415 - --json never draws one

    table = Table(title="tools", title_justify="left")
    for column in ("unit", "command", "granted", "fields"):
        table.add_column(column, overflow="fold")
    for tool in tools:
        for command in tool.get("commands") or []:
            fields = " ".join(field_text(p) for p in command.get("params") or []) or "-"
            table.add_row(str(tool.get("unit", "")), str(command.get("name", "")),
                          "yes" if command.get("granted") else "no", fields)
    return table


def handle(args: argparse.Namespace, ctx: Context) -> int:
    client = make_client(args, ctx)
    reply = client.tool_list(args.unit)
    data: dict[str, Any] = dict(reply.data)
    if args.json:
        ctx.emit_json(data)
    if not data.get("result"):
        ctx.note(f"pooler tools: the store refused: {data.get('message', '')}")
        return ExitStatus.FAILED
    if not args.json:
        console_for(ctx.stdout, environ=ctx.environ).print(tools_table(list(data.get("tools") or [])))
    return ExitStatus.OK
