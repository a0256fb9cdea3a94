"""Runners of a shared task (PostgreSQL journal) each write their own metrics file: its series carry
the file's name as ``runner``, and its counters count that runner's calls, so the files add up to
the task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import Store
from promcheck import metrics_files_pass_promtool  # noqa: F401 - autouse: each file passes promtool
from sharedkit import finish, query, start_runner, wait_for, write_pool
from test_metrics_file import samples_of, value

from pooler.journal.postgres.schema import upgrade

pytestmark = pytest.mark.postgres


@pytest.mark.process
def test_two_runners_of_a_task_write_two_files_that_add_up_to_the_task(
        store: Store, pg_url: str, tmp_path: Path) -> None:
    upgrade(pg_url)
    data = tmp_path / "a" / "data" / "rows.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text("".join(json.dumps({"ms": 20 + i}) + "\n" for i in range(30)))
    pool = write_pool(tmp_path / "a", [
        "mode: parallel", "max_concurrency: 6", "pool:",
        "  - {unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {ms: '${row.ms}'}, key: 'op-${row.ms}',",
        "     for_each: {file: data/rows.jsonl}}"])
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    first = start_runner(pool, store, pg_url, "t", tmp_path / "out-a", "--width", "3",
                         "--metrics-file", str(textfile / "import-a.prom"))
    wait_for(lambda: bool(query(pg_url, "SELECT 1 FROM tasks WHERE id = 't'")))
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy(pool, other / "pool.yaml")
    second = start_runner(other / "pool.yaml", store, pg_url, "t", tmp_path / "out-b", "--width", "3",
                          "--metrics-file", str(textfile / "import-b.prom"), cwd=other)
    (code_a, _, err_a), (code_b, _, err_b) = finish(first), finish(second)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    a = samples_of((textfile / "import-a.prom").read_text(encoding="utf-8"))
    b = samples_of((textfile / "import-b.prom").read_text(encoding="utf-8"))
    assert {dict(ls)["runner"] for _, ls in a} == {"import-a"}
    assert {dict(ls)["runner"] for _, ls in b} == {"import-b"}
    done_a = value(a, "pooler_calls_total", status="completed")
    done_b = value(b, "pooler_calls_total", status="completed")
    assert done_a + done_b == 30
    assert value(a, "pooler_rows_total", status="completed") == done_a
    assert value(a, "pooler_run_success") == value(b, "pooler_run_success") == 1
