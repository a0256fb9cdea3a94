"""The ``pooler`` command line: parses, wires, renders, and maps errors to exit statuses."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import TextIO

from pooler.cli.commands import COMMANDS
from pooler.cli.commands.common import Context, mask_journal, render_error
from pooler.cli.outcome import outcome_document
from pooler.errors import JournalError, LockedError, PoolerError, Problem, StoreError
from pooler.exits import ExitStatus
from pooler.version import __version__

DESCRIPTION = (
    "Run pools of store AI-tool calls: declarative pool files, checked before anything is sent, "
    "safe to rerun."
)
EPILOG = (
    "exit statuses: 0 done; 1 a step or call failed; 2 refused before anything was sent "
    "(bad flags, a pool that fails its checks, a check whose --against store cannot be "
    "reached); 3 another run of the pool holds its lock; "
    "70 internal error; 130/143 interrupted by SIGINT/SIGTERM. "
    "Run 'pooler COMMAND --help' for a command's options."
)

#: ``build_parser``'s ``only`` for a command line that names no command.
NO_COMMAND = ""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; each command group registers its own subcommands.

    With ``only``, that command's module alone is loaded and the others are listed by name, which
    keeps ``pooler check`` from importing the executor and the live view it never uses; an ``only``
    that names no command (``NO_COMMAND``: ``pooler --version``, ``pooler --help``, a misspelt
    command) loads none, as listing them, or refusing a name, needs their help lines alone.
    """
    parser = argparse.ArgumentParser(prog="pooler", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"pooler {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = COMMANDS[only][0] if only in COMMANDS else None
    for name, (module, text) in COMMANDS.items():
        if name in sub.choices:
            continue
        if only is None or module == wanted:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=text)
    # Listed for --help only: main() hands "pooler store", "pooler mcp" and "pooler lsp" to their own parsers.
    sub.add_parser("store", help="the bundled reference store ('pooler store serve --help')",
                   description="The bundled reference store: 'pooler store serve' starts it.")
    sub.add_parser("mcp", help="serve tool_list, tool_run and tool_pool to an agent over MCP (stdio)",
                   description="Serve tool_list, tool_run and tool_pool to an MCP client (an agent) over "
                               "stdio: 'pooler mcp --help' for its options.")
    sub.add_parser("lsp", help="the pool file's language server, for an editor (stdio)",
                   description="The pool file's language server over stdio: 'pooler lsp --help' for its "
                               "options, docs/editors.md for the editors.")
    return parser


def lsp(argv: list[str], stderr: TextIO) -> int:
    """``pooler lsp``: the language server, whose pygls and lsprotocol are an optional dependency."""
    try:
        # Loaded only here: only this command needs pygls.
        from pooler.cli.commands.lsp_cmd import main as lsp_main  # noqa: PLC0415
    except ImportError as exc:
        stderr.write(f"pooler lsp: needs pygls and lsprotocol ({exc.name} is not installed) - "
                     "install them with: pip install 'pooler[lsp]'\n")
        return ExitStatus.REFUSED
    return int(lsp_main(argv))


def mcp(argv: list[str], stderr: TextIO) -> int:
    """``pooler mcp``: the MCP server, whose SDK is an optional dependency."""
    try:
        # Loaded only here: only this command needs the MCP SDK.
        from pooler.cli.commands.mcp_cmd import main as mcp_main  # noqa: PLC0415
    except ImportError as exc:
        stderr.write(f"pooler mcp: needs the MCP SDK ({exc.name} is not installed) - "
                     "install it with: pip install 'pooler[mcp]'\n")
        return ExitStatus.REFUSED
    return int(mcp_main(argv))


def _own_parser(args: list[str], stderr: TextIO) -> int:
    """``pooler store ...``, ``pooler mcp ...`` and ``pooler lsp ...``, which parse their own options;
    their argparse exits (``--help``, a bad flag) become the exit status, as main's own do."""
    try:
        if args[0] == "store":
            # Loaded only here: the client side never needs the server's modules.
            from pooler.store.cli import main as store_main  # noqa: PLC0415

            return int(store_main(args[1:]))
        if args[0] == "lsp":
            return lsp(args[1:], stderr)
        return mcp(args[1:], stderr)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitStatus.REFUSED)


