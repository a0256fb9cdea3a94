"""The live view and the results table on a real pseudo-terminal, 80 and 160 columns wide.

Names are never broken across lines (``MELBIS_AGENT_STORE.Cm`` / ``dAdd``), no line is wider than
the terminal, the live count ends on the answer's total, and a Ctrl-C notice stays above the live
area instead of being drawn over.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from helpers import Store, on_terminal

COLOUR = re.compile(r"\x1b\[[0-9;]*m")
#: Cursor moves and carriage returns: what follows one is drawn from another place of the screen.
MOVE = re.compile(r"\x1b\[[0-9;?]*[A-Za-ln-z]|\x1b[()][A-Z0-9]|\r")
POOL = """\
pool:
  - {name: table, unit: MELBIS_AGENT_TEST, command: CmdTable, params: {rows: 5}}
  - name: each_row_of_the_table
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {step: table, table: rows}
    params: {sku: "S-${row.n}", name: "${row.text}"}
  - {name: refused, unit: MELBIS_AGENT_TEST, command: CmdFail}
"""


def run_on_terminal(store: Store, tmp_path: Path, columns: int, pool: Path,
                    interrupt_after: bytes | None = None) -> tuple[int, str]:
    return on_terminal(["run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                        "--journal", str(tmp_path / "j.sqlite")], store.token, columns,
                       interrupt_after=interrupt_after)


@pytest.mark.process
@pytest.mark.parametrize("columns", [80, 160])
def test_the_results_table_and_live_view_fit_the_terminal(store: Store, tmp_path: Path, columns: int) -> None:
    pool = tmp_path / "p.yaml"
    pool.write_text(POOL, encoding="utf-8")
    status, raw = run_on_terminal(store, tmp_path, columns, pool)
    assert status == 1
    text = MOVE.sub("\n", COLOUR.sub("", raw))
    lines = text.split("\n")
    assert max(len(line) for line in lines) <= columns, "\n".join(lines)
    # Every unit.command is whole on its line.
    for name in ("MELBIS_AGENT_TEST.CmdTable", "MELBIS_AGENT_STORE.CmdAdd", "MELBIS_AGENT_TEST.CmdFail"):
        assert re.search(rf"│ {re.escape(name)}\s*│", text), (name, text)
    assert "each_row_of_the_table" in text.replace("\n", "").replace("│", "").replace(" ", "")
    # The rows of the table were known only at run time: the count ends on the answer's 7 calls.
    counts = [re.search(r"(\d+)/(\d+)", line).groups() for line in lines  # type: ignore[union-attr]
              if line.startswith("calls") and re.search(r"\d+/\d+", line)]
    assert counts[-1] == ("7", "7"), counts
    # Never more calls done than the total shown.
    assert all(int(done) <= int(total) for done, total in counts), counts
    assert "pool partial: 7 calls: 6 succeeded, 1 failed, 0 skipped, 0 in doubt, 0 not run" in \
        " ".join(line.strip() for line in lines)


@pytest.mark.process
def test_a_ctrl_c_notice_prints_above_the_live_area(store_factory: object, tmp_path: Path) -> None:
    store: Store = store_factory("--latency-ms", "300")  # type: ignore[operator]
    pool = tmp_path / "slow.yaml"
    pool.write_text("pool:\n" + "".join(
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {{n: {n}}}}}\n" for n in range(30)),
        encoding="utf-8")
    started = time.monotonic()
    status, raw = run_on_terminal(store, tmp_path, 80, pool, interrupt_after=b"/30")
    assert status == 130
    assert time.monotonic() - started < 60
    text = MOVE.sub("\n", COLOUR.sub("", raw))
    # The notice has a line of its own, not one the next refresh of the bar overwrote.
    lines = [line.strip() for line in text.split("\n")]
    assert any(line.startswith("pooler: SIGINT: no new calls start") for line in lines), text
    assert "^Cpooler:" not in text
    assert "pooler: SIGINT: no new calls start; the calls in flight finish" in " ".join(text.split())
