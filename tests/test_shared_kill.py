"""Runners of one task killed and frozen mid-run, and the journal's database going away.

Three ``pooler run`` processes share a task of 400 keyed calls (a quarter of them orders under
``serialize_on``), width 4 each: one is killed with SIGKILL at a random point, one is frozen with
SIGSTOP until its lease has expired and its calls were taken back, then woken.  Against the store
that honours keys every call completes and no command runs twice; against ``--no-idempotency``
with ``--in-doubt stop`` nothing runs twice and every call whose fate is unknown is named in doubt.
The store refuses a second order on a busy contract, so a ``serialize_on`` overlap would show.
"""

from __future__ import annotations

import json
import random
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler
from pg_server import start_server
from sharedkit import finish, freeze, query, start_runner, wait_for, write_pool

from pooler.journal.postgres.schema import upgrade

pytestmark = pytest.mark.postgres
SLEEPS = 300
ORDERS = 100
# Long enough that a runner slowed by a loaded machine keeps its lease: only the frozen one loses it.
LEASE = ("--lease", "8", "--timeout", "2")


def big_pool(folder: Path) -> Path:
    """300 sleeps told apart by ms, then 100 orders on 10 contracts told apart by qty."""
    data = folder / "rows.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    with data.open("w") as fh:
        for i in range(SLEEPS):
            fh.write(json.dumps({"ms": 10 + i}) + "\n")
    orders = folder / "orders.jsonl"
    with orders.open("w") as fh:
        for i in range(ORDERS):
            fh.write(json.dumps({"contract": str(5005000 + i % 10), "qty": i + 1}) + "\n")
    return write_pool(folder, [
        "mode: parallel", "max_concurrency: 12", "serialize_on: contract", "stop_on_error: false", "pool:",
        "  - {unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {ms: '${row.ms}'}, key: 's-${row.ms}',",
        "     for_each: {file: rows.jsonl}}",
        "  - {unit: MELBIS_AGENT_ORDER, command: CmdAdd,",
        "     params: {contract: '${row.contract}', qty: '${row.qty}'},",
        "     key: 'o-${row.qty}', for_each: {file: orders.jsonl}}",
    ])


def carried_out(store: Store) -> Counter[str]:
    """Every command the store carried out, as the key its call has in the pool."""
    found: Counter[str] = Counter()
    for op in store.ops():
        if op["command"] == "CmdSleep":
            found[f"s-{op['params']['ms']}"] += 1
        elif op["command"] == "CmdAdd":
            found[f"o-{op['params']['qty']}"] += 1
    return found


def mine(url: str, pid: int, sql: str) -> int:
    rows = query(url, f"SELECT count(*) FROM work WHERE task = 't' AND runner LIKE %s AND {sql}",
                 (f"%-{pid}-%",))
    return int(rows[0][0])


def three_runners(store: Store, url: str, folder: Path, policy: str, seed: int) -> list[tuple[int, Any, str]]:
    """Run the task with three runners: the second killed, the third frozen past its lease."""
    rng = random.Random(seed)
    pool = big_pool(folder)
    extra = ("--width", "4", "--in-doubt", policy, *LEASE)
    steady = start_runner(pool, store, url, "t", folder / "out1", *extra)
    # The others join once the first holds its lease: a runner that joins before it does may
    # begin a run again under it (the join race in the note, tested on its own there).
    wait_for(lambda: bool(query(url, "SELECT 1 FROM runners WHERE task = 't' AND id LIKE %s",
                                (f"%-{steady.pid}-%",))), running=(steady,))
    killed = start_runner(pool, store, url, "t", folder / "out2", *extra)
    frozen = start_runner(pool, store, url, "t", folder / "out3", *extra)
    kill_at = rng.randrange(10, 150)
    freeze_at = rng.randrange(10, 150)
    done = "state = 'done'"
    wait_for(lambda: query(url, f"SELECT count(*) FROM work WHERE task = 't' AND {done}")[0][0] >= freeze_at,
             running=(steady, killed, frozen))
    freeze(frozen, url, lambda: mine(url, frozen.pid, "state = 'sent'") > 0)
    wait_for(lambda: query(url, f"SELECT count(*) FROM work WHERE task = 't' AND {done}")[0][0] >= kill_at
             and mine(url, killed.pid, "state = 'sent'") > 0, running=(steady, killed))
    killed.send_signal(signal.SIGKILL)
    # Woken only once its lease has expired and another runner has taken its calls back (a runner
    # that froze with none may outlive the task's other work: its lease running out is enough).
    wait_for(lambda: not query(url, "SELECT 1 FROM runners WHERE id LIKE %s AND lease_until > now()",
                               (f"%-{frozen.pid}-%",))
             and mine(url, frozen.pid, "state IN ('claimed', 'sent')") == 0)
    frozen.send_signal(signal.SIGCONT)
    return [finish(steady), finish(killed), finish(frozen)]


