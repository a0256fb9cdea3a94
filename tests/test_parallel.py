"""Parallel runs against the real store: width, waiting for references, serialize_on, stops."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers import Store
from poolkit import TEST, Recorder, echo, make_pool, ops_of, run, statuses, step

from pooler.pool.model import ForEach

ORDER = "MELBIS_AGENT_ORDER"


def sleep(ms: int | str, **kw: object) -> dict[str, object]:
    return step(TEST, "CmdSleep", {"ms": ms}, **kw)  # type: ignore[arg-type]


def test_no_more_than_max_concurrency_calls_run_at_once(store: Store, tmp_path: Path) -> None:
    recorder = Recorder()
    pool = make_pool(tmp_path, [sleep(150) for _ in range(9)], mode="parallel", max_concurrency=3)
    answer = run(pool, store, tmp_path / "out", reporter=recorder)
    assert answer["result"] is True
    # Three at once, never more: the calls ran in waves of three, not one after another. (Their
    # time is not asserted: on a busy machine it says more about the machine than about pooler.)
    assert recorder.most == 3


def test_a_step_waits_for_the_step_it_refers_to(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        sleep(400, name="slow"),
        echo({"after": "@slow.slept"}, name="needs"),
        echo({"free": 1}, name="free"),
    ], mode="parallel", max_concurrency=4)
    answer = run(pool, store, tmp_path / "out")
    assert answer["result"] is True
    assert [e["detail"] for e in answer["steps"]] == [{"slept": 400}, {"after": 400}, {"free": 1}]
    # The store records a command when it is carried out: the free step did not wait for the slow
    # one, the step that refers to it did.
    assert [op["params"] for op in ops_of(store)] == [{"free": 1}, {"ms": 400}, {"after": 400}]


def test_a_step_whose_reference_failed_is_not_run(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        step(TEST, "CmdFail", name="bad"),
        echo({"x": "@bad.id"}, name="needs"),
        sleep(50, name="other"),
        echo({"y": "@other.slept"}),
    ], mode="parallel", stop_on_error=False)
    answer = run(pool, store, tmp_path / "out")
    assert statuses(answer) == [(1, None, "failed"), (2, None, "not_run"), (3, None, "completed"),
                                (4, None, "completed")]
    assert answer["steps"][1]["message"] == "Not run: it refers to @bad (step 1), which failed."
    assert (answer["status"], answer["succeeded"], answer["failed"], answer["not_run"]) == (
        "partial", 2, 1, 1)
    assert sorted(op["command"] for op in ops_of(store)) == ["CmdEcho", "CmdFail", "CmdSleep"]


def orders(contracts: list[str]) -> list[dict[str, object]]:
    return [step(ORDER, "CmdAdd", {"contract": c}, key=f"order-{i}") for i, c in enumerate(contracts)]


def test_serialize_on_keeps_calls_on_one_contract_apart(store: Store, tmp_path: Path) -> None:
    contracts = ["40040343", "40041002"] * 3
    recorder = Recorder()
    pool = make_pool(tmp_path, orders(contracts), mode="parallel", max_concurrency=6,
                     serialize_on="contract", stop_on_error=False)
    answer = run(pool, store, tmp_path / "out", reporter=recorder)
    assert answer["result"] is True
    # The store refuses a second order on a contract it is busy with: none was refused.
    assert answer["succeeded"] == 6
    done = [op["params"]["contract"] for op in ops_of(store, "CmdAdd")]
    assert sorted(done) == sorted(contracts)
    # Two contracts side by side, never one after the other: two calls at once, one a contract.
    # (Their time is not asserted: on a busy machine it says more about the machine than about pooler.)
    assert recorder.most == 2


def test_without_serialize_on_the_store_refuses_calls_on_a_busy_contract(store: Store,
                                                                         tmp_path: Path) -> None:
    contracts = ["40040343", "40041002"] * 3
    pool = make_pool(tmp_path, orders(contracts), mode="parallel", max_concurrency=6,
                     stop_on_error=False)
    answer = run(pool, store, tmp_path / "out")
    refused = [e for e in answer["steps"] if e["status"] == "failed"]
    assert refused
    assert {e["message"] for e in refused} <= {"Sales document 40040343 is currently being processed",
                                              "Sales document 40041002 is currently being processed"}
    assert answer["status"] == "partial"


def test_serialize_on_with_a_missing_or_object_value_puts_no_constraint(store_factory: Any,
                                                                        tmp_path: Path) -> None:
    slow = store_factory("--latency-ms", "200")
    recorder = Recorder()
    pool = make_pool(tmp_path, [echo({"n": 1}), echo({"n": 2}), echo({"c": {"a": 1}}), echo({"c": {"a": 1}}),
                                echo({"c": None}), echo({"c": [1]})],
                     mode="parallel", max_concurrency=6, serialize_on="c")
    answer = run(pool, slow, tmp_path / "out", reporter=recorder)
    assert answer["result"] is True
    assert recorder.most == 6


def test_serialize_on_reads_resolved_params(store: Store, tmp_path: Path) -> None:
    recorder = Recorder()
    pool = make_pool(tmp_path, [
        echo({"v": 300}, name="src"),
        sleep("@src.v"),
        sleep(300),
        sleep(100),
    ], mode="parallel", max_concurrency=4, serialize_on="ms")
    answer = run(pool, store, tmp_path / "out", reporter=recorder)
    assert answer["result"] is True
    # Step 2 waits for its reference; once resolved its value is step 3's, so it waits for step 3.
    # Never all four at once (how many overlap besides depends on how fast src comes back).
    assert recorder.most <= 3
    done = [(op["params"]["ms"], datetime.fromisoformat(op["time"])) for op in ops_of(store, "CmdSleep")]
    assert [ms for ms, _ in done] == [100, 300, 300]
    assert (done[2][1] - done[1][1]).total_seconds() >= 0.28


def test_after_a_failure_no_new_call_starts_and_calls_in_flight_finish(store: Store,
                                                                       tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [sleep(300), step(TEST, "CmdFail"), sleep(10), sleep(10), sleep(10),
                                sleep(10)], mode="parallel", max_concurrency=2)
    answer = run(pool, store, tmp_path / "out")
    assert statuses(answer) == [(1, None, "completed"), (2, None, "failed")]
    assert (answer["status"], answer["not_run"]) == ("partial", 4)
    assert [op["command"] for op in ops_of(store)] == ["CmdFail", "CmdSleep"]


def test_steps_over_rows_run_side_by_side_and_a_dependent_waits_for_all(store_factory: Any,
                                                                        tmp_path: Path) -> None:
    slow = store_factory("--latency-ms", "150")
    with (tmp_path / "rows.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["n"])
        writer.writerows([[n] for n in range(8)])
    recorder = Recorder()
    pool = make_pool(tmp_path, [
        echo({"n": "${row.n}"}, name="rows", key="row-${row.n}", for_each=ForEach(file="rows.csv")),
        echo({"last": "@rows.n"}),
    ], mode="parallel", max_concurrency=4)
    answer = run(pool, slow, tmp_path / "out", reporter=recorder)
    assert answer["result"] is True
    assert answer["total"] == 9
    assert recorder.most == 4
    assert [(e["num"], e["status"], e["message"]) for e in answer["steps"]] == [
        (1, "completed", "8 rows: 8 completed"), (2, "completed", "The fields as received")]
    # The summary gives the detail of the last row, whichever call came back last.
    assert answer["steps"][0]["detail"] == {"n": "7"}
    assert sorted(op["idempotency_key"] for op in ops_of(slow)[:8]) == sorted(
        f"{answer['task']}:row-{n}" for n in range(8))
    # The step that refers to the step over rows waits for all its calls, and gets the last one's detail.
    assert ops_of(slow)[-1]["params"] == {"last": "7"}
    assert answer["steps"][-1]["detail"] == {"last": "7"}
