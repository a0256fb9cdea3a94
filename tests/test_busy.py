"""Busy is not failed: a call the store turns away busy (429, or 503 with Retry-After) goes back
behind the task's pause and is sent again under the same key, without using one of its attempts,
for as long as its step's patience (``busy_for``) lasts; a call still busy after that is not run,
for a redrive.  And the flow-control pools the manual shows run to their end, as written, against
a store that limits its rate.  Counts from the answer and the store's own records, never times."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, pooler, start_store
from sharedkit import journal_of, run_here, token_file
from test_docs import Block, pools

from pooler.journal.records import FlowDoc
from pooler.report.flowgraph import summary_line

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
#: A top-level option of flow control: a pool shown with one is a flow-control example.
FLOW_OPTION = re.compile(r"^(rate|adaptive|breaker|retry):", re.M)


def echo_pool(folder: Path, rows: int, head: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.csv").write_text("n\n" + "".join(f"{i}\n" for i in range(rows)), encoding="utf-8")
    pool = folder / "pool.yaml"
    pool.write_text(head + "pool:\n  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
                    "    for_each: {file: rows.csv}\n    key: echo-${row.n}\n    params: {n: '${row.n}'}\n",
                    encoding="utf-8")
    return pool


def carried_out(store: Store) -> Counter[str]:
    """How often the store carried out each row's echo, by its Idempotency-Key."""
    return Counter(op["idempotency_key"] for op in store.ops() if op["command"] == "CmdEcho")


