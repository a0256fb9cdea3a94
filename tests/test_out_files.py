"""The files pooler writes under --out, driven through the real ``pooler`` command: a link planted
in place of a folder is refused, every table name gets a file of its own, and a job file holds each
call's rows once and whole after a SIGKILL halfway through writing them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, environment, pooler, send_answer, serve

TEST = "MELBIS_AGENT_TEST"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_tables_folder_that_is_a_link_is_refused_and_nothing_outside_changes(store: Store,
                                                                              tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl", "keep me\n")
    write(outside, "notes.txt", "mine\n")
    before = listing(outside)
    out = tmp_path / "out"
    out.mkdir()
    (out / "tables").symlink_to(outside)
    pool = write(tmp_path, "pool.yaml",
                 f"pool:\n  - {{unit: {TEST}, command: CmdTable, params: {{rows: 2}}}}\n")
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(out),
                  "--journal", str(tmp_path / "journal.sqlite"), env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2, proc.stderr
    assert (f"pooler: {out / 'tables'} is a symbolic link - pooler never follows a link under --out; "
            "remove the link, or give another --out.") in proc.stderr
    assert store.ops() == []
    # pooler call sends its one call, and then refuses to write through the link.
    called = pooler("call", TEST, "CmdTable", "--params", '{"rows": 2}', "--store", store.url,
                    "--out", str(out), env={"POOLER_TOKEN": store.token})
    assert called.returncode != 0
    assert "is a symbolic link" in called.stderr
    assert listing(outside) == before


class CyrillicStore(BaseHTTPRequestHandler):
    """A Russian shop: its tables are named in Cyrillic, and two names differ only in a slash."""

    def do_POST(self) -> None:
        tables = {"товары": [{"sku": "ЧАЙ-1"}], "заказы": [{"id": 1}, {"id": 2}],
                  "a/b": [{"t": "slash"}], "a_b": [{"t": "underscore"}]}
        body = json.dumps({"ok": True, "ms": 1, "data": {"result": True, "message": "ok", "detail": {},
                                                         "tables": tables, "files": []}}).encode()
        send_answer(self, 200, "application/json", body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""


def test_every_table_name_gets_a_file_of_its_own(tmp_path: Path) -> None:
    pool = write(tmp_path, "pool.yaml", "pool:\n  - {unit: SHOP, command: CmdList, into: shop}\n")
    out = tmp_path / "out"
    with serve(CyrillicStore) as url:
        proc = pooler("run", str(pool), "--store", url, "--out", str(out), "--json",
                      "--journal", str(tmp_path / "journal.sqlite"), env={"POOLER_TOKEN": "t0ken-for-test"})
    assert proc.returncode == 0, proc.stderr
    tables = answer_of(proc)["steps"][0]["tables"]
    files = {name: Path(entry["file"]) for name, entry in tables.items()}
    jobs = {name: Path(entry["job"]) for name, entry in tables.items()}
    assert files["товары"].name == "step1.SHOP.CmdList.товары.jsonl"
    assert files["заказы"].name == "step1.SHOP.CmdList.заказы.jsonl"
    assert files["a_b"].name == "step1.SHOP.CmdList.a_b.jsonl"
    assert files["a/b"].name.startswith("step1.SHOP.CmdList.a_b~")
    assert jobs["заказы"] == out / "shop.заказы.jsonl"
    assert len(set(files.values())) == len(set(jobs.values())) == 4
    for name, entry in tables.items():
        assert files[name].parent == out / "tables"
        assert [json.loads(line) for line in files[name].read_text(encoding="utf-8").splitlines()] == \
            [json.loads(text) for text in entry["head"]]
        assert jobs[name].read_text(encoding="utf-8") == files[name].read_text(encoding="utf-8")


ROWS = 150_000
WIDTH = 300


def row_size(n: int) -> int:
    return len(f'{{"n":{n},"text":""}}\n') + WIDTH


@pytest.mark.process
def test_a_job_file_holds_each_calls_rows_once_after_a_kill_mid_table(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "pool.yaml", f"pool:\n  - {{unit: {TEST}, command: CmdTable, key: big, into: job,"
                                        f" params: {{rows: {ROWS}, width: {WIDTH}}}}}\n")
    out = tmp_path / "out"
    job = out / "job.rows.jsonl"
    full = sum(row_size(n) for n in range(1, ROWS + 1))
    env = environment()
    env["POOLER_TOKEN"] = store.token
    args = [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url, "--out", str(out),
            "--journal", str(tmp_path / "journal.sqlite"), "--task", "T", "--json"]
    killed_at = 0
    for _ in range(5):  # a kill that lands outside the writing of the rows is tried again
        job.unlink(missing_ok=True)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            size = job.stat().st_size if job.exists() else 0
            if size > 0:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
        proc.communicate(timeout=60)
        killed_at = job.stat().st_size if job.exists() else 0
        if 0 < killed_at < full:
            break
    assert 0 < killed_at < full, "the kill never landed while the rows were written"
    rerun = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr
    entry = json.loads(rerun.stdout)["steps"][0]
    assert entry["tables"]["rows"]["job_rows"] == ROWS
    numbers = [json.loads(line)["n"] for line in job.read_text(encoding="utf-8").splitlines()]
    assert numbers == list(range(1, ROWS + 1))
    # The store carried the command out once: the rerun's answer came from its Idempotency-Key.
    assert [op["command"] for op in store.ops()] == ["CmdTable"]
