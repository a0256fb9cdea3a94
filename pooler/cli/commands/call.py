"""``pooler call UNIT COMMAND``: one tool_run from the shell, answered in the seed's shape."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pooler.cli.commands import help_of
from pooler.cli.commands.common import Context, add_json, add_store_options, add_traceback, make_client
from pooler.client.arguments import prepare_call
from pooler.errors import UsageError
from pooler.exits import ExitStatus
from pooler.run.lock import OutLock, lock_dir
from pooler.run.tables import TableWriter

FIRST_KEYS = ("result", "message", "detail", "tables", "files")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "call",
        help=help_of("call"),
        description="Carry out one command of a store's AI tool, as tool_run does: tables go to "
                    "<out>/tables/<UNIT>.<command>.<table>.jsonl, and the answer has result, message, "
                    "detail, tables, files and time. Exit 0 when result is true, 1 when false, "
                    "2 when the call is refused before it is sent.",
    )
    parser.add_argument("unit", metavar="UNIT", help="the tool's address, e.g. MELBIS_AGENT_CURRENCY")
    parser.add_argument("command", metavar="COMMAND", help="the command, e.g. CmdList")
    parser.add_argument("--params", metavar="JSON", help="the command's fields as a JSON object")
    parser.add_argument("--params-source", metavar="FILE", help="a JSON file holding the object of fields")
    parser.add_argument("--files", metavar="JSON", help="the attachments as a JSON list of entries")
    parser.add_argument("--files-source", metavar="FILE", help="a JSON file holding the list of attachments")
    parser.add_argument("--into", metavar="JOB",
                        help="also append the answer's tables to <out>/<JOB>.<table>.jsonl")
    parser.add_argument("--debug", action="store_true", help="add the module's query count and time")
    parser.add_argument("--out", metavar="DIR", default="out",
                        help="where table and job files go (default ./out)")
    add_store_options(parser)
    add_json(parser)
    add_traceback(parser)
    parser.set_defaults(handler=handle)


def json_flag(flag: str, text: str | None) -> Any:
    """The value of a JSON flag; the seed's own refusals judge its kind afterwards."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not JSON: {exc.msg} at column {exc.colno} - "
                         f"quote it for the shell, e.g. {flag} '{{\"id\": 1}}'") from None


def seed_answer(data: dict[str, Any], tables: dict[str, Any], time: dict[str, Any]) -> dict[str, Any]:
    """tool_run's answer: the five keys, the module's own extra keys, then ``time``."""
    answer: dict[str, Any] = {
        "result": bool(data.get("result")),
        "message": data.get("message", ""),
        "detail": data.get("detail") if isinstance(data.get("detail"), dict) else {},
        "tables": tables,
        "files": data.get("files") if isinstance(data.get("files"), list) else [],
    }
    for key, value in data.items():
        if key not in FIRST_KEYS and key != "time":
            answer[key] = value
    answer["time"] = time
    return answer


def handle(args: argparse.Namespace, ctx: Context) -> int:
    answer = carry_out(args, ctx)
    if args.json:
        ctx.emit_json(answer)
    else:
        show(answer, ctx)
    return ExitStatus.OK if answer["result"] else ExitStatus.FAILED


def carry_out(args: argparse.Namespace, ctx: Context) -> dict[str, Any]:
    """The call made and its tables written: the answer, which no longer holds the store's body."""
    prepared = prepare_call(
        params=json_flag("--params", args.params),
        params_source=args.params_source,
        files=json_flag("--files", args.files),
        files_source=args.files_source,
        into=args.into,
        debug=args.debug,
        base=Path.cwd(),
    )
    client = make_client(args, ctx)
    # The --out lock of a run: a call writing into a running pool's tables would mix the two.
    with OutLock(Path(args.out), lock_dir(ctx.environ), doing="call"):
        reply = client.tool_run(args.unit, args.command, prepared.params, files=prepared.files,
                                debug=prepared.debug)
        data: dict[str, Any] = dict(reply.data)
        raw_tables = data.get("tables") if isinstance(data.get("tables"), dict) else {}
        tables = TableWriter(Path(args.out)).write(f"{args.unit}.{args.command}", raw_tables or {},
                                                  into=prepared.into)
    return seed_answer(data, tables, reply.time())


def show(answer: dict[str, Any], ctx: Context) -> None:
    """The answer for a person: the verdict and message, then detail, tables and files."""
    # Imported here: --json never needs rich, and by now a big answer's body is gone.
    from rich.text import Text  # noqa: PLC0415

    from pooler.cli.render import console_for  # noqa: PLC0415
    from pooler.plural import plural  # noqa: PLC0415

    console = console_for(ctx.stdout, environ=ctx.environ)
    verdict = ("done", "green") if answer["result"] else ("refused", "bold red")
    console.print(Text.assemble(verdict, f": {ctx.redactor.text(str(answer['message']))}"))
    if answer["detail"]:
        console.print_json(json.dumps(ctx.redactor.value(answer["detail"]), ensure_ascii=False))
    for name, table in answer["tables"].items():
        rows = plural(int(table.get("rows") or 0), "row")
        job_rows = plural(int(table.get("job_rows") or 0), "row")
        extra = f", job {table['job']} ({job_rows})" if table.get("job") else ""
        console.print(f"table {name}: {rows} -> {table.get('file')}{extra}")
    for entry in answer["files"]:
        console.print(f"file: {json.dumps(entry, ensure_ascii=False)}")
    time = answer.get("time") or {}
    console.print("time: " + ", ".join(f"{k} {v} ms" if k != "sql" else f"{k} {v}" for k, v in time.items()))
