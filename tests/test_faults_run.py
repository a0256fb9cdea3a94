"""``pooler run`` as a real process against a store that misbehaves (``--fault KIND:RATE``).

Every fault ends each call with exactly one status, says in one line what happened, leaves a
journal whose every call has one final status, and exits 1.  Whether a call is sent again follows
``retry``: a call that surely never reached the store is retried by default; one whose answer was
lost is retried only when it has a key and ``on_in_doubt: true``.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, STORE_TOKEN, Store, answer_of, environment, pooler, start_store

from pooler.client.http import ToolRunClient
from pooler.journal.records import FINAL_STATUSES
from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal
from pooler.pool.loader import load_pool
from pooler.run.config import RunConfig
from pooler.run.executor import run_pool
from pooler.store.faults import GARBAGE

TEST = "MELBIS_AGENT_TEST"
IN_DOUBT = "the call may or may not have been carried out"
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d \S")
CRASH_TEXT = "MELBIS_AGENT_TEST\\CmdEcho failed: the store broke down (injected fault: crash)"


def write_pool(folder: Path, steps: list[dict[str, Any]], **options: Any) -> Path:
    path = folder / "pool.json"
    path.write_text(json.dumps({**options, "pool": steps}), encoding="utf-8")
    return path


def echo(marker: str, **extra: Any) -> dict[str, Any]:
    return {"name": marker, "unit": TEST, "command": "CmdEcho", "params": {"m": marker}, **extra}


def run(store_url: str, tmp_path: Path, pool: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    token.chmod(0o600)
    return pooler("run", str(pool), "--store", store_url, "--token-file", str(token),
                  "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite"),
                  "--json", *extra)


def journal_rows(path: Path) -> list[dict[str, Any]]:
    """Every call record, read straight from the SQLite file (read-only)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT task, run, num, row, key, status FROM calls ORDER BY id")]


def assert_consistent(journal: Path, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Each call of the answer has exactly one record, with a final status equal to the answer's."""
    rows = journal_rows(journal)
    assert all(r["status"] in FINAL_STATUSES for r in rows), rows
    ids = Counter((r["task"], r["run"], r["num"], r["row"]) for r in rows)
    assert set(ids.values()) == {1}, ids
    recorded = {(r["num"], r["row"]): r["status"] for r in rows if r["task"] == answer["task"]}
    listed = {(e["num"], e.get("row")): e["status"] for e in answer["steps"]}
    assert recorded == listed
    counted = answer["succeeded"] + answer["failed"] + answer["skipped"] + answer["not_run"]
    assert counted == answer["total"]
    return rows


def ops_of(store: Store, marker: str) -> list[dict[str, Any]]:
    return [op for op in store.ops() if op["params"].get("m") == marker]


def step_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " call " in line[:30]]


@pytest.mark.parametrize(("kind", "status", "what", "ran"), [
    ("reset", "in_doubt", "closed the connection before answering", 1),
    ("truncate", "in_doubt", "cut its answer short", 1),
    # The store read the request and closed the connection without a word: from the outside that
    # cannot be told apart from a reset, so it is in doubt too (and the store ran nothing).
    ("refuse", "in_doubt", "closed the connection before answering", 0),
])
def test_a_lost_answer_is_in_doubt_in_one_line_naming_the_store(
        store_factory: Any, tmp_path: Path, kind: str, status: str, what: str, ran: int) -> None:
    store = store_factory("--fault", f"{kind}:1")
    pool = write_pool(tmp_path, [echo("first"), echo("second")])
    proc = run(store.url, tmp_path, pool)
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    message = f"the store at {store.url}/ {what}; {IN_DOUBT}"
    assert answer["steps"] == [{
        "num": 1, "name": "first", "unit": TEST, "command": "CmdEcho", "status": status, "key": None,
        "step_id": answer["steps"][0]["step_id"], "result": False, "message": message}]
    assert (answer["status"], answer["total"], answer["failed"], answer["not_run"]) == ("failed", 2, 1, 1)
    assert all(LINE.match(line) for line in proc.stderr.splitlines()), proc.stderr
    assert step_lines(proc.stderr)[0].endswith(f" first {TEST}.CmdEcho {status}: {message}")
    assert_consistent(tmp_path / "journal.sqlite", answer)
    assert len(ops_of(store, "first")) == ran
    assert ops_of(store, "second") == []


