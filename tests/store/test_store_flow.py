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
from pooler.store.flow import TokenBucket

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
