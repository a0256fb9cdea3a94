"""Runners of one shared task as real ``pooler run`` processes, and what the journal holds of them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from helpers import ROOT, Store, environment, pooler


def env() -> dict[str, str]:
    return environment()


def write_pool(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pool = folder / "pool.yaml"
    pool.write_text("\n".join(lines) + "\n")
    return pool


def token_file(folder: Path, store: Store) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "token"
    path.write_text(store.token)
    path.chmod(0o600)
    return path


def start_runner(pool: Path, store: Store, url: str, task: str, out: Path, *extra: str,
                 cwd: Path | None = None, environ: dict[str, str] | None = None) -> subprocess.Popen[str]:
    token = token_file(out.parent / f"{out.name}-secret", store)
    cmd = [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url, "--token-file",
           str(token), "--journal", url, "--task", task, "--json", "--out", str(out), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd or ROOT, env={**env(), **(environ or {})})


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, dict[str, Any] | None, str]:
    out, err = proc.communicate(timeout=timeout)
    answer = json.loads(out) if out.strip() else None
    return proc.returncode, answer, err


def together(pool: Path, store: Store, url: str, task: str, folder: Path, count: int = 2
             ) -> list[tuple[int, dict[str, Any] | None, str]]:
    """``count`` runner processes of one task started at once, each with its own --out, to their end."""
    runners = [start_runner(pool, store, url, task, folder / f"out{i}") for i in range(count)]
    return [finish(proc) for proc in runners]


def query(url: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql, args).fetchall())


def wait_for(what: Callable[[], bool], timeout: float = 60, poll: float = 0.02,
             running: Sequence[subprocess.Popen[str]] = ()) -> None:
    """Until ``what()`` holds (a bounded loop over a condition, never a fixed sleep).  A runner of
    ``running`` that ends first fails the wait at once, with what it said: the condition may
    never hold without it, and its words say why."""
    end = time.monotonic() + timeout
    while not what():
        ended = [proc for proc in running if proc.poll() is not None]
        if ended:
            said = [f"runner {proc.pid} ended with {proc.returncode}: {finish(proc)[2].strip()}"
                    for proc in ended]
            raise AssertionError("a runner ended before the condition held\n" + "\n".join(said))
        if time.monotonic() > end:
            raise AssertionError("the condition was not reached in time")
        time.sleep(poll)


def _client_ports(pid: int) -> list[int]:
    """The local TCP ports of the sockets process ``pid`` holds (its journal connections among them)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def freeze(proc: subprocess.Popen[str], url: str, holds: Callable[[], bool] = lambda: True,
           timeout: float = 60) -> None:
    """SIGSTOP the runner ``proc`` at a moment none of its connections to the journal ``url`` is inside
    a transaction, and ``holds()`` is true.  A runner frozen inside one would hold the task's lock
    until it woke, and no other runner could join the task or take its calls back meanwhile: where
    a process freezes is up to the machine's scheduler, so the test picks the moment instead."""
    end = time.monotonic() + timeout
    states: list[str] = []

    def idle_states() -> list[str]:
        return [str(s) for (s,) in query(url, "SELECT state FROM pg_stat_activity WHERE client_port = "
                                              "ANY(%s)", (_client_ports(proc.pid),))]

    while True:
        wait_for(holds, timeout=max(0.0, end - time.monotonic()), running=(proc,))
        # Stopped only at a moment it was seen outside every transaction: on a loaded machine a
        # runner of a busy task may spend most of its time inside one, and a stop at a random
        # moment would rarely find it out.
        states = idle_states()
        if not all(s == "idle" for s in states):
            if time.monotonic() > end:
                raise AssertionError(f"the runner was never outside a transaction: {states}")
            continue
        proc.send_signal(signal.SIGSTOP)
        # A statement the server was running when the runner stopped ends on its own: then the
        # connection is idle, or idle inside its transaction. One stays active when the runner
        # stopped between the statements of a pipeline and the end of it: tried again.
        settle = min(end, time.monotonic() + 2.0)
        while True:
            states = idle_states()
            if "active" not in states or time.monotonic() > settle:
                break
            time.sleep(0.02)
        if states and all(s == "idle" for s in states) and holds():
            return
        proc.send_signal(signal.SIGCONT)
        if time.monotonic() > end:
            raise AssertionError(f"the runner was never outside a transaction when stopped: {states}")


def max_overlap(intervals: list[tuple[Any, Any]]) -> int:
    """The most intervals open at one moment."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals],
                    key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def journal_of(kind: str, request: Any, tmp_path: Path, name: str = "journal.db") -> str:
    """The journal a test parametrized over both backends runs on: a SQLite file in ``tmp_path``,
    or the test's PostgreSQL database (``pg_url``), its schema made."""
    if kind == "sqlite":
        return str(tmp_path / name)
    from pooler.journal.postgres.schema import upgrade  # noqa: PLC0415

    url: str = request.getfixturevalue("pg_url")
    upgrade(url)
    return url


def run_here(pool: Path, store: Store, journal: str, task: str, out: Path, *extra: str
             ) -> tuple[int, dict[str, Any], str]:
    """``pooler run POOL --task T --json`` in the test's process, with a token file: the exit
    status, the answer and what it said on stderr."""
    token = token_file(out.parent / f"{out.name}-secret", store)
    proc = pooler("run", str(pool), "--store", store.url, "--token-file", str(token), "--journal", journal,
                  "--task", task, "--json", "--out", str(out), *extra)
    return proc.returncode, json.loads(proc.stdout), proc.stderr
