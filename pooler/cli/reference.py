"""docs/cli.md, the command-line reference, written from the argparse parsers themselves.

``python -m pooler.cli.reference`` (``make docs``) rewrites the page; ``--check`` exits 1 when the
page on disk is not what the parsers say. The page is the same on every machine: argparse's usage
lines are wrapped at a fixed width here, not at the width of the terminal (``COLUMNS``).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

from pooler.cli.main import EPILOG, build_parser
from pooler.cli.outcome import MEANINGS
from pooler.exits import ExitStatus

#: The page, from the repository's root.
PAGE = Path("docs/cli.md")
#: The command that rewrites the page, as the staleness test tells it.
REGENERATE = "make docs"
#: Usage lines are wrapped at this width whatever the terminal is.
WIDTH = 100

HEADER = f"""\
# The command line

<!-- Generated from the argparse parsers by `python -m pooler.cli.reference`: do not edit by hand;
     run `make docs` after changing a command's options. -->

Every command, subcommand and option of `pooler`, with the help text `pooler COMMAND --help`
prints. What the commands do together is told in the [tutorial](tutorial.md); how a run behaves in
[semantics.md](semantics.md); cron, CI and the exit statuses to alert on in
[operations.md](operations.md). Regenerate this page with `{REGENERATE}`
(`python -m pooler.cli.reference`).
"""


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command line, by its full command, in the order ``pooler --help`` lists them."""
    root = build_parser()
    yield "pooler", root
    for name, sub in subcommands(root):
        yield from walk(f"pooler {name}", own_parser(name) or sub)


def own_parser(name: str) -> argparse.ArgumentParser | None:
    """The parser main() hands ``pooler store ...``, ``pooler mcp ...`` and ``pooler lsp ...`` to, not
    the --help stub."""
    # Imported only here: the reference store and the MCP server keep their parsers to themselves.
    if name == "store":
        from pooler.store.cli import _parser as store_parser  # noqa: PLC0415

        return store_parser()
    if name == "mcp":
        from pooler.cli.commands.mcp_cmd import build_parser as mcp_parser  # noqa: PLC0415

        return mcp_parser()
    if name == "lsp":
        from pooler.cli.commands.lsp_cmd import build_parser as lsp_parser  # noqa: PLC0415

        return lsp_parser()
    return None


def walk(command: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield command, parser
    for name, sub in subcommands(parser):
        yield from walk(f"{command} {name}", sub)


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # argparse has no public walk of its parsers
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def fixed_width(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    """The parser's own formatter (raw or not), at ``WIDTH`` columns instead of the terminal's."""
    kind: Callable[..., argparse.HelpFormatter] = parser.formatter_class
    return kind(prog=parser.prog, width=WIDTH)


def prose(text: str) -> str:
    """Help text as Markdown shows it word for word: no markup, no HTML tags."""
    for char, escaped in (("\\", "\\\\"), ("*", "\\*"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        text = text.replace(char, escaped)
    return text


def cell(text: str) -> str:
    """Text fit for one cell of a Markdown table."""
    return prose(" ".join(text.split()))


def description(parser: argparse.ArgumentParser) -> str:
    """The parser's description, wrapped as --help wraps it (kept as written for a raw formatter)."""
    text = (parser.description or "").strip()
    if parser.formatter_class is not argparse.RawDescriptionHelpFormatter:
        text = textwrap.fill(" ".join(text.split()), width=WIDTH)
    return prose(text)


def section(command: str, parser: argparse.ArgumentParser) -> list[str]:
    formatter = fixed_width(parser)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    usage = formatter.format_help().strip()
    lines = [f"## `{command}`", ""]
    if parser.description:
        lines += [description(parser), ""]
    lines += ["```", usage, "```", ""]
    subs = subcommands(parser)
    if subs:
        helps = {a.dest: a.help or "" for a in _choices_actions(parser)}
        lines += ["| command | what it does |", "|---|---|"]
        lines += [f"| [`{command} {name}`](#{anchor(f'{command} {name}')}) | {cell(helps.get(name, ''))} |"
                  for name, _ in subs]
        lines.append("")
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        lines += [f"{group.title}:" if group.title else "options:", ""]
        lines += ["| option | what it does |", "|---|---|"]
        for action in actions:
            text = formatter._expand_help(action) if action.help else ""
            # A | splits a table's cell even inside backticks.
            flags = _invocation(formatter, action).replace("|", "\\|")
            lines.append(f"| `{flags}` | {cell(text)} |")
        lines.append("")
    return lines


def _invocation(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    """An option as its help shows it, the same on every Python: 3.13's argparse writes the value
    once (``-o, --output FILE``), older ones after each spelling (``-o FILE, --output FILE``)."""
    if not action.option_strings or action.nargs == 0:
        return formatter._format_action_invocation(action)
    value = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
    return ", ".join(f"{option} {value}" for option in action.option_strings)


def _choices_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found: list[argparse.Action] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action._choices_actions)
    return found


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading ``` `pooler run` ```: lower case, spaces to ``-``, no punctuation."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def exit_statuses() -> list[str]:
    lines = ["## Exit statuses", "", "Every command ends with one of these (`pooler/exits.py`):", "",
             "| status | name | meaning |", "|---|---|---|"]
    lines += [f"| {int(s)} | `{s.name}` | {cell(MEANINGS.get(int(s), ''))} |" for s in ExitStatus]
    lines += ["", cell(EPILOG), ""]
    return lines


def render() -> str:
    """The whole page, the same on every machine and terminal."""
    lines = [HEADER]
    for command, parser in parsers():
        lines += section(command, parser)
    lines += exit_statuses()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in ([], ["--check"]):
        sys.stderr.write("usage: python -m pooler.cli.reference [--check]  (from the repository's root)\n")
        return ExitStatus.REFUSED
    if not PAGE.parent.is_dir():
        sys.stderr.write(f"no {PAGE.parent}/ folder here: run this from the repository's root\n")
        return ExitStatus.REFUSED
    text = render()
    if args:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{PAGE} is stale: regenerate it with {REGENERATE}\n")
            return ExitStatus.FAILED
        return ExitStatus.OK
    PAGE.write_text(text, encoding="utf-8")
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main())
