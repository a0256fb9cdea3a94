"""Prometheus' own ``promtool check metrics`` on every metrics file a test writes.

promtool comes with Debian's ``prometheus`` package.  Where it is missing, ``promtool()`` skips the
test that asks for it, saying so, and fails it instead under ``POOLER_REQUIRE_PROMTOOL=1`` (CI);
the check after each metrics test (``metrics_files_pass_promtool``) then checks nothing, and the
test that asks for promtool itself shows why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRE = "POOLER_REQUIRE_PROMTOOL"


def promtool() -> str:
    """promtool's path; else the test skips (or, required, fails) saying why."""
    found = shutil.which("promtool")
    if found is None:
        why = "promtool is not installed (apt-get install prometheus): metrics files were not checked by it"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1: {why}")
        pytest.skip(why)
    return found


def promtool_problems(path: Path, exe: str) -> str:
    """What ``promtool check metrics`` says of a metrics file: "" when it passes."""
    with path.open("rb") as text:
        done = subprocess.run([exe, "check", "metrics"], stdin=text, capture_output=True, timeout=60,
                              check=False)
    said = (done.stdout + done.stderr).decode(errors="replace").strip()
    return "" if done.returncode == 0 else f"{path}: exit {done.returncode}: {said}"


@pytest.fixture(autouse=True)
def metrics_files_pass_promtool(tmp_path: Path) -> Iterator[None]:
    """After the test, every ``*.prom`` file under its folder passes ``promtool check metrics``."""
    yield
    exe = shutil.which("promtool")
    if exe is None and os.environ.get(REQUIRE) != "1":
        return
    assert exe is not None, f"{REQUIRE}=1: promtool is not installed (apt-get install prometheus)"
    problems = [p for path in sorted(tmp_path.rglob("*.prom")) if (p := promtool_problems(path, exe))]
    assert problems == [], "\n".join(problems)