def no_overlap(answer: dict[str, Any]) -> None:
    orders = answer["steps"][1]
    busy = [f for f in orders["failures"] if "currently being processed" in f.get("message", "")]
    assert busy == []


@pytest.mark.process
@pytest.mark.parametrize("seed", [1])
def test_runners_killed_and_frozen_against_a_key_honouring_store(store: Store, pg_url: str, tmp_path: Path,
                                                                  seed: int) -> None:
    upgrade(pg_url)
    (code1, answer, err1), (code2, _, _), (code3, _, err3) = three_runners(store, pg_url, tmp_path, "retry",
                                                                             seed)
    assert code1 == 0, err1
    assert code2 == -signal.SIGKILL
    # The frozen runner learns on waking that its calls were taken back, sends nothing more, says so.
    assert code3 == 1
    # Which it notices first, its deadline or the renewal refused, depends on when its heartbeat runs.
    assert re.search(r"pooler: (the lease of runner \S+ expired and its calls were taken back by another "
                     r"runner|runner \S+ was not heard from for longer than its lease \(8 s\): its calls "
                     r"may have been taken back)\n", err3), err3
    assert answer["status"] == "completed"
    assert (answer["total"], answer["succeeded"]) == (400, 400)
    ran = carried_out(store)
    every = [f"s-{10 + i}" for i in range(SLEEPS)] + [f"o-{i + 1}" for i in range(ORDERS)]
    assert sorted(ran) == sorted(every)
    assert [k for k, n in ran.items() if n > 1] == []
    no_overlap(answer)
    # Calls the killed and the frozen runner left in doubt were sent again with their key.
    assert {i["action"] for i in answer["in_doubt"]} <= {"retried"}


@pytest.mark.process
@pytest.mark.parametrize("seed", [2])
def test_runners_killed_and_frozen_without_keys_stop_in_doubt(store_factory: Any, pg_url: str, tmp_path: Path,
                                                              seed: int) -> None:
    upgrade(pg_url)
    store = store_factory("--no-idempotency")
    (code1, answer, err1), (code2, _, _), (code3, _, _) = three_runners(store, pg_url, tmp_path, "stop", seed)
    assert code1 == 1, err1
    assert code2 == -signal.SIGKILL
    assert code3 == 1
    ran = carried_out(store)
    assert [k for k, n in ran.items() if n > 1] == []
    rows = query(pg_url, "SELECT key_text, status, doubt FROM work WHERE task = 't'")
    completed = {k for k, s, _ in rows if s == "completed"}
    doubtful = {k for k, s, _ in rows if s == "in_doubt"}
    named = {i["key"] for i in answer["in_doubt"] if i["action"] == "stopped"}
    # The killed runner had a call in flight: it is in doubt, named, and the task stopped.
    assert doubtful
    assert named == doubtful
    assert query(pg_url, "SELECT halted FROM tasks")[0][0].endswith("in doubt")
    # Every command the store carried out is recorded completed or named in doubt.
    assert set(ran) <= completed | doubtful
    no_overlap(answer)


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.parametrize("seed", range(3, 9))
def test_more_kill_points(store_factory: Any, pg_url: str, tmp_path: Path, seed: int) -> None:
    if seed % 2:
        test_runners_killed_and_frozen_against_a_key_honouring_store(store_factory(), pg_url, tmp_path, seed)
    else:
        test_runners_killed_and_frozen_without_keys_stop_in_doubt(store_factory, pg_url, tmp_path, seed)