@pytest.mark.parametrize(("kind", "text", "ran"), [
    ("garbage", GARBAGE.decode(), 1),
    ("crash", CRASH_TEXT, 0),
])
def test_an_answer_that_is_not_json_is_in_doubt_with_the_stores_text(
        store_factory: Any, tmp_path: Path, kind: str, text: str, ran: int) -> None:
    store = store_factory("--fault", f"{kind}:1")
    pool = write_pool(tmp_path, [echo("first"), echo("second")], stop_on_error=False)
    proc = run(store.url, tmp_path, pool)
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    assert [(e["status"], e["result"], e["message"]) for e in answer["steps"]] == [
        ("in_doubt", False, text), ("in_doubt", False, text)]
    assert "detail" not in answer["steps"][0]
    assert (answer["status"], answer["failed"], answer["not_run"]) == ("failed", 2, 0)
    # A cron log keeps one line per event, even when the store's text has line breaks.
    assert all(LINE.match(line) for line in proc.stderr.splitlines()), proc.stderr
    assert len(step_lines(proc.stderr)) == 2
    assert_consistent(tmp_path / "journal.sqlite", answer)
    assert len(ops_of(store, "first")) == ran


def test_a_read_timeout_after_the_request_left_is_in_doubt(store_factory: Any, tmp_path: Path) -> None:
    store = store_factory("--fault", "slow:1", "--slow-ms", "20000")
    pool = write_pool(tmp_path, [echo("late", key="late-1")])
    proc = run(store.url, tmp_path, pool, "--timeout", "0.5")
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    entry = answer["steps"][0]
    assert (entry["status"], entry["message"]) == (
        "in_doubt", f"the store at {store.url}/ did not answer within 0.5 s; {IN_DOUBT}")
    assert_consistent(tmp_path / "journal.sqlite", answer)
    # The store did carry it out: that is why it is in doubt and not failed.
    assert len(ops_of(store, "late")) == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_refused_connection_is_retried_and_then_failed_never_sent(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    pool = write_pool(tmp_path, [echo("first"), echo("second")])
    proc = run(url, tmp_path, pool)
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    entry = answer["steps"][0]
    assert (entry["status"], entry["message"]) == (
        "failed", f"cannot reach the store at {url}/: connection refused")
    assert "step_id" not in entry
    assert_consistent(tmp_path / "journal.sqlite", answer)
    # Three tries by default, 200 ms and 400 ms apart (jitter at most -25%): the run took that long.
    assert answer["time"]["trip"] >= 450


@pytest.mark.process
def test_a_store_that_comes_up_during_the_backoff_gets_the_call(tmp_path: Path) -> None:
    """Never sent is always safe to send again: the retry reaches the store once it listens."""
    port = free_port()
    pool = write_pool(tmp_path, [echo("patient", retry={"attempts": 8, "backoff_ms": 500})])
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    token.chmod(0o600)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pooler", "run", str(pool), "--store", f"http://127.0.0.1:{port}",
         "--token-file", str(token), "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite"),
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=environment())
    assert proc.stderr is not None
    # The first line comes just before the first try, which finds nothing listening.
    first = proc.stderr.readline()
    assert " pool " in first
    store = None
    try:
        # A process, as a store coming up is: its start-up outlasts the run's first try, which a
        # store on a thread of this process would not.
        store = start_store(tmp_path / "late", "--port", str(port), process=True)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answer = json.loads(out)
        assert answer["steps"][0]["status"] == "completed"
        assert len(ops_of(store, "patient")) == 1
        # At least one backoff (500 ms, jitter at most -25%) passed before the call got through.
        assert answer["time"]["trip"] >= 375
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if store is not None:
            store.stop()


