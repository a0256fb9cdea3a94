"""``pooler mcp --http HOST:PORT``: the same server over MCP's streamable HTTP transport, behind a
bearer token.

Every request must carry ``Authorization: Bearer <token>``: the token of ``--http-token-file``, or
one made at start and printed once (as ``pooler store serve`` prints its own).  The check comes
before the SDK sees the request (pooler/mcp/gate.py, with the Host and Origin checks), so a request
without the token opens no session and runs nothing.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from pooler.contract.listen import is_loopback
from pooler.errors import UsageError
from pooler.infile import read_token, token_file_warning
from pooler.mcp.gate import Admission, Gate, parse_origin


@dataclass(frozen=True)
class Listen:
    """Where the HTTP server listens, and the token its clients must give."""

    host: str
    port: int
    token: str
    #: The token was made at start (and is printed), not read from a file.
    made: bool
    #: Origins of web pages allowed to call it (``--allow-origin``), besides its own.
    origins: tuple[str, ...] = ()

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host


def parse_listen(value: str, token_file: str | None,
                 origins: Sequence[str] = ()) -> tuple[Listen, str | None]:
    """``HOST:PORT``, the token and the allowed origins; a warning about a token file others can
    read, if any."""
    allowed = tuple(parse_origin(o) for o in origins)
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"--http takes HOST:PORT, like 127.0.0.1:8765 (port 0 picks a free one), not "
                         f"{value!r}")
    if token_file is None:
        if not is_loopback(host):
            raise UsageError(f"--http {value} is reachable from other machines, and no --http-token-file "
                             "was given - write a long random token into a file and give it with "
                             "--http-token-file, so that only its holders may call the server.")
        return Listen(host, int(port_text), secrets.token_hex(16), made=True, origins=allowed), None
    path = Path(token_file).expanduser()
    token = read_token(Path(token_file), "--http-token-file")
    return Listen(host, int(port_text), token, made=False, origins=allowed), token_file_warning(path)


def bind(listen: Listen) -> socket.socket:
    """The listening socket, bound before anything is printed: the URL names the port it got."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listen.host, listen.port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def endpoint(listen: Listen, sock: socket.socket) -> str:
    return f"http://{listen.url_host}:{sock.getsockname()[1]}/mcp"


async def serve_http(app: Any, listen: Listen, sock: socket.socket) -> None:
    """Serve the SDK's streamable HTTP app behind the gate until SIGINT or SIGTERM."""
    # A client's open event stream does not hold the shutdown up for long: the pools of the
    # sessions it ends still run to their end (``PoolerTools.close`` waits for them).
    admission = Admission.of(listen.host, sock.getsockname()[1], listen.origins)
    config = uvicorn.Config(Gate(app, listen.token, admission), log_level="warning", lifespan="on",
                            access_log=False, timeout_graceful_shutdown=10)
    await uvicorn.Server(config).serve(sockets=[sock])
