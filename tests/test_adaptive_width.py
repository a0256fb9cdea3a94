"""The adaptive width's rules (run/flow.py) on a clock of the test's own, with answers the test
makes or a store's real token bucket gives (tests/flowsim.py): latency alone never cuts, a busy
answer does, a halved limit is followed within seconds and a risen one found again; and one run
against the real store limited with ``--rate-limit``, at calls of 20 and 200 ms."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from flowsim import simulate
from helpers import Store, start_store
from sharedkit import run_here
from test_flow_control import client_can, echo_pool, turned_away

from pooler.run.flow import HEADROOM, RATE_BACKOFF, Flow

LIMIT = 30.0


def clocked(cap: int = 16) -> tuple[Flow, list[float]]:
    now = [0.0]
    flow = Flow(cap, adaptive=True, breaker=None, tell=lambda line: None, clock=lambda: now[0],
                wall=lambda: now[0])
    return flow, now


def clean(flow: Flow, now: list[float], answers: int, *, every: float = 0.02, ms: float = 10) -> None:
    """``answers`` clean answers, one each ``every`` seconds, each ``ms`` long."""
    for _ in range(answers):
        now[0] += every
        flow.attempted(ms=ms, since=now[0] - ms / 1000)


def test_latency_that_rises_while_every_answer_is_clean_never_cuts_the_width() -> None:
    flow, now = clocked()
    widths = []
    # From 5 ms to 2 s a call, each answer slower than the one before: never a cut.
    for n in range(400):
        now[0] += 0.05
        flow.attempted(ms=5 + n * 5, since=now[0] - 0.01)
        widths.append(flow.width)
    assert widths == sorted(widths)
    assert flow.width == 16
    assert flow.learnt is None
    assert not flow.events


def test_a_busy_answer_cuts_the_width_and_sets_the_rate_under_what_the_store_carried() -> None:
    flow, now = clocked()
    clean(flow, now, 200)
    assert flow.width == 16
    now[0] += 0.02
    flow.attempted(ms=1, busy=True, retry_after=0.03, since=now[0] - 0.001)
    assert flow.width == 11
    # 50 clean answers landed in the last second: the rate calls start at is a share of it.
    assert flow.learnt == pytest.approx(50 * RATE_BACKOFF)
    assert [e["what"] for e in flow.events] == ["pause", "cut"]
    assert flow.events[1]["line"] == "throttling to 11 at once: the store is busy; 45.0 calls a second"


def test_a_cut_leaves_the_width_that_carries_the_learnt_rate_at_the_recent_latency() -> None:
    flow, now = clocked()
    clean(flow, now, 300, every=1 / 40, ms=200)
    assert flow.width == 16
    for _ in range(3):
        now[0] += 0.05
        flow.attempted(ms=1, busy=True, retry_after=0.01, since=now[0] - 0.001)
    # Three cuts in a row would leave 16 x 0.7^3 = 5; 200 ms calls at the learnt rate need more.
    assert flow.learnt is not None
    assert flow.width >= flow.learnt * 0.2 * HEADROOM > 5


def test_answers_of_calls_started_before_a_cut_cut_nothing_more() -> None:
    flow, now = clocked()
    clean(flow, now, 100)
    now[0] += 0.01
    flow.attempted(ms=1, busy=True, since=now[0] - 0.001)
    width, rate = flow.width, flow.learnt
    flow.attempted(ms=30, busy=True, since=now[0] - 0.03)
    assert (flow.width, flow.learnt) == (width, rate)


def test_busy_answers_of_calls_sent_during_the_pause_the_store_asked_for_cut_nothing_more() -> None:
    flow, now = clocked()
    clean(flow, now, 100)
    now[0] += 0.01
    flow.attempted(ms=1, busy=True, retry_after=1.0, since=now[0] - 0.001)
    width, rate = flow.width, flow.learnt
    # A loaded runner heard the pause late: calls it sent after the cut, within the pause, were
    # answered busy (the store's bucket still empty). They teach nothing the pause did not.
    for _ in range(3):
        now[0] += 0.1
        flow.attempted(ms=1, busy=True, retry_after=1.0, since=now[0] - 0.001)
    assert (flow.width, flow.learnt) == (width, rate)
    # A call sent once the pause is over and answered busy cuts again.
    now[0] += 1.2
    flow.attempted(ms=1, busy=True, since=now[0] - 0.001)
    assert rate is not None
    assert flow.learnt is not None
    assert flow.learnt < rate


def test_a_learnt_rate_runs_no_further_ahead_than_twice_what_the_store_carries() -> None:
    flow, now = clocked()
    flow.attempted(ms=1, busy=True, since=now[0])
    # Hours of clean answers, one each 0.3 s (too few calls to need more): four in any second,
    # and the rate rises to 8.
    for _ in range(40_000):
        now[0] += 0.3
        flow.attempted(ms=10, since=now[0] - 0.01)
    assert flow.learnt == pytest.approx(8)
    flow.attempted(ms=10, gateway=True, since=now[0])
    assert flow.width >= 1


@pytest.mark.parametrize("latency", [0.0, 0.02, 0.2])
def test_against_a_limit_the_adaptive_width_meets_few_busy_answers_and_reaches_most_of_the_limit(
        latency: float) -> None:
    seen = simulate(600, latency, ((0.0, LIMIT),))
    assert len(seen.done) == 600
    assert seen.busy_share() <= 0.03
    # After the bucket's burst of 30, from the first call to the last.
    assert (len(seen.done) - LIMIT) / (LIMIT * (seen.done[-1] - seen.done[0])) >= 0.85


@pytest.mark.parametrize("latency", [0.0, 0.02, 0.2])
def test_a_halved_limit_brings_the_rate_under_it_within_a_few_seconds_and_a_risen_one_is_found_again(
        latency: float) -> None:
    seen = simulate(900, latency, ((0.0, LIMIT), (10.0, LIMIT / 2), (20.0, LIMIT)))
    assert len(seen.done) == 900
    # Halved at 10 s: within three seconds the rate is under it, and busy answers are rare after.
    assert (seen.rate_at(13.0) or LIMIT) <= LIMIT / 2
    assert seen.busy_in(13.0, 20.0) <= 3
    assert seen.carried(13.0, 20.0) >= 0.8 * LIMIT / 2 * 7
    # Risen at 20 s: within eight seconds most of it is used again.
    assert seen.carried(26.0, 28.0) >= 0.85 * LIMIT * 2


def test_a_fixed_width_meets_busy_answers_an_adaptive_one_avoids() -> None:
    fixed = simulate(300, 0.02, ((0.0, LIMIT),), adaptive=False)
    adaptive = simulate(300, 0.02, ((0.0, LIMIT),))
    assert adaptive.busy_share() * 5 < fixed.busy_share()


def adaptive_300(tmp_path: Path, store: Store) -> tuple[dict[str, Any], int, str]:
    """300 keyed echoes at an adaptive width of up to 16, every one completed: the answer, the
    busy answers the store gave, and what the run printed on stderr."""
    pool = echo_pool(tmp_path / "p", 300, "mode: parallel\nmax_concurrency: 16\nadaptive: true\n",
                     "    retry: {attempts: 8}\n")
    code, answer, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    assert code == 0, err
    assert answer["succeeded"] == 300
    return answer, turned_away(store), err


@pytest.mark.parametrize("latency", ["20", "200"])
def test_an_adaptive_run_against_a_rate_limited_store_uses_most_of_its_limit_whatever_its_calls_take(
        tmp_path: Path, latency: str) -> None:
    store = start_store(tmp_path / "s", "--rate-limit", "30", "--latency-ms", latency)
    try:
        answer, busy, _ = adaptive_300(tmp_path, store)
        assert answer["flow"]["busy"] == busy <= 0.05 * 300
        found = sorted(datetime.fromisoformat(op["time"]).timestamp() for op in store.ops()
                       if op["command"] == "CmdEcho")
        assert len(found) == 300
        # After the store's burst of 30: well above the half of its limit that a rule cutting on
        # latency alone reached, or of what a client on this machine reaches now, if less.
        rate = (len(found) - 30) / (found[-1] - found[0])
        ceiling = min(LIMIT, client_can(tmp_path, 150, latency))
        assert rate >= 0.7 * ceiling, (rate, ceiling)
    finally:
        store.stop()


def test_an_adaptive_run_follows_a_store_whose_limit_halves_mid_run_with_few_busy_answers(
        tmp_path: Path) -> None:
    # 30 calls a second, 15 from 3 s after the first call: about 100 calls before, 200 after.
    store = start_store(tmp_path / "s", "--rate-limit", "30,15@3", "--latency-ms", "20")
    try:
        answer, busy, err = adaptive_300(tmp_path, store)
        assert answer["flow"]["busy"] == busy <= 0.08 * 300
        # The store said so in its busy answers: the halved limit was met, and followed.
        assert any("rate limit of 15 calls a second" in line for line in store.log)
        assert "calls a second" in err
    finally:
        store.stop()