def seed_for(pattern: list[bool], rate: float) -> int:
    """The first seed whose draws fault (True) or pass (False) in this order."""
    for seed in range(10_000):
        rng = random.Random(seed)
        if [rng.random() < rate for _ in pattern] == pattern:
            return seed
    raise AssertionError("no seed found")


#: A lost answer, once: the store resets the connection, or answers after the client gave up.
LOST = {"reset": ([], []), "slow": (["--slow-ms", "10000"], ["--timeout", "2"])}


@pytest.mark.parametrize("kind", sorted(LOST))
def test_a_keyed_step_with_on_in_doubt_is_sent_again_and_runs_once(store_factory: Any, tmp_path: Path,
                                                                   kind: str) -> None:
    serve, client = LOST[kind]
    store = store_factory("--fault", f"{kind}:0.5", "--seed", str(seed_for([True, False], 0.5)), *serve)
    retry = {"attempts": 3, "backoff_ms": 10, "on_in_doubt": True}
    pool = write_pool(tmp_path, [echo("keyed", key="order-1", retry=retry)])
    proc = run(store.url, tmp_path, pool, "--task", "t1", *client)
    assert proc.returncode == 0, proc.stderr
    answer = answer_of(proc)
    assert answer["steps"][0]["status"] == "completed"
    assert answer["steps"][0]["detail"] == {"m": "keyed"}
    assert answer["in_doubt"] == [{"num": 1, "name": "keyed", "key": "order-1", "step_id": "t1-1-1",
                                   "action": "retried"}]
    assert_consistent(tmp_path / "journal.sqlite", answer)
    # Sent twice, carried out once: the repeat was answered from its Idempotency-Key.
    assert [op["idempotency_key"] for op in ops_of(store, "keyed")] == ["t1:order-1"]


@pytest.mark.parametrize(("kind", "key", "retry"), [
    ("reset", "order-1", None),
    ("reset", "order-1", {"attempts": 3, "backoff_ms": 10}),
    ("reset", None, {"attempts": 3, "backoff_ms": 10, "on_in_doubt": True}),
    ("slow", "order-1", {"attempts": 3, "backoff_ms": 10}),
    ("slow", None, {"attempts": 3, "backoff_ms": 10, "on_in_doubt": True}),
])
def test_a_lost_answer_is_not_sent_again_without_a_key_and_on_in_doubt(
        store_factory: Any, tmp_path: Path, kind: str, key: str | None, retry: dict[str, Any] | None) -> None:
    serve, client = LOST[kind]
    store = store_factory("--fault", f"{kind}:0.5", "--seed", str(seed_for([True, False], 0.5)), *serve)
    step = echo("once", **({"key": key} if key else {}), **({"retry": retry} if retry else {}))
    proc = run(store.url, tmp_path, write_pool(tmp_path, [step]), *client)
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    assert answer["steps"][0]["status"] == "in_doubt"
    # The call that went in doubt in this run is named at once, not only by the next run.
    assert [(d["num"], d["key"], d["action"]) for d in answer["in_doubt"]] == [(1, key, "left")]
    assert_consistent(tmp_path / "journal.sqlite", answer)
    # The second draw would have let it through: it was not sent again.
    assert len(ops_of(store, "once")) == 1


def test_a_keyed_step_whose_answers_keep_getting_lost_stays_in_doubt_and_ran_once(
        store_factory: Any, tmp_path: Path) -> None:
    store = store_factory("--fault", "reset:1")
    retry = {"attempts": 4, "backoff_ms": 10, "on_in_doubt": True}
    pool = write_pool(tmp_path, [echo("stuck", key="k", retry=retry)])
    proc = run(store.url, tmp_path, pool, "--task", "t")
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    assert answer["steps"][0]["status"] == "in_doubt"
    assert_consistent(tmp_path / "journal.sqlite", answer)
    assert [op["idempotency_key"] for op in ops_of(store, "stuck")] == ["t:k"]