@pytest.mark.process
def test_the_database_going_away_stops_the_runner_with_nothing_unrecorded(store: Store,
                                                                          tmp_path: Path) -> None:
    server = start_server()
    try:
        url = server.new_database("down")
        upgrade(url)
        pool = write_pool(tmp_path, ["pool:"] + [
            f"  - {{unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {{ms: {200 + i}}}, key: k{i}}}"
            for i in range(20)])
        runner = start_runner(pool, store, url, "t", tmp_path / "out", *LEASE)
        wait_for(lambda: query(url, "SELECT count(*) FROM work WHERE state = 'done'")[0][0] >= 2)
        server.stop()
        code, answer, err = finish(runner)
        server.start()
        assert code == 1
        # No answer could be read from the journal: --json prints the outcome's document instead.
        assert answer is not None
        assert (answer["result"], answer["status"], answer["exit"]) == (False, "failed", 1)
        assert answer["task"] == "t"
        told = (r"this runner stopped sending; (every call it sent is recorded\.|(1) call\(s\) it sent end "
                r"in doubt, their outcome not recorded \([01] answered, [01] in flight\))")
        assert re.search(told, answer["message"]), answer
        said = re.search(told, err)
        assert said is not None, err
        assert ("pooler: this runner stopped; nothing it did not record in the journal is reported done."
                in err)
        reported = set(re.findall(r"completed \d+ ms key (k\d+)", err))
        recorded = {r[0] for r in query(url, "SELECT key_text FROM work WHERE status = 'completed'")}
        assert reported
        assert reported <= recorded
        # Every call that left is recorded, or told in doubt in the message.
        ran = sum(1 for op in store.ops() if op["command"] == "CmdSleep")
        assert ran == len(recorded) + int(said[2] or 0)
        # The task never finished: `pooler show` builds its answer so far from what was recorded.
        shown = pooler("show", "t", "--journal", url, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["succeeded"] == len(recorded)
        # No runner of it is alive: it is dead, counted against its plan as a dead SQLite task is.
        listed = json.loads(pooler("runs", "--journal", url, "--json").stdout)["tasks"]
        assert [(t["id"], t["status"]) for t in listed] == [("t", "dead")]
        plan = listed[0]["plan"]
        assert (plan["planned"], plan["completed"], plan["failed"]) == (20, len(recorded), 0)
        assert plan["in_doubt"] + plan["not_run"] == 20 - len(recorded)
        assert json.loads(shown.stdout)["plan"] == plan
    finally:
        server.close()


@pytest.mark.process
def test_a_runner_killed_on_this_machine_is_taken_back_at_once_by_the_next_run(store: Store, pg_url: str,
                                                                              tmp_path: Path) -> None:
    upgrade(pg_url)
    pool = write_pool(tmp_path, ["pool:"] + [
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {{ms: {150 + i}}}, key: k{i}}}"
        for i in range(6)])
    # The default lease (120 s): the run after the kill must not wait for it to run out.
    killed = start_runner(pool, store, pg_url, "t", tmp_path / "out-a")
    wait_for(lambda: query(pg_url, "SELECT count(*) FROM work WHERE state = 'sent'")[0][0] == 1
             and query(pg_url, "SELECT count(*) FROM work WHERE state = 'done'")[0][0] >= 2)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    code, answer, err = finish(start_runner(pool, store, pg_url, "t", tmp_path / "out-b"), timeout=60)
    assert code == 0, err
    assert answer is not None
    # A new run of the task: the calls the killed run did are skipped in its answer, as on SQLite.
    assert answer["status"] == "completed"
    assert answer["succeeded"] + answer["skipped"] == 6
    assert answer["skipped"] >= 2
    # The call in flight when it was killed is in doubt, and sent again under its key.
    assert [i["action"] for i in answer["in_doubt"]] == ["retried"]
    assert sorted(carried_out(store).values()) == [1] * 6


@pytest.mark.process
def test_the_report_of_a_killed_runner_shows_its_unanswered_call_in_doubt(store_factory: Any, pg_url: str,
                                                                          tmp_path: Path) -> None:
    from browser import Elements  # noqa: PLC0415

    upgrade(pg_url)
    # Each call takes 800 ms at the store: the kill lands while the third is on its way.
    store: Store = store_factory("--latency-ms", "800")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(10)))
    pool = write_pool(tmp_path, ["pool:",
                                 "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: '${row.n}'},",
                                 "     key: 'k-${row.n}', for_each: {file: rows.jsonl}}"])
    killed = start_runner(pool, store, pg_url, "t", tmp_path / "out")
    # Killed with two calls answered and the third on its way.
    wait_for(lambda: query(pg_url, "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER "
                                   "(WHERE state = 'sent') FROM work WHERE task = 't'")[0] == (2, 1))
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    killed.communicate()
    report = tmp_path / "r.html"
    proc = pooler("show", "t", "--journal", pg_url, "--html", str(report))
    assert proc.returncode == 0, proc.stderr
    page = Elements(report.read_text(encoding="utf-8"))
    text = " ".join(page.all_text().split())
    assert "1 call in doubt" in text
    assert sorted(b["class"] for b in page.having("rect", "bar")) == [
        "tip bar completed", "tip bar completed", "tip bar in_doubt"]
    assert any("answered no answer recorded" in t for t in page.titles)
