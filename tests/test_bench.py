"""The benchmark harness measures what it claims: its generated pools are valid and run, its bare
loop sends the same chain, and its peak memory is the child's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, STORE_TOKEN, Store, answer_of, pooler

sys.path.insert(0, str(ROOT / "bench"))

import common
import generate
import summary


def echo_ops(store: Store) -> list[dict[str, Any]]:
    return [op for op in store.ops() if op["command"] == "CmdEcho"]


def test_generated_pools_pass_check_against_the_store(store: Store, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    generate.write_rows(tmp_path / "rows.jsonl", 3)
    files = [
        generate.write_yaml_pool(tmp_path / "keyed.yaml", 30),
        generate.write_json_pool(tmp_path / "chain.json", 30),
        generate.write_json_pool(tmp_path / "par.json", 30, refer=False,
                                 options={"mode": "parallel", "max_concurrency": 16}),
        generate.write_import_pool(tmp_path / "import.yaml", "rows.jsonl"),
    ]
    for path in files:
        done = pooler("check", str(path), "--against", store.url, "--token-file", str(token))
        assert done.returncode == 0, (path.name, done.stdout, done.stderr)


def test_the_chained_pool_sends_each_previous_n(store: Store, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    pool = generate.write_json_pool(tmp_path / "chain.json", 5)
    done = pooler("run", str(pool), "--store", store.url, "--token-file", str(token), "--out",
                  str(tmp_path / "out"), "--journal", str(tmp_path / "j.db"), "--json")
    assert done.returncode == 0, done.stderr
    answer = answer_of(done)
    assert (answer["status"], answer["succeeded"]) == ("completed", 5)
    assert common.trip_seconds(answer) is not None
    assert [op["params"].get("prev") for op in echo_ops(store)] == [None, 1, 2, 3, 4]


def test_the_bare_loop_sends_the_same_calls(store: Store, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    with common.work("test") as w:
        cmd = [common.PYTHON, str(common.BENCH / "bare_loop.py"), store.url, str(token), "5"]
        sample = common.run_process(cmd, w)[0]
    assert sample.status == 0
    assert sample.cpu > 0
    params = [op["params"] for op in echo_ops(store)]
    expected = [generate.echo_step(i, refer=False, keyed=False)["params"] for i in range(1, 6)]
    for i, p in enumerate(expected[1:], start=1):
        p["prev"] = i
    assert params == expected


def test_the_bare_thread_pool_sends_every_call_and_times_them(store: Store, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    with common.work("test") as w:
        cmd = [common.PYTHON, str(common.BENCH / "bare_loop.py"), store.url, str(token), "12", "4"]
        sample, out, _ = common.run_process(cmd, w)
        printed = json.loads(out.read_text(encoding="utf-8"))
    assert sample.status == 0
    assert 0 < printed["trip_ms"] <= sample.seconds * 1000
    assert sorted(op["params"]["n"] for op in echo_ops(store)) == list(range(1, 13))


def test_the_import_pool_sends_a_keyed_call_a_row(store: Store, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(STORE_TOKEN + "\n", encoding="utf-8")
    size = generate.write_rows(tmp_path / "rows.jsonl", 4)
    assert size == (tmp_path / "rows.jsonl").stat().st_size
    pool = generate.write_import_pool(tmp_path / "import.yaml", "rows.jsonl")
    done = pooler("run", str(pool), "--store", store.url, "--token-file", str(token), "--out",
                  str(tmp_path / "out"), "--journal", str(tmp_path / "j.db"), "--task", "t1", "--json")
    assert done.returncode == 0, done.stderr
    assert answer_of(done)["succeeded"] == 4
    ops = echo_ops(store)
    assert [op["params"]["sku"] for op in ops] == [f"SKU-{i:06d}" for i in range(1, 5)]
    assert all(op["idempotency_key"] for op in ops)
    assert len({op["idempotency_key"] for op in ops}) == 4


def test_the_collection_carries_n_on(tmp_path: Path) -> None:
    path = generate.write_collection(tmp_path / "c.json", "http://127.0.0.1:1", "demo", 3)
    doc = json.loads(path.read_text(encoding="utf-8"))
    bodies = [item["request"]["body"]["raw"] for item in doc["item"]]
    assert json.loads(bodies[0])["params"] == {"n": 1, "sku": "SKU-000001"}
    assert '"prev": {{prev}}' in bodies[2]
    assert json.loads(bodies[2].replace("{{prev}}", "2"))["params"]["prev"] == 2


def test_peak_memory_is_the_childs_own_not_the_parents(tmp_path: Path) -> None:
    ballast = bytearray(150_000_000)
    ballast[::4096] = b"\1" * len(ballast[::4096])
    with common.work("test") as w:
        small = common.run_process([common.PYTHON, "-c", "pass"], w, peak_memory=True)[0]
        fill = "b = bytearray(80_000_000); b[::4096] = b'1' * len(b[::4096])"
        big = common.run_process([common.PYTHON, "-c", fill], w, peak_memory=True)[0]
    assert len(ballast) == 150_000_000
    assert small.peak_rss is not None
    assert big.peak_rss is not None
    assert small.peak_rss < 40e6
    assert 80e6 < big.peak_rss < 130e6


def test_a_failing_process_is_reported_with_its_stderr(tmp_path: Path) -> None:
    with common.work("test") as w:
        try:
            common.run_process([common.PYTHON, "-c", "import sys; sys.exit('no such pool')"], w)
        except common.BenchError as exc:
            message = str(exc)
        else:
            message = ""
    assert "exited with 1" in message
    assert message.endswith("stderr ends:\nno such pool\n")


def test_alternate_warms_up_then_takes_turns() -> None:
    order: list[str] = []

    def make(name: str) -> Any:
        def run() -> common.Sample:
            order.append(name)
            return common.Sample(1.0, 0, 0.5)
        return run

    samples = common.alternate({"a": make("a"), "b": make("b")}, 3)
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert [len(samples["a"]), len(samples["b"])] == [3, 3]


def test_the_table_marks_missed_targets() -> None:
    rows = [summary.Row("x", "2 s", "1 s", 2.0, "≤ 1.10", False),
            summary.Row("y", "1", "—", None, "report", None)]
    text = summary.table(rows)
    lines = text.splitlines()
    assert lines[0].startswith("| case ")
    assert lines[2].split("|")[4:7] == [" 2.00  ", " ≤ 1.10 ", " NO  "]
    assert lines[3].split("|")[4].strip() == "—"


@pytest.mark.process
def test_a_store_that_does_not_start_is_reported_with_its_log() -> None:
    with common.work("test") as w:
        try:
            with common.store(w, "--latency-ms", "-1"):
                message = ""
        except common.BenchError as exc:
            message = str(exc)
    assert message.startswith("the store did not start: it printed ''; its log ends:\n")
    assert "--latency-ms" in message


@pytest.mark.process
def test_the_store_answers_and_its_cpu_is_read(tmp_path: Path) -> None:
    with common.work("test") as w, common.store(w) as st:
        token = tmp_path / "token"
        token.write_text(common.TOKEN + "\n", encoding="utf-8")
        before = st.cpu()
        # Enough calls for the store's CPU to pass a clock tick (/proc counts 10 ms ticks).
        sample = common.run_process([common.PYTHON, str(common.BENCH / "bare_loop.py"), st.url, str(token),
                                     "400"], w, store=st)[0]
    assert before > 0
    assert sample.extra["store_cpu"] > 0


def test_the_postgresql_planning_case_plans_every_row_as_its_floor_copies_it(pg_url: str,
                                                                              tmp_path: Path) -> None:
    import plain_plan_pg  # noqa: PLC0415 - loads psycopg, as the case does
    import plan_cost  # noqa: PLC0415
    import plan_full  # noqa: PLC0415
    from sharedkit import query  # noqa: PLC0415

    generate.write_goods_csv(tmp_path / "goods.csv", 25)
    (tmp_path / "plan.yaml").write_text(plan_cost.POOL, encoding="utf-8")
    assert pooler("journal", "upgrade", "--journal", pg_url).returncode == 0
    plan_full.main(str(tmp_path / "plan.yaml"), pg_url)
    plain_plan_pg.main(str(tmp_path / "goods.csv"), pg_url)
    planned = query(pg_url, "SELECT data->>'ref' FROM work WHERE task = 'bench' ORDER BY idx")
    copied = query(pg_url, "SELECT data->>'ref' FROM plain_rows ORDER BY n")
    assert planned == copied == [(f"r{i:07d}",) for i in range(25)]
