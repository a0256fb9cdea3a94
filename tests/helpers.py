"""Test helpers: a real reference store on a free port, and pooler run as a real process."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
#: The token of every store the tests start without a token option of their own.
STORE_TOKEN = "test-store-token-4f1c9a"


@dataclass
class Store:
    """A running ``pooler store serve`` process."""

    url: str
    proc: subprocess.Popen[str]
    db: Path
    root: Path
    token: str = ""
    args: list[str] = field(default_factory=list)

    def call(self, unit: str, command: str, params: dict[str, Any] | None = None,
             token: str | None = None, **extra: Any) -> requests.Response:
        body = {"unit": unit, "command": command, "params": params or {}, **extra}
        return requests.post(f"{self.url}/tool_run", json=body, timeout=30,
                             headers={"Authorization": f"Bearer {token or self.token}"})

    def ops(self) -> list[dict[str, Any]]:
        """Every command the store has carried out, oldest first (CmdOps adds no row itself)."""
        answer = self.call("MELBIS_AGENT_TEST", "CmdOps").json()
        rows: list[dict[str, Any]] = answer["data"]["tables"]["ops"]
        return rows

    @property
    def port(self) -> str:
        """The port it listens on: a store started again there is the same store to a task."""
        return self.url.rsplit(":", 1)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                # Its output read meanwhile: a store whose pipe is full cannot finish writing and end.
                self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def start_store(tmp: Path, *args: str, db: Path | None = None, root: Path | None = None) -> Store:
    """Start the reference store on a free port and wait for the URL it prints first."""
    db = db or tmp / "store.db"
    root = root or tmp / "store-root"
    if "--token" not in args and "--read-token" not in args:
        args = ("--token", STORE_TOKEN, *args)
    cmd = [sys.executable, "-m", "pooler", "store", "serve", "--port", "0",
           "--db", str(db), "--root", str(root), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"store did not start: {url!r} {err}")
    token = ""
    for i, a in enumerate(args):
        if a == "--token":
            token = args[i + 1]
            break
    return Store(url=url, proc=proc, db=db, root=root, token=token, args=list(args))



def pooler(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
           stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pooler ARGS`` as a real process and capture what it prints."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("POOLER_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pooler", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, input=stdin, timeout=timeout, check=False)


def answer_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON document ``--json`` prints on stdout."""
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stand-in store of fixed behaviour on 127.0.0.1, for answers the reference store never gives."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def send_answer(handler: BaseHTTPRequestHandler, status: int, ctype: str, body: bytes) -> None:
    """A stand-in store's answer: the request's body read, then one whole response."""
    handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    handler.send_response(status)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def on_terminal(argv: list[str], token: str, columns: int, *, rows: int = 50,
                interrupt_after: bytes | None = None) -> tuple[int, str]:
    """``python -m pooler ARGV`` with stdin, stdout and stderr on a pseudo-terminal ``columns`` wide:
    its exit status and everything it drew (escape codes included). With ``interrupt_after``, a
    SIGINT is sent once those bytes have been drawn."""
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("POOLER_") and k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update({"POOLER_TOKEN": token, "TERM": "xterm-256color"})
    proc = subprocess.Popen([sys.executable, "-m", "pooler", *argv], stdin=secondary, stdout=secondary,
                            stderr=secondary, cwd=ROOT, env=env, close_fds=True)
    os.close(secondary)
    chunks: list[bytes] = []
    sent = False
    while True:
        if interrupt_after is not None and not sent and interrupt_after in b"".join(chunks):
            proc.send_signal(signal.SIGINT)
            sent = True
        ready, _, _ = select.select([primary], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(primary, 65536)
        except OSError:  # the terminal closes when the run ends
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def wait_for_ops(store: Store, count: int, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until the store has carried out ``count`` commands, while the run ``proc`` goes on."""
    deadline = time.monotonic() + timeout
    while len(store.ops()) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached the store"
        time.sleep(0.02)
