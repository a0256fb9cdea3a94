"""An operator's night, through the real command against the real store: what the lines and the
answer say when a call goes in doubt, a run is killed, a resume would repeat work, and the journal
grows; and the small things a command says so nobody has to guess."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, environment, pooler, start_store, wait_for_ops


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run(store: Store, tmp_path: Path, pool: Path, *extra: str, token: str | None = None) -> Any:
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": token or store.token})


def start(store: Store, tmp_path: Path, pool: Path, *extra: str) -> subprocess.Popen[str]:
    env = environment()
    env["POOLER_TOKEN"] = store.token
    return subprocess.Popen(
        [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url,
         "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)


def test_a_call_in_doubt_is_named_in_this_run_and_counted_as_in_doubt(store_factory: Any,
                                                                      tmp_path: Path) -> None:
    store: Store = store_factory("--fault", "reset:1")
    pool = write(tmp_path, "p.yaml", "pool:\n  - {name: order, unit: MELBIS_AGENT_TEST, command: CmdEcho, "
                                     "key: order-1, params: {n: 1}}\n")
    proc = run(store, tmp_path, pool, "--task", "night-1", "--json")
    assert proc.returncode == 1
    answer = answer_of(proc)
    assert [(d["num"], d["key"], d["action"]) for d in answer["in_doubt"]] == [(1, "order-1", "left")]
    assert answer["calls_in_doubt"] == 1
    assert "pool failed: 1 call: 0 succeeded, 0 failed, 0 skipped, 1 in doubt, 0 not run" in proc.stderr


def test_a_resent_call_says_it_was_sent_again(store_factory: Any, tmp_path: Path) -> None:
    lossy: Store = store_factory("--no-idempotency", "--fault", "reset:1")
    pool = write(tmp_path, "p.yaml", "pool:\n  - {name: order, unit: MELBIS_AGENT_TEST, command: CmdEcho, "
                                     "key: order-1, params: {n: 1}}\n")
    first = run(lossy, tmp_path, pool, "--task", "night-2")
    assert first.returncode == 1
    lossy.stop()
    plain: Store = store_factory("--no-idempotency", "--port", lossy.port, db=lossy.db, root=lossy.root)
    again = run(plain, tmp_path, pool, "--task", "night-2", "--in-doubt", "retry")
    assert again.returncode == 0, again.stderr
    line = next(x for x in again.stdout.splitlines() if " call 1/1 " in x)
    assert ("key order-1 (sent again: the call night-2-1-1 was in doubt; a store that ignores "
            "Idempotency-Key may have carried it out twice)") in line


def test_the_resume_hint_says_what_a_resume_repeats(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "p.yaml", """\
pool:
  - {name: cur, unit: MELBIS_AGENT_CURRENCY, command: CmdAdd, params: {skey: CZK, name: Koruna}}
  - {name: bad, unit: MELBIS_AGENT_TEST, command: CmdFail}
