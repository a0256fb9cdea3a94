"""What every command shares: the common flags, where output goes, and the store client."""

from __future__ import annotations

import argparse
import contextlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pooler import strictjson
from pooler.cli.config import UNAUTHENTICATED, Target, config_path, resolve_target
from pooler.errors import CheckFailed, PoolerError, UsageError
from pooler.redact import Redactor, short_warning

if TYPE_CHECKING:
    from pooler.client.http import ToolRunClient
    from pooler.pool.compiler import Inputs
    from pooler.pool.model import Pool

#: The client's timeouts when --timeout is not given (client.ToolRunClient's defaults).
READ_TIMEOUT = 60.0
CONNECT_TIMEOUT = 5.0
INSECURE_WARNING = (
    "pooler: WARNING: --insecure: the store's TLS certificate is NOT verified; anyone on the way "
    "can read the token and change the answers. Use it only against a test store.\n"
)


@dataclass
class Context:
    """The process's streams and environment, handed to a command instead of globals."""

    stdout: TextIO
    stderr: TextIO
    environ: Mapping[str, str]
    redactor: Redactor = field(default_factory=Redactor)
    #: Whether the one JSON document of ``--json`` has been written.
    emitted: bool = False

    def human(self, args: argparse.Namespace) -> TextIO:
        """Where text for people goes: stderr when stdout is kept for the one JSON document."""
        return self.stderr if getattr(args, "json", False) else self.stdout

    def emit_json(self, document: Any) -> None:
        """The one JSON document of ``--json``, secrets masked."""
        # Strict JSON: a number no parser takes (NaN, Infinity) is written as a string.
        self.stdout.write(strictjson.dumps(self.redactor.value(document), ensure_ascii=False, indent=2))
        self.stdout.write("\n")
        self.stdout.flush()
        self.emitted = True

    def note(self, text: str) -> None:
        """A line for people on stderr, secrets masked."""
        self.stderr.write(self.redactor.text(text) + "\n")
        self.stderr.flush()


def mask_journal(given: str | None, ctx: Context) -> None:
    """The journal's passwords (``--journal``, else ``POOLER_JOURNAL``) join the redactor, so a
    message that quotes the URL, or libpq's text of a piece of it, shows ``***``."""
    from pooler.journal.dburl import JOURNAL_ENV, passwords  # noqa: PLC0415

    for secret in passwords(given or ctx.environ.get(JOURNAL_ENV)):
        ctx.redactor.add(secret)


def render_error(error: PoolerError) -> str:
    """Every problem with its caret line; a bare message gets the program's name in front."""
    problems = list(error.problems())
    parts = [p.render() if p.location() else f"pooler: {p.render()}" for p in problems]
    if isinstance(error, CheckFailed) and len(problems) > 1:
        parts.append(f"pooler: {len(problems)} problems")
    return "\n".join(parts)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 seconds")
    return value


