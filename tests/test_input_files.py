"""Input files that would hang or flood ``pooler check``: a named pipe named as a source, and an
error on a very long line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import pooler

TEST = "MELBIS_AGENT_TEST"


@pytest.mark.parametrize(("pool", "spot"), [
    ("pool_source: steps.fifo\n", "1:14"),
    (f"pool:\n  - unit: {TEST}\n    command: CmdEcho\n    params_source: steps.fifo\n", "4:20"),
])
def test_a_named_pipe_as_a_source_is_refused_before_it_is_opened(tmp_path: Path, pool: str,
                                                                 spot: str) -> None:
    os.mkfifo(tmp_path / "steps.fifo")
    path = tmp_path / "pool.yaml"
    path.write_text(pool, encoding="utf-8")
    # Opening a pipe that nobody writes to blocks a plain reader forever: the timeout is the failure.
    proc = pooler("check", str(path), timeout=60)
    assert proc.returncode == 2
    fifo = tmp_path / "steps.fifo"
    refusal = f"{fifo} is a named pipe, not a file - name a regular file."
    assert proc.stdout.splitlines()[0] == f"{path}:{spot}: {refusal}"


def test_an_error_on_a_very_long_line_quotes_a_window_with_the_caret_on_the_spot(tmp_path: Path) -> None:
    step = {"unit": TEST, "command": "CmdEcho", "params": {"a": "x" * 100_000}, "bogus": 1, "tail": "y" * 500}
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"pool": [step]}), encoding="utf-8")
    proc = pooler("check", str(path))
    assert proc.returncode == 2
    head, quoted, caret = proc.stdout.splitlines()[:3]
    column = json.dumps({"pool": [step]}).index('"bogus"') + 1
    assert head.startswith(f"{path}:1:{column}: Unknown key [bogus] in step 1")
    assert len(quoted) < 200
    assert quoted.startswith("    1 | ...x")
    assert quoted.endswith("...")
    assert caret.endswith("^")
    assert quoted[len(caret) - 1:].startswith('"bogus": 1')
    assert len(proc.stdout) < 1000