def exit_status_for(error: PoolerError) -> ExitStatus:
    """The one mapping from pooler's errors to exit statuses."""
    if isinstance(error, LockedError):
        return ExitStatus.LOCKED
    if isinstance(error, StoreError):
        return ExitStatus.FAILED
    if isinstance(error, JournalError):
        return ExitStatus.REFUSED
    return ExitStatus.REFUSED


def main(
    argv: list[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """The command ``argv`` names; without ``argv``, the process's own command line (the ``pooler``
    script, ``python -m pooler``), whose process is pooler's alone until it ends."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["store"], ["mcp"], ["lsp"]):
        if argv is None:
            # Servers: they run for long, and collect as any program does (``pooler.__main__.run``
            # started them with the collector off).
            gc.enable()
        return _own_parser(args, stderr or sys.stderr)
    if argv is not None:
        return command(args, stdout=stdout, stderr=stderr, environ=environ)
    # The objects a start makes (modules, classes, the parser) live as long as the process: the
    # collector would scan them some 80 times while the command's modules load, and twice more as
    # the process ends, for nothing.  Not collected while the command starts, kept out of every
    # later collection (frozen), and out of the last ones with whatever the command made.
    gc.disable()
    try:
        return command(args, stdout=stdout, stderr=stderr, environ=environ, started=_started)
    finally:
        gc.freeze()


def _started() -> None:
    gc.freeze()
    gc.enable()


def command(
    args: list[str],
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    started: Callable[[], None] = lambda: None,
) -> int:
    """The command ``args`` names (``started`` is called once its command line is parsed)."""
    ctx = Context(stdout=stdout or sys.stdout, stderr=stderr or sys.stderr,
                  environ=os.environ if environ is None else environ)
    first = next((a for a in args if not a.startswith("-")), None)
    wants_json = "--json" in args
    ns: argparse.Namespace | None = None
    try:
        ns = build_parser(first if first in COMMANDS else NO_COMMAND).parse_args(args)
        started()
        mask_journal(getattr(ns, "journal", None), ctx)
        status = int(ns.handler(ns, ctx))
    except PoolerError as error:
        ctx.note(render_error(error))
        status = exit_status_for(error)
        if getattr(ns, "command", None) == "run" and status == ExitStatus.REFUSED:
            ctx.note("pooler: refused before the first step; nothing was sent.")
        document(ctx, status, list(error.problems()), wanted=wants_json)
        return status
    except KeyboardInterrupt:
        ctx.note("pooler: interrupted")
        document(ctx, ExitStatus.INTERRUPTED, [], wanted=wants_json)
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``pooler runs | head``); nothing more can be said to it.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitStatus.FAILED
    except SystemExit as exc:
        # argparse's own refusals (a bad flag) and --help; under --json a refusal is a document too.
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitStatus.REFUSED)
        if code != 0:
            document(ctx, code, [Problem("the command line is wrong: see the usage above")],
                     wanted=wants_json)
        return code
    except Exception as error:  # noqa: BLE001 - the one place a bug becomes exit 70, not a traceback
        if getattr(ns, "traceback", False):
            ctx.note(ctx.redactor.text(traceback.format_exc()).rstrip())
        ctx.note(f"pooler: internal error: {type(error).__name__}: {error} "
                 "(run with --traceback to see where)")
        document(ctx, ExitStatus.INTERNAL, [Problem(f"internal error: {type(error).__name__}")],
                 wanted=wants_json)
        return ExitStatus.INTERNAL
    # A command that ended without its own document (none does on purpose) still writes one.
    document(ctx, status, [], wanted=wants_json)
    return status


def document(ctx: Context, status: int, problems: list[Problem], *, wanted: bool = True) -> None:
    """Under ``--json``, the outcome's document when the command has not written its own."""
    if wanted and not ctx.emitted:
        ctx.emit_json(outcome_document(int(status), problems))
