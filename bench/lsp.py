"""The language server's start-up: ``pooler lsp`` started as an editor starts it, the time to its
answer to ``initialize``, and then the time from opening a generated 2,000-step pool (keys and
references on every step) to its diagnostics.

The pool has one slip at its end (a reference to a step that does not exist), so the diagnostics
are a real check's answer, not an empty list.  Targets: initialize <= 0.5 s from the process's
start; the diagnostics <= 2 s from didOpen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from common import BenchError, Sample, Work, alternate, fmt_run, fmt_s, pooler_cmd, secs, series, work
from generate import write_yaml_pool
from summary import Row, Settings, main_for

STEPS = 2_000
INIT_LIMIT_S = 0.5
CHECK_LIMIT_S = 2.0
TIMEOUT_S = 120.0


def send(stream: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps(message).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


def receive(stream: IO[bytes]) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise BenchError("pooler lsp closed its stdout")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
    message: dict[str, Any] = json.loads(stream.read(length))
    return message


def cpu_of(pid: int) -> float:
    """A live process's CPU seconds so far (user + system), from /proc; 0 where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def session(w: Work, pool: Path) -> Sample:
    """One server: started, initialized, the pool opened and its diagnostics read, then shut down."""
    start = time.monotonic()
    proc = subprocess.Popen([*pooler_cmd(), "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=w.env, cwd=pool.parent)
    if proc.stdin is None or proc.stdout is None:
        raise BenchError("pooler lsp started without its pipes")
    try:
        send(proc.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"processId": None, "rootUri": pool.parent.as_uri(), "capabilities": {}}})
        while "id" not in receive(proc.stdout):
            pass
        initialized, init_cpu = time.monotonic() - start, cpu_of(proc.pid)
        send(proc.stdin, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        opened = time.monotonic()
        send(proc.stdin, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": pool.as_uri(), "languageId": "yaml", "version": 1, "text": pool.read_text("utf-8")}}})
        while True:
            message = receive(proc.stdout)
            if message.get("method") == "textDocument/publishDiagnostics" \
                    and message["params"]["uri"] == pool.as_uri():
                break
        checked, check_cpu = time.monotonic() - opened, cpu_of(proc.pid) - init_cpu
        if len(message["params"]["diagnostics"]) != 1:
            raise BenchError(f"expected the one slip of the pool, got {message['params']['diagnostics']}")
        send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None})
        while receive(proc.stdout).get("id") != 2:
            pass
        send(proc.stdin, {"jsonrpc": "2.0", "method": "exit", "params": None})
        status = proc.wait(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    return Sample(time.monotonic() - start, status, 0.0,
                  extra={"initialize": initialized, "check": checked, "initialize_cpu": init_cpu,
                         "check_cpu": check_cpu})


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("lsp") as w:
        pool = write_yaml_pool(w.tmp / "big.yaml", STEPS)
        with pool.open("a", encoding="utf-8") as out:
            out.write("  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n    params: {n: \"@nosuch.n\"}\n")
        samples = alternate({"lsp": lambda: session(w, pool)}, settings.runs)["lsp"]
    rows = []
    for what, limit, label in (("initialize", INIT_LIMIT_S, "answer to initialize, from the start"),
                               ("check", CHECK_LIMIT_S, f"diagnostics of {STEPS:,} steps, from didOpen")):
        timed = [Sample(s.extra[what], s.status, s.extra[f"{what}_cpu"]) for s in samples]
        t = secs(timed)
        rows.append(Row(f"pooler lsp: {label}", fmt_run(timed), f"limit {fmt_s(limit)}", t / limit,
                        f"≤ {limit:g} s", t <= limit, series(timed)))
    notes = [("The CPU time beside each is the server's own (from /proc): on a busy machine the wall time "
              "stretches far beyond it, and an idle machine's wall time is about the CPU time. Most of "
              "initialize's is importing lsprotocol's types (pygls's protocol classes).")]
    return rows, notes


if __name__ == "__main__":
    sys.exit(main_for("lsp", __doc__ or "", case))
