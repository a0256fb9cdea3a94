"""The live view in a real terminal: an interactive shell in tmux, 80 and 120 columns wide.

What a person sees is what tmux's screen holds after the run (``capture-pane``): every character of
every message is there, the call count is never cut, a one-step pool has one bar, and a terminal
narrower than 80 columns gets the plain lines.  Skipped without tmux, unless POOLER_REQUIRE_TMUX=1.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, busy_pool, start_store

REQUIRE = "POOLER_REQUIRE_TMUX"
#: The run's end: its summary line (the live view's or a plain one), then the shell's prompt.
SUMMARY = re.compile(r"pool (completed|partial|failed)\b[\s\S]*^\$( |$)", re.M)


@dataclass
class Terminal:
    """An interactive shell in a tmux window of its own server (its own socket)."""

    socket: str
    columns: int

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=30, check=True)
        return done.stdout

    def screen(self) -> str:
        """Everything the window shows and has scrolled off, as its lines."""
        # -J: a line the terminal wrapped comes back whole, so one written past the edge shows.
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-E", "-")

    def wait_for(self, pattern: re.Pattern[str], deadline: float = 90) -> str:
        """The screen once ``pattern`` is on it, polled until ``deadline`` seconds have passed."""
        end = time.monotonic() + deadline
        while True:
            text = self.screen()
            if pattern.search(text):
                return text
            assert time.monotonic() < end, f"not seen within {deadline} s: {pattern.pattern}\n{text}"
            time.sleep(0.05)

    def run(self, command: str) -> str:
        self.tmux("send-keys", "-t", "0", command, "Enter")
        return self.wait_for(SUMMARY)


@pytest.fixture
def terminal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if shutil.which("tmux") is None:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"tmux is not installed; {REQUIRE}=1 asks for the terminal tests")
        pytest.skip("the live view is not tried in a real terminal: tmux is not installed")
    started: list[Terminal] = []

    def make(columns: int) -> Terminal:
        term = Terminal(f"pooler-test-{uuid.uuid4().hex[:12]}", columns)
        shell = (f"env -i PATH={shlex.quote(os.environ.get('PATH', '/usr/bin:/bin'))} TERM=xterm-256color "
                 f"HOME={shlex.quote(str(tmp_path))} PS1='$ ' bash --norc --noprofile -i")
        subprocess.run(["tmux", "-L", term.socket, "new-session", "-d", "-x", str(columns), "-y", "40",
                        shell], check=True, timeout=30)
        started.append(term)
        term.wait_for(re.compile(r"^\$( |$)", re.M), 30)
        return term

    yield make
    for term in started:
        subprocess.run(["tmux", "-L", term.socket, "kill-server"], capture_output=True, timeout=30,
                       check=False)


POOL = """\
pool:
  - {name: nap, unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {ms: 200}}
  - name: each
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: rows.csv}
    params: {n: "${row.n}"}
  - {name: import_the_goods_now, unit: MELBIS_AGENT_IMPORT_GOODS, command: CmdAdd, params: {goods: []}}
  - {name: crash, unit: MELBIS_AGENT_TEST, command: CmdCrash}
  - {name: refused, unit: MELBIS_AGENT_CURRENCY, command: CmdAdd, params: {name: x, pos: lots}}
"""


def command(store: Store, tmp_path: Path, pool: Path, *extra: str) -> str:
    words = [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url, "--out",
             str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite"), *extra]
    return f"cd {shlex.quote(str(ROOT))} && POOLER_TOKEN={shlex.quote(store.token)} {shlex.join(words)}"


def bare(text: str) -> str:
    """Text without spaces, line ends and the table's rules: what is left of it on any layout."""
    return re.sub(r"[\s│┃━╇─]", "", text)


@pytest.mark.parametrize("columns", [80, 120])
def test_every_character_of_every_message_is_on_the_screen(terminal: Any, store: Store, tmp_path: Path,
                                                           columns: int) -> None:
    (tmp_path / "rows.csv").write_text("n\n" + "".join(f"{n}\n" for n in range(1000)), encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text(POOL, encoding="utf-8")
    answer = tmp_path / "answer.json"
    term = terminal(columns)
    screen = term.run(command(store, tmp_path, pool, "--no-stop-on-error", "--json") + f" > {answer}")
    lines = screen.splitlines()
    # What the run drew (the shell's echo of the typed command before it may wrap) fits the width.
    drawn = lines[next(i for i, line in enumerate(lines) if line.startswith("pool ")):]
    assert [line for line in drawn if len(line.rstrip()) > columns] == []
    messages = [str(step["message"]) for step in json.loads(answer.read_text())["steps"]]
    assert "Slept 200 ms" in messages
    assert any("CmdCrash failed" in m for m in messages)
    # Each message whole, in order, wherever the layout broke its lines.
    for message in messages:
        assert bare(message) in bare(screen), (message, screen)
    # The count of calls is never cut: 1,004 calls, every one shown at the end.
    assert any(re.search(r"\b1004/1004\b", line) for line in lines), screen
    assert "…" not in "".join(line for line in lines if "/1004" in line)


def test_a_one_step_pool_has_one_bar(terminal: Any, store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("n\n1\n2\n3\n", encoding="utf-8")
    pool = tmp_path / "one.yaml"
    pool.write_text("pool:\n  - name: nap\n    unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
                    "    for_each: {file: rows.csv}\n    params: {n: \"${row.n}\"}\n", encoding="utf-8")
    screen = terminal(80).run(command(store, tmp_path, pool))
    assert "rows of nap" not in screen
    assert re.search(r"^calls .*3/3", screen, re.M), screen


def test_below_80_columns_the_run_is_told_in_plain_lines(terminal: Any, store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "nap.yaml"
    pool.write_text("pool:\n  - {name: nap, unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {ms: 10}}\n",
                    encoding="utf-8")
    screen = terminal(72).run(command(store, tmp_path, pool))
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d call 1/1 step 1 nap MELBIS_AGENT_TEST\.CmdSleep "
                     r"completed", screen, re.M), screen
    assert "━" not in screen


def test_the_live_view_says_when_the_run_is_held_back_and_why(terminal: Any, tmp_path: Path) -> None:
    store = start_store(tmp_path, "--rate-limit", "10")
    try:
        pool = busy_pool(tmp_path, 40)
        screen = terminal(100).run(command(store, tmp_path, pool))
        # Above the bar, as it happens: the pause the store asked for, and the width cut back.
        assert re.search(r"^pausing every new call for [\d.]+ s: the store asked to wait \(Retry-After\)$",
                         screen, re.M), screen
        assert re.search(r"^throttling to \d+ at once: the store is busy; [\d.]+ calls a second$", screen,
                         re.M), screen
        assert re.search(r"^calls .*40/40", screen, re.M), screen
    finally:
        store.stop()
