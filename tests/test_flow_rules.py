"""How the runner holds back its calls, on a clock the test moves: a busy answer pauses every
new call, an adaptive width grows a call a clean window and is cut on strain, the rate it learns
from busy answers spaces the calls, and the breaker trips at its count."""

from __future__ import annotations

import pytest

from pooler.run.flow import Breaker, BreakerRule, Flow, Rate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_rate_spaces_its_calls_and_lets_its_burst_start_at_once() -> None:
    rate = Rate(per_second=20, burst=5)
    assert rate.interval == pytest.approx(0.05)
    assert rate.tolerance == pytest.approx(0.2)


def test_a_busy_answer_pauses_every_new_call_for_the_wait_it_asked_for() -> None:
    clock = Clock()
    flow = Flow(8, adaptive=False, clock=clock)
    assert flow.wait_before() == 0.0
    told = flow.answered(5, busy=True, strained=False, retry_after=1.5)
    assert told == "backing off 1.5 s: the store asked to wait"
    assert [flow.wait_before(), flow.wait_before()] == [pytest.approx(1.5)] * 2
    clock.now += 1.5
    assert flow.wait_before() == 0.0
    # Without adaptive the width is the cap, whatever the answers.
    assert (flow.width, flow.busy) == (8, 1)


def test_an_adaptive_width_grows_a_call_each_clean_window_up_to_the_cap_and_is_cut_on_strain() -> None:
    clock = Clock()
    flow = Flow(4, adaptive=True, clock=clock)
    widths = [flow.width]
    for _ in range(12):
        assert flow.answered(10, busy=False, strained=False, retry_after=None) is None
        widths.append(flow.width)
    assert widths[0] == 2
    assert max(widths) == 4 == flow.highest
    assert widths == sorted(widths)
    assert flow.answered(10, busy=False, strained=True, retry_after=None) == (
        "throttling to 2 at once: a gateway answered")
    # An answer much slower than the quickest recent ones cuts it too, down to one at least.
    assert flow.answered(100, busy=False, strained=False, retry_after=None) == (
        "throttling to 1 at once: answers slowed down")
    assert flow.answered(100, busy=False, strained=False, retry_after=None) is not None
    assert flow.width == 1


def test_busy_answers_teach_an_adaptive_flow_the_stores_rate_and_clean_windows_raise_it() -> None:
    clock = Clock()
    flow = Flow(16, adaptive=True, clock=clock)
    # 30 answers within a second, then the store says it is busy.
    for _ in range(30):
        clock.now += 0.02
        flow.answered(2, busy=False, strained=False, retry_after=None)
    told = flow.answered(2, busy=True, strained=False, retry_after=0.05)
    assert flow.learnt == pytest.approx(30 * 0.7)
    assert told == (f"throttling to {flow.width} at once: the store is busy; 21.0 calls a second; waiting "
                    "0.05 s as it asked")
    clock.now += 0.05
    gaps = [flow.wait_before() for _ in range(3)]
    assert gaps == [0.0, pytest.approx(1 / 21), pytest.approx(2 / 21)]
    before = flow.learnt
    for _ in range(flow.width):
        flow.answered(2, busy=False, strained=False, retry_after=None)
    assert flow.learnt == pytest.approx(before + 1)


def test_the_breaker_trips_at_its_count_of_calls_in_a_row_and_a_call_that_reached_the_store_resets_it(
) -> None:
    breaker = Breaker(BreakerRule(after=3, wait=5))
    assert [breaker.answered(down=d) for d in (True, True, False, True, True)] == [False] * 5
    assert breaker.answered(down=True) is True
    assert (breaker.trips, breaker.row) == (1, 0)