def turned_away(store: Store) -> int:
    return sum(1 for line in store.log if line.startswith("429 "))


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_rate_limited_store_answering_429s_leaves_no_call_failed_with_default_attempts(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path / "s", "--rate-limit", "20")
    request.addfinalizer(store.stop)
    # A fixed width of 16 against 20 calls a second: far more than the store takes, no retry given.
    pool = echo_pool(tmp_path / "pools", 120, "mode: parallel\nmax_concurrency: 16\n")
    code, answer, err = run_here(pool, store, journal, "t", tmp_path / "out")
    assert code == 0, err
    assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (120, 0, 0)
    flow = answer["flow"]
    assert flow["busy"] == turned_away(store) > 0
    assert flow["busy_resent"] == flow["busy"]
    assert flow["busy_not_run"] == 0
    assert flow["held_ms"] > 0
    # Each row carried out once, under the key it was first sent with (no new round).
    done = carried_out(store)
    assert sorted(done) == sorted(f"t:echo-{i}" for i in range(120))
    assert set(done.values()) == {1}
    assert "pausing every new call for " in err
    assert re.search(r"; the task held [\d.]+ s so far", err), err
    # The run's last line sums it up.
    assert (f"; the store answered busy {flow['busy']} times: the task held {flow['held_ms'] / 1000:.1f} s, "
            f"{flow['busy_resent']} calls sent again") in err


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_still_busy_after_its_busy_for_is_not_run_and_a_redrive_sends_it(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    # One call every 2 seconds, four at once: a call answered busy is still busy after busy_for.
    store = start_store(tmp_path / "s", "--rate-limit", "0.5")
    pool = echo_pool(tmp_path / "pools", 12, "mode: parallel\nmax_concurrency: 4\nretry: {busy_for: 1}\n")
    code, answer, err = run_here(pool, store, journal, "t", tmp_path / "out")
    store.stop()
    assert code == 1, err
    assert answer["failed"] == 0
    assert answer["succeeded"] >= 1
    assert answer["succeeded"] + answer["not_run"] == 12
    assert answer["interrupted"] == (
        "the store stayed busy: a call was still answered busy after 1 s (retry busy_for: 1); it and the "
        "calls not started are not run - `pooler redrive t` (or the same --task t) sends them")
    assert answer["flow"]["busy_not_run"] >= 1
    assert f"pool partial ({answer['interrupted']})" in err
    # The store takes calls again, on its port and data: the redrive sends what is left.
    again = start_store(tmp_path / "s", "--port", store.port, db=store.db, root=store.root)
    request.addfinalizer(again.stop)
    token = str(token_file(tmp_path / "k", again))
    proc = pooler("redrive", "t", "--store", again.url, "--token-file", token, "--journal", journal, "--json",
                  "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    done = carried_out(again)
    assert sorted(done) == sorted(f"t:echo-{i}" for i in range(12))
    assert set(done.values()) == {1}


def flow_examples() -> list[Block]:
    """The pools the manual shows with a top-level option of flow control."""
    return [block for block in pools() if FLOW_OPTION.search(block.text)]


def test_the_manual_shows_flow_control_examples() -> None:
    shown = flow_examples()
    assert any("adaptive: true" in block.text for block in shown)
    assert any("rate: {per_second" in block.text for block in shown)
    assert any("retry: {busy_for" in block.text for block in shown)


@pytest.mark.parametrize("kind", JOURNALS)
@pytest.mark.parametrize("block", flow_examples(), ids=str)
def test_every_flow_control_example_of_the_manual_runs_to_its_end_against_a_rate_limited_store(
        block: Block, kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path / "s", "--rate-limit", "150")
    request.addfinalizer(store.stop)
    # Beside a copy of pools/data, as in test_docs, with a longer goods.csv.
    folder = tmp_path / "pool"
    shutil.copytree(ROOT / "pools" / "data", folder / "data")
    rows = 240
    (folder / "data" / "goods.csv").write_text(
        "ref,sku,name,price\n" + "".join(f"r{i},SKU-{i},Goods {i},{i}.50\n" for i in range(rows)),
        encoding="utf-8")
    pool = folder / "shown.yaml"
    pool.write_text(block.text, encoding="utf-8")
    code, answer, err = run_here(pool, store, journal, "t", tmp_path / "out")
    assert code == 0, f"{block}: {err}"
    assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (rows, 0, 0), block
    assert answer.get("flow", {}).get("busy", 0) == turned_away(store)


def test_a_dry_run_tells_a_patience_other_than_the_default_and_the_refusals_taken_for_busy(
        tmp_path: Path) -> None:
    pool = echo_pool(tmp_path, 3, "retry: {busy_for: 30}\n")
    pool.write_text(pool.read_text(encoding="utf-8") + "  - unit: MELBIS_AGENT_ORDER\n    command: CmdAdd\n"
                    "    retry: {attempts: 4, busy_for: 600, refusals: [is currently being processed, "
                    "/tables are busy/]}\n    params: {contract: C-1}\n", encoding="utf-8")
    shown = pooler("run", str(pool), "--dry-run")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert ("busy answers: step 1 sends a call answered busy again for up to 30 s (retry busy_for), then "
            "leaves it not run and stops the pool") in lines
    assert ('busy refusals: step 2 sends a call refused "is currently being processed", "/tables are busy/" '
            "again, under the next key round, within 4 attempts") in lines
    # The default patience goes without saying.
    assert not any(line.startswith("busy answers: step 2") for line in lines)
    plain = echo_pool(tmp_path / "plain", 3, "")
    assert "busy " not in pooler("run", str(plain), "--dry-run").stdout


def test_the_reports_flow_summary_tells_how_long_busy_answers_held_the_run() -> None:
    doc: FlowDoc = {"run": 1, "runner": "r", "seconds": [], "events": [], "throttled_ms": 3000, "highest": 4,
                    "final": 4, "busy": 4, "trips": 0, "held_ms": 2500, "busy_resent": 3, "busy_not_run": 1}
    assert summary_line([doc]) == (
        "throttled for 3.0 s in all, highest width 4, final width 4, 4 busy answers, breaker opened 0 times; "
        "held behind busy answers for 2.5 s, 3 busy calls sent again, 1 busy call left not run")
    # A record kept before these were counted tells what it has.
    older: FlowDoc = {"run": 1, "runner": "r", "seconds": [], "events": [], "throttled_ms": 0, "highest": 2,
                      "final": 2, "busy": 0, "trips": 0}
    assert summary_line([older]).endswith("breaker opened 0 times")
