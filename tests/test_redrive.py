"""``pooler redrive TASK`` the morning after: it tells its plan, sends once each call of the night
that did not land (failed, in doubt, not run) and nothing else, needs neither the pool file nor
the data files, and a second redrive of a task with nothing left sends nothing.  On either
journal, against the reference store, counting what the store carried out."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, environment, pooler, start_store
from sharedkit import journal_of, token_file

from pooler.run.lock import PoolLock, lock_dir
from pooler.store.faults import FaultPlan, Rule

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
ROWS = 12
#: The row whose currency the store lacks at night: it fails (the pool goes on).
BAD_ROW = 8
#: A seed under which the night's store resets the connection of some calls before row 8.
SEED = 11


def night(tmp_path: Path, store: Store, journal: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """The night's run of task ``t``: goods with currency 1, but row 8 with currency 2, which the
    store does not have yet (refused: proven not carried out); the pool goes on after a failure,
    and its last step, which reads the goods step's detail, is not run when that step is not
    completed."""
    folder = tmp_path / "pools"
    folder.mkdir(exist_ok=True)
    rows = "".join(f"G{i},Goods {i},{i}.50,{2 if i == BAD_ROW else 1}\n" for i in range(ROWS))
    (folder / "goods.csv").write_text("sku,name,price,curr_id\n" + rows)
    (folder / "pool.yaml").write_text(
        "stop_on_error: false\n"
        "pool:\n"
        "  - name: add\n"
        "    unit: MELBIS_AGENT_STORE\n"
        "    command: CmdAdd\n"
        "    for_each: {file: goods.csv}\n"
        "    key: goods-${row.sku}\n"
        "    params: {sku: '${row.sku}', name: '${row.name}', price: '${row.price}',\n"
        "             curr_id: '${row.curr_id}'}\n"
        "  - {name: tell, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {last: '@add.id'}}\n")
    proc = pooler("run", str(folder / "pool.yaml"), *store_args(tmp_path, store), "--journal", journal,
                  "--task", "t", "--json", "--out", str(tmp_path / "out"), *extra)
    return proc.returncode, json.loads(proc.stdout)


def store_args(tmp_path: Path, store: Store) -> list[str]:
    return ["--store", store.url, "--token-file", str(token_file(tmp_path / "secret", store))]


def redrive(tmp_path: Path, store: Store, journal: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return pooler("redrive", "t", *store_args(tmp_path, store), "--journal", journal, "--out",
                  str(tmp_path / "out"), *extra)


def adds(store: Store) -> Counter[str]:
    """How many times the store carried out CmdAdd for each sku."""
    return Counter(str(op["params"]["sku"]) for op in store.ops() if op["command"] == "CmdAdd"
                   and op["unit"] == "MELBIS_AGENT_STORE")


def goods(store: Store) -> Counter[str]:
    """The goods the store holds, by sku."""
    answer = store.call("MELBIS_AGENT_STORE", "CmdList").json()["data"]
    return Counter(str(r["sku"]) for r in answer["tables"]["goods"])


def faulty_night(tmp_path: Path, request: Any, kind: str) -> tuple[Store, str, dict[str, Any]]:
    """A night with calls failed, in doubt and not run; the store's faults and its lack fixed by
    the morning."""
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    assert store.call("MELBIS_AGENT_CURRENCY", "CmdAdd", {"skey": "USD", "name": "Dollar"}).json()["data"][
        "detail"] == {"id": 1}
    # At night the store carries some calls out and resets their connection before answering.
    store.served.server.faults = FaultPlan([Rule("reset", 0.3)], seed=SEED)
    code, answer = night(tmp_path, store, journal)
    assert code == 1
    # The morning: the store answers every call, and has the currency row 8 names.
    store.served.server.faults = None
    assert store.call("MELBIS_AGENT_CURRENCY", "CmdAdd", {"skey": "EUR", "name": "Euro"}).json()["data"][
        "detail"] == {"id": 2}
    return store, journal, answer


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_redrive_tells_its_plan_and_sends_once_each_call_of_the_night_that_did_not_land(
        kind: str, tmp_path: Path, request: Any) -> None:
    store, journal, answer = faulty_night(tmp_path, request, kind)
    doubted = sorted(int(e["row"]) for e in answer["in_doubt"])
    completed = ROWS - 1 - len(doubted)
    assert doubted
    assert BAD_ROW not in doubted
    assert answer["not_run"] == 1
    before = adds(store)
    # The pool file and the data file are not needed: the task keeps its pool and its rows.
    (tmp_path / "pools" / "pool.yaml").unlink()
    (tmp_path / "pools" / "goods.csv").unlink()
    plan = (f"task t: {completed} completed: kept; 1 failed: sent again; {len(doubted)} in doubt: sent "
            "again under their keys; 1 not run: sent")
    dry = redrive(tmp_path, store, journal, "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, plan + "\n")
    told = json.loads(redrive(tmp_path, store, journal, "--dry-run", "--json").stdout)
    assert adds(store) == before
    report = tmp_path / "report.html"
    proc = redrive(tmp_path, store, journal, "--json", "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    # The report tells the redrive as run 2 of the task, its call of row 8 as that call's second
    # attempt, after the one of run 1.
    html = report.read_text()
    assert 'id="run-2"' in html
    assert 'id="run-1"' in html
    assert f"row {BAD_ROW} · key goods-G{BAD_ROW}" in html
    assert "attempt 2 · attempt 1 in run 1" in html
    assert f"pooler: redrive of {plan}\n" in proc.stderr
    done = json.loads(proc.stdout)
    assert (done["result"], done["status"]) == (True, "completed")
    # The answer carries the plan it was sent by, as the dry run told it.
    assert done["redrive"] == told["redrive"]
    assert told["redrive"]["failed"] == {"sent": 1, "kept": 0}
    # Every row in the store once: the failed and the unsent ones were carried out now, the ones
    # in doubt were answered by their keys (carried out at night, not again).
    assert goods(store) == Counter(f"G{i}" for i in range(ROWS))
    sent = adds(store) - before
    assert sent == Counter([f"G{BAD_ROW}"])
    # The last step read the detail of the step's last row (G11, id 11: G8 was added after it).
    assert [op["params"] for op in store.ops() if op["command"] == "CmdEcho"] == [{"last": ROWS - 1}]
    # The failed call went out under its next key round.
    keys = [op["idempotency_key"] for op in store.ops() if op["params"].get("sku") == f"G{BAD_ROW}"]
    assert keys == [f"t:goods-G{BAD_ROW}", f"t:goods-G{BAD_ROW}/2"]
    again = redrive(tmp_path, store, journal)
    assert (again.returncode, again.stdout) == (
        0, f"task t: {ROWS + 1} completed: kept - nothing to redrive, nothing sent\n")
    assert adds(store) - before == sent


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_redrive_sends_only_the_kinds_steps_and_rows_it_is_given(
        kind: str, tmp_path: Path, request: Any) -> None:
    store, journal, answer = faulty_night(tmp_path, request, kind)
    doubted = sorted(int(e["row"]) for e in answer["in_doubt"])
    before = adds(store)
    proc = redrive(tmp_path, store, journal, "--only", "failed", "--step", "add")
    assert proc.returncode == 1, proc.stderr
    assert adds(store) - before == Counter([f"G{BAD_ROW}"])
    # What it left is there for the next one; only the rows it names go now (the last step's one
    # call has no rows).
    row = doubted[0]
    dry = redrive(tmp_path, store, journal, "--dry-run", "--only", "in-doubt,not-run", "--rows",
                  f"{row}-{row}")
    kept = len(doubted) - 1
    sends = f"1 sent again under their keys, {kept} kept" if kept else "sent again under their keys"
    assert dry.stdout == (f"task t: {ROWS - len(doubted)} completed: kept; {len(doubted)} in doubt: {sends}; "
                          "1 not run: kept\n")
    proc = redrive(tmp_path, store, journal, "--only", "in-doubt", "--rows", f"{row}-{row}", "--json")
    done = json.loads(proc.stdout)
    assert sorted(int(e["row"]) for e in done["in_doubt"] if e.get("action") != "retried") == doubted[1:]
    assert adds(store) - before == Counter([f"G{BAD_ROW}"])


def test_a_redrive_tells_a_pool_file_changed_since_and_runs_the_steps_the_task_was_planned_with(
        tmp_path: Path, store: Store) -> None:
    journal = str(tmp_path / "journal.db")
    code, _ = night(tmp_path, store, journal)
    assert code == 1
    pool = tmp_path / "pools" / "pool.yaml"
    pool.write_text(pool.read_text().replace("CmdAdd", "CmdGet"))
    proc = redrive(tmp_path, store, journal, "--dry-run")
    assert proc.returncode == 0
    assert proc.stderr == (f"pooler: {pool.resolve()} changed since task t was planned; the redrive runs "
                           "the steps the task was planned with, as its journal keeps them.\n")


@pytest.mark.parametrize(("args", "message"), [
    (("redrive", "nope"),
     "pooler: the journal {journal} has no task nope - 'pooler runs' lists its tasks.\n"),
    (("redrive", "t", "--only", "failed,doubt"),
     ("pooler: --only failed,doubt: doubt is not a kind of call a redrive sends; write some of failed, "
     "in-doubt, not-run, separated by commas - did you mean in-doubt?\n")),
    (("redrive", "t", "--rows", "20-10"),
     ("pooler: --rows 20-10: write the rows as FIRST-LAST (like 10-20) or one row (like 10), numbered as "
     "the run's lines number them\n")),
    (("redrive", "t", "--step", "ad"),
     ("pooler: --step ad: the task has no such step - give a step's name or its number (1 to 2) - did you "
     "mean add?\n")),
])
def test_a_redrive_refuses_what_it_cannot_do_with_one_message_and_sends_nothing(
        tmp_path: Path, store: Store, args: tuple[str, ...], message: str) -> None:
    journal = str(tmp_path / "journal.db")
    _code, _ = night(tmp_path, store, journal)
    before = adds(store)
    proc = pooler(*args, *store_args(tmp_path, store), "--journal", journal, "--out", str(tmp_path / "out"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", message.format(journal=journal))
    assert adds(store) == before


@pytest.mark.postgres
@pytest.mark.process
def test_two_runners_redriving_a_shared_task_at_once_send_each_call_once(
        tmp_path: Path, request: Any) -> None:
    store, journal, _ = faulty_night(tmp_path, request, "postgres")
    before = adds(store)
    cmd = [sys.executable, "-m", "pooler", "redrive", "t", *store_args(tmp_path, store), "--journal", journal,
           "--json"]
    procs = [subprocess.Popen([*cmd, "--out", str(tmp_path / f"out{i}")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=environment())
             for i in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    assert goods(store) == Counter(f"G{i}" for i in range(ROWS))
    assert adds(store) - before == Counter([f"G{BAD_ROW}"])
    assert len([op for op in store.ops() if op["command"] == "CmdEcho"]) == 1


def test_a_redrive_the_run_lock_refuses_tells_only_the_refusal_and_no_plan(
        tmp_path: Path, store: Store) -> None:
    journal = str(tmp_path / "journal.db")
    code, _ = night(tmp_path, store, journal)
    assert code == 1
    before = adds(store)
    pool = tmp_path / "pools" / "pool.yaml"
    # The test holds the task's pool lock, as a redrive that won the race would.
    with PoolLock(pool, lock_dir(os.environ)):
        lost = redrive(tmp_path, store, journal, "--json")
    assert lost.returncode == 3
    assert re.fullmatch(rf"pooler: another run of {re.escape(str(pool))} is running \(pid {os.getpid()}, "
                        r"started \S+\); this run sent nothing\.\n", lost.stderr), lost.stderr
    assert json.loads(lost.stdout)["status"] == "locked"
    assert adds(store) == before


@pytest.mark.process
def test_two_redrives_of_a_sqlite_task_started_together_send_each_call_once_and_the_loser_tells_no_plan(
        tmp_path: Path, request: Any) -> None:
    store, journal, _ = faulty_night(tmp_path, request, "sqlite")
    before = adds(store)
    cmd = [sys.executable, "-m", "pooler", "redrive", "t", *store_args(tmp_path, store), "--journal", journal,
           "--out", str(tmp_path / "out")]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env=environment()) for _ in range(2)]
    results = sorted((p.returncode, out, err) for p in procs for out, err in [p.communicate(timeout=120)])
    assert results[0][0] == 0, results
    code, out, err = results[1]
    if code == 3:
        # It lost the lock: the refusal alone, no plan.
        assert (out, re.fullmatch(r"pooler: another run of \S+ is running \(pid \d+, started \S+\); this run "
                                  r"sent nothing\.\n", err) is not None) == ("", True), err
    else:
        # It came after the other had ended: nothing left.
        assert (code, out.endswith(" - nothing to redrive, nothing sent\n")) == (0, True), (out, err)
    assert goods(store) == Counter(f"G{i}" for i in range(ROWS))
    assert adds(store) - before == Counter([f"G{BAD_ROW}"])
