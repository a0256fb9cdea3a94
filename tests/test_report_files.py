"""The report and JUnit files without a browser: journals written before the timeline columns,
secrets, refusals, and a step over rows in JUnit."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from browser import Elements
from helpers import Store, answer_of, pooler
from junit_schema import jenkins_junit
from promcheck import metrics_files_pass_promtool  # noqa: F401 - autouse: each file passes promtool
from sharedkit import journal_of, start_runner, wait_for, write_pool
from test_keys_tasks import OLD_SCHEMA
from test_secrets import POOL, SECRET, TOKEN, assert_nowhere

from pooler.journal.sqlite.journal import Journal
from pooler.journal.sqlite.tasks import SqliteTaskJournal

__all__ = ["TOKEN"]  # the secret_store fixture reads the module's TOKEN

#: The journal's tables as the first releases wrote them, before the timeline columns.


def test_a_journal_written_before_the_timeline_still_gives_a_report(tmp_path: Path) -> None:
    journal = tmp_path / "old.sqlite"
    db = sqlite3.connect(journal)
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO tasks (id, pool_file, started, status) VALUES ('old', '/p.yaml', "
               "'2026-11-30T12:00:00.000', 'failed')")
    calls = [(0, "2026-11-30T12:00:00.100", "2026-11-30T12:00:00.300", "completed"),
             (1, "2026-11-30T12:00:00.150", "2026-11-30T12:00:00.250", "failed"),
             (2, "2026-11-30T12:00:00.310", "2026-11-30T12:00:00.400", "completed")]
    for row, sent, done, status in calls:
        db.execute("INSERT INTO calls (task, run, num, row, key, status, sent_at, done_at, result) "
                   "VALUES ('old', 1, 1, ?, ?, ?, ?, ?, ?)",
                   (row, f"k{row}", status, sent, done,
                    f'{{"num":1,"name":"add","unit":"U","command":"CmdAdd","row":{row},"message":"m{row}"}}'))
    db.commit()
    db.close()
    report = tmp_path / "report.html"
    proc = pooler("show", "old", "--journal", str(journal), "--html", str(report))
    assert proc.returncode == 0, proc.stderr
    page = Elements(report.read_text(encoding="utf-8"))
    # Two calls overlapped: two slots, worked out from the stamps; the third reuses the first.
    assert [b["data-lane"] for b in page.having("rect", "bar")] == ["1", "2", "1"]
    assert [b["class"] for b in page.having("rect", "bar")] == ["tip bar completed", "tip bar failed",
                                                                "tip bar completed"]
    assert "m1" in page.all_text()
    columns = {r[1] for r in sqlite3.connect(journal).execute("PRAGMA table_info(calls)")}
    assert {"lane", "serial", "sent_ms", "done_ms"} <= columns
    assert pooler("runs", "--journal", str(journal)).returncode == 0


def test_the_report_and_junit_keep_secrets_masked(secret_store: Store, tmp_path: Path,
                                                  token_file: Path) -> None:
    pool = tmp_path / "secret.yaml"
    pool.write_text(POOL)
    files = tmp_path / "files"
    files.mkdir()
    proc = pooler("run", str(pool), "--store", secret_store.url, "--token-file", str(token_file),
                  "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite"),
                  "--no-stop-on-error", "--report", str(files / "r.html"), "--junit", str(files / "j.xml"),
                  "--json", env={"SHOP_SIGNATURE": SECRET})
    assert proc.returncode == 1, proc.stderr
    assert_nowhere([proc.stdout, proc.stderr], [files])
    jenkins_junit(files / "j.xml")
    task = answer_of(proc)["task"]
    again = files / "again.html"
    assert pooler("show", task, "--journal", str(tmp_path / "journal.sqlite"), "--html",
                  str(again)).returncode == 0
    assert_nowhere([], [files])
    assert "echo-***" in (files / "r.html").read_text(encoding="utf-8")


def test_show_html_of_a_task_the_journal_does_not_hold(tmp_path: Path, store: Store) -> None:
    journal = tmp_path / "journal.sqlite"
    pooler("run", "pools/demo.yaml", "--store", store.url, "--out", str(tmp_path / "out"), "--journal",
           str(journal), env={"POOLER_TOKEN": store.token})
    proc = pooler("show", "nope", "--journal", str(journal), "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"pooler: no task nope in the journal {journal} - 'pooler runs' lists "
                                   "the tasks it holds.")
    assert not (tmp_path / "r.html").exists()


def test_a_report_into_a_missing_folder_is_refused_before_anything_is_sent(store: Store,
                                                                          tmp_path: Path) -> None:
    for flag in ("--report", "--junit"):
        target = tmp_path / "no" / "such" / "file"
        proc = pooler("run", "pools/demo.yaml", "--store", store.url, "--out", str(tmp_path / "out"),
                      "--journal", str(tmp_path / "journal.sqlite"), flag, str(target),
                      env={"POOLER_TOKEN": store.token})
        assert proc.returncode == 2
        refusal = (f"pooler: {flag} {target}: the folder {target.parent} does not exist - create it, "
                   "or name a file in a folder that exists")
        assert proc.stderr.splitlines() == [refusal,
                                            "pooler: refused before the first step; nothing was sent."]
    assert store.ops() == []


def test_files_in_folders_inside_out_not_made_yet_are_written_there_and_outside_out_refused(
        store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = {"--report": out / "reports" / "x.html", "--junit": out / "ci" / "night.xml",
             "--metrics-file": out / "metrics" / "night.prom"}
    args = [a for flag, path in files.items() for a in (flag, str(path))]
    # --out does not exist yet either: pooler makes it, and the folders in it the files need.
    proc = pooler("run", "pools/demo.yaml", "--store", store.url, "--out", str(out),
                  "--journal", str(tmp_path / "journal.sqlite"), *args, env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 0, proc.stderr
    assert all(path.is_file() for path in files.values()), proc.stderr
    assert "<html" in files["--report"].read_text(encoding="utf-8")
    # A folder named through --out that climbs out of it is elsewhere: refused, nothing made.
    beside = out / ".." / "beside" / "x.html"
    proc = pooler("run", "pools/demo.yaml", "--store", store.url, "--out", str(out),
                  "--journal", str(tmp_path / "journal.sqlite"), "--report", str(beside),
                  env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        f"pooler: --report {beside}: the folder {beside.absolute().parent} does not exist - create it, or "
        "name a file in a folder that exists")
    assert not (tmp_path / "beside").exists()


def test_junit_of_a_step_over_rows_lists_its_failed_calls(store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("sku\nA\nB\nC\n", encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n"
                    "  - {name: first, unit: MELBIS_AGENT_TEST, command: CmdEcho}\n"
                    "  - name: each\n    unit: MELBIS_AGENT_TEST\n    command: CmdFail\n"
                    "    for_each: {file: rows.csv}\n"
                    "  - {name: after, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {x: '@each.y'}}\n",
                    encoding="utf-8")
    junit = tmp_path / "junit.xml"
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"), "--journal",
                  str(tmp_path / "journal.sqlite"), "--no-stop-on-error", "--junit", str(junit),
                  env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 1, proc.stderr
    suite = jenkins_junit(junit).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    first, each, after = suite.iter("testcase")
    assert first.find("failure") is None
    assert first.find("skipped") is None
    failure = each.find("failure")
    assert failure is not None
    assert failure.get("type") == "failed"
    lines = (failure.text or "").splitlines()
    assert [line.split(":")[0] for line in lines[1:]] == ["row 0", "row 1", "row 2"]
    skipped = after.find("skipped")
    assert skipped is not None
    assert "@each" in (skipped.get("message") or "")


def history(path: Path, task: str, calls: list[dict[str, Any]], facts: dict[str, Any] | None = None) -> None:
    """A journal holding ``task`` and the records of its calls, as the runs that made them left
    them: a call ``sent`` has no answer recorded (its run was killed)."""
    Journal(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO tasks (id, pool_file, started, status, runs) VALUES (?, ?, ?, 'running', 1)",
                   (task, str(path.parent / "p.yaml"), "2026-12-01T00:00:00.000"))
        for call in calls:
            db.execute("INSERT INTO calls (task, run, num, row, key, step_id, status, lane, sent_ms, "
                       "done_ms, result) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (task, call["num"], call["row"], call.get("key"), call["step_id"], call["status"],
                        call["lane"], call.get("sent_ms"), call.get("done_ms"),
                        json.dumps(call["entry"]) if "entry" in call else None))
    with SqliteTaskJournal(path) as journal:
        journal.record_run(task, facts or {})


def test_a_killed_run_reports_its_unanswered_call_in_doubt(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    now = int(time.time() * 1000)
    history(path, "killed", [
        {"num": 1, "row": 0, "step_id": "killed-1-0-1", "status": "completed", "lane": 0, "sent_ms": now,
         "done_ms": now, "entry": {"num": 1, "row": 0, "message": "added"}},
        {"num": 1, "row": 1, "key": "k1", "step_id": "killed-1-1-1", "status": "sent", "lane": 1,
         "sent_ms": now}],
        {"store": "http://127.0.0.1:9", "mode": "parallel", "width": 2,
         "steps": [{"num": 1, "name": "add", "unit": "U", "command": "CmdAdd", "over_rows": True}]})
    report = tmp_path / "r.html"
    proc = pooler("show", "killed", "--journal", str(path), "--html", str(report))
    assert proc.returncode == 0, proc.stderr
    page = Elements(report.read_text(encoding="utf-8"))
    text = " ".join(page.all_text().split())
    assert "1 call in doubt" in text
    assert "not finished (still running, or killed)" in text
    assert [(b["data-lane"], b["class"]) for b in page.having("rect", "bar")] == [
        ("1", "tip bar completed"), ("2", "tip bar in_doubt")]
    assert any("answered no answer recorded" in t for t in page.titles)


def test_a_few_calls_within_one_millisecond_stay_bars_with_their_details(tmp_path: Path) -> None:
    # The journal keeps milliseconds: quick calls of a quick run have no width at all.  Added up
    # into cells, they lost their hover details; a few of them are still drawn one bar each.
    path = tmp_path / "journal.sqlite"
    history(path, "quick", [
        {"num": 1, "row": row, "key": f"k{row}", "step_id": f"quick-1-{row}-1", "status": "completed",
         "lane": row % 2, "sent_ms": 1000, "done_ms": 1000,
         "entry": {"num": 1, "row": row, "message": f"added {row}"}} for row in range(3)])
    report = tmp_path / "r.html"
    assert pooler("show", "quick", "--journal", str(path), "--html", str(report)).returncode == 0
    page = Elements(report.read_text(encoding="utf-8"))
    assert page.having("svg", "tl", data_mode="bars")
    assert len(page.having("rect", "bar")) == 3
    shown = sorted(t.rsplit("\n", 1)[-1] for t in page.titles if "key k" in t)
    assert shown == ["added 0", "added 1", "added 2"]


def test_a_task_run_twice_shows_each_run_newest_first(store_factory: Any, tmp_path: Path) -> None:
    faulty = store_factory("--fault", "reset:1")
    args = ["--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite"), "--task", "twice",
            "--report", str(tmp_path / "r.html")]
    first = pooler("run", "pools/demo.yaml", "--store", faulty.url, *args, env={"POOLER_TOKEN": faulty.token})
    assert first.returncode == 1, first.stderr
    faulty.stop()
    good = store_factory("--port", faulty.port)  # a task belongs to its store: the same address
    again = pooler("run", "pools/demo.yaml", "--store", good.url, *args, "--in-doubt", "retry",
                   env={"POOLER_TOKEN": faulty.token})
    assert again.returncode == 0, again.stderr
    page = Elements((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert [s["id"] for s in page.having("section", "run")] == ["run-2", "run-1"]
    assert "Run 2 (the latest)" in page.all_text()
    assert page.having("section", id="in-doubt") == []


@pytest.mark.process
@pytest.mark.parametrize("kind", [pytest.param("sqlite", id="sqlite"),
                                  pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)])
def test_the_report_of_a_task_killed_with_sigkill_tells_it_dead_with_the_counts_runs_and_show_give(
        kind: str, store: Store, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    pool = write_pool(tmp_path / "pools", ["pool:"] + [
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {{ms: {100 + i}}}, key: k{i}}}"
        for i in range(30)])
    runner = start_runner(pool, store, journal, "t", tmp_path / "out")
    wait_for(lambda: sum(op["command"] == "CmdSleep" for op in store.ops()) >= 3, running=[runner])
    runner.send_signal(signal.SIGKILL)
    runner.communicate(timeout=60)
    listed = json.loads(pooler("runs", "--journal", journal, "--json").stdout)["tasks"]
    assert [(t["id"], t["status"]) for t in listed] == [("t", "dead")]
    shown = answer_of(pooler("show", "t", "--journal", journal, "--json"))
    assert shown["not_run"] > 0
    report = tmp_path / "killed.html"
    proc = pooler("show", "t", "--journal", journal, "--html", str(report))
    assert proc.returncode == 0, proc.stderr
    page = Elements(report.read_text(encoding="utf-8"))
    [badge] = page.having("span", "badge")
    assert badge["class"] == "badge dead"
    text = " ".join(page.all_text().split())
    doubt = shown["calls_in_doubt"]
    assert (f"{shown['total']} in all: {shown['succeeded']} completed, {shown['failed'] - doubt} failed, "
            f"{doubt} in doubt, {shown['skipped']} skipped, {shown['not_run']} not run") in text, text
