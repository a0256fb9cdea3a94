"""A setting of the whole process (glibc's malloc arenas) is made by the commands that need it,
never by a library object: a program that makes a ``ToolRunClient`` keeps its malloc as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import ROOT, Store

#: Prints whether the arena cap was set in this process (``share_malloc_arenas`` runs once).
SET = ("from pooler.client.answer_budget import share_malloc_arenas\n"
       "print(share_malloc_arenas.cache_info().currsize)")


def python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, check=True)
    return proc.stdout.strip().splitlines()[-1]


def test_a_client_made_by_a_library_leaves_the_process_malloc_alone(store: Store) -> None:
    made = ("from pooler.client.http import ToolRunClient\n"
            f"ToolRunClient({store.url!r}, {store.token!r}).close()\n" + SET)
    assert python(made) == "0"


def test_pooler_run_caps_the_malloc_arenas_of_its_threads(store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}}\n")
    token = tmp_path / "token"
    token.write_text(store.token)
    token.chmod(0o600)
    args = ["run", str(pool), "--store", store.url, "--token-file", str(token), "--out",
            str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite"), "--quiet"]
    ran = f"from pooler.cli.main import main\nassert main({args!r}) == 0\n" + SET
    assert python(ran) == "1"
