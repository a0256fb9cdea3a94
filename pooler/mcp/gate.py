"""Which HTTP requests reach ``pooler mcp --http``: the bearer token first, then the ``Host`` and
``Origin`` a browser page could forge by DNS rebinding, then the protocol revision.

The token comes first, so a caller without it learns nothing else about the server (a wrong token is
401 whatever its Host or Origin).  A ``Host`` must name the listening address (any of localhost,
127.0.0.1 and [::1] when it is loopback) or the host of an ``--allow-origin``; an ``Origin``, when
sent, must be the server's own or on the ``--allow-origin`` list: else 403.  A server listening on
every address (0.0.0.0, ::) cannot know the names it is reached by, so there the Host is not checked
and the token is the gate.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pooler.contract.listen import is_loopback
from pooler.errors import UsageError

#: What a request without the right token is told (never the token, nor what was sent instead).
DENIED = ("pooler mcp needs Authorization: Bearer <token> on every request - the token it printed when "
          "it started, or the one in its --http-token-file.")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 - names the wildcard listeners, binds nothing


def parse_origin(value: str) -> str:
    """An ``--allow-origin`` value as browsers send it: ``scheme://host[:port]``, lower case."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") \
            or parts.query or parts.fragment or "@" in parts.netloc:
        raise UsageError(f"--allow-origin takes an origin as a browser sends it, like "
                         f"https://tools.example.com or http://localhost:3000, not {value!r}")
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass(frozen=True)
class Admission:
    """The hosts and origins one listening server admits."""

    hosts: frozenset[str] | None
    origins: frozenset[str]

    @classmethod
    def of(cls, host: str, port: int, allowed: Iterable[str]) -> Admission:
        origins = {parse_origin(o) for o in allowed}
        bare = host.strip("[]").lower()
        if bare in WILDCARDS:
            names: set[str] | None = None
        elif is_loopback(bare):
            names = set(LOOPBACK_NAMES)
        else:
            names = {f"[{bare}]" if ":" in bare else bare}
        own = set()
        for name in names or ():
            own |= {name, f"{name}:{port}"}
            origins.add(f"http://{name}:{port}")
        # A proxy in front of the server (TLS, another name) passes the Host its clients used.
        hosts = None if names is None else own | {urlsplit(o).netloc for o in origins}
        return cls(frozenset(hosts) if hosts is not None else None, frozenset(origins))

    def admits_host(self, host: str) -> bool:
        return self.hosts is None or host.lower() in self.hosts

    def admits_origin(self, origin: str | None) -> bool:
        # Only browsers send an Origin; a client that sends none is not a page of another site.
        return origin is None or origin.lower() in self.origins


def _answer(status: int, body: dict[str, object],
            extra: tuple[tuple[bytes, bytes], ...] = ()) -> list[Message]:
    data = json.dumps(body).encode()
    return [{"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                         *extra]},
            {"type": "http.response.body", "body": data}]


def _rpc_error(message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}


class Gate:
    """An ASGI wrapper that answers 401, 403 or 400 before the SDK sees a request it must not serve."""

    def __init__(self, app: ASGIApp, token: str, admission: Admission) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self.admission = admission

    def refusal(self, headers: dict[bytes, bytes]) -> list[Message] | None:
        # In constant time, so the answer's timing tells nothing of the token.
        if not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            return _answer(401, {"error": "invalid_token", "error_description": DENIED},
                           ((b"www-authenticate", b'Bearer realm="pooler mcp"'),))
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.admission.admits_host(host):
            return _answer(403, _rpc_error(
                f"pooler mcp does not answer to Host {host!r}: it answers to the address it listens on, "
                "and to the hosts of --allow-origin (DNS rebinding protection)"))
        origin = headers.get(b"origin")
        if not self.admission.admits_origin(None if origin is None else origin.decode("latin-1")):
            assert origin is not None
            return _answer(403, _rpc_error(
                f"pooler mcp does not answer to pages of Origin {origin.decode('latin-1')!r}: give it "
                "with --allow-origin to let them call"))
        version = headers.get(b"mcp-protocol-version")
        if version is not None and version.decode("latin-1") not in KNOWN_PROTOCOL_VERSIONS:
            return _answer(400, _rpc_error(
                f"Unsupported MCP-Protocol-Version {version.decode('latin-1')!r} - pooler mcp speaks "
                f"{', '.join(KNOWN_PROTOCOL_VERSIONS)}"))
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(dict(scope["headers"]))
            if refused is not None:
                for message in refused:
                    await send(message)
                return
        await self.app(scope, receive, send)
