"""Flow control against the reference store: a busy answer's Retry-After pauses every new call of
the task (every runner of it), a width that adapts keeps a rate-limited store's 429s rare, and
the breaker turns a store that goes down into one clear stop.  Counts and generous ratios from
the store's ops and log, never wall-clock limits."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler, start_store
from sharedkit import finish, journal_of, run_here, start_runner, wait_for

from pooler.journal.opening import open_journal
from pooler.pool.breaker import BreakerRule
from pooler.run.flow import Flow
from pooler.run.pacing import PAUSE, Pacer

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


def echo_pool(folder: Path, rows: int, head: str, step: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.csv").write_text("n\n" + "".join(f"{i}\n" for i in range(rows)))
    pool = folder / "pool.yaml"
    pool.write_text(head + "pool:\n  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
                    "    for_each: {file: rows.csv}\n    key: echo-${row.n}\n    params: {n: '${row.n}'}\n"
                    + step)
    return pool


def times(store: Store) -> list[float]:
    return sorted(datetime.fromisoformat(op["time"]).timestamp() for op in store.ops()
                  if op["command"] == "CmdEcho")


def turned_away(store: Store) -> int:
    """The calls the store's rate limit answered 429 (a store on a thread keeps its log)."""
    return sum(1 for line in store.log if line.startswith("429 "))


# The pause a busy answer asks for

@pytest.mark.parametrize("kind", JOURNALS)
def test_a_pause_one_runner_hears_holds_back_the_calls_of_every_runner_of_the_task(
        kind: str, tmp_path: Path, request: Any, store: Store) -> None:
    journal_url = journal_of(kind, request, tmp_path)
    pool = echo_pool(tmp_path / "pools", 1, "")
    code, _, err = run_here(pool, store, journal_url, "t", tmp_path / "out")
    assert code == 0, err
    journal = open_journal(journal_url)
    request.addfinalizer(journal.close)
    stop = threading.Event()
    flows = [Flow(4, adaptive=False, breaker=None, tell=lambda line: None) for _ in range(2)]
    pacers = [Pacer(journal.work("t", f"runner-{i}"), {}, stop, flow) for i, flow in enumerate(flows)]
    # Runner 0 is answered 429 with Retry-After: 1.5; its next call publishes the pause ...
    flows[0].attempted(ms=3.0, busy=True, retry_after=1.5)
    assert [e["what"] for e in flows[0].events] == ["pause"]
    assert flows[0].events[0]["line"] == ("pausing every new call for 1.5 s: the store asked to wait "
                                          "(Retry-After)")
    row: Any = None
    first = threading.Thread(target=pacers[0].wait, args=(row, row))
    first.start()
    onlooker = journal.work("t", "onlooker")
    wait_for(lambda: onlooker.held(PAUSE) > 1.0)
    # ... and runner 1, which never met a busy answer, waits it out too.
    assert pacers[1].wait(row, row)
    first.join()
    assert flows[0].throttled_ms >= 1400
    assert flows[1].throttled_ms >= 1000
    # Over: the next call of either starts at once.
    assert pacers[1].wait(row, row)
    assert flows[1].throttled_ms < 1600


def test_every_busy_answer_is_counted_as_the_store_turned_it_away_and_the_waits_are_told(
        tmp_path: Path) -> None:
    store = start_store(tmp_path, "--rate-limit", "10")
    try:
        pool = echo_pool(tmp_path / "pools", 40, "mode: parallel\nmax_concurrency: 16\nadaptive: true\n",
                         "    retry: {attempts: 10}\n")
        code, answer, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
        assert code == 0, err
        assert answer["succeeded"] == 40
        flow = answer["flow"]
        assert flow["busy"] == turned_away(store) > 0
        assert flow["throttled_ms"] > 0
        assert flow["breaker_trips"] == 0
        assert "pausing every new call for " in err
        assert "throttling to " in err
        assert len(times(store)) == 40
    finally:
        store.stop()


