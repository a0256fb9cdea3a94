"""``pooler store serve``: the bundled reference store on a free port, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from pooler.contract.listen import is_loopback
from pooler.errors import PoolerError, UsageError
from pooler.store.engine import Engine, StoreConfig
from pooler.store.faults import KINDS, FaultPlan, parse_rule
from pooler.store.fencing import Fences
from pooler.store.flow import Flow, parse_rate_limit
from pooler.store.server import StoreServer

DEFAULT_DIR = Path(".pooler-store")

DESCRIPTION = """\
The bundled reference store: a real HTTP server on SQLite speaking tool_run and tool_list.
It prints its URL (http://HOST:PORT) as the first line of stdout, and serves until SIGINT or
SIGTERM. State lives in --db and --root, so it survives a restart.

Tokens: --token T grants every command; --read-token T grants CmdList, CmdGet and CmdEcho only
(CmdOps, which shows every caller's params, needs a full token). With neither option the store
makes a random token, grants it every command and prints "token: <token>" as the second line.
On an address other than loopback the store starts only with --token.

Bounds: a request's token is checked before its body is read; at most --max-connections
connections are served at once (more wait to be accepted), and one left idle --idle-timeout
seconds is closed.

MELBIS_AGENT_TEST CmdOps lists every command the store has carried out (a command whose function
ran, whatever it answered); CmdOps adds no row itself, so reading the ops does not change them."""


class _StopError(BaseException):
    """SIGINT or SIGTERM arrived.

    A BaseException: socketserver swallows an Exception raised while it hands a request to its
    thread, and a signal arriving just then would be lost.
    """


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pooler store", description="The bundled reference store.")
    sub = parser.add_subparsers(dest="action", required=True, metavar="serve")
    serve = sub.add_parser("serve", help="run the reference store", description=DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="port; 0 (the default) picks a free one")
    serve.add_argument("--db", type=Path, default=DEFAULT_DIR / "store.db",
                       help="the SQLite database (default ./.pooler-store/store.db)")
    serve.add_argument("--root", type=Path, default=DEFAULT_DIR / "root",
                       help="the folder of attachment files (default ./.pooler-store/root)")
    serve.add_argument("--token", action="append", default=[], metavar="T",
                       help="a token granted every command (repeatable)")
    serve.add_argument("--read-token", action="append", default=[], metavar="T",
                       help="a token granted only CmdList, CmdGet and CmdEcho (repeatable)")
    serve.add_argument("--registry", action="append", default=[], type=Path, metavar="DIR",
                       help="a folder of tool declarations (*.json) to add; a call of one of them answers "
                            "'Module not found!'. A declaration of a unit the store has replaces its own.")
    serve.add_argument("--latency-ms", type=int, default=0, metavar="N",
                       help="every tool_run (and tool_list) takes N ms more; a call over "
                            "--rate-limit is answered at once")
    serve.add_argument("--reply-delay-ms", type=int, default=0, metavar="N",
                       help="answer every tool_run N ms after carrying it out (what it did is recorded "
                            "first): a reply that comes late, to try what a client does with a call whose "
                            "answer it never heard")
    serve.add_argument("--rate-limit", default=None, metavar="N[,M@S...]",
                       help="carry out at most N calls a second (a token bucket of N): a call over it is "
                            "answered 429 with Retry-After, the seconds until the next is taken; "
                            "N,M@S,... changes the limit to M calls a second S seconds after the first "
                            "call (e.g. 30,15@10,30@20)")
    serve.add_argument("--order-ms", type=int, default=100, metavar="N",
                       help="MELBIS_AGENT_ORDER.CmdAdd books for N ms (default 100), its contract locked "
                            "meanwhile: a long booking is a lock another client holds")
    serve.add_argument("--crowd-ms", type=int, default=0, metavar="N",
                       help="a call takes N ms more for every other call in flight beside it (a store that "
                            "slows down under load)")
    serve.add_argument("--max-file-kb", type=int, default=None, metavar="N",
                       help="refuse several attachments that come to more than N KB together "
                            "(a single file passes at any size)")
    serve.add_argument("--no-idempotency", action="store_true", help="ignore the Idempotency-Key header")
    serve.add_argument("--fence-leases", action="store_true",
                       help="refuse (409, not carried out) a request whose Pooler-Lease epoch is older "
                            "than one already seen for its Idempotency-Key")
    serve.add_argument("--fault", action="append", default=[], metavar="KIND:RATE",
                       help=f"inject a fault into that share of /tool_run calls; KIND is one of "
                            f"{', '.join(KINDS)} (repeatable; MELBIS_AGENT_TEST CmdOps is never faulted)")
    serve.add_argument("--max-connections", type=int, default=64, metavar="N",
                       help="connections served at once, each by a thread of its own (default 64)")
    serve.add_argument("--idle-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="close a connection that sends nothing for this long (default 30)")
    serve.add_argument("--seed", type=int, default=None, metavar="N", help="seed of the fault draws")
    serve.add_argument("--slow-ms", type=int, default=30000, metavar="N",
                       help="how late a 'slow' fault answers (default 30000)")
    return parser


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _StopError


@dataclass
class Served:
    """A store ready to serve: its server bound to its port, its engine open, and the token it made
    when none was given (None otherwise)."""

    server: StoreServer
    engine: Engine
    made_token: str | None


def open_store(argv: list[str], log: Callable[[str], None] | None = None) -> Served:
    """The store ``pooler store serve ARGV`` serves, bound and ready, without serving it yet.

    Raises PoolerError for a bad option and OSError when the address cannot be bound; the caller
    serves it (``serve_forever``) and closes both the server and the engine.
    """
    args = _parser().parse_args(["serve", *argv])
    if min(args.latency_ms, args.reply_delay_ms, args.slow_ms, args.order_ms, args.max_file_kb or 0) < 0:
        raise UsageError("--latency-ms, --reply-delay-ms, --slow-ms, --order-ms and --max-file-kb take a "
                         "number of 0 or more")
    schedule = _rate_limit(args.rate_limit, args.crowd_ms)
    if args.max_connections < 1 or not args.idle_timeout > 0:
        raise UsageError("--max-connections takes a number of 1 or more, --idle-timeout more than 0 "
                         "seconds")
    if not args.token and not is_loopback(args.host):
        raise UsageError(f"--host {args.host} is reachable from other machines, and no --token was "
                         "given - give --token with a long random token, so that only its holders may "
                         "call the store.")
    made = None if args.token or args.read_token else secrets.token_hex(16)
    tokens = tuple(args.token) or ((made,) if made else ())
    faults = FaultPlan([parse_rule(f) for f in args.fault], args.seed, args.slow_ms)
    config = StoreConfig(db=args.db, root=args.root, tokens=tokens,
                         read_tokens=tuple(args.read_token), registry_dirs=tuple(args.registry),
                         latency_ms=args.latency_ms, order_ms=args.order_ms, max_file_kb=args.max_file_kb,
                         idempotency=not args.no_idempotency, reply_delay_ms=args.reply_delay_ms)
    engine = Engine(config)
    try:
        server = StoreServer((args.host, args.port), engine, faults, log=log or _log,
                             max_connections=args.max_connections, idle_timeout=args.idle_timeout,
                             fences=Fences() if args.fence_leases else None,
                             flow=Flow(schedule, args.crowd_ms))
    except OSError as exc:
        engine.close()
        raise OSError(exc.errno, f"cannot listen on {args.host}:{args.port}: {exc.strerror} - "
                                 "pick another --port, or 0 for a free one") from exc
    return Served(server, engine, made)


def _rate_limit(text: str | None, crowd_ms: int) -> tuple[tuple[float, float], ...] | None:
    """The schedule ``--rate-limit`` gives (None without it), checked with ``--crowd-ms``."""
    schedule = None
    plain = True
    if text is not None:
        plain = not any(c in text for c in ",@")
        try:
            schedule = parse_rate_limit(text)
        except ValueError as exc:
            if not plain:
                raise UsageError(f"--rate-limit {text}: {exc} - write N, or N,M@SECONDS,... "
                                 "(e.g. 30,15@10,30@20)") from None
            schedule = ()
    if crowd_ms < 0 or schedule == ():
        raise UsageError("--rate-limit takes a number of calls a second above 0, --crowd-ms a number of 0 or "
                         "more")
    return schedule


def main(argv: list[str]) -> int:
    if argv[:1] != ["serve"]:
        _parser().parse_args(argv)  # --help, or the usage and exit 2 for anything but "serve"
    try:
        served = open_store(argv[1:])
    except PoolerError as exc:
        sys.stderr.write(f"pooler store: {exc.render()}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"pooler store: {exc.strerror}\n")
        return 2
    server, engine, made = served.server, served.engine, served.made_token
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    sys.stdout.write(server.url + "\n")
    if made is not None:
        # As notebook servers do: a token nobody could guess, shown once to who started the store.
        sys.stdout.write(f"token: {made}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.5)
    except _StopError:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        server.server_close()
        engine.close()
    return 0


def _log(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()
