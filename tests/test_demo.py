"""``python -m pooler.demo``, what ``make demo`` runs, end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import ROOT


def test_the_demo_runs_the_demo_pool_against_its_own_store(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLER_")}
    env["POOLER_DEMO_OUT"] = str(out)
    proc = subprocess.run([sys.executable, "-m", "pooler.demo"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    # The run is shown as an operator sees it; the answer is in its file, not 130 lines on the screen.
    assert proc.stdout == ""
    answer = json.loads((out / "answer.json").read_text())
    assert answer["result"] is True
    assert [s["name"] for s in answer["steps"]] == ["cur", "kettle", "check", "catalogue"]
    assert answer["steps"][1]["detail"]["row"]["curr_id"] == answer["steps"][0]["detail"]["id"]
    table = out / "tables" / "step4.MELBIS_AGENT_STORE.CmdList.goods.jsonl"
    assert answer["steps"][3]["tables"]["goods"]["file"] == str(table.absolute())
    assert json.loads(table.read_text())["sku"] == "KETTLE-1"
    assert "pooler demo: the reference store is up at http://127.0.0.1:" in proc.stderr
    assert "pool completed: 4 calls: 4 succeeded" in proc.stderr
    assert re.search(r"call 2/4 step 2 kettle MELBIS_AGENT_STORE\.CmdAdd completed \d+ ms", proc.stderr)
    assert "pooler demo: exit status 0" in proc.stderr
    assert f"pooler demo: the answer (JSON): {out / 'answer.json'}\n" in proc.stderr
    assert f"pooler demo: a table: {table}\n" in proc.stderr
    assert (f"pooler demo: the run again, from the journal: pooler show {answer['task']} --journal "
            f"{out / 'journal.sqlite'}\n") in proc.stderr
    assert len(proc.stderr.splitlines()) < 20
    # The store was stopped and its temporary folder removed.
    folder = proc.stderr.split("(its data lives in ", 1)[1].split(")", 1)[0]
    assert not Path(folder).exists()


def test_the_demo_takes_an_out_option(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLER_")}
    proc = subprocess.run([sys.executable, "-m", "pooler.demo", "--out", str(tmp_path / "elsewhere")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "elsewhere" / "journal.sqlite").is_file()
    assert "--help" not in proc.stderr


def test_make_demo_runs_the_demo_module() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "demo: $(STAMP)\n\t$(BIN)/python -m pooler.demo\n" in makefile
