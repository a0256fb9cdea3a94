"""A real PostgreSQL server for the cases that measure the PostgreSQL journal (started in a
temporary folder, as the tests start it), and a fresh journal database in it for each run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from common import PYTHON, ROOT, BenchError, Work, pooler_cmd

sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PgServer, start_server


def server() -> PgServer:
    try:
        return start_server()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        raise BenchError(f"no PostgreSQL to measure with: {exc}") from exc


def database(found: PgServer, w: Work, label: str = "db", tree: Path | None = None) -> str:
    """A new database made a journal by ``pooler journal upgrade``: its URL.  With ``tree`` (an
    earlier tree's folder), that tree's pooler makes it, at that tree's schema version."""
    url = found.new_database(f"bench_{w.fresh(label).name.replace('-', '_')}")
    # ``python -m`` puts its working folder first on the path: the earlier tree's, there.
    command = pooler_cmd() if tree is None else [PYTHON, "-m", "pooler"]
    done = subprocess.run([*command, "journal", "upgrade", "--journal", url], env=w.env, cwd=tree,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"pooler journal upgrade failed: {done.stderr}")
    return url


def server_cpu(found: PgServer) -> float:
    """The CPU seconds (user + system) the server has spent so far: the postmaster's own, those of
    its children that have ended (counted into it when it reaped them) and those of its live ones
    (the backends, the checkpointer...), read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        master = int((found.folder / "data" / "postmaster.pid").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
        except OSError:
            continue  # a process that ended meanwhile
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == master:
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        elif ppid == master:
            total += int(fields[11]) + int(fields[12])
    return total / tick
