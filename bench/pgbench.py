"""A real PostgreSQL server for the cases that measure the PostgreSQL journal (started in a
temporary folder, as the tests start it), and a fresh journal database in it for each run."""

from __future__ import annotations

import subprocess
import sys

from common import ROOT, BenchError, Work, pooler_cmd

sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PgServer, start_server


def server() -> PgServer:
    try:
        return start_server()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        raise BenchError(f"no PostgreSQL to measure with: {exc}") from exc


def database(found: PgServer, w: Work, label: str = "db") -> str:
    """A new database made a journal by ``pooler journal upgrade``: its URL."""
    url = found.new_database(f"bench_{w.fresh(label).name.replace('-', '_')}")
    done = subprocess.run([*pooler_cmd(), "journal", "upgrade", "--journal", url], env=w.env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"pooler journal upgrade failed: {done.stderr}")
    return url