# A width that adapts

def adaptive_run(tmp_path: Path, calls: int, adaptive: bool) -> tuple[dict[str, Any], int, list[float]]:
    store = start_store(tmp_path / ("a" if adaptive else "f"), "--rate-limit", "30")
    try:
        head = f"mode: parallel\nmax_concurrency: 16\nadaptive: {str(adaptive).lower()}\n"
        pool = echo_pool(tmp_path / ("pa" if adaptive else "pf"), calls, head, "    retry: {attempts: 10}\n")
        code, answer, err = run_here(pool, store, str(tmp_path / f"j-{adaptive}.db"), "t", tmp_path / "out")
        assert code == 0, err
        return answer, turned_away(store), times(store)
    finally:
        store.stop()


def client_can(tmp_path: Path, calls: int, latency: str = "0") -> float:
    """The calls a second a fixed width of 16 carries against a store with no limit, on this machine
    as it is now: the most a client can reach there, under which a learnt rate is judged (a loaded
    machine slows the client, not the store's bucket)."""
    (tmp_path / "free").mkdir()
    store = start_store(tmp_path / "free", "--latency-ms", latency)
    try:
        pool = echo_pool(tmp_path / "pool-free", calls, "mode: parallel\nmax_concurrency: 16\n")
        code, _, err = run_here(pool, store, str(tmp_path / "j-free.db"), "t", tmp_path / "out-free")
        assert code == 0, err
        found = times(store)
        return (len(found) - 1) / (found[-1] - found[0])
    finally:
        store.stop()


