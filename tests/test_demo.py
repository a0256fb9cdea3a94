"""``python -m pooler.demo``, what ``make demo`` runs, end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, environment


def test_the_demo_runs_the_demo_pool_against_its_own_store(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = environment()
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
    report = (out / "report.html").absolute()
    said = f"pooler demo: the run's report is {report} - open it in a browser (file://{report})."
    assert said in proc.stderr
    assert "<svg class=\"tl\"" in report.read_text(encoding="utf-8")
    # The store was stopped and its temporary folder removed.
    folder = proc.stderr.split("(its data lives in ", 1)[1].split(")", 1)[0]
    assert not Path(folder).exists()


def test_the_demo_takes_an_out_option(tmp_path: Path) -> None:
    env = environment()
    proc = subprocess.run([sys.executable, "-m", "pooler.demo", "--out", str(tmp_path / "elsewhere")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "elsewhere" / "journal.sqlite").is_file()
    assert "--help" not in proc.stderr


def test_make_demo_runs_the_demo_module() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "demo: $(STAMP)\n\t$(BIN)/python -m pooler.demo\n" in makefile


def test_the_demo_runs_from_the_package_as_the_wheel_lays_it_out(tmp_path: Path) -> None:
    """No repository around: the package folder with the files pyproject.toml adds to the wheel."""
    import shutil  # noqa: PLC0415
    tomllib = pytest.importorskip("tomllib")

    site = tmp_path / "site"
    shutil.copytree(ROOT / "pooler", site / "pooler", ignore=shutil.ignore_patterns("__pycache__", "data"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = project["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert extra["pools/demo.yaml"] == "pooler/data/demo.yaml"
    for source, target in extra.items():
        (site / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / source, site / target)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = environment()
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run([sys.executable, "-m", "pooler.demo", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"pooler run {site / 'pooler' / 'data' / 'demo.yaml'} --store" in proc.stderr
    answer = json.loads((tmp_path / "out" / "answer.json").read_text(encoding="utf-8"))
    assert answer["result"] is True
