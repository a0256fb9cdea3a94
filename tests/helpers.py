"""Test helpers: a real reference store on a free port (on a thread, or a process), and pooler run
in the test's process or as a real one."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import select
import signal
import socketserver
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
#: How often a server on a thread of the tests looks whether it was asked to stop: its
#: ``shutdown()`` waits up to this long, once a test, thousands of times a suite.
SHUTDOWN_POLL = 0.01


def serve_in_thread(server: socketserver.BaseServer, *, name: str | None = None) -> None:
    """``server`` served on a daemon thread of the tests, looking every ``SHUTDOWN_POLL`` whether
    it was asked to stop."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL}, daemon=True,
                     name=name).start()


@contextlib.contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[None]:
    """``server`` served on a thread of the tests while the block runs; then stopped and closed."""
    serve_in_thread(server)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Store:
    """A running reference store: a ``pooler store serve`` process, or the same server on a thread
    of the test process (``proc`` is then None and ``served`` holds it)."""

    url: str
    proc: subprocess.Popen[str] | None
    db: Path
    root: Path
    token: str = ""
    args: list[str] = field(default_factory=list)
    served: Any = None
    #: What a store on a thread logged (a process's log is on its stderr).
    log: list[str] = field(default_factory=list)

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
        if self.served is not None:
            served, self.served = self.served, None
            served.server.shutdown()
            served.server.server_close()
            served.engine.close()
            return
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                # Its output read meanwhile: a store whose pipe is full cannot finish writing and end.
                self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def _store_args(tmp: Path, args: tuple[str, ...], db: Path | None, root: Path | None
                ) -> tuple[list[str], Path, Path, str]:
    db = db or tmp / "store.db"
    root = root or tmp / "store-root"
    if "--token" not in args and "--read-token" not in args:
        args = ("--token", STORE_TOKEN, *args)
    token = ""
    for i, a in enumerate(args):
        if a == "--token":
            token = args[i + 1]
            break
    return ["--port", "0", "--db", str(db), "--root", str(root), *args], db, root, token


def start_store(tmp: Path, *args: str, db: Path | None = None, root: Path | None = None,
                process: bool = False) -> Store:
    """The reference store on a free port of 127.0.0.1, with a fresh database.

    On a thread of the test process (its real HTTP server) unless ``process``: a test that stops
    the store with a signal, kills it or reads what it prints asks for a process.
    """
    if process:
        return start_store_process(tmp, *args, db=db, root=root)
    from pooler.store.cli import open_store  # noqa: PLC0415 - the client side never needs it

    argv, db, root, token = _store_args(tmp, args, db, root)
    log: list[str] = []
    served = open_store(argv, log=log.append)
    serve_in_thread(served.server, name=f"store {served.server.url}")
    return Store(url=served.server.url, proc=None, db=db, root=root, token=token, args=list(args),
                 served=served, log=log)


def start_store_process(tmp: Path, *args: str, db: Path | None = None, root: Path | None = None) -> Store:
    """Start ``pooler store serve`` as a process and wait for the URL it prints first."""
    argv, db, root, token = _store_args(tmp, args, db, root)
    cmd = [sys.executable, "-m", "pooler", "store", "serve", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"store did not start: {url!r} {err}")
    return Store(url=url, proc=proc, db=db, root=root, token=token, args=list(args))


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without pooler's own variables and the terminal's size
    (pytest-xdist's workers set COLUMNS and LINES), and ``env`` over it."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("POOLER_") and k not in ("COLUMNS", "LINES")}
    full_env.update(env or {})
    return full_env


def pooler(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
           stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``pooler ARGS`` in the test's process, through ``main(argv, stdout=, stderr=, environ=)``:
    its exit status and what it wrote, as a process would have given them.

    For what belongs to a process (signals, kills, locks between processes, the terminal, the
    installed script) use ``pooler_process``. ``stdin`` and ``timeout`` are for that one; no
    command but ``pooler mcp`` reads its standard input.
    """
    from pooler.cli.main import main  # noqa: PLC0415

    assert stdin is None, "pooler(...) in process reads no stdin: use pooler_process"
    out, err = io.StringIO(), io.StringIO()
    here, before = Path.cwd(), dict(os.environ)
    environ = environment(env)
    os.chdir(cwd or ROOT)
    # The environment a process would have had, for what reads it without being handed it
    # (argparse's width from COLUMNS); put back as it was after.
    os.environ.clear()
    os.environ.update(environ)
    try:
        # Anything written to sys.stdout or sys.stderr (a warning) lands where a process's would.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args), stdout=out, stderr=err, environ=environ)
    finally:
        os.environ.clear()
        os.environ.update(before)
        os.chdir(here)
    return subprocess.CompletedProcess(["pooler", *args], code, out.getvalue(), err.getvalue())


def pooler_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                   stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pooler ARGS`` as a real process and capture what it prints."""
    return subprocess.run([sys.executable, "-m", "pooler", *args], capture_output=True, text=True,
                          env=environment(env), cwd=cwd or ROOT, input=stdin, timeout=timeout,
                          check=False)


def answer_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON document ``--json`` prints on stdout."""
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stand-in store of fixed behaviour on 127.0.0.1, for answers the reference store never gives."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    with serving(server):
        yield f"http://127.0.0.1:{server.server_address[1]}"


def busy_pool(folder: Path, rows: int) -> Path:
    """An adaptive pool of ``rows`` echoes with the default attempts: against a store run with
    ``--rate-limit``, it meets busy answers and gets through them (a busy answer uses no attempt)."""
    (folder / "rows.csv").write_text("n\n" + "".join(f"{n}\n" for n in range(rows)), encoding="utf-8")
    pool = folder / "busy.yaml"
    pool.write_text("mode: parallel\nmax_concurrency: 16\nadaptive: true\npool:\n"
                    "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, for_each: {file: rows.csv},\n"
                    "     params: {n: \"${row.n}\"}}\n", encoding="utf-8")
    return pool


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
