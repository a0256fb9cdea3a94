"""Rate limits (``rate``): a token bucket over the calls started, held by the journal for the task
as a whole.  Read from the times the reference store records of what it carried out; the tests
count calls in windows and compare rates by generous ratios, never wall-clock limits."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler, start_store
from sharedkit import journal_of, together, token_file

from pooler.journal.opening import open_journal
from pooler.pool.rate import Pace, Rate
from pooler.run.flow import Flow
from pooler.run.pacing import Pacer

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


def echo_pool(folder: Path, rows: int, head: str, params: str = "{n: '${row.n}'}") -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "rows.csv").write_text("n,w\n" + "".join(f"{i},{i % 2}\n" for i in range(rows)))
    pool = folder / "pool.yaml"
    pool.write_text(head + "mode: parallel\nmax_concurrency: 16\npool:\n"
                    "  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n    for_each: {file: rows.csv}\n"
                    f"    key: echo-${{row.n}}\n    params: {params}\n")
    return pool


def times(store: Store, **where: Any) -> list[float]:
    """When the store carried out each CmdEcho (whose params hold ``where``), in seconds."""
    return sorted(datetime.fromisoformat(op["time"]).timestamp() for op in store.ops()
                  if op["command"] == "CmdEcho" and all(op["params"].get(k) == v for k, v in where.items()))


def busiest_second(found: list[float]) -> int:
    """The most calls any one-second window holds."""
    return max(sum(1 for t in found[i:] if t < start + 1.0) for i, start in enumerate(found))


def run(tmp_path: Path, store: Store, journal: str, pool: Path, *extra: str) -> int:
    proc = pooler("run", str(pool), "--store", store.url, "--token-file",
                  str(token_file(tmp_path / "secret", store)), "--journal", journal, "--task", "t",
                  "--out", str(tmp_path / "out"), *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.returncode


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_rate_holds_the_calls_started_to_its_bucket_at_any_width(kind: str, tmp_path: Path,
                                                                    request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    run(tmp_path, store, journal, echo_pool(tmp_path / "pools", 200, "rate: {per_second: 20, burst: 5}\n"))
    found = times(store)
    assert len(found) == 200
    # 20 a second and 5 at once: no second holds more than 25, however wide the pool runs.
    assert busiest_second(found) <= 25
    # And the limit is a rate, not a stall: the calls went at about 20 a second.
    assert (len(found) - 5) / (found[-1] - found[0]) > 20 / 2


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_handed_over_late_takes_its_slot_as_it_goes_and_the_next_keeps_its_distance(
        kind: str, tmp_path: Path, request: Any, store: Store) -> None:
    journal_url = journal_of(kind, request, tmp_path)
    run(tmp_path, store, journal_url, echo_pool(tmp_path / "pools", 1, ""))  # the task "t"
    journal = open_journal(journal_url)
    request.addfinalizer(journal.close)
    flow = Flow(4, adaptive=False, breaker=None, tell=lambda line: None)
    pacer = Pacer(journal.work("t", "runner"), {1: Pace(Rate(5.0), "pool")}, threading.Event(), flow)
    row: Any = type("Row", (), {"num": 1})()
    first = pacer.wait(row, row)
    assert first is not None
    # Handed over, the first call waits for its connection on a busy machine ...
    time.sleep(0.5)
    going = time.monotonic()
    first()
    second = pacer.wait(row, row)
    assert second is not None
    second()
    # ... and takes its slot only as it goes: the next one leaves a slot (0.2 s) after it, not at
    # once on the slot the first would have left free while it was being handed over.
    assert time.monotonic() - going >= 0.2 - 0.01
    assert flow.throttled_ms >= 150


@pytest.mark.postgres
@pytest.mark.process
def test_two_runners_of_one_task_share_its_rate(tmp_path: Path, request: Any) -> None:
    journal = journal_of("postgres", request, tmp_path)
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    pool = echo_pool(tmp_path / "pools", 200, "rate: {per_second: 20, burst: 5}\n")
    ends = together(pool, store, journal, "t", tmp_path)
    assert [code for code, _, _ in ends] == [0, 0], [err for _, _, err in ends]
    found = times(store)
    assert len(found) == 200
    # Together, as one: a bucket a runner would have let 50 through in a second.
    assert busiest_second(found) <= 25


def test_a_bucket_a_key_value_runs_each_value_at_the_rate(tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    pool = echo_pool(tmp_path / "pools", 40, "rate: {per_second: 5, key: w}\n",
                     params="{n: '${row.n}', w: '${row.w}'}")
    run(tmp_path, store, str(tmp_path / "j.db"), pool)
    both = times(store)
    each = [times(store, w=w) for w in ("0", "1")]
    assert [len(t) for t in each] == [20, 20]
    # Five a second each (and one more where a window's edge meets a slot's, as the clock has it).
    assert all(busiest_second(t) <= 6 for t in each), [busiest_second(t) for t in each]
    # Two buckets side by side: about twice one bucket's 5 a second.
    assert (len(both) - 2) / (both[-1] - both[0]) > 5 * 1.5


def test_check_and_a_dry_run_tell_the_limits_and_rate_on_the_command_line_overrides_the_pools(
        tmp_path: Path) -> None:
    pool = echo_pool(tmp_path, 10, "rate: {per_second: 20, burst: 5}\n")
    with pool.open("a") as f:
        f.write("  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, rate: {per_second: 0.5, key: w}, "
                "params: {w: 1}}\n")
    checked = pooler("check", str(pool))
    assert (checked.returncode, checked.stdout) == (0, (
        f"{pool}: the pool (its 1 step without a rate) starts at most 20 calls a second, 5 at once\n"
        f"{pool}: step 2 starts at most 0.5 calls a second, a bucket per params.w\n"
        "1 file valid\n"))
    dry = pooler("run", str(pool), "--dry-run", "--rate", "50")
    assert dry.stderr == f"pooler: --rate 50 overrides rate.per_second: 20 of {pool}\n"
    assert dry.stdout.splitlines()[2] == (
        "rate: the pool (its 1 step without a rate) starts at most 50 calls a second, 5 at once; step 2 "
        "starts at most 0.5 calls a second, a bucket per params.w")
    refused = pooler("run", str(pool), "--dry-run", "--rate", "0")
    assert refused.returncode == 2
    assert "argument --rate: '0' must be 0.01 to 10000 calls a second" in refused.stderr