def test_a_rerun_after_a_reset_finishes_the_in_doubt_key_without_running_it_twice(
        store_factory: Any, tmp_path: Path) -> None:
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    faulty = store_factory("--fault", "reset:1", db=db, root=root)
    pool = write_pool(tmp_path, [echo("a", key="a"), echo("b", key="b")])
    first = run(faulty.url, tmp_path, pool, "--task", "t")
    assert first.returncode == 1
    assert [e["status"] for e in answer_of(first)["steps"]] == ["in_doubt"]
    faulty.stop()
    sound = store_factory("--port", faulty.port, db=db, root=root)
    again = run(sound.url, tmp_path, pool, "--task", "t")
    assert again.returncode == 0, again.stderr
    answer = answer_of(again)
    assert [e["status"] for e in answer["steps"]] == ["completed", "completed"]
    rows = assert_consistent(tmp_path / "journal.sqlite", answer)
    assert [(r["run"], r["num"], r["status"]) for r in rows] == [
        (1, 1, "in_doubt"), (2, 1, "completed"), (2, 2, "completed")]
    assert [op["params"]["m"] for op in sound.ops()] == ["a", "b"]


def run_measured(args: list[str], tmp_path: Path) -> tuple[int, int, str, str]:
    """Exit status, peak memory (KiB) of that one process, stdout and stderr."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    env = environment()
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "pooler", *args], stdout=o, stderr=e, cwd=ROOT,
                                env=env)
        result: list[tuple[int, int, Any]] = []
        waiter = threading.Thread(target=lambda: result.append(os.wait4(proc.pid, 0)))
        waiter.start()
        waiter.join(timeout=300)
        if waiter.is_alive():
            proc.kill()
            waiter.join()
        proc.returncode = os.waitstatus_to_exitcode(result[0][1])
    return proc.returncode, result[0][2].ru_maxrss, out.read_text(), err.read_text()


@pytest.mark.process
def test_a_huge_answer_is_taken_in_bounded_memory(store_factory: Any, tmp_path: Path) -> None:
    """A 50 MB answer is a valid envelope under the client's 256 MB cap: it completes, its padding
    reaches no file, and the run's memory stays a small multiple of the answer."""
    store = store_factory("--fault", "huge:1")
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    pool = write_pool(tmp_path, [echo("big", key="big")])
    status, peak_kib, out, err = run_measured(
        ["run", str(pool), "--store", store.url, "--token-file", str(token), "--out", str(tmp_path / "out"),
         "--journal", str(tmp_path / "journal.sqlite"), "--json"], tmp_path)
    assert status == 0, err
    answer = json.loads(out)
    assert answer["steps"][0]["detail"] == {"m": "big"}
    assert "padding" not in out
    assert_consistent(tmp_path / "journal.sqlite", answer)
    assert (tmp_path / "journal.sqlite").stat().st_size < 1 << 20
    assert peak_kib < 400 * 1024, f"peak {peak_kib} KiB"


def test_an_answer_over_the_clients_cap_is_in_doubt_with_a_clear_message(
        store_factory: Any, tmp_path: Path) -> None:
    store = store_factory("--fault", "huge:1")
    pool = load_pool(write_pool(tmp_path, [echo("big", key="big")]))
    with Journal(tmp_path / "journal.sqlite") as journal, \
            ToolRunClient(store.url, STORE_TOKEN, max_answer_bytes=4 << 20) as client:
        answer = run_pool(pool, client, RunConfig(out=tmp_path / "out", task_id="t"), journal=journal)
    entry = answer["steps"][0]
    assert (entry["status"], entry["message"]) == (
        "in_doubt", (f"the store at {store.url}/ sent an answer over 4 MB, more than this client takes in "
                     f"(ask for fewer rows, or raise max_answer_bytes); {IN_DOUBT}"))
    assert_consistent(tmp_path / "journal.sqlite", answer)
    assert len(ops_of(store, "big")) == 1
