"""The store's own flow limits: ``--rate-limit N`` answers a call over N a second 429 with the
wait as ``Retry-After`` and carries nothing out; ``--crowd-ms N`` makes a call slower the more
calls are in flight beside it.  CmdOps is outside both."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import requests
from helpers import STORE_TOKEN, Store, start_store
from storekit import TEST, unique

from pooler.client.reply import _retry_after
from pooler.errors import UsageError
from pooler.store.cli import open_store
from pooler.store.flow import TokenBucket, parse_rate_limit

HEADERS = {"Authorization": f"Bearer {STORE_TOKEN}"}


def echo(store: Store, marker: str) -> requests.Response:
    return requests.post(f"{store.url}/tool_run", headers=HEADERS, timeout=10,
                         json={"unit": TEST, "command": "CmdEcho", "params": {"m": marker}})


def test_a_bucket_gives_its_burst_then_one_call_each_rate_th_of_a_second() -> None:
    now = [100.0]
    bucket = TokenBucket(4, burst=2, clock=lambda: now[0])
    assert [bucket.take(), bucket.take()] == [0.0, 0.0]
    assert bucket.take() == pytest.approx(0.25)
    now[0] += 0.25
    assert bucket.take() == 0.0
    assert bucket.take() == pytest.approx(0.25)
    # Time away fills it up to its burst, never more.
    now[0] += 60
    assert [bucket.take(), bucket.take(), bucket.take() > 0] == [0.0, 0.0, True]


def test_a_call_over_the_rate_limit_is_answered_429_with_the_wait_and_is_not_carried_out(
        tmp_path: Path) -> None:
    store = start_store(tmp_path, "--rate-limit", "2")
    try:
        marker = unique("m")
        answers = [echo(store, marker) for _ in range(4)]
        codes = [a.status_code for a in answers]
        assert codes[:2] == [200, 200]
        busy = [a for a in answers if a.status_code == 429]
        assert busy, codes
        wait = _retry_after(busy[0].headers)
        assert wait is not None
        assert 0 < wait <= 0.5
        assert busy[0].json() == {"ok": False, "error": (
            f"MELBIS_AGENT_TEST\\CmdEcho: over the store's rate limit of 2 calls a second - not carried out; "
            f"come back in {busy[0].headers['Retry-After']} s")}
        # CmdOps is outside the limit: the ops show the calls carried out, those turned away not.
        assert sum(o["params"].get("m") == marker for o in store.ops()) == codes.count(200)
        assert [line for line in store.log if line.startswith("429 ")] == [
            f"429 {a.json()['error']}" for a in busy]
    finally:
        store.stop()


def test_a_crowded_store_answers_slower_the_more_calls_are_in_flight(tmp_path: Path) -> None:
    store = start_store(tmp_path, "--crowd-ms", "200")
    try:
        alone = echo(store, unique("m")).json()["ms"]
        # One long call held in flight, seen in the crowd the store counts before the next call goes:
        # threads started together need not overlap on a busy machine.
        sleeper = threading.Thread(target=store.call, args=(TEST, "CmdSleep", {"ms": 3000}))
        sleeper.start()
        flow = store.served.server.flow
        deadline = time.monotonic() + 60
        while flow._flying < 1 and sleeper.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert flow._flying == 1
        crowded = echo(store, unique("m")).json()["ms"]
        sleeper.join()
        # A call waits 200 ms for every call in flight as it comes.
        assert alone < 200 <= crowded
    finally:
        store.stop()


@pytest.mark.parametrize("args", [("--rate-limit", "0"), ("--rate-limit", "-3"), ("--crowd-ms", "-1")])
def test_a_bad_flow_limit_is_refused_with_one_message(tmp_path: Path, args: tuple[str, ...]) -> None:
    with pytest.raises(UsageError) as found:
        open_store(["--port", "0", "--db", str(tmp_path / "s.db"), "--root", str(tmp_path / "r"), *args])
    assert found.value.message == ("--rate-limit takes a number of calls a second above 0, --crowd-ms a "
                                   "number of 0 or more")


def test_a_rate_limit_schedule_changes_the_rate_and_the_burst_counted_from_the_first_call() -> None:
    now = [50.0]
    bucket = TokenBucket(4, clock=lambda: now[0], schedule=parse_rate_limit("4,2@10s,8@20"))
    now[0] = 80.0  # time before the first call counts for nothing
    assert [bucket.take() for _ in range(4)] == [0.0] * 4
    assert bucket.take() == pytest.approx(0.25)
    assert bucket.rate == 4
    now[0] += 10
    # Halved: the bucket keeps a second of the new rate, and each call waits half a second.
    assert (bucket.rate, bucket.burst) == (2, 2)
    assert [bucket.take(), bucket.take(), bucket.take()] == [0.0, 0.0, pytest.approx(0.5)]
    now[0] += 10
    assert bucket.rate == 8
    assert [bucket.take() for _ in range(8)] == [0.0] * 8


def test_a_rate_limited_store_tells_its_limit_of_the_moment_in_its_busy_answer(tmp_path: Path) -> None:
    store = start_store(tmp_path, "--rate-limit", "2,1@0.5")
    try:
        marker = unique("m")
        first = [echo(store, marker) for _ in range(3)]
        assert "rate limit of 2 calls a second" in first[-1].json()["error"]
        again = echo(store, marker)
        while again.status_code != 429 or "of 1 calls" not in again.json()["error"]:
            again = echo(store, marker)
        assert again.json()["error"].startswith(
            "MELBIS_AGENT_TEST\\CmdEcho: over the store's rate limit of 1 calls a second - not carried out; "
            "come back in ")
    finally:
        store.stop()


@pytest.mark.parametrize(("text", "why"), [
    ("30,15", "'15': the first rate has no time, each later one an @SECONDS"),
    ("30@5,15@10", "'30@5': the first rate has no time, each later one an @SECONDS"),
    ("30,15@x", "'15@x' is not a number of calls a second (and @SECONDS)"),
    ("30,0@10", "'0@10': a rate is a number of calls a second above 0"),
    ("30,15@10,20@10", "'20@10': each change comes later than the one before it"),
])
def test_a_bad_rate_limit_schedule_is_refused_saying_what_is_wrong(tmp_path: Path, text: str,
                                                                   why: str) -> None:
    with pytest.raises(UsageError) as found:
        open_store(["--port", "0", "--db", str(tmp_path / "s.db"), "--root", str(tmp_path / "r"),
                    "--rate-limit", text])
    assert found.value.message == (f"--rate-limit {text}: {why} - write N, or N,M@SECONDS,... "
                                   "(e.g. 30,15@10,30@20)")
