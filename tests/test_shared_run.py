"""Runners sharing a task through a PostgreSQL journal, driven as a user does: several ``pooler run``
processes against the real store and a real PostgreSQL."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler
from sharedkit import finish, freeze, max_overlap, query, start_runner, wait_for, write_pool

from pooler.journal.postgres.schema import upgrade

pytestmark = pytest.mark.postgres
SLEEP = "{unit: MELBIS_AGENT_TEST, command: CmdSleep"


@pytest.fixture
def url(pg_url: str) -> str:
    upgrade(pg_url)
    return pg_url


def sleeps(folder: Path, n: int, *, ms: int = 20, mode: str = "parallel", cap: int = 8,
           extra: tuple[str, ...] = ()) -> Path:
    """A pool of one step over ``n`` rows, each a keyed CmdSleep whose ms tells it apart."""
    data = folder / "data" / "rows.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"ms": ms + i}) + "\n" for i in range(n)))
    return write_pool(folder, [f"mode: {mode}", f"max_concurrency: {cap}", *extra, "pool:",
                               f"  - {SLEEP}, params: {{ms: '${{row.ms}}'}}, key: 'op-${{row.ms}}',",
                               "     for_each: {file: data/rows.jsonl}}"])


def sleep_ops(store: Store) -> list[int]:
    return [op["params"]["ms"] for op in store.ops() if op["command"] == "CmdSleep"]


@pytest.mark.process
def test_two_runners_share_a_task_and_each_call_runs_once(store: Store, url: str, tmp_path: Path) -> None:
    pool = sleeps(tmp_path / "a", 40)
    first = start_runner(pool, store, url, "t", tmp_path / "out-a", "--width", "3")
    # The second host has the pool file only: no data file, another working folder.
    wait_for(lambda: bool(query(url, "SELECT 1 FROM tasks WHERE id = 't'")))
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy(pool, other / "pool.yaml")
    second = start_runner(other / "pool.yaml", store, url, "t", tmp_path / "out-b", "--width", "3", cwd=other)
    (code_a, answer_a, err_a), (code_b, answer_b, err_b) = finish(first), finish(second)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    assert answer_a is not None
    assert answer_b is not None
    # Each tells the whole task: a runner that joined after the other had done it all ran the task
    # again, and tells the calls of that earlier run skipped.
    for answer in (answer_a, answer_b):
        assert (answer["status"], answer["total"], answer["succeeded"] + answer["skipped"]) == (
            "completed", 40, 40)
        rows = answer["steps"][0]["rows"]
        assert (rows["total"], rows["completed"] + rows["skipped"], rows["failed"], rows["in_doubt"],
                rows["not_run"]) == (40, 40, 0, 0, 0)
    assert sorted(sleep_ops(store)) == [20 + i for i in range(40)]
    shown = pooler("show", "t", "--journal", url, "--json")
    assert shown.returncode == 0, shown.stderr
    whole = json.loads(shown.stdout)
    assert (whole["status"], whole["succeeded"] + whole["skipped"], whole["task"]) == ("completed", 40, "t")
    listed = pooler("runs", "--journal", url)
    assert listed.stdout.startswith("t  completed  started ")
    # Counted against its plan, as a task on SQLite is.
    assert "runs 2  40 calls planned: 40 completed  " in listed.stdout


@pytest.mark.process
def test_the_cap_holds_for_the_whole_task(store: Store, url: str, tmp_path: Path) -> None:
    pool = sleeps(tmp_path, 24, ms=60, cap=4)
    runners = [start_runner(pool, store, url, "t", tmp_path / f"out{i}", "--width", "4") for i in range(2)]
    results = [finish(r) for r in runners]
    assert [code for code, _, _ in results] == [0, 0], [err for *_, err in results]
    spans = query(url, "SELECT sent_at, done_at FROM work WHERE task = 't'")
    assert len(spans) == 24
    # Every request left after its call was marked sent, and was answered before it was marked done.
    assert max_overlap(spans) <= 4


def echoes(folder: Path, n: int, cap: int) -> Path:
    """A parallel pool of one keyed CmdEcho step over ``n`` rows."""
    data = folder / "rows.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(n)))
    return write_pool(folder, ["mode: parallel", f"max_concurrency: {cap}", "pool:",
                               "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: '${row.n}'},",
                               "     key: 'e-${row.n}', for_each: {file: rows.jsonl}}"])


def spans_of(url: str, pid: int) -> list[tuple[Any, Any]]:
    """When each call of the runner with process ``pid`` was sent and recorded done."""
    return query(url, "SELECT sent_at, done_at FROM work WHERE task = 't' AND runner LIKE %s",
                 (f"%-{pid}-%",))


@pytest.mark.process
def test_runners_of_the_default_width_share_a_full_cap_fairly_and_a_late_one_gets_its_share(
        store_factory: Any, url: str, tmp_path: Path) -> None:
    # Each call takes 150 ms at the store, so 200 calls fill a cap of 4 for seconds.
    store = store_factory("--latency-ms", "150")
    pool = echoes(tmp_path / "pool", 200, 4)
    first = start_runner(pool, store, url, "t", tmp_path / "out-a")
    wait_for(lambda: query(url, "SELECT count(*) FROM work WHERE task = 't' AND state = 'done'")[0][0] >= 4)
    # The first runner waits (stopped, well within its lease) until the late one has joined,
    # however long a busy machine takes to start a process: the task is not over before then.
    freeze(first, url)
    late = start_runner(pool, store, url, "t", tmp_path / "out-b")
    joined: list[Any] = []
    try:
        wait_for(lambda: bool(joined.extend(r[0] for r in query(
            url, "SELECT started FROM runners WHERE id LIKE %s", (f"%-{late.pid}-%",))) or joined))
    finally:
        first.send_signal(signal.SIGCONT)
    (code_a, _, err_a), (code_b, answer, err_b) = finish(first), finish(late)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    assert answer is not None
    assert (answer["status"], answer["succeeded"]) == ("completed", 200)
    assert sorted(int(op["params"]["n"]) for op in store.ops()) == list(range(200))
    a, b = spans_of(url, first.pid), spans_of(url, late.pid)
    assert len(a) + len(b) == 200
    # Each carried out a fair part of the task, the late one too.
    assert len(a) >= 50
    assert len(b) >= 50
    # The late runner's first call left within a few of the first runner's calls after it joined.
    first_of_b = min(sent for sent, _ in b)
    assert len([sent for sent, _ in a if joined[0] < sent < first_of_b]) <= 8
    # Once both held calls, each held at most its share, half the cap.
    assert max_overlap([s for s in a if s[0] > first_of_b]) <= 2
    assert max_overlap(b) <= 2


@pytest.mark.process
def test_serialize_on_and_references_hold_across_runners(store: Store, url: str, tmp_path: Path) -> None:
    lines = ["mode: parallel", "max_concurrency: 8", "serialize_on: contract", "stop_on_error: false",
             "pool:",
             f"  - {{name: first, {SLEEP[1:]}, params: {{ms: 50}}, key: first}}"]
    for i in range(8):
        lines.append(f"  - {{unit: MELBIS_AGENT_ORDER, command: CmdAdd, key: order-{i}, "
                     f"params: {{contract: '{4004000 + i % 2}', qty: '@first.slept'}}}}")
    pool = write_pool(tmp_path, lines)
    runners = [start_runner(pool, store, url, "t", tmp_path / f"out{i}", "--width", "4") for i in range(2)]
    results = [finish(r) for r in runners]
    assert [code for code, _, _ in results] == [0, 0], [err for *_, err in results]
    answers = [answer for _, answer, _ in results]
    assert None not in answers
    # A runner whose process starts late on a busy machine may find the other's run over and run
    # the task again: it sends nothing done before and tells those calls skipped.  The run that
    # sent them tells them as the store answered: it refuses a second call on a busy contract, and
    # none was refused, so none overlapped.
    sent = [a for a in answers if a is not None and a["skipped"] == 0]
    assert sent, answers
    assert all([e["status"] for e in a["steps"]] == ["completed"] * 9 for a in sent), sent
    late = [a for a in answers if a not in sent]
    assert all([e["status"] for e in a["steps"]] == ["skipped"] * 9 for a in late), late
    orders = [op for op in store.ops() if op["command"] == "CmdAdd"]
    assert [op["params"]["qty"] for op in orders] == [50] * 8
    # Equal contracts in file order.
    for contract in ("4004000", "4004001"):
        keys = [op["idempotency_key"] for op in orders if op["params"]["contract"] == contract]
        assert keys == sorted(keys)


@pytest.mark.process
def test_stop_on_error_stops_every_runner(store: Store, url: str, tmp_path: Path) -> None:
    lines = ["mode: parallel", "max_concurrency: 4", "pool:",
             "  - {unit: MELBIS_AGENT_TEST, command: CmdFail}"]
    lines += [f"  - {SLEEP}, params: {{ms: {100 + i}}}, key: s{i}}}" for i in range(30)]
    pool = write_pool(tmp_path, lines)
    runners = [start_runner(pool, store, url, "t", tmp_path / f"out{i}", "--width", "2") for i in range(2)]
    results = [finish(r) for r in runners]
    assert [code for code, _, _ in results] == [1, 1]
    failed_at = query(url, "SELECT done_at FROM work WHERE task = 't' AND num = 1")[0][0]
    later = query(url, "SELECT count(*) FROM work WHERE task = 't' AND sent_at > %s", (failed_at,))[0][0]
    assert later == 0
    answer = results[0][1]
    assert answer is not None
    assert answer["not_run"] >= 30 - 4
    assert query(url, "SELECT halted FROM tasks")[0][0] == "step 1 failed"


@pytest.mark.process
def test_a_step_over_an_earlier_steps_table_runs_on_another_host(store: Store, url: str,
                                                                  tmp_path: Path) -> None:
    pool = write_pool(tmp_path, [
        "pool:",
        # Keyed: the second runner runs the task again, and sends again what completed without a key.
        "  - {name: src, unit: MELBIS_AGENT_TEST, command: CmdTable, params: {rows: 3, width: 4}, into: job,",
        "     key: src}",
        f"  - {SLEEP}, params: {{ms: 1500}}, key: nap}}",
        f"  - {SLEEP}, params: {{ms: '${{row.n}}'}}, for_each: {{step: src, table: rows}}}}",
    ])
    first = start_runner(pool, store, url, "t", tmp_path / "out-a")
    # The first runner stops after step 2 (in flight when it is told to): step 3 is left to another.
    wait_for(lambda: bool(query(url, "SELECT 1 FROM work WHERE task = 't' AND num = 2 AND state = 'sent'")))
    first.send_signal(signal.SIGTERM)
    code_a, _, _ = finish(first)
    assert code_a == 143
    second = start_runner(pool, store, url, "t", tmp_path / "out-b")
    code_b, answer, err = finish(second)
    assert code_b == 0, err
    assert answer is not None
    assert answer["steps"][2]["rows"]["completed"] == 3
    assert sorted(sleep_ops(store)) == [1, 2, 3, 1500]
    assert (tmp_path / "out-a" / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl").is_file()
    assert not (tmp_path / "out-b" / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl").exists()
    gathered = pooler("gather", "t", "--journal", url, "--out", str(tmp_path / "all"))
    assert gathered.returncode == 0, gathered.stderr
    table = tmp_path / "all" / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl"
    assert table.read_text() == (tmp_path / "out-a" / "tables" / table.name).read_text()
    assert (tmp_path / "all" / "job.rows.jsonl").read_text() == table.read_text()
    assert gathered.stdout == f"{table}  3 rows\n{tmp_path / 'all' / 'job.rows.jsonl'}  3 rows\n"


@pytest.mark.process
def test_secrets_never_reach_the_database(store_factory: Any, url: str, tmp_path: Path) -> None:
    token = "tok-8c1d2e7f"
    secret = "sec-91ab77"
    store = store_factory("--token", token)
    pool = write_pool(tmp_path, [
        "vars:", "  pin: {env: SHOP_PIN, secret: true}", "pool:",
        "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {pin: '${pin}', n: 1}, key: 'k-${pin}'}",
    ])
    code, answer, err = finish(start_runner(pool, store, url, "t", tmp_path / "out",
                                            environ={"SHOP_PIN": secret}))
    assert code == 0, err
    assert answer is not None
    assert answer["steps"][0]["key"] == "k-***"
    assert secret not in json.dumps(answer)
    dump = query(url, "SELECT string_agg(t::text, '|') FROM (SELECT * FROM tasks) t")[0][0]
    dump += query(url, "SELECT string_agg(w::text, '|') FROM (SELECT * FROM work) w")[0][0]
    assert "k-***" in dump
    assert secret not in dump
    assert token not in dump


@pytest.mark.process
def test_a_data_row_holding_a_secret_is_refused_before_the_task_is_planned(
        store_factory: Any, url: str, tmp_path: Path) -> None:
    token = "tok-8c1d2e7f"
    store = store_factory("--token", token)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"n": 1}) + "\n" + json.dumps({"n": token}) + "\n")
    pool = write_pool(tmp_path, ["pool:",
                                 "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: '${row.n}'},",
                                 "     key: 'k-${row.n}', for_each: {file: rows.jsonl}}"])
    code, answer, err = finish(start_runner(pool, store, url, "t", tmp_path / "out"))
    assert code == 2
    assert answer is not None
    told = ("row 2 of rows.jsonl of step 1 holds the value of a secret (the token or a secret variable), "
            "and a task keeps its rows in the journal, which never holds a secret - keep the secret out of "
            "the data file.")
    assert [p["message"] for p in answer["problems"]] == [told]
    assert token not in err
    # No task, no rows, nothing sent.
    assert query(url, "SELECT count(*) FROM tasks") == [(0,)]
    assert query(url, "SELECT count(*) FROM work") == [(0,)]
    assert [op for op in store.ops() if op["command"] == "CmdEcho"] == []


@pytest.mark.process
def test_a_read_timeout_not_shorter_than_the_lease_is_refused(store: Store, url: str, tmp_path: Path) -> None:
    pool = sleeps(tmp_path, 2)
    proc = start_runner(pool, store, url, "t", tmp_path / "out", "--timeout", "30", "--lease", "30")
    code, answer, err = finish(proc)
    message = ("the store's read timeout (30 s, --timeout) must be shorter than the lease (30 s, --lease): a "
               "call still waiting for its answer when its lease runs out would be taken back while it may "
               "yet be carried out")
    assert code == 2
    # With --json a refusal is one outcome document on stdout.
    assert answer is not None
    assert (answer["result"], answer["status"], answer["exit"]) == (False, "refused", 2)
    assert answer["message"] == message
    assert err == f"pooler: {message}\npooler: refused before the first step; nothing was sent.\n"
    assert sleep_ops(store) == []
    assert query(url, "SELECT count(*) FROM tasks")[0][0] == 0


@pytest.mark.process
def test_the_planning_runner_reads_data_files_by_the_rules_of_any_run(store: Store, url: str,
                                                                    tmp_path: Path) -> None:
    # A dated Latin-1 feed with ";" between fields: the name takes a variable, the file its options.
    feed = tmp_path / "feeds" / "2026-12-01.csv"
    feed.parent.mkdir()
    feed.write_bytes("sku;name\nA-1;Crème\nB-2;Käse\n".encode("latin-1"))
    pool = write_pool(tmp_path, [
        "vars: {date: null}", "pool:",
        "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {sku: '${row.sku}', name: '${row.name}'},",
        "     key: 'g-${row.sku}',",
        "     for_each: {file: 'feeds/${date}.csv', delimiter: ';', encoding: latin-1}}"])
    runner = start_runner(pool, store, url, "feed", tmp_path / "out", "--var", "date=2026-12-01")
    code, answer, err = finish(runner)
    assert code == 0, err
    assert answer is not None
    assert (answer["status"], answer["succeeded"]) == ("completed", 2)
    assert [op["params"] for op in store.ops()] == [{"sku": "A-1", "name": "Crème"},
                                                    {"sku": "B-2", "name": "Käse"}]


@pytest.mark.process
def test_an_empty_feed_refuses_a_shared_run_before_the_task_exists(store: Store, url: str,
                                                                    tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("sku,name\n")
    pool = write_pool(tmp_path, [
        "pool:",
        "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {sku: '${row.sku}'}, key: 'g-${row.sku}',",
        "     for_each: {file: rows.csv}}"])
    code, _, err = finish(start_runner(pool, store, url, "empty", tmp_path / "out"))
    assert code == 2, err
    assert f"for_each of step 1 has no rows: the file {rows} is empty" in err
    assert "Traceback" not in err
    assert store.ops() == []
    assert query(url, "SELECT 1 FROM tasks WHERE id = 'empty'") == []