""")
    proc = run(store, tmp_path, pool, "--task", "night-3")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].endswith(
        "; to continue: --task night-3 --resume (it sends again the unkeyed step already done: 1 cur; "
        "give it a key to have it skipped)")
    denied = run(store, tmp_path, pool, "--task", "night-4", token="not-the-token")
    assert denied.returncode == 1
    assert denied.stdout.splitlines()[-1].endswith(
        "; the store refused the token (ACCESS_DENIED): a resume would meet the same refusal - fix the "
        "token, then continue with --task night-4 --resume")


@pytest.mark.process
def test_a_killed_run_is_told_dead_and_shows_its_partial_answer(store_factory: Any, tmp_path: Path) -> None:
    store: Store = store_factory("--latency-ms", "100")
    pool = write(tmp_path, "long.yaml", "pool:\n" + "".join(
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, key: k{n}, params: {{n: {n}}}}}\n"
        for n in range(40)))
    proc = start(store, tmp_path, pool, "--task", "night-5")
    try:
        wait_for_ops(store, 2, proc)
        alive = pooler("runs", "--journal", str(tmp_path / "journal.sqlite"), "--json")
        assert [t["status"] for t in answer_of(alive)["tasks"]] == ["running"]
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    listed = pooler("runs", "--journal", str(tmp_path / "journal.sqlite"))
    assert listed.returncode == 0
    assert listed.stdout.startswith("night-5  dead ")
    shown = pooler("show", "night-5", "--journal", str(tmp_path / "journal.sqlite"), "--json")
    assert shown.returncode == 0, shown.stderr
    answer = answer_of(shown)
    done = len(store.ops())
    assert answer["interrupted"] == "the run died before it finished (killed, or the machine went down)"
    assert answer["succeeded"] in (done - 1, done)  # the call in flight may have landed unrecorded
    # The plan's 40 calls: those recorded done, the one left in flight (if any) in doubt, the rest not run.
    assert answer["total"] == 40
    assert answer["calls_in_doubt"] in (0, 1)
    assert answer["succeeded"] + answer["calls_in_doubt"] + answer["not_run"] == answer["total"]
    assert [i["action"] for i in answer["in_doubt"]] == ["left"] * answer["calls_in_doubt"]
    plain = pooler("show", "night-5", "--journal", str(tmp_path / "journal.sqlite"))
    assert "(the run died before it finished (killed, or the machine went down))" in plain.stdout
    # It can be resumed: the keys that landed are skipped.
    resumed = run(store, tmp_path, pool, "--task", "night-5", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert len(store.ops()) == 40


@pytest.mark.process
def test_a_step_over_rows_cut_by_a_signal_is_partial(store_factory: Any, tmp_path: Path) -> None:
    store: Store = store_factory("--latency-ms", "50")
    write(tmp_path, "goods.csv", "sku\n" + "".join(f"S-{n}\n" for n in range(200)))
    pool = write(tmp_path, "rows.yaml",
                 "pool:\n  - name: add\n    unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
                 "    for_each: {file: goods.csv}\n    params: {sku: \"${row.sku}\"}\n")
    proc = start(store, tmp_path, pool, "--json")
    wait_for_ops(store, 3, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    step = json.loads(out)["steps"][0]
    assert step["status"] == "partial"
    assert step["rows"]["completed"] >= 3
    assert step["rows"]["not_run"] == 200 - step["rows"]["completed"]


def test_small_things_are_said(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "p.yaml", "pool:\n  - {name: echo, unit: MELBIS_AGENT_TEST, command: CmdEcho}\n")
    resumed = run(store, tmp_path, pool, "--resume")
    assert resumed.returncode == 0
    assert (f"pooler: --resume: no unfinished task of {pool} in the journal; this run starts a new task."
            in resumed.stderr)
    wide = run(store, tmp_path, pool, "--max-concurrency", "8")
    assert (f"pooler: --max-concurrency 8 has no effect: {pool} runs in mode sequential, one call at a "
            "time - add --mode parallel to run calls side by side.") in wide.stderr
    assert "1 call: 1 succeeded" in wide.stdout
    fresh = pooler("runs", env={"XDG_STATE_HOME": str(tmp_path / "fresh")})
    assert (fresh.returncode, fresh.stdout) == (0, "no tasks in the journal yet\n")
    helped = pooler("run", "--help", env={"COLUMNS": "200"})
    for default in ("default ./out", "default 60 s, and 5 s to connect", "default retry",
                    "sequential (default)", "default 4, at most 16", "default: on",
                    "default $XDG_STATE_HOME/pooler/journal.sqlite"):
        assert default in helped.stdout, default


@pytest.mark.process
def test_prune_removes_old_finished_tasks_and_never_a_running_one(store_factory: Any, tmp_path: Path) -> None:
    store: Store = store_factory("--latency-ms", "200")
    journal = tmp_path / "journal.sqlite"
    done = write(tmp_path, "done.yaml", "pool:\n" + "".join(
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {{n: {n}}}}}\n" for n in range(3)))
    for task in ("old-1", "old-2"):
        assert run(store, tmp_path, done, "--task", task).returncode == 0
    killed = write(tmp_path, "killed.yaml", "pool:\n" + "".join(
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {{n: {n}}}}}\n" for n in range(20)))
    proc = start(store, tmp_path, killed, "--task", "dead-1")
    wait_for_ops(store, 7, proc)
    proc.kill()
    proc.wait()
    kept = pooler("runs", "--prune", "--older-than", "30d", "--journal", str(journal), "--json")
    assert answer_of(kept)["removed_tasks"] == 0
    pruned = pooler("runs", "--prune", "--older-than", "0d", "--journal", str(journal))
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith(f"pruned {journal}: removed 2 tasks ended more than 0d ago (6 calls); "
                                    "1 task still running kept; ")
    left = answer_of(pooler("runs", "--journal", str(journal), "--json"))["tasks"]
    assert [(t["id"], t["status"]) for t in left] == [("dead-1", "dead")]
    # The plans of the pruned tasks (their work rows) go with them.
    db = sqlite3.connect(journal)
    try:
        assert db.execute("SELECT DISTINCT task FROM work").fetchall() == [("dead-1",)]
        # And every other row kept of them: their runs, for the report, and who ran them.
        for table in ("task_runs", "runs", "runners"):
            assert {t for (t,) in db.execute(f"SELECT DISTINCT task FROM {table}")} <= {"dead-1"}, table
    finally:
        db.close()
    bad = pooler("runs", "--prune", "--older-than", "a month", "--journal", str(journal))
    assert bad.returncode == 2
    assert "--older-than 'a month': give an age like 30d" in bad.stderr


def test_the_store_restarted_on_its_database_keeps_its_data(tmp_path: Path) -> None:
    # The fixture the resend test leans on: a store started again on the same files.
    first = start_store(tmp_path, "--no-idempotency")
    first.call("MELBIS_AGENT_TEST", "CmdEcho", {"n": 1})
    first.stop()
    second = start_store(tmp_path, "--no-idempotency", db=first.db, root=first.root)
    try:
        assert len(second.ops()) == 1
    finally:
        second.stop()
