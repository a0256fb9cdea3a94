"""``pooler lsp``: its flags, how a registry's tools are fetched, and the server started on stdio.

The server (pooler/lsp/) is a library: this command hands it the one way the command line gets a
store's declarations (``check --against``'s), so a pool in the editor is checked as check checks it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from pooler.cli.commands.common import Context, add_store_options
from pooler.exits import ExitStatus
from pooler.lsp.server import PoolServer, build


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pooler lsp",
        description="The pool file's language server, over stdio, for an editor to start: every problem "
                    "'pooler check' finds, as you type, with its did-you-mean as a quick fix; completion "
                    "and hover of keys, units, commands and fields (from the registry), earlier steps "
                    "and their detail, data file columns and variables; go to a referenced step or a "
                    "named file. The registry is --against, or the client's initializationOptions "
                    "{\"against\": ...}, or a '# pooler: against=...' line in the pool file. "
                    "docs/editors.md shows how to set it up in VS Code, Neovim, Helix and Emacs.",
    )
    add_store_options(parser, store_flag="--against")
    return parser


def prepare(argv: list[str], *, stderr: TextIO, environ: Mapping[str, str]) -> PoolServer:
    """``pooler lsp ARGV`` made into its server; words for people go to ``stderr``. ``main`` serves
    it on stdio; the tests serve it in their own process over pipes, so what they try is what the
    command builds."""
    args = build_parser().parse_args(argv)
    # stdout is the protocol's wire: every word for people goes to stderr, which editors log.
    ctx = Context(stdout=stderr, stderr=stderr, environ=environ)

    def fetch(source: str) -> list[dict[str, Any]]:
        # Loaded when a registry is first asked for, not before the server answers initialize:
        # check's module brings the terminal's rendering, a fifth of a second.
        from pooler.cli.commands.check import fetch_tools  # noqa: PLC0415

        return fetch_tools(argparse.Namespace(**{**vars(args), "store": source}), ctx)

    return build(fetch, args.store)


def main(argv: list[str]) -> int:
    """Serve until the client says exit (or closes stdin)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pooler lsp: %(message)s")
    server = prepare(argv, stderr=sys.stderr, environ=os.environ)
    try:
        server.start_io()
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    return ExitStatus.OK
