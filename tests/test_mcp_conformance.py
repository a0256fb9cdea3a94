"""The official MCP conformance suite (npm @modelcontextprotocol/conformance 0.1.16, on Node.js 22)
runs its server scenarios that apply to a server of tools against ``pooler mcp --http``.

The suite sends no token, so it speaks through a small proxy here that adds the bearer token and
passes every other header as sent - the Host and Origin of the DNS rebinding scenario included.
The proxy is in front of the server as a TLS proxy would be: the server is told its origin with
``--allow-origin``, and answers to its host.
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import Store, serving
from mcpkit import NODE_DIR, REQUIRE_INSPECTOR, http_server

pytestmark = pytest.mark.process

INSTALL = ("npm install --prefix tests/.node --no-audit --no-fund node@22 "
           "@modelcontextprotocol/conformance@0.1.16")
#: The scenario that calls a tool of the suite's own (``test_tool_with_progress``, no arguments), which
#: the server offers only with --conformance-tools.
OWN_TOOL = "tools-call-with-progress"
SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection", OWN_TOOL]
#: Headers of the server's answer the proxy does not pass on: its own framing, and what it adds itself.
HOP_BY_HOP = {"server", "date", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "content-length"}


def conformance() -> list[str]:
    """The command that runs the suite; skips (or fails, when required) without it."""
    modules = NODE_DIR / "node_modules"
    cli = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    node = modules / "node" / "bin" / "node"
    if not cli.is_file() or not node.is_file():
        why = f"the MCP conformance suite 0.1.16 is not installed in {NODE_DIR} - {INSTALL}"
        if os.environ.get(REQUIRE_INSPECTOR) == "1":
            pytest.fail(f"{why}; {REQUIRE_INSPECTOR}=1 asks for these tests to run")
        pytest.skip(why)
    return [str(node), str(cli)]


class Upstream:
    """Where the proxy passes requests, and the token it adds: set once the server has started."""

    host = ""
    port = 0
    token = ""


@contextmanager
def token_proxy(upstream: type[Upstream]) -> Iterator[str]:
    """A proxy on loopback that adds ``Authorization: Bearer <token>`` to every request it passes to
    the upstream server; its origin (``http://127.0.0.1:PORT``)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: object) -> None:  # type: ignore[override]
            return None

        def relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(upstream.host, upstream.port, timeout=120)
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in ("authorization", "connection", "content-length"):
                    conn.putheader(name, value)
            conn.putheader("Authorization", f"Bearer {upstream.token}")
            conn.putheader("Content-Length", str(len(body or b"")))
            conn.endheaders(body)
            answer = conn.getresponse()
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            # Chunk by chunk: an event stream is passed on as it comes.
            try:
                while chunk := answer.read1(65536):
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            finally:
                conn.close()

        do_GET = do_POST = do_DELETE = relay  # noqa: N815 - the names http.server calls

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    proxy.daemon_threads = True
    with serving(proxy):
        yield f"http://127.0.0.1:{proxy.server_address[1]}"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def run_scenario(store: Store, out: Path, scenario: str, *extra: str) -> subprocess.CompletedProcess[str]:
    suite = conformance()

    class To(Upstream):
        token = "conformance-token-0123456789"

    with token_proxy(To) as origin, \
            http_server(store, out, "--allow-origin", origin, *extra, token=To.token) as server:
        where = urlsplit(server.url)
        To.host, To.port = str(where.hostname), int(where.port or 0)
        return subprocess.run([*suite, "server", "--url", f"{origin}/mcp", "--scenario", scenario],
                              capture_output=True, text=True, timeout=300, check=False, cwd=out)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_conformance_suite_passes_its_server_scenario(store: Store, out: Path, scenario: str) -> None:
    # The suite's own tools are served beside pooler's, as a run of the suite would start the server.
    ran = run_scenario(store, out, scenario, "--conformance-tools")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # Every check of the scenario passed, none warned.
    assert re.search(r"Passed: (\d+)/\1, 0 failed, 0 warnings", ran.stdout), ran.stdout


def test_without_the_option_the_suites_own_tool_is_not_offered(store: Store, out: Path) -> None:
    # An agent is never offered a tool that exists for the suite alone: the one check fails on its
    # name, not on pooler's progress.
    ran = run_scenario(store, out, OWN_TOOL)
    assert ran.returncode != 0
    assert "Passed: 0/1, 1 failed, 0 warnings" in ran.stdout, ran.stdout
    assert "Unknown tool [test_tool_with_progress]" in ran.stdout, ran.stdout