def calls_a_second(text: str) -> float:
    """``--rate N``: calls a second, as a pool's ``rate.per_second`` takes them."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of calls a second") from None
    if not 0.01 <= value <= 10000:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0.01 to 10000 calls a second")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def add_run_output(parser: argparse.ArgumentParser) -> None:
    """What a run prints and where: ``--quiet``, ``--verbose``, ``--log``, ``--traceback``."""
    parser.add_argument("--quiet", action="store_true",
                        help="print only failures, in-doubt calls and the summary of a run that did not "
                             "complete")
    parser.add_argument("--verbose", action="store_true",
                        help="also say what was left aside (names in --vars-file the pool does not declare)")
    parser.add_argument("--log", metavar="FILE",
                        help="also append plain timestamped lines to FILE (default: none)")
    add_traceback(parser)


def add_traceback(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--traceback", action="store_true",
                        help="on an internal error, show the full Python traceback")


def add_json(parser: argparse.ArgumentParser, what: str = "the answer") -> None:
    parser.add_argument("--json", action="store_true",
                        help=f"print {what} as one JSON document on stdout; text for people goes to stderr")


def add_store_options(parser: argparse.ArgumentParser, *, store_flag: str = "--store") -> None:
    """``--store``, ``--token-file``, ``--config``, ``--insecure``, ``--timeout``."""
    if store_flag == "--store":
        metavar, what = "URL|NAME", "the store's base URL, or a name from the config file (env POOLER_STORE)"
    else:
        metavar, what = "STORE|DIR|FILE", (
            "a store's base URL or name from the config file (env POOLER_STORE), a folder of exported "
            "*.json tool declarations, or a saved tool_list ('pooler tools --json > shop-tools.json'), "
            "read offline")
    parser.add_argument(store_flag, dest="store", metavar=metavar, help=what)
    parser.add_argument("--token-file", metavar="PATH",
                        help="a file holding the token (env POOLER_TOKEN); the token is never printed")
    parser.add_argument("--config", metavar="FILE",
                        help="the named-stores file (env POOLER_CONFIG; "
                             "default ~/.config/pooler/stores.yaml)")
    parser.add_argument("--insecure", action="store_true",
                        help="do not verify the store's TLS certificate (warns loudly every time)")
    parser.add_argument("--timeout", type=positive_float, metavar="SECONDS", default=None,
                        help=f"how long one call may take for its whole answer once sent (default "
                             f"{READ_TIMEOUT:g} s, and {CONNECT_TIMEOUT:g} s to connect)")


def target(args: argparse.Namespace, ctx: Context) -> Target:
    """The store and token the flags name; the token joins the redactor at once."""
    found = resolve_target(args.store, args.token_file, args.config, ctx.environ)
    if found.token:
        ctx.redactor.add(found.token.strip())
        warning = short_warning("the token", found.token.strip())
        if warning:
            ctx.note(warning)
    for warning in found.warnings:
        ctx.note(warning)
    return found


def make_client(args: argparse.Namespace, ctx: Context, *, masking: bool = True,
                need_token: bool = False) -> ToolRunClient:
    """A ``ToolRunClient`` for the store the flags name; with ``masking`` a ``MaskingClient``.

    ``masking=False`` is for a caller that masks what it writes itself, as the executor does.
    ``need_token`` refuses, before anything is sent, to go on without a token.
    """
    # Imported here: urllib3 is a large part of start-up, and check and plan never call a store.
    from pooler.client.http import ToolRunClient  # noqa: PLC0415

    found = target(args, ctx)
    if need_token and found.token is None:
        raise UsageError(UNAUTHENTICATED.format(url=found.url, config=config_path(args.config, ctx.environ)))
    if args.insecure:
        ctx.stderr.write(INSECURE_WARNING)
        ctx.stderr.flush()
        # The loud warning above replaces urllib3's one-per-request noise.
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    options: dict[str, Any] = {"verify": not args.insecure}
    if args.timeout is not None:
        options["read_timeout"] = args.timeout
    if not masking:
        return ToolRunClient(found.url, found.token, redactor=ctx.redactor, name=found.name, **options)
    from pooler.client.masking import MaskingClient  # noqa: PLC0415 - a run masks what it writes itself

    return MaskingClient(found.url, found.token, redactor=ctx.redactor, name=found.name, **options)


def add_variable_options(parser: argparse.ArgumentParser) -> None:
    """``--var`` and ``--vars-file``: the variables of a pool, as run and check take them."""
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help="set a variable (repeatable); wins over --vars-file, the environment "
                             "and the default")
    parser.add_argument("--vars-file", metavar="FILE", help="a YAML or JSON file of variable values")


def variable_inputs(args: argparse.Namespace, ctx: Context) -> Inputs:
    """Where the pool's variables come from, as the flags and the environment give them."""
    from pooler.pool.compiler import Inputs  # noqa: PLC0415 - only the commands that compile need it

    overrides: dict[str, str] = {}
    for text in args.var:
        name, value = parse_var(text)
        overrides[name] = value
    return Inputs(overrides=overrides, vars_file=Path(args.vars_file) if args.vars_file else None,
                  environ=ctx.environ)


def mask_variables(pool: Pool, inputs: Inputs, redactor: Redactor) -> None:
    """Add the pool's secret values to ``redactor``, so a problem that quotes one shows ``***``."""
    from pooler.pool.variables import resolve_variables  # noqa: PLC0415

    with contextlib.suppress(PoolerError):
        for secret in resolve_variables(pool, inputs.overrides, inputs.vars_file, inputs.environ).secrets:
            redactor.add(secret)


def parse_var(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--var``."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise UsageError(f"--var {text!r} needs the form NAME=VALUE, for example --var sku=A-100")
    return name.strip(), value