def test_an_adaptive_width_keeps_a_rate_limited_stores_429s_rare_and_its_rate_high(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    answer, busy, found = adaptive_run(tmp_path, 150, adaptive=True)
    assert answer["succeeded"] == 150
    # Few 429s (the store's burst of 30 answered at once, then its rate is learnt) ...
    assert busy <= 0.1 * 150, busy
    assert answer["flow"]["busy"] == busy
    # ... and the rate stays near the store's 30 a second (after its burst).
    rate = (len(found) - 30) / (found[-1] - found[0])
    ceiling = min(30.0, client_can(tmp_path, 150))
    assert rate >= 0.6 * ceiling, (rate, ceiling)
    # It started low and grew, never past max_concurrency.
    assert 2 <= answer["flow"]["highest_width"] <= 16


@pytest.mark.slow
def test_600_calls_against_a_store_limited_to_30_a_second_meet_few_429s_with_an_adaptive_width(
        tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    answer, busy, found = adaptive_run(tmp_path, 600, adaptive=True)
    assert answer["succeeded"] == 600
    assert busy <= 0.03 * 600, busy
    assert 600 / (found[-1] - found[0]) >= 0.8 * 30


# The breaker

def breaker_pool(folder: Path, rows: int, breaker: str) -> Path:
    # stop_on_error: false, as a night's import runs: a call in flight when the store went is in
    # doubt, and would stop the pool on its own before the breaker had its say.
    return echo_pool(folder, rows, f"mode: parallel\nmax_concurrency: 8\nstop_on_error: false\n"
                                   f"rate: {{per_second: 60}}\nbreaker: {breaker}\n")


def keys_done(store: Store) -> list[str]:
    return [op["idempotency_key"] for op in store.ops() if op["command"] == "CmdEcho"]


def rows_done(store: Store) -> list[str]:
    """The rows the store carried out, one entry each time (its data outlives a restart)."""
    return [op["params"]["n"] for op in store.ops() if op["command"] == "CmdEcho"]


def redrive_on_a_store_back(tmp_path: Path, store: Store, journal: str, out: str, request: Any) -> list[str]:
    """The store started again on its port and data, and ``pooler redrive t`` run to its end:
    the rows the store then holds."""
    again = start_store(tmp_path / "s", "--port", store.port, db=store.db, root=store.root, process=True)
    request.addfinalizer(again.stop)
    token = str(tmp_path / f"{out}-secret" / "token")
    proc = pooler("redrive", "t", "--store", again.url, "--token-file", token,
                  "--journal", journal, "--in-doubt", "retry", "--json", "--out", str(tmp_path / out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] is True
    return rows_done(again)


@pytest.mark.process
@pytest.mark.parametrize("kind", JOURNALS)
def test_a_store_killed_mid_run_stops_the_pool_with_the_rest_not_run_and_a_redrive_finishes_it(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path / "s", process=True)
    request.addfinalizer(store.stop)
    pool = breaker_pool(tmp_path / "pools", 200, "{after: 5, wait: 1}")
    runner = start_runner(pool, store, journal, "t", tmp_path / "out")
    wait_for(lambda: len(keys_done(store)) >= 40, running=[runner])
    assert store.proc is not None
    store.proc.kill()
    store.proc.communicate()
    code, answer, err = finish(runner)
    assert code == 1, err
    assert answer is not None
    done = answer["succeeded"]
    # Stopped within `after` calls of finding the store down: those in flight when it went
    # are in doubt, at most 5 failed, and every call not started is not run - not failed.
    assert answer["failed"] == answer["calls_in_doubt"]
    assert answer["calls_in_doubt"] <= 8
    assert answer["not_run"] >= 200 - done - 8 - 5 > 0
    assert answer["succeeded"] + answer["failed"] + answer["not_run"] == 200
    assert answer["interrupted"] == (
        "the store looks down: 5 calls in a row did not reach it, and it did not answer tool_list within "
        "1 s; the calls not started are not run - once it is back, `pooler redrive t` (or the same "
        "--task t) goes on")
    assert answer["flow"]["breaker_trips"] == 1
    assert "5 calls in a row did not reach the store: no call starts while it is tried with tool_list" in err
    assert f"pool partial ({answer['interrupted']})" in err
    # Back on the same port and data: the redrive sends what is left, every row carried out once.
    assert sorted(redrive_on_a_store_back(tmp_path, store, journal, "out", request)) == sorted(
        str(i) for i in range(200))


@pytest.mark.process
def test_a_store_back_within_the_breakers_wait_lets_the_run_go_on_to_its_end(tmp_path: Path,
                                                                             request: Any) -> None:
    store = start_store(tmp_path / "s", process=True)
    request.addfinalizer(store.stop)
    pool = breaker_pool(tmp_path / "pools", 200, "{after: 5, wait: 60}")
    runner = start_runner(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    wait_for(lambda: len(keys_done(store)) >= 40, running=[runner])
    assert store.proc is not None
    assert runner.stderr is not None
    store.proc.kill()
    store.proc.communicate()
    # The breaker opens (the runner says so), and the store comes back on its port meanwhile.
    told = []
    for line in runner.stderr:
        told.append(line)
        if "did not reach the store" in line:
            break
    again = start_store(tmp_path / "s", "--port", store.port, db=store.db, root=store.root, process=True)
    request.addfinalizer(again.stop)
    code, answer, err = finish(runner)
    assert answer is not None, err
    # Every call has its one status; none is left not run, and only those in flight when the
    # store was killed may be in doubt.
    assert answer["not_run"] == 0
    assert answer["failed"] == answer["calls_in_doubt"] <= 8
    assert answer["succeeded"] + answer["calls_in_doubt"] == 200
    assert code == (0 if answer["calls_in_doubt"] == 0 else 1)
    assert "the store answered tool_list after" in err
    assert answer["flow"]["breaker_trips"] == 1
    # Carried out once each, those in doubt perhaps not at all.
    done = rows_done(again)
    assert len(done) == len(set(done)) >= answer["succeeded"]


def test_a_breaker_counts_requests_in_a_row_that_found_the_store_down() -> None:
    told: list[str] = []
    flow = Flow(4, adaptive=False, breaker=BreakerRule(after=3, wait=5), tell=told.append)
    for _ in range(2):
        flow.attempted(ms=1, down=True)
    flow.attempted(ms=1)  # an answer: the row starts again
    for _ in range(2):
        flow.attempted(ms=1, down=True)
    assert not flow.tripped
    flow.attempted(ms=1, gateway=True)
    assert flow.tripped
    assert told == [("3 calls in a row did not reach the store: no call starts while it is tried with "
                     "tool_list (up to 5 s)")]
    flow.closed("back")
    assert not flow.tripped
    assert flow.trips == 1


def test_an_adaptive_width_grows_on_clean_windows_and_is_cut_once_a_window() -> None:
    now = [0.0]
    flow = Flow(16, adaptive=True, breaker=None, tell=lambda line: None, clock=lambda: now[0])
    assert flow.width == 2
    for _ in range(2 + 3 + 4 + 5):
        now[0] += 0.01
        flow.attempted(ms=5)
    assert flow.width == 6
    now[0] += 0.01
    flow.attempted(ms=5, busy=True, retry_after=0.1)
    assert flow.width == 4
    # Answers of calls started before the cut cut nothing more.
    flow.attempted(ms=50, busy=True)
    assert flow.width == 4
    assert flow.highest == 6
    assert [e["what"] for e in flow.events] == ["pause", "cut"]
    assert flow.events[1]["line"].startswith("throttling to 4 at once: the store is busy; ")


def test_a_dry_run_tells_an_adaptive_width_and_a_breaker_other_than_the_default(tmp_path: Path) -> None:
    pool = echo_pool(tmp_path, 3, "mode: parallel\nmax_concurrency: 12\nadaptive: true\n"
                                  "breaker: {after: 3, wait: 20}\n")
    shown = pooler("run", str(pool), "--dry-run")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "width: adapts to the store, from 2 up to 12 calls at once" in lines
    assert ("breaker: after 3 calls in a row that do not reach the store, tries it for 20 s before it "
            "stops") in lines
    off = echo_pool(tmp_path / "off", 3, "breaker: false\n")
    assert "breaker: off - a store that goes down costs every call left as a failure" in (
        pooler("run", str(off), "--dry-run").stdout.splitlines())
    plain = echo_pool(tmp_path / "plain", 3, "")
    told = pooler("run", str(plain), "--dry-run").stdout
    assert "breaker:" not in told
    assert "width:" not in told
    document = json.loads(pooler("run", str(pool), "--dry-run", "--json").stdout)
    assert (document["adaptive"], document["breaker"]) == (True, {"after": 3, "wait": 20.0})


@pytest.mark.postgres
@pytest.mark.process
def test_two_runners_of_a_task_whose_store_goes_down_both_stop_with_the_rest_not_run(
        tmp_path: Path, request: Any) -> None:
    journal = journal_of("postgres", request, tmp_path)
    store = start_store(tmp_path / "s", process=True)
    request.addfinalizer(store.stop)
    pool = breaker_pool(tmp_path / "pools", 300, "{after: 5, wait: 1}")
    runners = [start_runner(pool, store, journal, "t", tmp_path / f"out{i}") for i in range(2)]
    wait_for(lambda: len(keys_done(store)) >= 40, running=runners)
    assert store.proc is not None
    store.proc.kill()
    store.proc.communicate()
    ends = [finish(runner) for runner in runners]
    assert [code for code, _, _ in ends] == [1, 1], [err for _, _, err in ends]
    for _, answer, _ in ends:
        assert answer is not None
        # Whichever runner gave up first, the task stopped for both, saying why.
        assert answer["interrupted"].startswith("the store looks down: 5 calls in a row did not reach it")
        assert answer["failed"] == answer["calls_in_doubt"]
        assert answer["not_run"] > 0
    assert sorted(redrive_on_a_store_back(tmp_path, store, journal, "out0", request)) == sorted(
        str(i) for i in range(300))
