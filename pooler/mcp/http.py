"""``pooler mcp --http HOST:PORT``: the same server over MCP's streamable HTTP transport, behind a
bearer token.

Every request must carry ``Authorization: Bearer <token>``: the token of ``--http-token-file``, or
one made at start and printed once (as ``pooler store serve`` prints its own).  The check comes
before the SDK sees the request, so a request without the token opens no session and runs nothing.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from pooler.contract.listen import is_loopback
from pooler.errors import UsageError
from pooler.infile import read_token, token_file_warning

#: What a request without the right token is told (never the token, nor what was sent instead).
DENIED = ("pooler mcp needs Authorization: Bearer <token> on every request - the token it printed when "
          "it started, or the one in its --http-token-file.")


@dataclass(frozen=True)
class Listen:
    """Where the HTTP server listens, and the token its clients must give."""

    host: str
    port: int
    token: str
    #: The token was made at start (and is printed), not read from a file.
    made: bool

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host


def parse_listen(value: str, token_file: str | None) -> tuple[Listen, str | None]:
    """``HOST:PORT`` and the token; a warning about a token file others can read, if any."""
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
        return Listen(host, int(port_text), secrets.token_hex(16), made=True), None
    path = Path(token_file).expanduser()
    token = read_token(Path(token_file), "--http-token-file")
    return Listen(host, int(port_text), token, made=False), token_file_warning(path)


class BearerGate:
    """An ASGI wrapper that answers 401 to any HTTP request without the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            # In constant time, so the answer's timing tells nothing of the token.
            if not hmac.compare_digest(given, self._expected):
                body = json.dumps({"error": "invalid_token", "error_description": DENIED}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()),
                                        (b"www-authenticate", b'Bearer realm="pooler mcp"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


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
    """Serve the SDK's streamable HTTP app behind the token until SIGINT or SIGTERM."""
    # A client's open event stream does not hold the shutdown up for long: the pools of the
    # sessions it ends still run to their end (``PoolerTools.close`` waits for them).
    config = uvicorn.Config(BearerGate(app, listen.token), log_level="warning", lifespan="on",
                            access_log=False, timeout_graceful_shutdown=10)
    await uvicorn.Server(config).serve(sockets=[sock])
